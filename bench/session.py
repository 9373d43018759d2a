"""One bench run: its RunInfo, the JSONL file and the SQLite store its rows go to as each test
finishes, the ceilings and baselines it measures once and reuses, and its time budget."""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import torch

from aoq.backends import platform_of
from aoq.testing.records import JsonlWriter, Record, RunInfo, new_run
from aoq.testing.store import Store
from bench import baselines, cases
from bench.machine import machine_info
from bench.rows import ceiling_record, missing_record
from bench.timing import Rotation, Timed, device_time, wall_time

# Seconds a test takes before any of its kind has finished (H200 / 2-core CPU estimates);
# the running means replace them. Kinds are ``<parameter>/<side>`` (bench/conftest.py), and
# ``skip`` for peers known not to run. Compiles are planned apart: ``Budget.affords``.
PRIOR_S = {"gpu": 0.8, "cpu": 1.0, "quick": 0.2, "skip": 0.01, "compile": 15.0}
COMPILE_KIND = "peer/torchao-compile"
GOAL_COMPILE_KIND = "peer/torchao-compile/goal"
"""A compile behind a decode goal (baselines.goal_compile): its time is reserved in every ETA,
so other compiles run only where the remaining goal compiles still fit."""


@dataclasses.dataclass(frozen=True)
class Options:
    backend: str
    quick: bool = False
    out: Path = Path("reports/runs")
    store: Path | None = Path("reports/results.sqlite")
    budget_s: float | None = None
    started: float | None = None
    """time.monotonic() when ``python -m bench`` started (the budget counts from it, collection
    included); None: from the session's first test."""
    torchao: bool = True
    argv: tuple[str, ...] = ()

    @property
    def gpu(self) -> bool:
        return self.backend in ("cuda", "rocm")


class Budget:
    """Wall-clock budget of the run: tests that would start past it are skipped (their rows
    recorded as skip, reason 'budget'); optional work asks ``affords`` first."""

    def __init__(
        self,
        seconds: float | None,
        prior_s: float,
        clock: Callable[[], float],
        start: float | None = None,
    ) -> None:
        self.clock = clock
        self.start = clock() if start is None else start
        self.seconds = seconds
        self.prior_s = prior_s
        self.spent: dict[str, list[float]] = defaultdict(list)

    def elapsed(self) -> float:
        return self.clock() - self.start

    def left(self) -> float:
        return float("inf") if self.seconds is None else self.seconds - self.elapsed()

    def expired(self) -> bool:
        return self.left() <= 0

    def add(self, kind: str, seconds: float) -> None:
        self.spent[kind].append(seconds)

    def mean(self, kind: str) -> float:
        got = self.spent.get(kind)
        if got:
            return statistics.fmean(got)
        return PRIOR_S.get(kind, self.prior_s)

    def eta(self, kinds: Iterable[str]) -> float:
        """Seconds the given (remaining) tests should take; compile tests count as skips,
        except the goal cells' (GOAL_COMPILE_KIND), whose compile time is reserved."""
        return sum(
            self.mean("compile") if k == GOAL_COMPILE_KIND else self.mean(k)
            for k in kinds
            if k != COMPILE_KIND
        )

    def affords(self, kind: str, remaining: Iterable[str]) -> bool:
        """Whether one more ``kind`` (e.g. ``compile``) fits before the budget ends, the
        remaining tests' ETA set aside."""
        return self.left() - self.eta(remaining) >= self.mean(kind)


