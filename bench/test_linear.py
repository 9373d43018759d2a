"""The linear matrix: per (dtype, shape) the bf16 F.linear baseline, then per config torchao
(eager, compiled) and aoq, each timed over rotating weight/input copies; and aoq's eager host
overhead per quantized linear. Rows: see bench/rows.py. A mode that fails (e.g. a graph that
cannot be captured) is an error row; aoq's failures fail the test, a peer's do not."""

from __future__ import annotations

import copy
import functools
import time
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import aoq
from aoq.testing.benchrows import summarize
from aoq.testing.records import Record
from bench import baselines as bl
from bench.cases import Host, Linear
from bench.rows import compare, missing_records, timed_records, why
from bench.session import BenchSession
from bench.summary import HOST, HOST_GOAL_US, note
from bench.timer import Timer, failed, paired_over
from bench.timing import Timed


def _weight(cell: Linear, device: torch.device) -> torch.Tensor:
    s = cell.shape
    return torch.randn(s.n, s.k, device=device, dtype=cell.dtype) * s.k**-0.5


def _inputs(cell: Linear, device: torch.device, copies: int) -> list[torch.Tensor]:
    s = cell.shape
    return [torch.randn(s.m, s.k, device=device, dtype=cell.dtype) for _ in range(copies)]


def _dense(w: torch.Tensor, copies: int) -> list[torch.Tensor]:
    """``copies`` of a bf16 (fp16, fp32) weight: the dense side of a rotation."""
    return [w] + [w.clone() for _ in range(copies - 1)]


def _aoq_weight(cell: Linear, device: torch.device) -> torch.Tensor:
    layer = nn.Linear(cell.shape.k, cell.shape.n, bias=False, device=device, dtype=cell.dtype)
    with torch.no_grad():
        layer.weight.copy_(_weight(cell, device))
    assert cell.config is not None
    aoq.quantize_(layer, cell.config)
    return layer.weight


def _copies(timer: Timer, cell: Linear, w: torch.Tensor, device: torch.device) -> int:
    """Copies to rotate through: what one call moves (weight, x, y) against the cache."""
    return timer.copies(bl.linear_bytes(cell, bl.tensor_bytes(w)), device)


def _skip(bench: BenchSession, cell: Linear, modes: tuple[str, ...], reason: str) -> None:
    bench.write(missing_records(bench.run_id, cell.case, modes, "skip", reason))
    pytest.skip(reason)


def _bf16_p50(bench: BenchSession, cell: Linear) -> dict[str, float]:
    base = bench.baselines.get(cell.group)
    return bl.rates(base) if isinstance(base, dict) else {}


def _floor(bench: BenchSession, cell: Linear, weight_bytes: int) -> float | None:
    peaks = bl.peaks(cell.config, cell.dtype_name)
    nbytes = bl.linear_bytes(cell, weight_bytes)
    return bl.floor_us(bench.ceilings, peaks, nbytes, cell.shape.flops)


def _raise_first(timed: dict[str, Timed | Exception]) -> None:
    errors = failed(timed)
    if errors:
        raise errors[0]


def test_baseline(baseline: Linear, bench: BenchSession, timer: Timer) -> None:
    """bf16 (fp16, fp32) F.linear of one (dtype, shape): measured once, reused by its cells."""
    if reason := bench.over_budget():
        bench.baselines[baseline.group] = reason
        pytest.skip(reason)
    w = _weight(baseline, bench.device)
    n = _copies(timer, baseline, w, bench.device)
    timed = timer.time(bl.linear_rotation(_dense(w, n), _inputs(baseline, bench.device, n)))
    bench.baselines[baseline.group] = timed
    floor = _floor(bench, baseline, bl.dense_bytes(baseline))
    bench.notes[baseline.id] = note(bl.rates(timed), floor=floor)
    _raise_first(timed)


