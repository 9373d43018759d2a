"""What a bench test times with (:class:`Timer`): bench/timing.py's device timings on GPUs,
pytest-benchmark's fixture on CPUs, and host timings: a call's host µs, and paired host
timings whose batches alternate with a baseline's."""

from __future__ import annotations

import contextlib
import statistics
from collections.abc import Callable, Mapping
from typing import Any

import torch

from bench import timing
from bench.timing import (
    CPU_REPS,
    GPU_REPS,
    QUICK_REPS,
    Clock,
    HostClock,
    Rotation,
    Timed,
    cache_bytes,
    collector_off,
    copies_for,
    fixture_time,
    per_call,
    warm_gpu,
)


def _batch_of(fn: Callable[[], Any], batch: int) -> Callable[[], None]:
    """``batch`` back-to-back calls of ``fn``."""

    def run() -> None:
        for _ in range(batch):
            fn()

    return run


def host_time(fn: Callable[[], Any], batch: int, reps: int, clock: Clock | None = None) -> Timed:
    """Host µs per call of ``fn``: ``reps`` batches of ``batch`` back-to-back calls (on a GPU,
    for a layer whose kernels are shorter than their launches, this is the host overhead)."""
    clock = clock or HostClock()
    run = _batch_of(fn, batch)
    run()
    clock.sync()
    with collector_off():
        samples = per_call(clock.times_us(run, reps), batch)
    clock.sync()
    return Timed(samples, {"reps": reps, "batch": batch})


def host_time_pair(
    fn: Callable[[], Any],
    base: Callable[[], Any],
    batch: int,
    reps: int,
    clock: Clock | None = None,
) -> tuple[Timed, Timed]:
    """:func:`host_time` of ``fn`` and of ``base``, their batches taking turns
    (timing.turns): a drift in the
    host's speed (on the H100 runners one test's host times sat at 18-20 µs a call and the
    next one's at 26-35, run after run, whichever config it was) falls on both, so their
    per-rep differences (:func:`paired_over`) measure ``fn``'s cost over ``base``."""
    clock = clock or HostClock()
    run_fn, run_base = _batch_of(fn, batch), _batch_of(base, batch)
    run_fn()
    run_base()
    clock.sync()
    with collector_off():
        got = clock.turns_us([run_fn, run_base], reps)
    clock.sync()
    extra = {"reps": reps, "batch": batch}
    return Timed(per_call(got[0], batch), extra), Timed(per_call(got[1], batch), dict(extra))


def paired_over(fn: Timed, base: Timed) -> float:
    """Median over reps of ``fn``'s µs per call less ``base``'s in the same rep."""
    return statistics.median(a - b for a, b in zip(fn.samples_us, base.samples_us, strict=True))


class Timer:
    """What a test times with: device events, graph and eager, on GPUs; on CPUs the test's
    pytest-benchmark fixture (wall clock; usable once per test, hence one side per test)."""

    def __init__(self, gpu: bool, quick: bool, benchmark: Callable[[], Any] | None = None) -> None:
        """``benchmark``: returns the test's pytest-benchmark fixture (CPU)."""
        self.gpu = gpu
        self._benchmark = benchmark
        self.reps = (
            (GPU_REPS // 2 if quick else GPU_REPS) if gpu else (QUICK_REPS if quick else CPU_REPS)
        )
        self.cap_s = (0.3 if quick else 0.5) if gpu else (0.3 if quick else 3.0)
        self.most_copies = 32 if gpu else (2 if quick else 8)

    @property
    def modes(self) -> tuple[str, ...]:
        return ("graph", "eager") if self.gpu else ("wall",)

    def copies(self, nbytes: int, device: torch.device) -> int:
        return copies_for(nbytes, cache_bytes(device), self.most_copies)

    def time(
        self, rot: Rotation, modes: tuple[str, ...] | None = None
    ) -> dict[str, Timed | Exception]:
        """Per-call samples of each mode (default: all of this device's), or the error that
        mode raised: a graph that cannot be captured must not cost the eager row."""
        out: dict[str, Timed | Exception] = {}
        for mode in modes or self.modes:
            try:
                if self.gpu:
                    out[mode] = timing.device_time(rot, mode == "graph", self.reps, self.cap_s)
                else:
                    out[mode] = fixture_time(self.benchmark(), rot.next, self.reps, self.cap_s)
            except Exception as e:  # noqa: BLE001 - recorded as the mode's error row
                out[mode] = e
                if self.gpu:
                    settle()
        return out

    def time_pair(
        self, rot: Rotation, base: Rotation, modes: tuple[str, ...] | None = None
    ) -> tuple[dict[str, Timed | Exception], dict[str, Timed | Exception]]:
        """On a GPU, :meth:`time` of ``rot`` and ``base`` with their passes taking turns
        (timing.device_times); a mode's error is both sides' error."""
        if not self.gpu:
            raise RuntimeError("paired device timing runs on a GPU; a CPU test times once")
        out: tuple[dict[str, Timed | Exception], dict[str, Timed | Exception]] = ({}, {})
        for mode in modes or self.modes:
            try:
                a, b = timing.device_times([rot, base], mode == "graph", self.reps, self.cap_s)
            except Exception as e:  # noqa: BLE001 - recorded as the mode's error row
                a = b = e
                settle()
            out[0][mode], out[1][mode] = a, b
        return out

    def benchmark(self) -> Any:
        if self._benchmark is None:
            raise RuntimeError("CPU timing needs the test's pytest-benchmark fixture")
        return self._benchmark()

    def host(self, fn: Callable[[], Any]) -> Timed:
        """Host µs per call (eager), batches of back-to-back calls (20 on a GPU, where a
        call is ~10-100 µs; 4 on a CPU, where it does the math too)."""
        if self.gpu:
            warm_gpu()
            return host_time(fn, 20, self.reps, EventlessSync())
        return fixture_time(self.benchmark(), fn, self.reps, self.cap_s, iterations=4)

    def host_pair(self, fn: Callable[[], Any], base: Callable[[], Any]) -> tuple[Timed, Timed]:
        """On a GPU, :meth:`host` of ``fn`` and ``base`` with their batches taking turns
        (:func:`host_time_pair`). A CPU test has one pytest-benchmark fixture, which times
        one function."""
        if not self.gpu:
            raise RuntimeError("paired host timing runs on a GPU; a CPU test times once")
        warm_gpu()
        return host_time_pair(fn, base, 20, self.reps, EventlessSync())


def settle() -> None:
    """After a failed mode (e.g. a capture that hit a synchronising op): let the device
    finish; an error it reports belongs to that mode, already recorded."""
    with contextlib.suppress(Exception):
        torch.cuda.synchronize()


def failed(timed: Mapping[str, Timed | Exception]) -> list[Exception]:
    return [t for t in timed.values() if isinstance(t, Exception)]


class EventlessSync(HostClock):
    """The host clock, synchronising the GPU before and after (never inside) the batches."""

    def sync(self) -> None:
        torch.cuda.synchronize()
