"""regressions.html: each backend's newest run against its baseline (the run before it of the
same kind, backend and bench script) with ``reports.regress``: the findings that are not
"ok" (regressions first), counts per comparison; history of each timed row (p50 over runs,
x = the run's commit or time) with detected steps marked; SQNR steps of conformance runs;
missing-data alerts (a row or a whole backend that stopped reporting gates like a
regression)."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from pathlib import Path
from typing import Any

from aoq.testing.benchrows import parse_case
from reports import regress, svg
from reports.data import Run, by_age
from reports.site import Site, rounded, table

KINDS = ("conformance", "bench", "compile", "training")
THRESHOLDS = Path(__file__).resolve().parents[2] / "bench" / "thresholds.toml"
MAX_CHARTS = 48
COLUMNS = [
    "run_kind",
    "backend",
    "row",
    "kind",
    "status",
    "gating",
    "base",
    "new",
    "change",
    "p_value",
    "threshold",
    "reason",
    "base_run",
    "new_run",
]


def pairs(site: Site) -> list[tuple[Run, Run]]:
    """(baseline, newest) per kind, backend label and bench script; a ``--run`` run is the
    newest of its group."""
    groups: dict[tuple[str, str, str], list[Run]] = defaultdict(list)
    for run in by_age(site.runs.values()):
        if run.info.kind in KINDS:
            groups[(run.info.kind, run.label, regress.suite(run))].append(run)
    out = []
    for key in sorted(groups, key=lambda k: (KINDS.index(k[0]), k[1], k[2])):
        runs = groups[key]
        chosen = [r for r in runs if r.info.run_id in site.wanted] or runs
        new = chosen[-1]
        older = runs[: runs.index(new)]
        if older:
            out.append((older[-1], new))
    return out


def _tick(p: regress.Point) -> str:
    """A run on the x axis: its commit, or its time and id when the commit is unknown."""
    sha = p.git_sha.removesuffix("-dirty")
    if len(sha) >= 7 and all(c in "0123456789abcdef" for c in sha):
        return sha[:7]
    return f"{p.started[11:16]} {p.run_id[-6:]}"


def charts(series: dict[tuple[str, str], list[regress.Point]], unit: str, ranked: set) -> tuple:
    """Small multiples of the rows with 2+ points (timed rows: the aoq side and rows outside
    the linear schema), stepped and flagged rows first; (svg or None, steps, rows left out)."""
    steps, cells = [], []
    for (label, row), points in sorted(series.items()):
        case = parse_case(row)
        if len(points) < 2 or (case is not None and case.side != "aoq"):
            continue
        found = regress.detect_steps(points)
        for s in found:
            steps.append(
                {
                    "backend": label,
                    "row": row,
                    "run_id": s.run_id,
                    "before": s.before,
                    "after": s.after,
                    "change": s.change,
                    "unit": unit,
                }
            )
        priority = (not found, (label, row) not in ranked)
        cells.append((priority, label, row, points, found))
    cells.sort(key=lambda c: c[:3])
    drawn = []
    for _, label, row, points, found in cells[:MAX_CHARTS]:
        ticks = {float(i): _tick(p) for i, p in enumerate(points)}
        marks = [(float(s.index), f"step {s.change:+.0%}") for s in found]
        drawn.append(
            svg.line_chart(
                f"{label} {row}",
                [svg.Series(unit, [p.value for p in points])],
                y_label=unit,
                x_labels=ticks,
                marks=marks,
                width=330,
                height=190,
            )
        )
    multiples = svg.small_multiples(f"history ({unit})", drawn, columns=4) if drawn else None
    return multiples, steps, max(0, len(cells) - MAX_CHARTS)


def _thresholds() -> tuple[regress.Thresholds, str]:
    if not THRESHOLDS.exists():
        return regress.load_thresholds(None), "defaults (no bench/thresholds.toml)"
    try:
        return regress.load_thresholds(THRESHOLDS), "bench/thresholds.toml"
    except regress.ThresholdError as e:
        return regress.load_thresholds(None), f"defaults: {e}"


def context(site: Site) -> dict[str, Any]:
    thresholds, source = _thresholds()
    comparisons, findings = [], []
    for base, new in pairs(site):
        found = regress.compare_runs(base, new, thresholds)
        n: dict[str, int] = defaultdict(int)
        for f in found:
            n[f.status] += 1
        comparisons.append(
            {
                "kind": new.info.kind,
                "label": new.label,
                "suite": regress.suite(new),
                "base": base.info.run_id,
                "new": new.info.run_id,
                "counts": {s: n[s] for s in regress.STATUS_ORDER if n[s]},
                "gating": sum(f.gating for f in found),
            }
        )
        for f in found:
            if f.status != "ok":
                findings.append(
                    {
                        **dataclasses.asdict(f),
                        "gating": f.gating,
                        "run_kind": new.info.kind,
                        "base_run": base.info.run_id,
                        "new_run": new.info.run_id,
                    }
                )
    order = regress.STATUS_ORDER
    findings.sort(key=lambda f: (order.index(f["status"]), f["backend"], f["row"]))
    flagged = {(f["backend"], f["row"]) for f in findings}
    bench, bench_steps, bench_left = charts(
        regress.history(site.runs.values(), "bench"), "p50 µs", flagged
    )
    sqnr = regress.history(site.runs.values(), "conformance")
    stepped = {k: v for k, v in sqnr.items() if regress.detect_steps(v)}
    sqnr_chart, sqnr_steps, _ = charts(stepped, "SQNR dB", flagged)
    missing = regress.missing_data(site.runs.values())
    by_backend: dict[str, int] = defaultdict(int)
    for m in missing:
        by_backend[m.backend] += 1
    return {
        "thresholds": thresholds,
        "source": source,
        "comparisons": comparisons,
        "findings": findings,
        "statuses": [s for s in regress.STATUS_ORDER if any(f["status"] == s for f in findings)],
        "labels": sorted({f["backend"] for f in findings}),
        "bench_chart": bench,
        "bench_left": bench_left,
        "sqnr_chart": sqnr_chart,
        "steps": bench_steps + sqnr_steps,
        "n_sqnr_rows": len(sqnr),
        "missing": [m for m in missing if m.row.endswith(" run")],
        "missing_rows": dict(sorted(by_backend.items())),
        "n_missing": len(missing),
        "csv": {
            **table(
                "aoq-regressions.csv", COLUMNS, ([rounded(f[c]) for c in COLUMNS] for f in findings)
            ),
            "table": "findings",
        },
    }
