"""Each row's history across runs, and the level shifts in it (steps) that persist.

A bench row's series is its p50 per run (with the samples); a conformance case's is its SQNR.
reports/regress.py turns steps into findings; the regressions page charts the series.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from aoq.testing.benchrows import p50_us, samples_us
from aoq.testing.records import Record
from reports.data import Run, bench_records, by_age

NOT_RUN = ("skip", "error", "crash")
"""Statuses of a record that measured nothing."""


def as_number(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def records_of(run: Run) -> list[Record]:
    """Bench runs in the benchrows schema (legacy ids adapted), so rows match across runs."""
    return bench_records(run) if run.info.kind == "bench" else run.records


@dataclasses.dataclass(frozen=True)
class Point:
    run_id: str
    started: str
    git_sha: str
    value: float
    samples: list[float]


@dataclasses.dataclass(frozen=True)
class Step:
    index: int
    """Index in the series of the first point on the new level."""
    run_id: str
    before: float
    after: float
    change: float
    """after / before - 1 (for latency: + = slower)."""


def _bench_point(rec: Record) -> tuple[str, float, list[float]] | None:
    v = p50_us(rec.metrics)
    if v is None or rec.status in NOT_RUN:
        return None
    return rec.case_id, v, samples_us(rec.metrics)


def _sqnr_point(rec: Record) -> tuple[str, float, list[float]] | None:
    db = as_number(rec.metrics.get("db")) if rec.check == "sqnr" else None
    if db is None or not math.isfinite(db) or rec.status in NOT_RUN:
        return None
    return f"{rec.case_id}:sqnr", db, []


_SERIES = {"bench": _bench_point, "conformance": _sqnr_point}


def history(runs: Iterable[Run], kind: str = "bench") -> dict[tuple[str, str], list[Point]]:
    """(backend label, row) -> its points, oldest first: p50 µs (and samples) of each timed
    row of bench runs; SQNR dB of each case of conformance runs, row ``case_id:sqnr`` as in
    compare_runs' findings."""
    point = _SERIES.get(kind)
    if point is None:
        raise ValueError(f"no history for {kind!r} runs; kinds with one: {list(_SERIES)}")
    out: dict[tuple[str, str], list[Point]] = defaultdict(list)
    for run in by_age(r for r in runs if r.info.kind == kind):
        i = run.info
        for rec in records_of(run):
            got = point(rec)
            if got is not None:
                row, value, samples = got
                out[(run.label, row)].append(Point(i.run_id, i.started, i.git_sha, value, samples))
    return dict(out)


def _rel(value: float, ref: float) -> float:
    if ref == 0:
        return 0.0 if value == 0 else math.copysign(math.inf, value)
    return (value - ref) / abs(ref)


def detect_steps(points: list[Point], threshold: float = 0.05, min_run: int = 2) -> list[Step]:
    """Level shifts that persist, not single blips.

    Walk the series holding the current level: the median of the points accepted onto it
    since the last step. A point within ``threshold`` (relative) of the level joins it. A
    point beyond it opens a candidate: when it and the next ``min_run - 1`` points all lie
    beyond the threshold on the same side, and within the threshold of their own median, the
    level has moved -- a Step at the first of them (before: the old level, after: their
    median) and they start the new level. Otherwise the point was a blip: passed over,
    never joining a level, so one outlier neither raises an alarm nor drags the level.

    Not steps: a shift seen only in the last ``min_run - 1`` points (it may still be a
    blip), and a slow drift of a fraction of the threshold per run (the level follows it).
    """
    if min_run < 1:
        raise ValueError(f"min_run={min_run}: a step needs at least one point on its new level")
    values = [p.value for p in points]
    steps: list[Step] = []
    level = values[:1]
    i = 1
    while i < len(values):
        ref = statistics.median(level)
        if abs(_rel(values[i], ref)) <= threshold:
            level.append(values[i])
            i += 1
            continue
        window = values[i : i + min_run]
        mid = statistics.median(window)
        moved = [_rel(v, ref) for v in window]
        same_side = all(m > threshold for m in moved) or all(m < -threshold for m in moved)
        if (
            len(window) == min_run
            and same_side
            and all(abs(_rel(v, mid)) <= threshold for v in window)
        ):
            steps.append(Step(i, points[i].run_id, ref, mid, _rel(mid, ref)))
            level = list(window)
            i += min_run
        else:
            i += 1
    return steps
