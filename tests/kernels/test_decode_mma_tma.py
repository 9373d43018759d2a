"""kernels/decode_mma.py's TMA probe: int4 codes in tile order read through a tensor
descriptor give the pointer loads' bits.

Runs under TRITON_INTERPRET=1 on CPU tensors (``make kernels-interpret``) and on a GPU of
sm90 or later (TMA); the plain CPU unit run skips it."""

import pytest
import torch
from _pairwise import pairwise
from aoq.kernels import decode_mma as dm
from aoq.kernels._common import INTERPRET, WeightFormat

from aoq.formats import affine
from aoq.formats.packing import pack_uint4, pack_zero_words, tile_uint4

GPU = torch.cuda.is_available() and not INTERPRET
TMA_GPU = GPU and torch.cuda.get_device_capability() >= (9, 0)
pytestmark = pytest.mark.skipif(
    not (INTERPRET or TMA_GPU), reason="needs TRITON_INTERPRET=1 before import, or sm90+"
)
DEV = "cuda" if GPU else "cpu"
OUT = torch.bfloat16 if GPU else torch.float32  # the interpreter's kernels store float32


# every group size (a descriptor block of 16, 32, 64 bytes) with 8 and 16 rows, each of those
# split and not: 6 of 12 cases
@pytest.mark.parametrize("gs,m,split", pairwise([32, 64, 128], [1, 9], [None, 3]))
def test_descriptor_reads_are_the_pointer_reads(gs, m, split):
    n, k = 192, 1024
    q, s, z = affine.quantize_uint4_asymmetric(torch.randn(n, k, device=DEV), gs)
    x = torch.randn(m, k, device=DEV).to(torch.bfloat16)
    tq = tile_uint4(pack_uint4(q))
    sg, zw = s.t().contiguous().t(), pack_zero_words(z)
    ys = []
    for tile in ({"SK": False}, {"SK": False, "TMA": True}):
        y = torch.empty(m, n, dtype=OUT, device=DEV)
        dm.decode_mma(x, tq, sg, zw, None, y, k // gs, WeightFormat.UINT4, split, tile=tile,
                      tiled=True)  # fmt: skip
        ys.append(y)
    assert torch.equal(ys[0], ys[1])


def test_descriptor_needs_tiled_int4():
    n, k = 128, 256
    q, s, z = affine.quantize_uint4_asymmetric(torch.randn(n, k, device=DEV), 128)
    x = torch.randn(1, k, device=DEV).to(torch.bfloat16)
    y = torch.empty(1, n, dtype=OUT, device=DEV)
    with pytest.raises(ValueError, match="TMA"):
        dm.decode_mma(x, pack_uint4(q), s, z, None, y, 2, WeightFormat.UINT4, None,
                      tile={"TMA": True})  # fmt: skip
