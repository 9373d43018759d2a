"""speed.html: from the newest bench run per backend that timed linears, the speed goals it
meets and misses (GPU runs: reports.goals), then per config × shape
and mode (graph replay, eager, wall): speedup vs bf16, vs the peer (torchao, the faster of
eager and compiled; the ``peer`` column names the faster side and any side not timed, since a
skipped torch.compile leaves "vs peer" an upper bound), and % of roofline, as bar charts (log
axis where the range is wide) and one sortable, filterable table; then the other timings
(bandwidth of casts, step times, host overhead) from the newest run that has each, and the
run's ceilings.

Legacy rows (before ``aoq.testing.benchrows``) are adapted by ``reports.data.bench_records``.
"""

from __future__ import annotations

import re
from typing import Any

from aoq.testing.benchrows import CEILING, LATENCY, MODES, parse_case, samples_us
from aoq.testing.benchrows import p50_us as p50_of
from aoq.testing.records import Record
from reports import goals, svg
from reports.data import Run, bench_records, by_age
from reports.site import Site, first_line, fmt, rounded, table

PEERS = ("torchao", "torchao-compile")
WIDE = 4.0  # a max/min ratio above this gets a log axis
COLUMNS = [
    "backend",
    "config",
    "dtype",
    "shape",
    "mode",
    "status",
    "kernel",
    "p50_us",
    "bf16_us",
    "peer_us",
    "peer",
    "speedup_vs_bf16",
    "speedup_vs_peer",
    "roofline",
    "n_samples",
    "alternatives",
    "reason",
    "run_id",
]


def shape_key(shape: str) -> tuple:
    """M1-K8192-N8192 -> (1, 8192, 8192): shapes sort by size, not as text."""
    nums = [int(n) for n in re.findall(r"\d+", shape)]
    return (nums, shape)


def peer_side(got: dict[str, Record]) -> tuple[float | None, str]:
    """(p50, side) of the faster timed peer among one row's sides, the side named with the
    peers that were not timed (skipped, failed): "torchao (torchao-compile not timed)"."""
    timed: dict[str, float] = {}
    for s in PEERS:
        v = p50_of(got[s].metrics) if s in got and got[s].status == "pass" else None
        if v:
            timed[s] = v
    if not timed:
        return None, ""
    side = min(timed, key=lambda s: timed[s])
    untimed = [s for s in PEERS if s in got and got[s].status != "pass"]
    return timed[side], side + (f" ({', '.join(untimed)} not timed)" if untimed else "")


def has_latency(run: Run) -> bool:
    """A bench run with timed rows. A subset run (``--only``) no longer takes the place of the
    full picture: reports.data.latest lays it over the newest full run, row by row."""
    return any(r.check == LATENCY for r in run.records)


def rows_of(run: Run) -> list[dict[str, Any]]:
    """One row per aoq timing (config, dtype, shape, mode) with its baselines beside it."""
    sides: dict[str, dict[str, Record]] = {}
    for r in bench_records(run):
        case = parse_case(r.case_id) if r.check == LATENCY else None
        if case is not None:
            sides.setdefault(case.row_key, {})[case.side] = r
    out = []
    for got in sides.values():
        aoq = got.get("aoq")
        case = parse_case(aoq.case_id) if aoq is not None else None
        if aoq is None or case is None:
            continue
        m = aoq.metrics
        p50 = p50_of(m)
        bf16 = got.get("bf16")
        bf16_us = p50_of(bf16.metrics) if bf16 and bf16.status == "pass" else None
        peer_us, peer = peer_side(got)
        vs_bf16 = m.get("speedup_vs_bf16") or (bf16_us / p50 if bf16_us and p50 else None)
        vs_peer = m.get("speedup_vs_peer") or (peer_us / p50 if peer_us and p50 else None)
        peer_note = "; ".join(
            f"{s}: {got[s].status} {first_line(got[s].reason, 120)}".strip()
            for s in PEERS
            if s in got and got[s].status != "pass"
        )
        out.append(
            {
                "backend": run.label,
                "config": case.config,
                "dtype": case.dtype,
                "shape": case.shape,
                "mode": case.mode,
                "status": aoq.status,
                "kernel": aoq.kernel or "",
                "p50_us": p50,
                "bf16_us": bf16_us,
                "peer_us": peer_us,
                "peer": peer,
                "speedup_vs_bf16": vs_bf16,
                "speedup_vs_peer": vs_peer,
                "roofline": m.get("roofline"),
                "n_samples": len(samples_us(m)) or m.get("n"),
                "alternatives": m.get("alternatives") or {},
                "reason": "; ".join(x for x in (aoq.reason or "", peer_note) if x),
                "run_id": aoq.run_id,  # (a partial run laid over the run: its own id)
            }
        )
    configs = list(dict.fromkeys(r["config"] for r in out))
    out.sort(key=lambda r: (configs.index(r["config"]), shape_key(str(r["shape"])), r["mode"]))
    return out