class BenchSession:
    """Opened by the first test that needs it; closed at the end of the pytest session."""

    def __init__(self, opts: Options, clock: Callable[[], float] = time.monotonic) -> None:
        self.opts = opts
        self.device = torch.device("cuda" if opts.gpu else "cpu")
        prior = PRIOR_S["quick" if opts.quick else ("gpu" if opts.gpu else "cpu")]
        self.budget = Budget(opts.budget_s, prior, clock, opts.started)
        self.torchao = baselines.torchao_version() if opts.torchao else None
        self.run: RunInfo | None = None
        self.writer: JsonlWriter | None = None
        self.store: Store | None = None
        self.records: list[Record] = []
        self.ceilings: dict[str, float] = {}
        self.baselines: dict[tuple[str, ...], Mapping[str, Timed | Exception] | str] = {}
        """Measured once, reused: (dtype, shape) F.linear, ("host",), ("train", name)."""
        self.peers: dict[str, dict[str, dict[str, float]]] = defaultdict(dict)
        self.remaining: list[str] = []
        """Kinds of the tests not yet run (the conftest keeps it current), for ETAs."""
        self.notes: dict[str, str] = {}

    # -- lifecycle -------------------------------------------------------------------------

    def open(self) -> RunInfo:
        if self.run is not None:
            return self.run
        arch = platform_of(self.device).arch
        o = self.opts
        run = new_run("bench", o.backend, self.device, arch, argv=list(o.argv), quick=o.quick)
        machine = machine_info(run, self.device, self.torchao)
        extra = {**run.extra, "budget_s": o.budget_s, "machine": machine}
        self.run = dataclasses.replace(run, extra=extra)
        self.writer = JsonlWriter(self.run, self.opts.out)
        if self.opts.store is not None:
            self.store = Store(self.opts.store)
            self.store.add_run(self.run)
        self.measure_ceilings()
        return self.run

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        if self.store is not None:
            self.store.close()

    @property
    def run_id(self) -> str:
        return self.open().run_id

    def write(self, records: list[Record]) -> None:
        """The rows of one test: to the JSONL (one fsync) and the store (one transaction)."""
        if not records:
            return
        assert self.writer is not None
        self.writer.write_many(records)
        if self.store is not None:
            self.store.add_records(records)
        self.records += records

    # -- ceilings ----------------------------------------------------------------------------

    def dtypes(self) -> list[str]:
        """The run's model dtypes, and fp32 always (bench.baselines.peaks)."""
        seen = {c.dtype_name for c in cases.linear_cases(self.opts.backend, self.opts.quick)}
        return [d for d in ("bf16", "fp16", "fp32") if d in seen or d == "fp32"]

    def measure_ceilings(self) -> None:
        """Bandwidth and compute ceilings, once per run; a ceiling the device lacks is a skip.
        On a GPU their ~3 GB of operands then go back to the driver (``empty_cache``): carved
        from those cached blocks, an `--only` run's first row (the baseline after the
        ceilings) read bf16 F.linear at 14336 x 4096 M16 52.3 µs (run a9c986), 45.4 with them
        handed back (9117d3, H100)."""
        self._ceilings(baselines.ceiling_ops(self.device, self.dtypes(), self.opts.quick))
        if self.opts.gpu:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()

    def _ceilings(self, ops: dict[str, Any]) -> None:
        for name, (op, work) in ops.items():
            try:
                timed = self.time_once(op)
            except Exception as e:  # noqa: BLE001 - e.g. no fp8 GEMM on this device
                self.write([missing_record(self.run_id, f"ceiling/{name}", "ceiling", "skip", e)])
                continue
            p50 = statistics.median(timed.samples_us)
            self.ceilings[name] = baselines.ceiling_value(name, work, p50)
            self.write([ceiling_record(self.run_id, name, self.ceilings[name], timed)])

    def time_once(self, op: Callable[[], Any]) -> Timed:
        """Time a large single op (no rotation: it moves far more than any cache)."""
        rot = Rotation([op])
        if self.opts.gpu:
            return device_time(rot, graph=False, reps=10, cap_s=2.0)
        return wall_time(rot, reps=5 if self.opts.quick else 10, cap_s=2.0)

    # -- budget ------------------------------------------------------------------------------

    def over_budget(self) -> str | None:
        if self.budget.expired():
            return f"budget: --budget-s {self.opts.budget_s:g} spent before this test"
        return None

    def affords_compile(self) -> bool:
        """For the running test, ``remaining[0]`` (the conftest pops each at its teardown):
        whether its compile fits beside every later test and goal compile. A goal compile
        (GOAL_COMPILE_KIND) goes before ordinary tests: it needs room only beside the later
        goal compiles, and the run's last tests are then skipped for budget, as recorded
        (bench 9d02ed: refused at 4096 x 14336 while the run still held ~20 s of M 2048 rows
        at 4096^2 it could not reach anyway)."""
        rest = self.remaining[1:]
        if self.remaining and self.remaining[0] == GOAL_COMPILE_KIND:
            rest = [k for k in rest if k == GOAL_COMPILE_KIND]
        return self.budget.affords("compile", rest)
