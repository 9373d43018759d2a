"""targets.html: every kernel compiled ahead of time for each GPU target (no GPU needed):
status, the matrix instructions found (mma/wgmma/tcgen05, mfma), spills, registers, shared
memory, and the change in registers since the previous compile run. A target that cannot
support a kernel (fp8 on sm80) is an expected impossibility: an xfail with its reason, shown
as such, not as a failure."""

from __future__ import annotations

from typing import Any

from aoq.testing.records import Record
from reports.site import Site, summaries, table

TARGETS = ("sm80", "sm89", "sm90", "sm100", "gfx90a", "gfx942", "gfx950")
COLUMNS = [
    "kernel",
    "target",
    "status",
    "mma",
    "regs",
    "spills",
    "shared",
    "seconds",
    "regs_change",
    "reason",
    "run_id",
]


def mma_names(metrics: dict[str, Any]) -> str:
    """['wgmma.mma_async'] -> 'wgmma'; ['v_mfma'] -> 'mfma'."""
    return ", ".join(str(x).split(".")[0].removeprefix("v_") for x in metrics.get("mma") or [])


def cell(r: Record, before: Record | None) -> dict[str, Any]:
    m = r.metrics
    regs, old = m.get("regs"), (before.metrics.get("regs") if before else None)
    expected = r.status in ("xfail", "skip")
    return {
        "status": r.status,
        "css": "expected" if expected else r.status,
        "label": "not supported" if expected else r.status,
        "mma": mma_names(m),
        "regs": regs,
        "spills": m.get("spills"),
        "shared": m.get("shared"),
        "seconds": m.get("seconds"),
        "regs_change": regs - old if isinstance(regs, int) and isinstance(old, int) else None,
        "reason": r.reason or "",
    }


def context(site: Site) -> dict[str, Any]:
    grids, rows = [], []
    for run in site.latest("compile"):
        base = site.previous(run)
        old = {r.case_id: r for r in summaries(base)} if base else {}
        recs = summaries(run)
        targets = [t for t in TARGETS if any(r.shape == t for r in recs)]
        targets += sorted({r.shape or "?" for r in recs} - set(targets))
        grid: dict[str, dict[str, Any]] = {}
        for r in recs:
            c = cell(r, old.get(r.case_id))
            grid.setdefault(r.config or r.kernel or "?", {})[r.shape or "?"] = c
            rows.append(
                {
                    "kernel": r.config or r.kernel or "?",
                    "target": r.shape or "?",
                    **c,
                    "run_id": run.info.run_id,
                }
            )
        grids.append(
            {
                "run": site.run_row(run),
                "base": base.info.run_id if base else None,
                "targets": targets,
                "grid": grid,
            }
        )
    return {
        "grids": grids,
        "rows": rows,
        "kernels": list(dict.fromkeys(r["kernel"] for r in rows)),
        "targets": [t for t in TARGETS if any(r["target"] == t for r in rows)],
        "csv": {
            **table("aoq-compile-targets.csv", COLUMNS, ([r[c] for c in COLUMNS] for r in rows)),
            "table": "compile",
        },
    }
