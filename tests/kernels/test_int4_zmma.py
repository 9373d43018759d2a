"""kernels/int4_zmma.py (ZMMA: int4_base_codes) through decode_mma: int4 codes as
base + q and the zero point as a third MMA operand, -(base + z) (a probe, off in TILE: on an
H100 it ran 2-6 % slower than the subtraction, bench/NOTES.md session 34).

Runs under TRITON_INTERPRET=1 on CPU tensors (``make kernels-interpret``) and on a GPU (the
inline-assembly path, bf16 128.0 or fp16 1024.0 as the base); the plain CPU unit run skips it.
"""

import pytest
import torch
from _mx_cases import DEV, GPU, NEEDS_KERNELS, OUT
from _pairwise import pairwise
from aoq.kernels import decode_mma as dm
from aoq.kernels._common import WeightFormat

from aoq.formats import affine
from aoq.formats.packing import pack_uint4, pack_zero_words, tile_uint4, unpack_uint4
from aoq.testing.metrics import max_rel_error

pytestmark = NEEDS_KERNELS


def _weight(n: int, k: int, gs: int):
    torch.manual_seed(3)
    q, s, z = affine.quantize_uint4_asymmetric(torch.randn(n, k, device=DEV), gs)
    z[0, 0] = 15  # the largest base + z
    q = pack_uint4(q)
    q[0] = (torch.arange(k // 2) * 37 % 256).to(torch.uint8).to(DEV)  # every nibble, both places
    w = affine.dequantize_uint4_asymmetric(unpack_uint4(q), s, z).float()
    return q, s.t().contiguous().t(), pack_zero_words(z), w


def _run(x, q, s, zw, groups, zmma, split=None, tiled=True):
    out = x.dtype if GPU and x.dtype == torch.float16 else OUT
    y = torch.empty(x.shape[0], q.shape[0], dtype=out, device=DEV)
    codes = tile_uint4(q) if tiled else q
    assert dm.serves(x, codes, groups, WeightFormat.UINT4, s, zw, tiled=tiled)
    tile = {"ZMMA": zmma} if zmma else {}
    dm.decode_mma(x, codes, s, zw, None, y, groups, WeightFormat.UINT4, split, tile=tile,
                  tiled=tiled)  # fmt: skip
    return y


@pytest.mark.parametrize("xdt", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("zmma", [1, 2])
@pytest.mark.parametrize("gs", [32, 128])
def test_zero_point_operand_one_hot_is_each_weight_exactly(gs, zmma, xdt):
    """With x = e_k the three MMAs give (base + q) - (base + z) = q - z exactly, times the
    group's scale: each dequantized weight bit for bit, every nibble in both places."""
    n, k = 128, 2 * 128
    q, s, zw, w = _weight(n, k, gs)
    for k0 in range(0, k, 32):
        x = torch.zeros(8, k, dtype=xdt, device=DEV)
        x[torch.arange(8), k0 + torch.arange(8)] = 1.0
        got = _run(x, q, s, zw, k // gs, zmma)
        assert torch.equal(got.float().T, w[:, k0 : k0 + 8].to(got.dtype).float()), k0


# each ZMMA form with 1 and 5 rows and with K split and not, each pair once: 4 of 8 cases
@pytest.mark.parametrize("zmma,m,split", pairwise([1, 2], [1, 5], [None, 3]))
def test_zero_point_operand_matches_the_subtraction(m, split, zmma):
    """Random rows: the same products as int4_codes's subtraction up to the float32 rounding
    of the larger sums (the cancellation of (base + z) times x's group sum), tiled codes and
    row-major alike."""
    n, k, gs = 192, 1024, 64
    q, s, zw, w = _weight(n, k, gs)
    x = torch.randn(m, k, device=DEV).to(torch.bfloat16)
    for tiled in (True, False):
        base = _run(x, q, s, zw, k // gs, 0, split, tiled)
        got = _run(x, q, s, zw, k // gs, zmma, split, tiled)
        assert max_rel_error(got.float(), base.float()) < (4e-3 if GPU else 1e-5)
    want = x.double() @ w.double().T
    assert max_rel_error(got.double(), want) < (4e-3 if GPU else 1e-5)
