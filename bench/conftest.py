"""The bench suite's pytest plugin: ``python -m bench`` (or ``pytest bench --bench-backend X``).

Parametrizes the tests from bench/cases.py, keeps the baselines that selected cells need
(``--bench-only``), orders the tests (per (dtype, shape): the bf16 baseline, then per config
torchao, torchao-compile and aoq, so every row can carry its speedups), opens the run on first
use (its rows go to the JSONL and the store as each test finishes), prints one line per timed
test with counts and an ETA, and a summary table of speedups at the end. One device, one
process: no pytest-xdist here (timings of neighbours on one GPU would disturb each other).
"""

from __future__ import annotations

import fnmatch
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from bench import cases
from bench.baselines import goal_compile, peer_skip
from bench.session import GOAL_COMPILE_KIND, BenchSession, Options
from bench.summary import progress_line, summary_table
from bench.timer import Timer

KINDS = ("host", "kernel", "training", "baseline", "peer", "cell")
"""The parameters that make a bench test (see bench/cases.py)."""


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("aoq bench")
    g.addoption("--bench-backend", default="cpu", choices=["cpu", "cuda", "rocm"])
    g.addoption("--bench-quick", action="store_true", help="tiny shapes (CI, laptops)")
    g.addoption("--bench-only", action="append", default=[], help="test id glob (repeatable)")
    g.addoption("--bench-out", default="reports/runs", help="directory of the run's JSONL")
    g.addoption("--bench-store", default="reports/results.sqlite", help="'' for none")
    g.addoption("--bench-budget-s", type=float, default=None, help="skip what starts later")
    g.addoption("--bench-started", type=float, default=None,
                help="time.monotonic() at the command's start (the budget's)")  # fmt: skip
    g.addoption("--bench-no-torchao", action="store_true")
    g.addoption("--bench-argv", default="", help="python -m bench's arguments (run header)")


def _cases(config: pytest.Config) -> dict[str, list[Any]]:
    backend = config.getoption("--bench-backend")
    quick = config.getoption("--bench-quick")
    linear = cases.linear_cases(backend, quick)
    return {
        "host": cases.host_cases(backend, quick),
        "kernel": cases.kernel_cases(backend, quick),
        "training": cases.training_cases(backend, quick),
        "baseline": [c for c in linear if c.config is None],
        "peer": [c for c in linear if c.side in ("torchao", "torchao-compile")],
        "cell": [c for c in linear if c.side == "aoq"],
    }


def _run_order(config: pytest.Config) -> list[Any]:
    """Host, kernels, training, then the linears as cases.linear_cases orders them (per
    (dtype, shape): baseline, then per config the peers before aoq)."""
    backend = config.getoption("--bench-backend")
    quick = config.getoption("--bench-quick")
    got = _cases(config)
    return got["host"] + got["kernel"] + got["training"] + cases.linear_cases(backend, quick)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    for name, params in _cases(metafunc.config).items():
        if name in metafunc.fixturenames:
            metafunc.parametrize(name, params, ids=[p.id for p in params])


def _case(item: pytest.Item) -> tuple[str, Any] | None:
    spec = getattr(item, "callspec", None)
    for name in KINDS:
        if spec is not None and name in spec.params:
            return name, spec.params[name]
    return None


def _needs(case: Any) -> str | None:
    """The id of the test whose result this one uses (its bf16 side)."""
    base = getattr(case, "baseline_id", None)
    return base if base != case.id else None


@pytest.hookimpl(trylast=True)  # after -k / -m deselection: plan what really runs
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    only = config.getoption("--bench-only")
    found = [(item, _case(item)) for item in items]
    bench = [(item, c) for item, c in found if c is not None]
    if only:
        picked = {c.id for _, (_, c) in bench if any(fnmatch.fnmatchcase(c.id, p) for p in only)}
        picked |= {_needs(c) for _, (_, c) in bench if c.id in picked} - {None}
        dropped = [item for item, (_, c) in bench if c.id not in picked]
        config.hook.pytest_deselected(items=dropped)
        bench = [(item, kc) for item, kc in bench if kc[1].id in picked]
    order = {c.id: i for i, c in enumerate(_run_order(config))}
    bench.sort(key=lambda ic: order.get(ic[1][1].id, 0))
    items[:] = [item for item, _ in bench] + [item for item, c in found if c is None]
    plugin = cast(BenchPlugin, config.pluginmanager.get_plugin("aoq-bench"))
    plugin.plan(items)


