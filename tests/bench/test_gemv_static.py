"""bench.gemv_static under the Triton interpreter (a subprocess: TRITON_INTERPRET must be set
before triton is imported) against torch's float64 product of the same codes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

SCRIPT = """
import torch
from bench.gemv_static import gemv_static
torch.manual_seed(0)
n, k = 8, 256
x = torch.randn(1, k).to(torch.bfloat16)
s = torch.rand(n) + 0.5
for q in (torch.randint(-128, 128, (n, k), dtype=torch.int8),
          (torch.randn(n, k) * 8).to(torch.float8_e4m3fn)):
    y = torch.empty(1, n, dtype=torch.float32)
    gemv_static(x, q, s, y, block_n=2, block_k=64, num_warps=1)
    ref = (x.double() @ q.double().t()) * s.double()
    err = ((y.double() - ref).abs() / ref.abs().clamp_min(1.0)).max().item()
    assert err < 1e-5, (q.dtype, err)
    try:
        gemv_static(x, q[:, :100], s, y, block_k=64)
    except ValueError as e:
        assert "whole blocks" in str(e)
    else:
        raise AssertionError("a K that is not whole blocks must be refused")
print("ok")
"""


def test_static_gemv_is_the_float_product_under_the_interpreter():
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=300)  # fmt: skip
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stdout + out.stderr
