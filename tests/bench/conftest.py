"""Tests of the bench harness (bench/): its logic on CPU, the quick CPU run end to end, the
GPU code paths import-checked and collected, and the test-only slowdown knob."""

import sys
import time

import pytest
from bench_runs import REPO, run_bench

from aoq.testing.records import read_jsonl

if str(REPO) not in sys.path:  # plain `pytest`: the checkout's bench/ must be importable
    sys.path.append(str(REPO))


@pytest.fixture(scope="session")
def quick(tmp_path_factory):
    """The quick CPU bench, run once: (process, its out dir, RunInfo, records, seconds)."""
    out = tmp_path_factory.mktemp("bench")
    t0 = time.monotonic()
    # no budget: the rows checked here must all run, however loaded the machine
    proc = run_bench(out, "--store", str(out / "results.sqlite"), "--budget-s", "0")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (path,) = out.glob("*.jsonl")
    run, records = read_jsonl(path)
    return proc, out, run, records, time.monotonic() - t0
