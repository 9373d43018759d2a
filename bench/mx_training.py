"""MX training: CPU convergence curves (kind "training"). The GPU numbers (the MX cast kernels'
bandwidth, fwd+bwd(+AdamW) of an MXFP8 MLP against bf16) are bench rows now:
``python -m bench --only 'mx_*' --only 'mxtrain*'`` (bench/test_kernels.py,
bench/test_training.py); ``--gpu`` below runs exactly that.

    python bench/mx_training.py --convergence --out reports/runs     # CPU, about a minute
    python bench/mx_training.py --gpu --out $OUT                     # = python -m bench --only ...

--convergence: the aoq.testing.convergence toy trained in float, MXFP8 (e4m3), MXFP6 (e2m3
and e3m2), MXFP4, and MXFP8 with the spec's FLOOR scale rule (shown diverging: why training
defaults to RCEIL); one Record per loss curve (kind "training").
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import aoq


def convergence(directory: str) -> None:
    from aoq.testing.convergence import train_toy, write_curves

    configs = {
        "float": None,
        "mxfp8": aoq.MXTrainingConfig("fp8_e4m3"),
        "mxfp6": aoq.MXTrainingConfig("fp6_e2m3"),
        "mxfp6-e3m2": aoq.MXTrainingConfig("fp6_e3m2"),
        "mxfp4": aoq.MXTrainingConfig("fp4_e2m1"),
        "mxfp8-floor": aoq.MXTrainingConfig("fp8_e4m3", scale_rounding="floor"),
    }
    tolerances = {
        "mxfp8": 0.02,
        "mxfp6": 0.05,
        "mxfp6-e3m2": 0.05,
        "mxfp4": 0.05,
        "mxfp8-floor": 0.02,
    }
    expect_fail = {
        "mxfp4": "4-bit elements (8 magnitudes) for x, W and gradients: no recipe expects "
        "MXFP4 training to track float without extra tricks; shown for contrast",
        "mxfp8-floor": "the spec's FLOOR scale saturates the largest gradient of every "
        "cross-entropy row ((1 - p) / batch sits just under a power of two) by ~10%; "
        "shown for contrast with the RCEIL default",
    }
    results = {}
    for name, config in configs.items():
        results[name] = train_toy(config)
        print(f"{name}: eval loss {results[name]['eval_loss']:.4f}")
    path = write_curves(
        results, "float", tolerances, directory, expect_fail=expect_fail, argv=sys.argv
    )
    print("wrote", path)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--convergence", action="store_true")
    p.add_argument("--gpu", action="store_true")
    p.add_argument("--out", default="reports/runs")
    args = p.parse_args()
    if args.convergence:
        convergence(args.out)
    if args.gpu:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script
        from bench.__main__ import main as bench

        only = ["--only=mx_*", "--only=mxtrain*"]
        return bench(["--backend", "auto", "--out", args.out, "--no-torchao", *only])
    return 0


if __name__ == "__main__":
    sys.exit(main())
