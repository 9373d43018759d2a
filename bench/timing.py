"""How bench times a call: device events on GPUs, the host clock on CPUs, rotating buffers.

GPUs. pytest-benchmark's timers are host clocks: they time how long Python takes to *launch*
work, not how long the GPU takes to do it. A 10 µs kernel launched from Python costs 30-100 µs
of host time (aoq's dispatch, the launcher, the driver), so a host clock would report the
launch path and hide the kernel behind launch gaps. Here each repetition is bracketed by CUDA
(HIP) events on the stream, and every cell is timed twice:

- ``graph``: one pass over the rotation captured as a CUDA graph and replayed, no launch gaps:
  what the kernels cost (what serving stacks that capture graphs see);
- ``eager``: the same pass launched from Python: what an eager user sees, host overhead and
  all (for small decode shapes this is host bound).

CPUs. Wall clock: pytest-benchmark's ``benchmark`` fixture times each call (``wall`` mode), and
its stats and every sample are kept.

Rotation. A cell is timed over ``copies_for(...)`` distinct weight/input copies, one pass
running each once, so that one pass moves several times the last-level cache and no call
finds its operands cached (a 4096x4096 int4 weight is 8 MB: it would sit in an H100's 50 MB L2
and report a bandwidth no model sees). A sample is one pass divided by the copies in it.

Warm-up: one pass (autotuning, Triton compilation, lazily built layouts), the clocks raised
after an idle gap (WARM_GAP_S), then a pass that sizes the repetitions to the row's cap.
Samples: 30 per GPU row (at least 5), p20/p50/p80 and all of them recorded. Python's garbage
collector is off while samples are taken (:func:`collector_off`), as in ``timeit``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

import torch

GPU_REPS = 30
CPU_REPS = 20
QUICK_REPS = 10
LEAST_REPS = 5
WARMUP = 2
MiB = 1 << 20


@dataclasses.dataclass
class Timed:
    """Per-call samples of one mode, and what else the timer knows (reps, copies, stats)."""

    samples_us: list[float]
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)


class Rotation:
    """Calls over distinct operand copies: ``next()`` runs the next one, ``all()`` a pass."""

    def __init__(self, calls: Sequence[Callable[[], Any]]) -> None:
        if not calls:
            raise ValueError("a rotation needs at least one call")
        self.calls = list(calls)
        self._i = 0

    def __len__(self) -> int:
        return len(self.calls)

    def next(self) -> Any:
        call = self.calls[self._i]
        self._i = (self._i + 1) % len(self.calls)
        return call()

    def all(self) -> None:
        for call in self.calls:
            call()


def cache_bytes(device: torch.device) -> int:
    """The last-level cache to defeat: the GPU's L2, else a generous CPU L3 (64 MiB)."""
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return int(getattr(props, "L2_cache_size", 0) or 50 * MiB)
    return 64 * MiB