def _chart(title: str, rows: list[dict], metric: str, scale: float = 1.0, x_label: str = ""):
    cats = list(dict.fromkeys(f"{r['config']} · {r['shape']}" for r in rows))
    modes = [m for m in MODES if any(r["mode"] == m for r in rows)]
    value = {(f"{r['config']} · {r['shape']}", r["mode"]): r[metric] for r in rows}
    series = [
        svg.Series(
            mode, [None if value.get((c, mode)) is None else value[(c, mode)] * scale for c in cats]
        )
        for mode in modes
    ]
    vals = [v for s in series for v in s.values if v]
    if not vals:
        return None
    speedup = metric.startswith("speedup")
    log = speedup and max(vals) / min(vals) > WIDE
    return svg.bar_chart(
        title + (" (log axis)" if log else ""),
        cats,
        series,
        log=log,
        base=1.0 if speedup else None,
        x_label=x_label,
        value_fmt=(lambda v: f"{v:.2f}×") if speedup else (lambda v: f"{v:.0f}%"),
    )


def others(site: Site, label: str) -> list[dict[str, Any]]:
    """Non-linear timings: for each check, the rows of the newest run of ``label`` with it."""
    newest: dict[str, Run] = {}
    for run in by_age(r for r in site.runs.values() if r.info.kind == "bench"):
        if run.label != label:
            continue
        for r in run.records:
            if r.check not in (LATENCY, CEILING, "vs_peer"):
                newest[r.check] = run
    out = []
    for check, run in sorted(newest.items()):
        for r in run.records:
            if r.check != check:
                continue
            m = {k: v for k, v in r.metrics.items() if k not in ("samples_us",)}
            out.append(
                {
                    "backend": label,
                    "run_id": run.info.run_id,
                    "case": r.case_id,
                    "check": check,
                    "status": r.status,
                    "kernel": r.kernel or "",
                    "p50_us": p50_of(m),
                    "metrics": fmt({k: v for k, v in m.items() if not k.startswith("p")}),
                    "tolerance": fmt(r.tolerance or {}),
                    "reason": r.reason or "",
                }
            )
    return out


def context(site: Site) -> dict[str, Any]:
    runs = site.latest("bench", where=has_latency)
    sections, rows, other = [], [], []
    for run in runs:
        got = rows_of(run)
        rows += got
        ceilings = {
            r.case_id.split("/", 1)[-1]: r.metrics.get("value")
            for r in run.records
            if r.check == CEILING
        }
        charts = [
            _chart(
                f"{run.label}: speedup vs bf16 F.linear",
                got,
                "speedup_vs_bf16",
                x_label="× faster than bf16 (right of 1 is faster)",
            ),
            _chart(
                f"{run.label}: speedup vs torchao",
                got,
                "speedup_vs_peer",
                x_label="× faster than the peer (the faster of its eager and compiled runs)",
            ),
            _chart(
                f"{run.label}: % of roofline",
                got,
                "roofline",
                100.0,
                x_label="floor time / measured time, %",
            ),
        ]
        sections.append(
            {
                "run": site.run_row(run),
                "ceilings": ceilings,
                "goals": goals.check(run),
                "charts": [c for c in charts if c is not None],
            }
        )
        other += others(site, run.label)
    labels = sorted({r["backend"] for r in rows})
    return {
        "sections": sections,
        "rows": rows,
        "others": other,
        "labels": labels,
        "configs": list(dict.fromkeys(r["config"] for r in rows)),
        "modes": sorted({r["mode"] for r in rows}),
        "csv": {
            **table("aoq-speed.csv", COLUMNS, ([rounded(r[c]) for c in COLUMNS] for r in rows)),
            "table": "speed",
        },
    }
