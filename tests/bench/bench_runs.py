"""Running ``python -m bench`` from the tests."""

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_bench(out: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """A quick CPU bench in a fresh process, on one thread: on a loaded machine two OpenMP
    threads stall at every barrier for milliseconds, and the samples would be noise."""
    cmd = [sys.executable, "-m", "bench", "--backend", "cpu", "--quick", "--out", str(out)]
    # a clean environment: no slowdown knob, and none of pytest-xdist's worker variables
    # (the bench is a pytest run of its own; under `pytest -n` it would think it is a worker)
    base = {
        k: v
        for k, v in os.environ.items()
        if k != "AOQ_TEST_SLOWDOWN" and not k.startswith(("PYTEST_XDIST", "PYTEST_CURRENT"))
    }
    env = {**(base if env is None else env), "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [*cmd, *args], cwd=REPO, capture_output=True, text=True, timeout=600, env=env
    )
