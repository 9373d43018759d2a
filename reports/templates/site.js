"use strict";
/* Shared by every page: sortable tables (click a header), filter bars (.filters[data-table]),
   the CSV download (button.csv) from the page's embedded #csv-data, and the ready flag the
   browser check waits for. A page may set window.aoqCsv = () => ({name, columns, rows}). */
(function () {
  const $ = (s, el) => (el || document).querySelector(s);
  const $$ = (s, el) => [...(el || document).querySelectorAll(s)];
  function key(td) {
    if (!td) return "";
    const v = td.dataset.v !== undefined ? td.dataset.v : td.textContent.trim();
    const n = Number(v);
    return v !== "" && !Number.isNaN(n) ? n : v.toLowerCase();
  }
  function compare(x, y) {
    if (typeof x !== typeof y) return typeof x === "number" ? -1 : 1;
    return x < y ? -1 : x > y ? 1 : 0;
  }
  $$("table.sortable").forEach((t) => {
    const head = t.tHead.rows[t.tHead.rows.length - 1];
    [...head.cells].forEach((th, i) => {
      th.classList.add("sort");
      th.tabIndex = 0;
      const sort = () => {
        const asc = th.getAttribute("aria-sort") !== "ascending";
        [...head.cells].forEach((h) => h.removeAttribute("aria-sort"));
        th.setAttribute("aria-sort", asc ? "ascending" : "descending");
        const body = t.tBodies[0];
        const rows = [...body.rows];
        rows.sort((a, b) => (asc ? 1 : -1) * compare(key(a.cells[i]), key(b.cells[i])));
        rows.forEach((r) => body.appendChild(r));
      };
      th.addEventListener("click", sort);
      th.addEventListener("keydown", (e) => { if (e.key === "Enter") sort(); });
    });
  });
  function filter(box) {
    const t = document.getElementById(box.dataset.table);
    const ctrls = $$("[data-key]", box);
    let shown = 0;
    const rows = [...t.tBodies[0].rows];
    rows.forEach((tr) => {
      const ok = ctrls.every((c) => {
        const k = c.dataset.key;
        if (c.type === "checkbox") return !c.checked || tr.dataset[k] === "1";
        const v = c.value.trim().toLowerCase();
        if (!v) return true;
        if (k === "text") return tr.textContent.toLowerCase().includes(v);
        return (tr.dataset[k] || "").toLowerCase().split(" ").includes(v);
      });
      tr.hidden = !ok;
      if (ok) shown += 1;
    });
    const n = $(".count", box);
    if (n) n.textContent = shown + " of " + rows.length + " rows";
  }
  $$(".filters[data-table]").forEach((box) => {
    $$("[data-key]", box).forEach((c) => c.addEventListener("input", () => filter(box)));
    filter(box);
  });
  function cell(v) {
    if (v === null || v === undefined) return "";
    const s = typeof v === "object" ? JSON.stringify(v) : String(v);
    return /[",\n\r]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
  }
  function csv() {
    if (typeof window.aoqCsv === "function") return window.aoqCsv();
    const d = JSON.parse($("#csv-data").textContent);
    const t = d.table && document.getElementById(d.table);
    if (!t) return d;
    const keep = new Set($$("tbody tr", t).filter((r) => !r.hidden).map((r) => Number(r.dataset.i)));
    return { name: d.name, columns: d.columns, rows: d.rows.filter((_, i) => keep.has(i)) };
  }
  $$("button.csv").forEach((b) => b.addEventListener("click", () => {
    const d = csv();
    const text = [d.columns.map(cell).join(",")].concat(d.rows.map((r) => r.map(cell).join(","))).join("\n") + "\n";
    const a = document.createElement("a");
    a.href = URL.createObjectURL(new Blob([text], { type: "text/csv" }));
    a.download = d.name;
    document.body.appendChild(a);
    a.click();
    a.remove();
  }));
  document.body.dataset.ready = "1";
})();
