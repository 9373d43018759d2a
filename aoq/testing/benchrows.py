"""Bench rows: the one shape every speed measurement takes in a ``kind="bench"`` run.

A timed row is a :class:`~aoq.testing.records.Record` with ``check="latency"`` and the case id

    <config>/<dtype>/<backend>/<shape>/<side>/<mode>

e.g. ``int4wo-g128/bf16/cuda/M1-K4096-N4096/aoq/graph``. ``side`` is who ran it: ``aoq``,
``bf16`` (F.linear, the baseline), ``torchao`` or ``torchao-compile`` (the peer);
``mode`` is how it was timed: ``graph`` (CUDA-graph replay, device events), ``eager``
(launched from Python, device events) or ``wall`` (host clock, CPU backends). Kernels that
are not linears (activation quantization, MX casts, a training step) use the config slot for
their name (``act_quant.int8_row``, ``mx_cast.dim0``, ``mx-train-fp8``).

Metrics of a timed row: ``p20_us``, ``p50_us``, ``p80_us``, ``min_us``, ``n`` and every
sample in ``samples_us`` (regression tests need them), plus where known ``speedup_vs_bf16``,
``speedup_vs_peer``, ``roofline`` (floor / p50: 1.0 is the roofline), ``floor_us``,
``bytes`` and ``flops``. Ceilings measured in the same run are ``check="ceiling"`` rows
``ceiling/<name>`` with ``metrics={"value": ...}`` (``copy_GBps``, ``bf16_TFLOPs``, ...).

Runs committed before this schema (``bench/linear_speed.py``) keep ``p50`` without the unit
and no samples; :func:`p50_us` reads both.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence
from typing import Any

from aoq.testing.records import Record

SIDES = ("aoq", "bf16", "torchao", "torchao-compile")
MODES = ("graph", "eager", "wall")
LATENCY = "latency"
CEILING = "ceiling"


@dataclasses.dataclass(frozen=True)
class BenchCase:
    config: str
    dtype: str
    backend: str
    shape: str
    side: str
    mode: str

    @property
    def case_id(self) -> str:
        return "/".join(dataclasses.astuple(self))

    @property
    def row_key(self) -> str:
        """The row without its side: aoq, bf16 and the peer of one cell share it."""
        return f"{self.config}/{self.dtype}/{self.backend}/{self.shape}/{self.mode}"


def parse_case(case_id: str) -> BenchCase | None:
    """The parts of a timed row's id, or None for ids of another shape (legacy, ceilings)."""
    parts = case_id.split("/")
    if len(parts) != 6 or parts[4] not in SIDES or parts[5] not in MODES:
        return None
    return BenchCase(*parts)


def summarize(samples_us: Sequence[float]) -> dict[str, Any]:
    """p20/p50/p80/min of the samples, and the samples themselves (µs, in measured order)."""
    if not samples_us:
        raise ValueError("no samples")
    s = sorted(float(v) for v in samples_us)
    if len(s) >= 2:
        q = statistics.quantiles(s, n=10, method="inclusive")
        p20, p80 = q[1], q[7]
    else:
        p20 = p80 = s[0]
    return {
        "p20_us": p20,
        "p50_us": statistics.median(s),
        "p80_us": p80,
        "min_us": s[0],
        "n": len(s),
        "samples_us": [float(v) for v in samples_us],
    }


def latency_record(
    run_id: str,
    case: BenchCase,
    samples_us: Sequence[float],
    *,
    kernel: str | None = None,
    status: str = "pass",
    reason: str | None = None,
    **metrics: Any,
) -> Record:
    """A timed row: the summary of ``samples_us`` plus ``metrics`` (speedups, roofline...)."""
    return Record(
        run_id,
        case.case_id,
        LATENCY,
        status,
        config=case.config,
        dtype=case.dtype,
        shape=case.shape,
        kernel=kernel,
        metrics={**summarize(samples_us), **metrics},
        reason=reason,
    )


def p50_us(metrics: dict[str, Any]) -> float | None:
    """The median in µs of a timed row, new schema or legacy (``p50``)."""
    v = metrics.get("p50_us", metrics.get("p50"))
    return float(v) if isinstance(v, (int, float)) else None


def samples_us(metrics: dict[str, Any]) -> list[float]:
    """The row's samples; a legacy row has none."""
    v = metrics.get("samples_us")
    return [float(x) for x in v] if isinstance(v, list) else []