class BenchPlugin:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        opt = config.getoption
        store = opt("--bench-store")
        self.opts = Options(
            backend=opt("--bench-backend"),
            quick=opt("--bench-quick"),
            out=Path(opt("--bench-out")),
            store=Path(store) if store else None,
            budget_s=opt("--bench-budget-s"),
            started=opt("--bench-started"),
            torchao=not opt("--bench-no-torchao"),
            # "bench" first: reports/regress.py names a bench series by argv[0]
            argv=("bench", *opt("--bench-argv").split()),
        )
        self.session = BenchSession(self.opts)
        self.kinds: dict[str, str] = {}
        self.ids: dict[str, str] = {}
        self.order: list[str] = []
        self.done = 0
        self.started = time.monotonic()
        self._t0 = self.started

    def plan(self, items: list[pytest.Item]) -> None:
        """Ids and kinds of the tests to run (peers known to skip are kind ``skip``: ETAs)."""
        s = self.session
        for item in items:
            got = _case(item)
            if got is None:
                continue
            name, case = got
            self.ids[item.nodeid] = case.id
            known = name == "peer" and peer_skip(case, self.opts.quick, s.torchao)
            kind = "skip" if known else f"{name}/{getattr(case, 'side', '')}"
            if name == "peer" and not known and goal_compile(case):
                kind = GOAL_COMPILE_KIND
            self.kinds[item.nodeid] = kind
        self.order = [i.nodeid for i in items if i.nodeid in self.ids]
        self.session.remaining = [self.kinds[n] for n in self.order]

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_teststatus(self, report: pytest.TestReport) -> tuple[str, str, str] | None:
        """No dots: each timed test prints its own line (pytest_runtest_logreport)."""
        ours = report.nodeid in self.ids and report.outcome in ("passed", "skipped")
        if ours and (report.when == "call" or (report.when == "setup" and report.skipped)):
            return report.outcome, "", report.outcome.upper()
        return None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.nodeid not in self.ids or report.when != "teardown":
            return
        kind = self.kinds[report.nodeid]
        self.done += 1
        if self.session.remaining:
            self.session.remaining.pop(0)
        self.session.budget.add(kind, time.monotonic() - self._t0)
        note = self.session.notes.pop(self.ids[report.nodeid], None)
        if note is None:
            return
        eta = self.session.budget.eta(self.session.remaining)
        line = progress_line(
            self.done, len(self.order), self.ids[report.nodeid], note, self._elapsed(), eta
        )
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(line)

    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        self._t0 = time.monotonic()

    def _elapsed(self) -> float:
        return time.monotonic() - self.started

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        s = self.session
        if s.run is None:
            return
        terminalreporter.write_sep("=", f"bench {s.run.run_id} ({s.run.backend}, {s.run.device})")
        terminalreporter.write_line(summary_table(s.records, s.ceilings, self.opts.gpu))
        where = f"{s.writer.path}" if s.writer else ""
        store = f" and {self.opts.store}" if self.opts.store else ""
        terminalreporter.write_line(f"\nrecords: {where}{store}")

    def pytest_sessionfinish(self) -> None:
        self.session.close()


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(BenchPlugin(config), "aoq-bench")


@pytest.fixture(scope="session")
def bench(request: pytest.FixtureRequest) -> BenchSession:
    """The run (opened, its ceilings measured, on first use)."""
    plugin = cast(BenchPlugin, request.config.pluginmanager.get_plugin("aoq-bench"))
    plugin.session.open()
    return plugin.session


@pytest.fixture
def timer(request: pytest.FixtureRequest, bench: BenchSession) -> Iterator[Timer]:
    """Device events on GPUs; the pytest-benchmark fixture (wall clock) on CPUs."""
    gpu = bench.opts.gpu
    # CPU: the benchmark fixture, fetched when the test first times something (a test that
    # only records a skip must not leave it unused: pytest-benchmark warns)
    yield Timer(
        gpu, bench.opts.quick, None if gpu else lambda: request.getfixturevalue("benchmark")
    )
    if gpu:
        import torch

        torch.cuda.empty_cache()
