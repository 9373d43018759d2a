"""SQNR of each core config's output vs the float layer: Linear(1024, 1024, bias), randn(64, 1024)
input, fp32 and bf16, with nn.Linear's default (kaiming-uniform) weights and with randn weights.

    python bench/sqnr_table.py [--seeds 5]

Prints min / median over the seeds. The floors asserted in tests/test_configs.py use the
default init; randn weights are shown too (Gaussian weights cost 1-3 dB at these bit widths).
"""

from __future__ import annotations

import argparse
import statistics

import torch
from torch import nn

import aoq
from aoq.testing.metrics import sqnr

CONFIGS = [
    aoq.Int8WeightOnlyConfig(),
    aoq.Int8DynamicActivationInt8WeightConfig(),
    aoq.Int4WeightOnlyConfig(),
    aoq.Int8DynamicActivationInt4WeightConfig(),
    aoq.Float8WeightOnlyConfig(),
    aoq.Float8DynamicActivationFloat8WeightConfig(),
]


def measure(config: aoq.AOQConfig, dtype: torch.dtype, init: str, seed: int) -> float:
    torch.manual_seed(seed)
    m = nn.Linear(1024, 1024).to(dtype)
    if init == "randn":
        with torch.no_grad():
            m.weight.copy_(torch.randn_like(m.weight))
    x = torch.randn(64, 1024, dtype=dtype)
    with torch.no_grad():
        expect = m(x)
        aoq.quantize_(m, config)
        return sqnr(expect, m(x))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    print(f"{'config':12} {'dtype':9} {'default init min/med':>22} {'randn weights min/med':>22}")
    for config in CONFIGS:
        for dtype in (torch.float32, torch.bfloat16):
            cols = []
            for init in ("default", "randn"):
                vals = [measure(config, dtype, init, s) for s in range(args.seeds)]
                cols.append(f"{min(vals):10.2f}/{statistics.median(vals):<10.2f}")
            print(f"{config.id:12} {str(dtype)[6:]:9} {cols[0]} {cols[1]}")


if __name__ == "__main__":
    main()
