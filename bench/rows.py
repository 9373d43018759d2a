"""Building the records of a bench run (schema: aoq.testing.benchrows).

A timed row carries the summary of its samples and where known ``speedup_vs_bf16`` (bf16
p50 / its p50, same mode), ``speedup_vs_peer`` (the faster torchao side's p50 / its p50, same
mode, with ``peer`` naming that side), ``roofline`` (floor / p50), ``floor_us``, ``bytes`` and
``flops``. A side that could not be timed is a row with status skip (not installed, not
served, over budget) or error, and the reason.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from aoq.testing.benchrows import CEILING, LATENCY, BenchCase, latency_record, summarize
from aoq.testing.records import Record
from bench.timing import Timed


def why(reason: str | BaseException) -> str:
    if isinstance(reason, BaseException):
        return f"{type(reason).__name__}: {reason}"[:500]
    return reason


def compare(
    p50: float,
    *,
    bf16: float | None = None,
    peer: tuple[str, float] | None = None,
    floor: float | None = None,
) -> dict[str, Any]:
    """The ratios of a row whose median is ``p50`` µs."""
    out: dict[str, Any] = {}
    if bf16:
        out["speedup_vs_bf16"] = bf16 / p50
    if peer:
        out["peer"], out["speedup_vs_peer"] = peer[0], peer[1] / p50
    if floor:
        out["floor_us"], out["roofline"] = floor, floor / p50
    return out


def timed_records(
    run_id: str,
    case_of: Callable[[str], BenchCase],
    timed: Mapping[str, Timed | Exception],
    kernel: str | None = None,
    metrics_of: Callable[[str, float], dict[str, Any]] = lambda mode, p50: {},
    check: str = LATENCY,
    **fixed: Any,
) -> list[Record]:
    """One row per mode: samples summary, the timer's extras, ``metrics_of(mode, p50)`` and
    ``fixed`` metrics; an error row for a mode that raised."""
    rows = []
    for mode, t in timed.items():
        if isinstance(t, Exception):
            rows += missing_records(run_id, case_of, [mode], "error", t, kernel, check)
            continue
        p50 = summarize(t.samples_us)["p50_us"]
        extra = {**t.extra, **fixed, **metrics_of(mode, p50)}
        row = latency_record(run_id, case_of(mode), t.samples_us, kernel=kernel, **extra)
        rows.append(row if check == LATENCY else dataclasses.replace(row, check=check))
    return rows


def missing_records(
    run_id: str,
    case_of: Callable[[str], BenchCase],
    modes: Iterable[str],
    status: str,
    reason: str | BaseException,
    kernel: str | None = None,
    check: str = LATENCY,
) -> list[Record]:
    """Rows of a side that has no samples, one per mode."""
    out = []
    for mode in modes:
        case = case_of(mode)
        out.append(
            missing_record(
                run_id,
                case.case_id,
                check,
                status,
                reason,
                config=case.config,
                dtype=case.dtype,
                shape=case.shape,
                kernel=kernel,
            )
        )
    return out


def missing_record(
    run_id: str, case_id: str, check: str, status: str, reason: str | BaseException, **fields: Any
) -> Record:
    return Record(run_id, case_id, check, status, reason=why(reason), **fields)


def ceiling_record(run_id: str, name: str, value: float, timed: Timed) -> Record:
    metrics = {"value": value, **summarize(timed.samples_us), **timed.extra}
    return Record(run_id, f"{CEILING}/{name}", CEILING, "pass", kernel=name, metrics=metrics)
