"""Retired: the quantized-linear speed benchmark is ``python -m bench`` (``make bench``).

This wrapper keeps the old command working:

    python bench/linear_speed.py [--out DIR] [--configs a,b] [--no-torchao]
    ==  python -m bench --backend auto [--out DIR] [--only 'a/*' --only 'b/*'] [--no-torchao]

The GPU timing (device events, CUDA-graph replay and eager, rotating copies), the ceilings,
the torchao side, the host-overhead rows and the activation-quantization rows now live in
bench/timing.py, bench/baselines.py, bench/test_linear.py and bench/test_kernels.py. Runs it
wrote (``*-bench-cuda-*`` before aoq.testing.benchrows) are read by reports/data.py.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def translate(argv: list[str]) -> list[str]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="reports/runs")
    p.add_argument("--configs", default="")
    p.add_argument("--no-torchao", action="store_true")
    args = p.parse_args(argv)
    out = ["--backend", "auto", "--out", args.out]
    out += [f"--only={c}/*" for c in args.configs.split(",") if c]
    return out + (["--no-torchao"] if args.no_torchao else [])


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script
    from bench.__main__ import main

    sys.exit(main(translate(sys.argv[1:])))
