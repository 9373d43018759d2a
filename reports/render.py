"""Render the accuracy report: one self-contained HTML page (inline CSS and JS, no network, opens
from file://), jinja2 with autoescape, plus ``results.csv`` beside it.

The page: the runs shown; the matrix config x dtype x backend coloured by the worst status of
the cell's cases; per cell, every case and check with its metrics, effective tolerance, the
profile file it came from, and the kernel that ran; the compile-target matrix; filters by
backend, config and status; a CSV download of the records.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import jinja2

from aoq.testing.store import SUMMARY_CHECK
from reports.data import ORDER, RED, Run, cells, csv_text, frame, load_runs, pick, worst

TEMPLATES = Path(__file__).resolve().parent / "templates"
COLUMNS = [
    "run_id",
    "backend",
    "case_id",
    "check",
    "status",
    "config",
    "dtype",
    "shape",
    "kernel",
    "metrics",
    "tolerance",
    "tolerance_source",
    "reason",
    "time",
]


def fmt(value: Any) -> str:
    """Compact, readable numbers: 4 significant digits, inf/nan spelled out."""
    if isinstance(value, bool) or value is None:
        return str(value).lower()
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)
        return f"{value:.4g}"
    if isinstance(value, dict):
        return ", ".join(f"{k}={fmt(v)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(fmt(v) for v in value)
    return str(value)


def _detail_rows(records: list[Any]) -> list[dict[str, Any]]:
    """The case summary first, then its checks, for every case of a cell."""
    by_case: dict[str, list[Any]] = {}
    for r in records:
        by_case.setdefault(r["case_id"], []).append(r)
    rows = []
    for case_id, recs in by_case.items():
        recs.sort(key=lambda r: (r["check"] != SUMMARY_CHECK,))
        for r in recs:
            metrics = {
                k: v for k, v in (r["metrics"] or {}).items() if k != "checks" and v is not None
            }
            rows.append(
                {
                    "case": r["shape"] or case_id,
                    "case_id": case_id,
                    "check": r["check"],
                    "status": r["status"],
                    "kernel": r["kernel"] or "",
                    "metrics": fmt(metrics),
                    "tolerance": fmt(r["tolerance"] or {}),
                    "source": r["tolerance_source"] or "",
                    "reason": r["reason"] or "",
                    "summary": r["check"] == SUMMARY_CHECK,
                }
            )
    return rows


def _run_rows(runs: list[Run]) -> list[dict[str, Any]]:
    rows = []
    for run in runs:
        statuses = [r.status for r in run.records if r.check == SUMMARY_CHECK]
        counts = {s: statuses.count(s) for s in ORDER if statuses.count(s)}
        i = run.info
        rows.append(
            {
                "label": run.label,
                "run_id": i.run_id,
                "device": i.device,
                "arch": i.arch,
                "torch": i.torch,
                "triton": i.triton or "-",
                "git": i.git_sha[:12] + ("-dirty" if i.git_sha.endswith("-dirty") else ""),
                "started": i.started,
                "quick": bool(i.extra.get("quick")),
                "counts": counts,
                "status": worst(statuses) if statuses else "skip",
                "host": i.host,
            }
        )
    return rows


def context(runs: list[Run], target: Run | None) -> dict[str, Any]:
    df = frame(runs)
    table = cells(df)
    backends = [r.label for r in runs]
    configs = list(dict.fromkeys(table["config"])) if not table.empty else []
    dtypes = ["bf16", "fp16", "fp32"]  # fixed order, whatever order the cells came in
    matrix: list[dict[str, Any]] = []
    index = {(c.config, c.dtype, c.backend): c for c in table.itertuples()}
    for config in configs:
        row: dict[str, Any] = {"config": config, "cells": []}
        for b in backends:
            for dtype in dtypes:
                c = index.get((config, dtype, b))
                if c is None:
                    row["cells"].append({"backend": b, "dtype": dtype, "status": None})
                    continue
                counts = {str(k): int(v) for k, v in c.counts.items()}
                ok = sum(v for k, v in counts.items() if k not in RED)
                row["cells"].append(
                    {
                        "backend": b,
                        "dtype": dtype,
                        "status": c.status,
                        "ok": ok,
                        "n": int(c.n),
                        "counts": counts,
                        "anchor": f"{config}/{dtype}/{b}",
                    }
                )
        matrix.append(row)
    details = []
    records = df.to_dict("records")
    grouped: dict[tuple[str, str, str], list[Any]] = {}
    for r in records:
        grouped.setdefault((r["config"], r["dtype"], r["backend"]), []).append(r)
    for row in matrix:
        for cell in row["cells"]:
            if cell["status"] is not None:
                key = (row["config"], cell["dtype"], cell["backend"])
                details.append(
                    {**cell, "config": row["config"], "rows": _detail_rows(grouped.get(key, []))}
                )
    targets: list[str] = []
    compile_rows: dict[str, dict[str, dict[str, str]]] = {}
    if target is not None:
        for r in target.records:
            if r.check == SUMMARY_CHECK:
                t = r.shape or "?"
                if t not in targets:
                    targets.append(t)
                m = r.metrics
                mma = ",".join(str(x).split(".")[0].removeprefix("v_") for x in m.get("mma") or [])
                spills = m.get("spills")
                note = f"{mma or '-'} spills={spills}" if spills is not None else mma
                compile_rows.setdefault(r.config or "?", {})[t] = {
                    "status": r.status,
                    "note": note,
                    "reason": r.reason or "",
                    "metrics": fmt(m),
                }
    csv_records = [{k: r.get(k) for k in COLUMNS} for r in records]
    return {
        "generated": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "runs": _run_rows(runs),
        "backends": backends,
        "configs": configs,
        "dtypes": dtypes,
        "statuses": list(ORDER),
        "matrix": matrix,
        "details": details,
        "compile_run": target.info if target else None,
        "compile_rows": compile_rows,
        "targets": targets,
        "records": csv_records,
        "columns": COLUMNS,
    }


def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,  # every value is escaped: record text may hold anything
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render_report(
    store: Path | None, runs_dir: Path | None, out: Path, wanted: Iterable[str] = ()
) -> Path:
    """Write ``out`` (HTML) and ``results.csv`` beside it; returns ``out``."""
    shown, target = pick(load_runs(store, runs_dir), wanted)
    ctx = context(shown, target)
    html = environment().get_template("report.html.j2").render(**ctx)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(html, encoding="utf-8")
    (out.parent / "results.csv").write_text(csv_text(frame(shown)), encoding="utf-8")
    return out
