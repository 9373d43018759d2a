"""accuracy.html: the conformance matrix config × dtype × backend, coloured by the worst
status of the cell's cases; per cell, every case and check with its metrics, effective
tolerance, the profile file it came from, and the kernel that ran; filters by backend,
config, status and case id; CSV of the records.

The per-check detail is embedded once, as compact JSON (strings interned, floats to six
significant digits), and drawn into a cell's table when it is opened: the page stays small
with thousands of records.
"""

from __future__ import annotations

import json
from typing import Any

from aoq.testing.store import SUMMARY_CHECK
from reports.data import RED, Run, cells, frame
from reports.site import STATUSES, Site, rounded

DTYPES = ("bf16", "fp16", "fp32")  # fixed order, whatever order the cells came in
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
]


class _Strings:
    """Interned strings: each distinct string once, referred to by index (0 is "")."""

    def __init__(self) -> None:
        self.items: list[str] = [""]
        self.index: dict[str, int] = {"": 0}

    def __call__(self, s: str | None) -> int:
        s = s or ""
        if s not in self.index:
            self.index[s] = len(self.items)
            self.items.append(s)
        return self.index[s]


def compact(runs: list[Run]) -> dict[str, Any]:
    """{"s": strings, "cases": [[backend, config, dtype, shape, case_id, run_id, checks]]}
    with every field a string index; a check is [check, status, kernel, metrics, tolerance
    (JSON), source, reason], the case's summary first."""
    s = _Strings()
    out = []
    for run in runs:
        by_case: dict[str, list[Any]] = {}
        for r in run.records:
            by_case.setdefault(r.case_id, []).append(r)
        for case_id, recs in by_case.items():
            recs.sort(key=lambda r: r.check != SUMMARY_CHECK)
            head = recs[0]
            checks = []
            for r in recs:
                metrics = {k: v for k, v in r.metrics.items() if k != "checks" and v is not None}
                tol = json.dumps(r.tolerance, sort_keys=True) if r.tolerance else ""
                checks.append(
                    [
                        s(r.check),
                        s(r.status),
                        s(r.kernel),
                        rounded(metrics) or 0,
                        s(tol),
                        s(r.tolerance_source),
                        s(r.reason),
                    ]
                )
            out.append(
                [
                    s(run.label),
                    s(head.config),
                    s(head.dtype),
                    s(head.shape),
                    s(case_id),
                    s(head.run_id),  # (a partial run laid over the run: its own id)
                    checks,
                ]
            )
    return {"s": s.items, "cases": out}


def matrix(runs: list[Run]) -> tuple[list[str], list[dict[str, Any]]]:
    """(configs, rows): per config, one cell per backend × dtype with its worst status."""
    t = cells(frame(runs))
    backends = [r.label for r in runs]
    configs = list(dict.fromkeys(t["config"])) if not t.empty else []
    index = {(c.config, c.dtype, c.backend): c for c in t.itertuples()}
    rows = []
    for config in configs:
        row: dict[str, Any] = {"config": config, "cells": []}
        for b in backends:
            for dtype in DTYPES:
                c = index.get((config, dtype, b))
                if c is None:
                    row["cells"].append({"backend": b, "dtype": dtype, "status": None})
                    continue
                n = {str(k): int(v) for k, v in c.counts.items()}
                by_status = {k: n[k] for k in STATUSES if k in n}
                row["cells"].append(
                    {
                        "backend": b,
                        "dtype": dtype,
                        "config": config,
                        "status": c.status,
                        "ok": sum(v for k, v in n.items() if k not in RED),
                        "n": int(c.n),
                        "counts": by_status,
                        "anchor": f"{config}/{dtype}/{b}",
                    }
                )
        rows.append(row)
    return configs, rows


def context(site: Site) -> dict[str, Any]:
    runs = site.latest("conformance")
    configs, rows = matrix(runs)
    details = [c for row in rows for c in row["cells"] if c["status"] is not None]
    return {
        "runs": [site.run_row(r) for r in runs],
        "backends": [r.label for r in runs],
        "configs": configs,
        "dtypes": list(DTYPES),
        "statuses": list(STATUSES),
        "matrix": rows,
        "details": details,
        "data": compact(runs),
        "csv": {"name": "aoq-accuracy.csv", "columns": COLUMNS, "rows": []},
    }
