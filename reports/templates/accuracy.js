"use strict";
/* The accuracy page: filters over the matrix and cells, each cell's checks drawn from the
   embedded #acc-data when it is opened (text only: textContent, never HTML), and the CSV
   of the records the filters keep. */
(function () {
  const $ = (id) => document.getElementById(id);
  const D = JSON.parse($("acc-data").textContent);
  const S = D.s;
  const groups = new Map();  // "backend|config|dtype" -> [case]
  D.cases.forEach((c) => {
    const k = S[c[0]] + "|" + S[c[1]] + "|" + S[c[2]];
    if (!groups.has(k)) groups.set(k, []);
    groups.get(k).push(c);
  });
  const keyOf = (d) => d.dataset.backend + "|" + d.dataset.config + "|" + d.dataset.dtype;
  function num(v) {
    if (typeof v !== "number") return Array.isArray(v) ? v.map(num).join(", ") : String(v);
    if (!Number.isFinite(v) || Number.isInteger(v)) return String(v);
    return String(Number(v.toPrecision(4)));
  }
  const show = (o) => (o ? Object.keys(o).map((k) => k + "=" + num(o[k])).join(", ") : "");
  const HEAD = ["case", "check", "status", "kernel", "metrics", "tolerance", "from", "reason"];
  function fill(d) {
    if (d.dataset.filled) return;
    d.dataset.filled = "1";
    const table = document.createElement("table");
    const tr = table.insertRow();
    HEAD.forEach((h) => { const th = document.createElement("th"); th.textContent = h; tr.appendChild(th); });
    (groups.get(keyOf(d)) || []).forEach((c) => {
      c[6].forEach((k, i) => {
        const row = table.insertRow();
        row.className = i === 0 ? "summary" : "check";
        row.dataset.case = S[c[4]];
        const tol = S[k[4]] ? JSON.parse(S[k[4]]) : null;
        const vals = [i === 0 ? (S[c[3]] || S[c[4]]) : "", i === 0 ? "case" : S[k[0]], S[k[1]], S[k[2]],
          show(k[3]), show(tol), S[k[5]], S[k[6]]];
        vals.forEach((v, j) => {
          const td = row.insertCell();
          td.textContent = v;
          if (j === 2) td.className = "s-" + v;
          if (j === 6) td.className = "src";
          if (j === 7) td.className = "reason";
        });
      });
    });
    d.appendChild(table);
  }
  document.querySelectorAll("details.cell").forEach((d) => d.addEventListener("toggle", () => { if (d.open) fill(d); }));
  const val = (id) => $(id).value;
  function hasCase(d, q) {
    return d.id.includes(q) || (groups.get(keyOf(d)) || []).some((c) => S[c[4]].includes(q));
  }
  function apply() {
    const b = val("f-backend"), c = val("f-config"), s = val("f-status"), q = val("f-text");
    document.querySelectorAll("#matrix .col").forEach((th) => { th.hidden = !!b && th.dataset.backend !== b; });
    document.querySelectorAll("#matrix tr.mrow").forEach((tr) => {
      let any = false;
      tr.querySelectorAll("td.cell").forEach((td) => {
        td.hidden = !!b && td.dataset.backend !== b;
        const hit = !s || (td.dataset.statuses || "").split(" ").includes(s);
        td.classList.toggle("dim", !hit);
        if (hit && !td.hidden) any = true;
      });
      tr.hidden = (!!c && tr.dataset.config !== c) || !any;
    });
    document.querySelectorAll("details.cell").forEach((d) => {
      d.hidden = (!!b && d.dataset.backend !== b) || (!!c && d.dataset.config !== c)
        || (!!s && !(d.dataset.statuses || "").split(" ").includes(s)) || (!!q && !hasCase(d, q));
    });
  }
  ["f-backend", "f-config", "f-status", "f-text"].forEach((id) => $(id).addEventListener("input", apply));
  window.aoqCsv = function () {
    const d = JSON.parse($("csv-data").textContent);
    const b = val("f-backend"), c = val("f-config");
    const rows = [];
    D.cases.forEach((cs) => {
      if ((b && S[cs[0]] !== b) || (c && S[cs[1]] !== c)) return;
      cs[6].forEach((k) => rows.push([S[cs[5]], S[cs[0]], S[cs[4]], S[k[0]], S[k[1]], S[cs[1]], S[cs[2]],
        S[cs[3]], S[k[2]], k[3] ? JSON.stringify(k[3]) : "", S[k[4]], S[k[5]], S[k[6]]]));
    });
    return { name: d.name, columns: d.columns, rows: rows };
  };
  function openHash() {
    const d = document.getElementById(decodeURIComponent(location.hash.slice(1)));
    if (d && d.tagName === "DETAILS") { d.open = true; fill(d); }
  }
  window.addEventListener("hashchange", openHash);
  openHash();
  apply();
})();
