"""The speed goals a GPU bench run is held to (README, "Speed goals"), checked against one run:
per goal, each cell's measured value (graph replays, as the goals are stated; host time
eager) and whether it meets the goal. Shown per run on speed.html.

A ratio against torchao only counts where torchao's faster side was timed: a cell whose
torch.compile side the bench skipped for budget compares with eager torchao alone, an upper
bound on aoq's lead, so it reads "upper bound" and neither meets nor misses a goal it
clears; one it misses is missed either way.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from aoq.testing.benchrows import LATENCY, parse_case
from aoq.testing.records import Record
from reports.data import Run, bench_records

LARGE_KN = ("K8192-N8192", "K4096-N14336", "K14336-N4096")
"""The goals' K x N: the issue's 8192^2 and 4096 x 14336, and the bench's 14336 x 4096."""
HOST_CHECK = "host_overhead"


@dataclasses.dataclass(frozen=True)
class Goal:
    """``metric`` of ``config`` (an aoq config id, or a kernel such as act_quant.int8_row) at
    M ``m`` over ``shapes`` (K x N ids, or whole shape ids where ``m`` is None), at least
    ``target`` (at most, for ``at_most``)."""

    name: str
    config: str
    m: int | None
    metric: str
    target: float
    shapes: tuple[str, ...] = LARGE_KN
    at_most: bool = False

    def meets(self, value: float) -> bool:
        return value <= self.target if self.at_most else value >= self.target


def _decode(name: str, config: str, m1: float, peer: bool) -> list[Goal]:
    """M1 at ``m1`` x bf16 (and 1.3x torchao where ``peer``), M16 within 15 % of it."""
    out = [
        Goal(f"{name} decode M1 vs bf16", config, 1, "speedup_vs_bf16", m1),
        Goal(f"{name} decode M16 vs bf16", config, 16, "speedup_vs_bf16", round(m1 * 0.85, 3)),
    ]
    if peer:
        out.insert(1, Goal(f"{name} decode M1 vs torchao", config, 1, "speedup_vs_peer", 1.3))
    return out


GOALS: tuple[Goal, ...] = (
    *_decode("int4 weight-only", "int4wo-g128", 3.0, True),
    *_decode("int8 weight-only", "int8wo", 1.8, True),
    *_decode("fp8 weight-only", "fp8wo", 1.8, True),
    *_decode("W4A8", "w4a8-g32", 2.5, False),
    *(
        Goal(f"{name} prefill M4096 vs bf16", config, 4096, "speedup_vs_bf16", 0.9)
        for name, config in (
            ("int4 weight-only", "int4wo-g128"),
            ("int8 weight-only", "int8wo"),
            ("fp8 weight-only", "fp8wo"),
        )
    ),
    Goal("fp8 W8A8 row prefill M4096 vs bf16", "fp8-row", 4096, "speedup_vs_bf16", 1.5),
    Goal("int8 W8A8 prefill M4096 vs bf16", "w8a8", 4096, "speedup_vs_bf16", 1.2),
    *(
        Goal(
            f"activation quantization {kind}, share of copy bandwidth",
            f"act_quant.{kind}",
            None,
            "roofline",
            0.8,
            ("M8192-K8192",),
        )  # fmt: skip
        for kind in ("int8_row", "fp8_row")
    ),
)
HOST_GOAL = Goal("eager host time over bf16 F.linear, µs", "", 1, "over_bf16_us", 10.0, (), True)


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
