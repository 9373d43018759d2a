"""bench/wt_probe.py's kernel: both orientations, every format, split or not, against the
float64 product of the same dequantized weights (the probe's error column is this check).

Runs under TRITON_INTERPRET=1 on CPU tensors (make kernels-interpret) and on a GPU; the plain
CPU unit run skips it."""

import pytest
import torch
import triton
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
    m, k, n = 5, 256, 128
    x = torch.randn(m, k, device=DEV).to(torch.bfloat16)
    q, s, z, deq = wp.make_weight(fmt, n, k, DEV)
    want = x.double() @ deq.T
    k_split = triton.cdiv(triton.cdiv(k, split), 128) * 128
    p = torch.empty(split, m, n, device=DEV, dtype=torch.float32)
    wp._wt_kernel[(n // 64, split)](
        x, q, s, z, p, m, n, k, k_split, WFMT=wp.FMT_ID[fmt], GROUP=128, ROWS=16,
        BLOCK_N=64, BLOCK_K=128, SWAP=swap, STAGES=2, UPCAST=INTERPRET,
    )  # fmt: skip
    got = p.sum(0).double()
    assert ((got - want).norm() / want.norm()).item() < 1e-5
