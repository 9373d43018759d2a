"""Write the golden checkpoints: one tiny bf16 model per config, both checkpoint routes, and
what they must decode to. Run once per format version; never regenerate to make a test pass.

    .venv/bin/python tests/golden/make_golden.py [--force | --missing]

--missing writes only the configs that have no golden yet (a new config), leaving every
existing golden untouched.
"""

import argparse
import sys
from pathlib import Path

import torch
from torch import nn

import aoq
from aoq.serialization import FORMAT_VERSION
from aoq.tensors import Int32Bias
from aoq.testing.cases import inference_configs

ROOT = Path(__file__).parent / f"v{FORMAT_VERSION}"


def float_bias(bias: torch.Tensor) -> torch.Tensor:
    if isinstance(bias, Int32Bias):
        return bias.dequantize(torch.float32)
    return bias.detach().to(torch.float32)


def tiny_model() -> nn.Module:
    return nn.Sequential(nn.Linear(128, 48)).to(torch.bfloat16)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--force", action="store_true", help="overwrite existing goldens")
    parser.add_argument("--missing", action="store_true", help="write only configs without one")
    args = parser.parse_args()
    if ROOT.exists() and not (args.force or args.missing):
        print(f"{ROOT} exists; goldens are written once (pass --force to overwrite)")
        return 1
    torch.manual_seed(1234)
    x = torch.randn(4, 128, dtype=torch.bfloat16)
    for config in inference_configs():
        out = ROOT / config.id
        if args.missing and out.exists():
            continue
        out.mkdir(parents=True, exist_ok=True)
        model = aoq.quantize_(tiny_model(), config)
        torch.save(model.state_dict(), out / "state_dict.pt")
        aoq.save_pretrained(model, out / "pretrained")
        expected = {
            "x": x,
            "y": model(x).detach(),
            "weight": model[0].weight.dequantize(torch.float32),
            "bias": float_bias(model[0].bias),
        }
        torch.save(expected, out / "expected.pt")
        print("wrote", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
