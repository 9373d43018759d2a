"""bench/wt_probe.py's kernel: both orientations, every format, split or not, against the
float64 product of the same dequantized weights (the probe's error column is this check).

Runs under TRITON_INTERPRET=1 on CPU tensors (make kernels-interpret) and on a GPU; the plain
CPU unit run skips it."""

import pytest
import torch
from aoq.kernels._common import INTERPRET

from bench import wt_probe as wp

GPU = torch.cuda.is_available() and not INTERPRET
pytestmark = pytest.mark.skipif(
    not (INTERPRET or GPU), reason="needs TRITON_INTERPRET=1 before import, or a GPU"
)
DEV = "cuda" if GPU else "cpu"


@pytest.mark.parametrize("split", [1, 2])
@pytest.mark.parametrize("swap", [1, 0], ids=["weights-as-A", "x-as-A"])
@pytest.mark.parametrize("fmt", ["int8", "fp8", "int4"])
def test_partials_sum_to_the_float64_product(fmt, swap, split):
    torch.manual_seed(0)
    x = torch.randn(5, 256, device=DEV).to(torch.bfloat16)
    q, s, z, deq = wp.make_weight(fmt, 128, 256, DEV)
    cfg = {"swap": swap, "BLOCK_N": 64, "BLOCK_K": 128, "warps": 4, "stages": 2, "split": split}
    got, _ = wp.run(x, (q, s, z), fmt, cfg)
    want = x.double() @ deq.T
    assert ((got.double() - want).norm() / want.norm()).item() < 1e-5