def _bf16_rows(
    bench: BenchSession,
    cell: Linear,
    modes: tuple[str, ...],
    paired: dict[str, Timed | Exception] | None = None,
) -> list[Record]:
    """The cell's bf16 side: its (dtype, shape)'s baseline samples, measured once, or the
    samples ``paired`` with the cell's own (on a GPU: :func:`test_aoq`)."""
    base: Any = paired or bench.baselines.get(
        cell.group, "the bf16 baseline of this shape was not selected"
    )
    case = functools.partial(cell.case, side="bf16")
    if not isinstance(base, dict):
        return missing_records(bench.run_id, case, modes, "skip", f"baseline: {base}")
    # a mode that failed in turns failed on aoq's side (a capture): bf16's is not timed
    lost = {m: e for m, e in base.items() if isinstance(e, Exception)} if paired else {}
    rows = [
        missing_records(bench.run_id, case, [m], "skip", f"timed in turns with aoq's: {why(e)}")[0]
        for m, e in lost.items()
    ]
    dense = bl.linear_bytes(cell, bl.dense_bytes(cell))
    floor = bl.floor_us(bench.ceilings, bl.peaks(None, cell.dtype_name), dense, cell.shape.flops)
    return rows + timed_records(
        bench.run_id,
        case,
        {m: t for m, t in base.items() if m not in lost},
        "aten.linear",
        lambda mode, p: compare(p, floor=floor),
        bytes=dense,
        flops=cell.shape.flops,
    )


def _peer_skip_reason(peer: Linear, bench: BenchSession) -> str | None:
    if reason := bl.peer_skip(peer, bench.opts.quick, bench.torchao):
        return reason
    if peer.side == "torchao-compile" and "torchao" not in bench.peers.get(peer.key, {}):
        return "torchao eager did not run for this cell, so neither does compile"
    return None


def test_peer(peer: Linear, bench: BenchSession, timer: Timer) -> None:
    """torchao's same scheme, eager or torch.compile(dynamic=False)."""
    modes = timer.modes
    if reason := bench.over_budget() or _peer_skip_reason(peer, bench):
        _skip(bench, peer, modes, reason)
    w = _weight(peer, bench.device)
    try:
        ao = bl.torchao_weight(w, peer.config_id)
    except Exception as e:  # noqa: BLE001 - torchao refuses this dtype / device
        _skip(bench, peer, modes, f"torchao does not serve this cell: {why(e)}")
    nbytes = bl.tensor_bytes(ao)
    floor = _floor(bench, peer, nbytes)
    if peer.side == "torchao-compile":
        eager = bench.peers[peer.key]["torchao"].get(modes[0])
        if floor and eager and floor / eager > 0.9:
            _skip(bench, peer, modes, "torchao eager is within 10% of the roofline already")
        if not bench.affords_compile():
            _skip(bench, peer, modes, "budget: not enough left for a torch.compile")
    n = _copies(timer, peer, ao, bench.device)
    ws = [ao] + [bl.copy_of(ao, lambda: bl.torchao_weight(w, peer.config_id)) for _ in range(n - 1)]
    fn = bl.compiled_linear() if peer.side == "torchao-compile" else None
    t0 = time.monotonic()
    timed = timer.time(bl.linear_rotation(ws, _inputs(peer, bench.device, n), fn))
    if fn is not None:
        bench.budget.add("compile", time.monotonic() - t0)
    bf16, p50 = _bf16_p50(bench, peer), bl.rates(timed)
    bench.peers[peer.key][peer.side] = p50
    rows = timed_records(
        bench.run_id,
        peer.case,
        timed,
        f"torchao.{'compile' if fn else 'eager'}",
        lambda mode, p: compare(p, bf16=bf16.get(mode), floor=floor),
        bytes=bl.linear_bytes(peer, nbytes),
        flops=peer.shape.flops,
    )
    bench.write(rows)  # a peer's failure is its error row, not the run's
    errors = "; ".join(why(e)[:80] for e in failed(timed))
    bench.notes[peer.id] = note(p50, bf16=bf16) + (f" error: {errors}" if errors else "")


def _best_peer(bench: BenchSession, cell: Linear) -> dict[str, tuple[str, float]]:
    """Per mode, the faster torchao side (eager or compiled) and its p50."""
    best: dict[str, tuple[str, float]] = {}
    for side, p50 in bench.peers.get(cell.key, {}).items():
        for mode, v in p50.items():
            if mode not in best or v < best[mode][1]:
                best[mode] = (side, v)
    return best


