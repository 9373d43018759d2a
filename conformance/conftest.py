"""pytest entry to the same matrix: ``pytest conformance -n <GPUs> --aoq-backend cuda``.

One test per cell (config/dtype/backend), running that cell's cases exactly as
``python -m conformance`` does: in an isolated worker process, written case by case to the
store and to this xdist worker's shard of ONE run (``<run_id>.shard-<i>of<n>.jsonl``), which
the controller merges into ``<run_id>.jsonl`` at the end. Each xdist worker drives one GPU
(gw0 -> the first visible GPU, gw1 -> the second, ...), so ``-n`` = the number of GPUs.
"""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from aoq.testing import matrix


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("aoq conformance")
    g.addoption("--aoq-backend", default="cpu", choices=list(matrix.BACKENDS))
    g.addoption("--aoq-quick", action="store_true", help="the CI subset")
    g.addoption("--aoq-only", action="append", default=[], help="case id glob (repeatable)")
    g.addoption("--aoq-run-id", default=None, help="name of the run (default: a new id)")
    g.addoption("--aoq-store", default="reports/results.sqlite")
    g.addoption("--aoq-runs-dir", default="reports/runs")
    g.addoption("--aoq-timeout", type=float, default=300.0, help="seconds per case")


def _run_id(config: pytest.Config) -> str:
    if not hasattr(config, "_aoq_run_id"):
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        backend = config.getoption("--aoq-backend")
        new = f"{stamp}-conformance-{backend}-{os.urandom(3).hex()}"
        config._aoq_run_id = config.getoption("--aoq-run-id") or new  # type: ignore[attr-defined]
    return str(config._aoq_run_id)  # type: ignore[attr-defined]


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist controller: every worker gets the same run id."""
    node.workerinput["aoq_run_id"] = _run_id(node.config)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "aoq_cell" not in metafunc.fixturenames:
        return
    opt = metafunc.config.getoption
    cases = matrix.cases(opt("--aoq-backend"), opt("--aoq-quick"), only=opt("--aoq-only"))
    cells = list(dict.fromkeys(c.cell for c in cases))
    metafunc.parametrize("aoq_cell", cells, ids=cells)


def _worker(config: pytest.Config) -> tuple[int, int]:
    """(index, count) of this xdist worker; (0, 1) without xdist. Read from the worker's
    config, not from PYTEST_XDIST_WORKER: a run started by a test that itself runs in an
    xdist worker inherits that variable, and would take itself for one shard of two."""
    info = getattr(config, "workerinput", None) or {}
    m = re.fullmatch(r"gw(\d+)", str(info.get("workerid", "")))
    return (int(m.group(1)) if m else 0), int(info.get("workercount", 1))


@pytest.fixture(scope="session")
def aoq_session(request: pytest.FixtureRequest) -> Any:
    from conformance.__main__ import _gpus
    from conformance.session import Options, Session

    config = request.config
    opt = config.getoption
    run_id = getattr(config, "workerinput", {}).get("aoq_run_id") or _run_id(config)
    index, count = _worker(config)
    backend = opt("--aoq-backend")
    gpus = _gpus() if backend in matrix.GPU_BACKENDS else ()
    opts = Options(
        backend=backend,
        quick=opt("--aoq-quick"),
        only=tuple(opt("--aoq-only")),
        shard=(index + 1, count) if count > 1 else None,
        shard_filters=False,  # xdist decides which worker runs which cell
        jobs=1,
        timeout=opt("--aoq-timeout"),
        store=Path(opt("--aoq-store")),
        runs_dir=Path(opt("--aoq-runs-dir")),
        run_id=run_id,
        gpus=(gpus[index % len(gpus)],) if gpus else (),
        argv=tuple(sys.argv),
    )
    session = Session(opts)
    session.start()
    yield session
    session.close()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Controller (or a run without xdist): merge the workers' shards into one run."""
    config = session.config
    if hasattr(config, "workerinput") or not hasattr(config, "_aoq_run_id"):
        return
    from conformance.merge import MergeError, merge, shard_files

    runs_dir = Path(config.getoption("--aoq-runs-dir"))
    if not shard_files(runs_dir, config._aoq_run_id):
        return
    try:
        store = Path(config.getoption("--aoq-store"))
        out = merge(runs_dir, config._aoq_run_id, store, require_all=False)
        print(f"\nconformance run merged: {out}")
    except MergeError as e:
        print(f"\nconformance shards not merged: {e}")
