"""kernels/act_qdq.py: the one-pass int8 activation quantize-dequantize, bit for bit the
values of ``aoq::quantize_int8_act``'s codes dequantized in float32 and rounded once (the
reference op), under TRITON_INTERPRET=1 and on a GPU, for every int8 mode, for rows read
once (one tile) and twice (wider than a tile), and in every float dtype."""

import pytest
import torch
from aoq.kernels import act_qdq
from aoq.kernels._common import INTERPRET

from aoq.testing.metrics import bit_equal

GPU = torch.cuda.is_available() and not INTERPRET
pytestmark = pytest.mark.skipif(
    not (INTERPRET or GPU), reason="needs TRITON_INTERPRET=1 before import, or a GPU"
)
DEV = "cuda" if GPU else "cpu"
MODES = [(0, None), (1, None), (2, torch.tensor(0.035))]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
@pytest.mark.parametrize("shape", [(1, 64), (37, 200), (20, 9000), (20, 17000), (0, 64)], ids=str)
def test_values_are_the_reference_bit_for_bit(dtype, shape):
    x = torch.randn(shape, dtype=dtype) * 3
    if x.numel():
        x[0, :5] = torch.tensor([0.0, 1.5, -2.5, 1e-30, 65.0]).to(dtype)  # ties, tiny, outlier
    for mode, scale in MODES:
        got = act_qdq.qdq_int8_act_triton(x.to(DEV), mode, None if scale is None else scale.to(DEV))
        want = act_qdq.qdq_int8_act(x, mode, scale)
        assert got.dtype == dtype and bit_equal(got.cpu(), want), mode


def test_refuses_what_it_cannot_serve():
    x = torch.randn(4, 64, device=DEV)
    with pytest.raises(ValueError, match="int8 modes"):
        act_qdq.qdq_int8_act_triton(x, 3, None)
    with pytest.raises(ValueError, match="act_scale"):
        act_qdq.qdq_int8_act_triton(x, 2, None)
