"""platforms.html: the same cell side by side across backends (cpu, cuda, rocm, interpret),
from each backend's newest conformance run.

Two views: config × dtype (worst status of the cell's cases, lowest SQNR, largest output
error), where backends ran different shapes (the interpreter runs small ones); and config ×
dtype × shape for the shapes two or more backends ran. Highlighted: backends that disagree
on the status (skips aside), and, for one shape, SQNR that differs by more than
``DRIFT_DB`` between backends (the same math on the same inputs should agree closely).
"""

from __future__ import annotations

from typing import Any

from reports.data import RED, Run, worst
from reports.site import Site, rounded, table

DRIFT_DB = 1.0


def cases(run: Run) -> dict[tuple[str, str, str], dict[str, Any]]:
    """(config, dtype, shape) -> status, sqnr dB, output rel_err and budget, kernel."""
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in run.records:
        key = (r.config or "?", r.dtype or "?", r.shape or "?")
        c = out.setdefault(
            key,
            {"status": None, "db": None, "rel_err": None, "budget": None, "kernel": "", "red": ""},
        )
        if r.check == "cell":
            c["status"], c["kernel"] = r.status, r.kernel or ""
            checks = r.metrics.get("checks") or {}
            c["red"] = " ".join(k for k, v in sorted(checks.items()) if v in RED)
        elif r.check == "sqnr":
            c["db"] = r.metrics.get("db")
        elif r.check == "output":
            c["rel_err"], c["budget"] = r.metrics.get("rel_err"), r.metrics.get("budget")
    return {k: v for k, v in out.items() if v["status"] is not None}


def _flags(cells: list[dict[str, Any] | None], drift: bool) -> tuple[bool, bool]:
    statuses = {c["status"] for c in cells if c and c["status"] != "skip"}
    dbs = [c["db"] for c in cells if c and isinstance(c.get("db"), (int, float))]
    return len(statuses) > 1, drift and len(dbs) > 1 and max(dbs) - min(dbs) > DRIFT_DB


def _nums(values: list[Any]) -> list[float]:
    return [v for v in values if isinstance(v, (int, float))]


def context(site: Site) -> dict[str, Any]:
    runs = site.latest("conformance")
    labels = [r.label for r in runs]
    per = {r.label: cases(r) for r in runs}
    keys = sorted({k for c in per.values() for k in c})
    configs = list(dict.fromkeys(k[0] for k in keys))
    summary: list[dict[str, Any]] = []
    for config in configs:
        for dtype in ("bf16", "fp16", "fp32"):
            cells: list[dict[str, Any] | None] = []
            for b in labels:
                got = [v for k, v in per[b].items() if k[0] == config and k[1] == dtype]
                dbs, errs = _nums([g["db"] for g in got]), _nums([g["rel_err"] for g in got])
                cells.append(
                    {
                        "status": worst(g["status"] for g in got),
                        "n": len(got),
                        "db": min(dbs) if dbs else None,
                        "rel_err": max(errs) if errs else None,
                        "red": " ".join(sorted({w for g in got for w in g["red"].split()})),
                    }
                    if got
                    else None
                )
            if any(cells):
                bad, _ = _flags(cells, drift=False)
                summary.append({"config": config, "dtype": dtype, "cells": cells, "bad": bad})
    shared: list[dict[str, Any]] = []
    for key in keys:
        cells = [per[b].get(key) for b in labels]
        if sum(c is not None for c in cells) < 2:
            continue
        bad, drift = _flags(cells, drift=True)
        shared.append(
            {
                "config": key[0],
                "dtype": key[1],
                "shape": key[2],
                "cells": cells,
                "bad": bad,
                "drift": drift,
            }
        )
    ran = [i for i in range(len(labels)) if any(r["cells"][i] for r in shared)]
    shared_labels = [labels[i] for i in ran]  # a backend that shares no shape: no column
    for r in shared:
        r["cells"] = [r["cells"][i] for i in ran]
    columns = (
        ["config", "dtype", "shape"]
        + [f"{b}_{m}" for b in shared_labels for m in ("status", "sqnr_db", "rel_err", "kernel")]
        + ["status_differs", "sqnr_drift"]
    )
    csv_rows = []
    for r in shared:
        row = [r["config"], r["dtype"], r["shape"]]
        for c in r["cells"]:
            row += (
                [c["status"], rounded(c["db"]), rounded(c["rel_err"]), c["kernel"]]
                if c
                else ["", None, None, ""]
            )
        csv_rows.append(row + [r["bad"], r["drift"]])
    return {
        "labels": labels,
        "shared_labels": shared_labels,
        "summary": summary,
        "shared": shared,
        "configs": configs,
        "n_bad": sum(r["bad"] for r in shared) + sum(r["bad"] for r in summary),
        "drift_db": DRIFT_DB,
        "csv": {**table("aoq-platform-diff.csv", columns, csv_rows), "table": "diff"},
    }