def test_aoq(cell: Linear, bench: BenchSession, timer: Timer) -> None:
    """aoq's quantized linear through its dispatch (the kernel it picks, traced). On a GPU
    its passes take turns with bf16 F.linear's over the same inputs (timing.device_times),
    and its ratio is against those bf16 samples, not the shape's baseline timed earlier: at
    its power limit a GPU's SM clock moves by several per cent within a row (run bd72d9:
    int8wo at 4096 x 8192 x 8192 sampled 759-817 µs, bf16's row minutes earlier 687-773), and
    an `--only` run's first row after the ceilings read 6-17 % slow (751e7f, c39c2b)."""
    modes = timer.modes
    if reason := bench.over_budget():
        bench.write(_bf16_rows(bench, cell, modes))
        _skip(bench, cell, modes, reason)
    qw = _aoq_weight(cell, bench.device)
    n = _copies(timer, cell, qw, bench.device)
    ws = [qw] + [copy.deepcopy(qw) for _ in range(n - 1)]
    xs = _inputs(cell, bench.device, n)
    with aoq.trace_kernels() as trace:
        F.linear(xs[0], ws[0])
    ran = trace.records[0]
    rot = bl.linear_rotation(ws, xs)
    paired: dict[str, Timed | Exception] | None = None
    if timer.gpu:
        dense = bl.linear_rotation(_dense(_weight(cell, bench.device), n), xs)
        timed, paired = timer.time_pair(rot, dense)
    else:
        timed = timer.time(rot)
    nbytes = bl.tensor_bytes(qw)
    floor = _floor(bench, cell, nbytes)
    bf16 = bl.rates(paired) if paired else _bf16_p50(bench, cell)
    peer = _best_peer(bench, cell)

    def metrics(mode: str, p50: float) -> dict[str, Any]:
        return compare(p50, bf16=bf16.get(mode), peer=peer.get(mode), floor=floor)

    provenance: dict[str, Any] = {"fallback": ran.fallback}
    if ran.reason:
        provenance["fallback_reason"] = ran.reason
    rows = timed_records(
        bench.run_id,
        cell.case,
        timed,
        ran.kernel,
        metrics,
        bytes=bl.linear_bytes(cell, nbytes),
        flops=cell.shape.flops,
        **provenance,
    )
    bench.write(rows + _bf16_rows(bench, cell, modes, paired))
    peer_p50 = {mode: v for mode, (_, v) in peer.items()}
    bench.notes[cell.id] = f"{ran.kernel} " + note(bl.rates(timed), bf16, peer_p50, floor)
    _raise_first(timed)


def test_host_overhead(host: Host, bench: BenchSession, timer: Timer) -> None:
    """Eager host µs per call of one layer at M=1 (aoq's dispatch, launcher and launches)."""
    mode = timer.modes[-1]
    if reason := bench.over_budget():
        _skip(bench, host, (mode,), reason)
    w = _weight(host, bench.device) if host.config is None else _aoq_weight(host, bench.device)
    x = _inputs(host, bench.device, 1)[0]
    extra: dict[str, Any] = {}
    if host.config is None:
        t = timer.host(functools.partial(F.linear, x, w))
        bench.baselines[("host",)] = {mode: t}
    elif timer.gpu:
        # the goal is aoq's own overhead: the time over the bf16 F.linear it replaces (this
        # host's Python and launch floor), their batches alternating in this test (the
        # host's speed drifts between tests: timer.host_time_pair)
        base = functools.partial(F.linear, x, _weight(host, bench.device))
        t, tb = timer.host_pair(functools.partial(F.linear, x, w), base)
        over = paired_over(t, tb)
        extra = {
            "goal_us": HOST_GOAL_US,
            "meets_goal": over <= HOST_GOAL_US,
            "over_bf16_us": over,
            "bf16_paired_p50_us": summarize(tb.samples_us)["p50_us"],
        }
    else:  # a CPU test times once (pytest-benchmark): against the baseline test's bf16
        t = timer.host(functools.partial(F.linear, x, w))
        p50 = summarize(t.samples_us)["p50_us"]
        ref = bench.baselines.get(("host",))
        over_ref = p50 - bl.rates(ref)[mode] if isinstance(ref, dict) else None
        extra = {
            "goal_us": HOST_GOAL_US,
            "meets_goal": (p50 if over_ref is None else over_ref) <= HOST_GOAL_US,
        }
        if over_ref is not None:
            extra["over_bf16_us"] = over_ref
    p50 = summarize(t.samples_us)["p50_us"]
    bench.write(timed_records(bench.run_id, host.case, {mode: t}, None, check=HOST, **extra))
    bench.notes[host.id] = f"{p50:.1f}us per call"
