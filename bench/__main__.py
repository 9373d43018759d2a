"""``python -m bench``: time aoq against bf16 and torchao on this machine; rows to the store.

    python -m bench [--backend auto|cpu|cuda|rocm] [--quick] [--only GLOB ...]
                    [--out reports/runs] [--store reports/results.sqlite] [--budget-s N]
                    [--no-torchao] [--container] [-- PYTEST_ARGS ...]

Runs the pytest suite in bench/ (see bench/conftest.py): ceilings, the linear matrix (every
config x dtype x shape against bf16 F.linear and torchao), the quantize/cast kernels, the MX
training step and aoq's host overhead. Every row goes to ``OUT/<run_id>.jsonl`` and the SQLite
store as its test finishes; a summary of speedups is printed last. ``--only`` globs match test
ids such as ``int4wo-g128/bf16/cuda/M1-K4096-N4096/aoq`` (the baselines a selected test needs
come along). ``--budget-s``: tests that would start more than N seconds after the command
started (its set-up and collection included) are skipped with that reason (default: 480 s on
GPUs, so a full run fits one 10-minute call; 1800 s on CPUs, 50 s for a quick CPU run; 0 for
none). ``--container`` runs the same command inside the backend's image
(ci/container.py). Exit status: 0, 1 if a test failed (an aoq kernel raised), 2 on bad usage.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
GPU = ("cuda", "rocm")
DEFAULT_BUDGET_S = {
    ("gpu", False): 480.0,  # a full run + start-up within one 10-minute call
    ("gpu", True): 120.0,
    ("cpu", False): 1800.0,  # emulated formats run the reference math: seconds per call
    ("cpu", True): 50.0,
}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--backend", default="auto", choices=["auto", "cpu", *GPU])
    p.add_argument("--quick", action="store_true", help="tiny shapes: CI, laptops")
    p.add_argument("--only", action="append", default=[], metavar="GLOB", help="test id glob")
    p.add_argument("--out", default="reports/runs", help="directory of the run's JSONL")
    p.add_argument("--store", default="reports/results.sqlite", help="SQLite store ('' for none)")
    p.add_argument("--budget-s", type=float, help="skip tests that would start after N seconds")
    p.add_argument("--no-torchao", action="store_true", help="no peer rows (recorded as skips)")
    p.add_argument("--container", action="store_true", help="run inside the backend's image")
    p.add_argument("pytest_args", nargs="*", help="after --: passed to pytest")
    return p


def resolve_backend(name: str) -> str:
    """auto -> this machine's GPU backend, else cpu; a GPU backend must be present."""
    import torch

    vendor = "rocm" if torch.version.hip else "cuda"
    if name == "auto":
        return vendor if torch.cuda.device_count() > 0 else "cpu"
    if name in GPU and (torch.cuda.device_count() == 0 or name != vendor):
        raise ValueError(f"--backend {name}: no {name} GPU visible to torch {torch.__version__}")
    return name


def pytest_args(
    args: argparse.Namespace, backend: str, argv: list[str], started: float | None = None
) -> list[str]:
    """The pytest command line; ``started``: the command's time.monotonic() at its start, from
    which the budget counts (pytest runs in this process, so the clocks agree)."""
    budget = args.budget_s
    if budget is None:
        budget = DEFAULT_BUDGET_S.get(("gpu" if backend in GPU else "cpu", args.quick))
    out = [
        str(HERE),
        "-q",
        "--no-header",
        "-p",
        "no:cacheprovider",
        f"--bench-backend={backend}",
        f"--bench-out={args.out}",
        f"--bench-store={args.store}",
        f"--bench-argv={' '.join(argv)}",
    ]
    if importlib.util.find_spec("pytest_benchmark"):  # its own table: ours is printed instead
        out.append("--benchmark-quiet")
    out += ["--bench-quick"] if args.quick else []
    out += [f"--bench-budget-s={budget:g}"] if budget else []
    out += [f"--bench-started={started!r}"] if budget and started is not None else []
    out += ["--bench-no-torchao"] if args.no_torchao else []
    out += [f"--bench-only={g}" for g in args.only]
    return out + list(args.pytest_args)


def main(argv: list[str] | None = None) -> int:
    started = time.monotonic()
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--container" in argv:  # the same command inside the backend's image
        from ci.container import module_in_container

        return module_in_container("bench", argv)
    args = _parser().parse_args(argv)
    try:
        backend = resolve_backend(args.backend)
    except ValueError as e:
        print(f"bench: {e}", file=sys.stderr)
        return 2
    import pytest

    # its own pytest session, never an xdist worker: started from one (a test under
    # `pytest -n`), pytest-benchmark would read the inherited variables and disable itself
    for k in [k for k in os.environ if k.startswith("PYTEST_XDIST")]:
        del os.environ[k]
    code = int(pytest.main(pytest_args(args, backend, argv, started)))
    if code == pytest.ExitCode.NO_TESTS_COLLECTED:
        print(f"bench: no test matches --only {args.only}", file=sys.stderr)
        return 2
    return 0 if code == pytest.ExitCode.OK else (1 if code == pytest.ExitCode.TESTS_FAILED else 2)


if __name__ == "__main__":
    sys.exit(main())