def copies_for(nbytes: int, cache: int, most: int = 32, factor: int = 4) -> int:
    """Copies whose one pass moves ``factor`` x the cache: at least 2, at most ``most``."""
    return max(2, min(most, -(-factor * cache // max(nbytes, 1))))


def fit_reps(pass_s: float, reps: int, cap_s: float, least: int = LEAST_REPS) -> int:
    """Repetitions of a ``pass_s`` pass that fit ``cap_s``, between ``least`` and ``reps``."""
    if pass_s <= 0:
        return reps
    return max(min(least, reps), min(reps, int(cap_s / pass_s)))


def per_call(pass_us: Sequence[float], calls: int) -> list[float]:
    """Per-call µs from per-pass µs."""
    return [t / calls for t in pass_us]


class Clock(Protocol):
    def sync(self) -> None: ...

    def times_us(self, run: Callable[[], Any], reps: int) -> list[float]: ...

    def turns_us(self, runs: Sequence[Callable[[], Any]], reps: int) -> list[list[float]]: ...


def turns(n: int, reps: int) -> list[int]:
    """Which of ``n`` runs goes when, over ``reps`` rounds: in order on even rounds, reversed
    on odd ones, so that none is always first after another's work."""
    out: list[int] = []
    for i in range(reps):
        out += range(n) if i % 2 == 0 else range(n - 1, -1, -1)
    return out


def _per_run(order: list[int], samples: list[float], n: int) -> list[list[float]]:
    out: list[list[float]] = [[] for _ in range(n)]
    for j, s in zip(order, samples, strict=True):
        out[j].append(s)
    return out


class EventClock:
    """Device time: an event pair around each repetition, all queued, one synchronisation."""

    def sync(self) -> None:
        torch.cuda.synchronize()

    def times_us(self, run: Callable[[], Any], reps: int) -> list[float]:
        return self.turns_us([run], reps)[0]

    def turns_us(self, runs: Sequence[Callable[[], Any]], reps: int) -> list[list[float]]:
        """``reps`` samples of each of ``runs``, taking turns (:func:`turns`)."""
        order = turns(len(runs), reps)
        pairs = [
            (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            for _ in order
        ]
        for j, (start, end) in zip(order, pairs, strict=True):
            start.record()
            runs[j]()
            end.record()
        torch.cuda.synchronize()
        return _per_run(order, [s.elapsed_time(e) * 1e3 for s, e in pairs], len(runs))


class HostClock:
    """Host time of each repetition (CPU work, or launches when nothing waits on the device)."""

    def sync(self) -> None:
        pass

    def times_us(self, run: Callable[[], Any], reps: int) -> list[float]:
        return self.turns_us([run], reps)[0]

    def turns_us(self, runs: Sequence[Callable[[], Any]], reps: int) -> list[list[float]]:
        order, out = turns(len(runs), reps), []
        for j in order:
            t0 = time.perf_counter()
            runs[j]()
            out.append((time.perf_counter() - t0) * 1e6)
        return _per_run(order, out, len(runs))


COLLECT_FIRST = os.environ.get("AOQ_BENCH_COLLECT_FIRST", "1") != "0"
"""Collect before the collector goes off. Session 48, H200, int4wo M16 at 8192^2 as a graph
replay, the same code in one call, taking turns: 16.9 / 16.9 us collecting first, 19.7 / 19.6
not (runs 7715a0, 5f5ca7 / 8cd01c, 4dc049). Runs with the collector left on all the while
(06528f and before) read 16.7-16.8, so the slow state is the collector off with garbage left
uncollected; why a device-side time moves with it is not known. ``AOQ_BENCH_COLLECT_FIRST=0``
skips it (A/B runs; a goal bench then takes ~3.6 min on an H200 against ~5.5)."""


@contextlib.contextmanager
def collector_off() -> Iterator[None]:
    """Python's cyclic garbage collector collected (COLLECT_FIRST), then off until the block
    ends (as ``timeit`` does): a collection that falls inside an eager pass stalls its
    launches, and its cost grows with what the process holds, so a long run's late rows
    would pay more than its early ones. The collection costs: 0.5 s for a process that has
    run torch.compile (~450 k objects) on a 2-core CI machine, and a cell times several
    passes (run 1df5cb, which collected, reached its 379th of 417 cells at 5m32s where
    06528f reached its 415th of 465 at 3m40s)."""
    was = gc.isenabled()
    if COLLECT_FIRST:
        gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class NotCapturable(RuntimeError):
    """The calls synchronize with the host, so a CUDA graph cannot hold them."""


def _check_capturable(rot: Rotation) -> None:
    """Run one pass with torch's sync debug mode set to error: a call that waits on the
    device (``.item()``, a copy from pageable memory...) raises here instead of invalidating
    a capture, which on an H200 left the CUDA context failing every later call (torchao's
    W8A8, run ff3b81)."""
    previous = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode("error")
    try:
        rot.all()
    except RuntimeError as e:
        raise NotCapturable(f"not capturable in a CUDA graph: {str(e).splitlines()[0]}") from e
    finally:
        torch.cuda.set_sync_debug_mode(previous)


def cuda_graph(rot: Rotation) -> Callable[[], Any]:
    """Capture one pass of ``rot`` (already warmed up) as a CUDA graph; returns its replay.
    The side-stream warm-up is what torch's docs ask before a capture."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        rot.all()
    torch.cuda.current_stream().wait_stream(stream)
    _check_capturable(rot)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        rot.all()
    graph.replay()
    return graph.replay


def device_time(rot: Rotation, graph: bool, *args: Any, **kwargs: Any) -> Timed:
    """Per-call device µs of ``rot``: warm-up pass, a sizing pass, then ``reps`` passes (fewer
    if they would exceed ``cap_s``), replayed from a graph (``capture``, default a CUDA graph)
    or launched eagerly; ``clock`` defaults to CUDA events. ``warm`` (default
    :func:`warm_gpu`) raises the clocks first where the GPU may have idled (WARM_GAP_S).
    Arguments as :func:`device_times`."""
    return device_times([rot], graph, *args, **kwargs)[0]


def device_times(
    rots: Sequence[Rotation],
    graph: bool,
    reps: int = GPU_REPS,
    cap_s: float = 1.5,
    clock: Clock | None = None,
    capture: Callable[[Rotation], Callable[[], Any]] | None = None,
    warm: Callable[[], None] | None = None,
) -> list[Timed]:
    """:func:`device_time` of several rotations, their passes taking turns (:func:`turns`):
    each rep's passes run back to back, under the same clocks and temperature. A compute
    bound pass's time follows the SM clock, which a GPU at its power limit moves by several
    per cent within a row's 30 passes (run bd72d9: int8wo at 4096 x 8192 x 8192 sampled 759
    to 817 µs, bf16's row minutes earlier 687 to 773): timed in turns, a ratio of two rows
    compares them on the same clocks."""
    clock = clock or EventClock()
    started = time.perf_counter()
    for rot in rots:
        rot.all()  # autotuning, compilation, lazily built layouts
    clock.sync()
    warm_after_idle(started, warm or warm_gpu)
    runs = [(capture or cuda_graph)(rot) if graph else rot.all for rot in rots]
    with collector_off():
        first = sum(t[0] for t in clock.turns_us(runs, 1))
        n = fit_reps(first * 1e-6, reps, cap_s)
        passes = clock.turns_us(runs, n)
    _busy[0] = time.perf_counter()
    extra = {"paired": True} if len(rots) > 1 else {}
    return [
        Timed(per_call(p, len(rot)), {"reps": n, "copies": len(rot), **extra})
        for rot, p in zip(rots, passes, strict=True)
    ]


WARM_GAP_S = 1.0
"""Idle seconds after which a device timing first runs :func:`warm_gpu` (an idle H100 sits at
345 MHz; a light decode row's passes do not raise it). This did not mend what it was written
for: `--only` runs' first row, bf16 8192^2 M1 right after the ceilings, read 57 us as a graph
replay in runs 9931c7, 1afc1c, 36682e and (warmed) c39c2b, against 48.6-49.6 wherever smaller
rows went first. A probe (session 37, H100) read 48.8 us for that row first in a process, and
90.8 (graph) / 126.8 (eager) when its weights were allocated after a 4096 x 4096 x 1024 GEMM
row's were freed: not idle clocks. What mended it was handing the ceilings' cached blocks back
to the driver before the first row (BenchSession.measure_ceilings: 52.3 -> 45.4 us, runs
a9c986 and 9117d3)."""
_busy: list[float | None] = [None]  # when the last device timing ended (perf_counter)


def warm_after_idle(started: float, warm: Callable[[], None]) -> bool:
    """Call ``warm`` where the GPU may have idled WARM_GAP_S: no device timing yet, the last
    ended that long before ``started``, or the warm-up pass since took that long (a compile)."""
    last = _busy[0]
    if last is None or started - last > WARM_GAP_S or time.perf_counter() - started > WARM_GAP_S:
        warm()
        return True
    return False


WARM_GPU_S = 0.2
"""Seconds of matrix products before a GPU host timing (``AOQ_BENCH_WARM_S`` overrides; 0
skips): an idle H200 runs at ~345 MHz, and a host timing's calls are too light to raise the
clocks, so its first configs' kernels outlasted their own launches (run dca4df: fp8-row,
fp8wo, int8wo, W8A8 and W4A8 at 28-34 us a call, the same plans 16-18 us once warm)."""


def warm_gpu(seconds: float | None = None) -> None:
    """Keep the current GPU busy for ``seconds`` (WARM_GPU_S) so that its clocks are up."""
    s = float(os.environ.get("AOQ_BENCH_WARM_S", WARM_GPU_S)) if seconds is None else seconds
    if s <= 0 or not torch.cuda.is_available():
        return
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    end = time.perf_counter() + s
    while time.perf_counter() < end:
        for _ in range(8):
            a @ a
        torch.cuda.synchronize()


def wall_time(rot: Rotation, reps: int, cap_s: float, warmup: int = WARMUP) -> Timed:
    """Host µs per call, rotating; for what runs outside a test's ``benchmark`` fixture."""
    clock = HostClock()
    for _ in range(warmup):
        rot.next()
    with collector_off():
        first = clock.times_us(rot.next, 1)[0]
        n = fit_reps(first * 1e-6, reps, cap_s)
        return Timed(clock.times_us(rot.next, n), {"reps": n, "copies": len(rot)})


def fixture_time(
    benchmark: Any, fn: Callable[[], Any], reps: int, cap_s: float, iterations: int = 1
) -> Timed:
    """pytest-benchmark times ``fn`` (wall clock): ``reps`` rounds of ``iterations`` calls,
    fewer rounds where a call is slow; its stats and every per-call sample are kept."""
    t0 = time.perf_counter()
    for _ in range(max(1, WARMUP // iterations)):
        fn()
    one = (time.perf_counter() - t0) / max(1, WARMUP // iterations)
    rounds = fit_reps(one * iterations, reps, cap_s)
    benchmark.pedantic(fn, rounds=rounds, iterations=iterations, warmup_rounds=0)
    stats = benchmark.stats.stats
    # pytest-benchmark's own stats, in seconds per round of ``iterations`` calls
    pb = {k: getattr(stats, k) for k in ("min", "max", "mean", "stddev", "median", "iqr")}
    pb.update(rounds=rounds, iterations=iterations)
    samples = [s / iterations * 1e6 for s in stats.data]
    return Timed(samples, {"reps": rounds, "benchmark": pb})
