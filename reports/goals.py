"""The speed goals a GPU bench run is held to (aoq.testing.goals), checked against one run:
per goal, each cell's measured value (graph replays, as the goals are stated; host time
eager) and whether it meets the goal. Shown per run on speed.html.

A ratio against torchao only counts where torchao's faster side was timed: a cell whose
torch.compile side the bench skipped for budget compares with eager torchao alone, an upper
bound on aoq's lead, so it reads "upper bound" and neither meets nor misses a goal it
clears; one it misses is missed either way.
"""

from __future__ import annotations

from typing import Any

from aoq.testing.benchrows import LATENCY, parse_case
from aoq.testing.goals import GOALS, HOST_GOAL, Goal
from aoq.testing.records import Record
from reports.data import Run, bench_records

HOST_CHECK = "host_overhead"


def _index(run: Run) -> dict[tuple[str, str, str, str], Record]:
    """(config, shape, side, mode) -> the bf16 record (timed linears and kernels)."""
    out = {}
    for r in bench_records(run):
        case = parse_case(r.case_id) if r.check == LATENCY else None
        if case is not None and case.dtype == "bf16":
            out[(case.config, case.shape, case.side, case.mode)] = r
    return out


def _budget_skipped(rec: Record | None) -> bool:
    return rec is not None and rec.status == "skip" and (rec.reason or "").startswith("budget")


def _cell(goal: Goal, label: str, value: Any, upper_bound: bool = False) -> dict[str, Any]:
    if not isinstance(value, (int, float)):
        return {"label": label, "value": None, "state": "not measured"}
    if upper_bound and goal.meets(value):
        state = "upper bound"
    else:
        state = "met" if goal.meets(value) else "missed"
    return {"label": label, "value": float(value), "state": state}


def _verdict(cells: list[dict[str, Any]]) -> str:
    states = [c["state"] for c in cells]
    measured = [s for s in states if s != "not measured"]
    if not measured:
        return "not measured"
    missed = states.count("missed")
    if missed:
        return f"missed at {missed} of {len(states)}"
    if len(measured) < len(states) or "upper bound" in states:
        return "open"  # nothing missed, not everything shown to meet
    return "met"


def check(run: Run) -> list[dict[str, Any]]:
    """One row per goal (GOALS, then the host goal): name, target, cells (label, value, state:
    met, missed, upper bound or not measured) and a verdict (met, missed at n of N, open,
    not measured). GPU runs only: the goals are stated for H100 / H200 class GPUs."""
    if run.info.backend not in ("cuda", "rocm"):
        return []
    idx = _index(run)
    rows = []
    for goal in GOALS:
        cells = []
        for kn in goal.shapes:
            shape = kn if goal.m is None else f"M{goal.m}-{kn}"
            rec = idx.get((goal.config, shape, "aoq", "graph"))
            ok = rec is not None and rec.status == "pass"
            value = rec.metrics.get(goal.metric) if ok and rec is not None else None
            bound = goal.metric == "speedup_vs_peer" and _budget_skipped(
                idx.get((goal.config, shape, "torchao-compile", "graph"))
            )
            cells.append(_cell(goal, kn, value, bound))
        rows.append(_row(goal, cells))
    host = [
        _cell(HOST_GOAL, r.config or r.case_id.split("/")[0], r.metrics.get("over_bf16_us"))
        for r in run.records
        if r.check == HOST_CHECK and r.metrics.get("over_bf16_us") is not None
    ]
    rows.append(_row(HOST_GOAL, host))
    return rows


def _row(goal: Goal, cells: list[dict[str, Any]]) -> dict[str, Any]:
    target = f"≤ {goal.target:g}" if goal.at_most else f"≥ {goal.target:g}"
    if goal.metric == "roofline":
        target = f"≥ {goal.target:.0%}"
    elif goal.metric.startswith("speedup"):
        target += "×"
    return {
        "goal": goal.name,
        "metric": goal.metric,
        "target": target,
        "cells": cells,
        "verdict": _verdict(cells),
    }


def tally(rows: list[dict[str, Any]]) -> dict[str, int]:
    """How many goals of :func:`check`'s rows are met, missed, open and not measured (the
    overview's bench tiles)."""
    out = dict.fromkeys(("met", "missed", "open", "not measured"), 0)
    for r in rows:
        head = "missed" if r["verdict"].startswith("missed") else r["verdict"]
        out[head] += 1
    return {k: v for k, v in out.items() if v}
