"""kernels/decode_mma.py with MX fp4 weights (WFMT 4): the codes and their block's power of
two assembled into bf16 pairs (kernels/bf16_codes.fp4_codes), checked against the emulated
path's bf16 weights (aoq.formats.mx.mx_dequantize to bf16): bit for bit with one-hot
activations, for every code and E8M0 byte, on both the one-multiply path and the BIG one
(scales above 2**1, NaN). Under TRITON_INTERPRET=1 (the float path) and on a GPU (the
inline assembly)."""

import pytest
import torch
from aoq.kernels import decode_mma as dm
from aoq.kernels._common import INTERPRET, WeightFormat

from aoq.formats.mx import MXElem, mx_dequantize, mx_quantize, pack_mx_codes
from aoq.testing.metrics import max_rel_error

GPU = torch.cuda.is_available() and not INTERPRET
pytestmark = pytest.mark.skipif(
    not (INTERPRET or GPU), reason="needs TRITON_INTERPRET=1 before import, or a GPU"
)
DEV = "cuda" if GPU else "cpu"
OUT = torch.bfloat16 if GPU else torch.float32  # the interpreter's kernels store float32
FP4 = WeightFormat.MX_FP4
SMALL = [0, 1, 2, 60, 100, 126, 127, 128]
"""E8M0 bytes whose 2**(b - 1) is a bf16: one multiply."""
LARGE = [129, 130, 200, 252]
"""Bytes that need the second multiply (every fp4 value stays finite up to 252)."""


def _flag(scale: torch.Tensor) -> torch.Tensor:
    """The weight's BIG flag, as aoq.tensors.mx.MXWeight.build_derived computes it."""
    return (scale > 128).any().to(torch.int32).reshape(1)


def _weight(n: int, k: int, bytes_: list[int], bs: int = 32, seed: int = 0):
    """Random fp4 codes (row 0: every code, twice a block) and E8M0 bytes drawn from
    ``bytes_`` -> (packed codes, bytes [N, K / bs], the emulated bf16 weight as float32).
    With bytes above 128: row 1's first block holds one code 6.0 under byte 253 (inf: it
    overflows) among zeros, row 2's second block is NaN (byte 255)."""
    g = torch.Generator().manual_seed(seed)
    codes = torch.randint(0, 16, (n, k), generator=g, dtype=torch.uint8)
    codes[0] = torch.arange(k, dtype=torch.uint8) % 16
    pick = torch.randint(0, len(bytes_), (n, k // bs), generator=g)
    scale = torch.tensor(bytes_, dtype=torch.uint8)[pick]
    if max(bytes_) > 128:
        codes[1, :bs], codes[1, 3], scale[1, 0] = 0, 7, 253
        scale[2, 1] = 255
    want = mx_dequantize(codes, scale, MXElem.FP4_E2M1, bs, 1, torch.bfloat16).float()
    return pack_mx_codes(codes, MXElem.FP4_E2M1).to(DEV), scale.to(DEV), want


def _same(got: torch.Tensor, want: torch.Tensor) -> bool:
    """Equal values (infinities included), NaN where the reference is NaN."""
    got, want = got.float().cpu(), want.to(OUT).float()
    nan = want.isnan()
    return torch.equal(got.isnan(), nan) and torch.equal(got[~nan], want[~nan])


@pytest.mark.parametrize("bytes_", [SMALL, SMALL + LARGE], ids=["one-multiply", "big"])
@pytest.mark.parametrize("group_major", [False, True])
def test_one_hot_is_each_emulated_weight_exactly(bytes_, group_major):
    """Row r of x is e_k for 16 columns k at a time: y[r, n] = the emulated path's bf16
    weight [n, k] (float32 products of exact values: one term and zeros), every code under
    every byte (subnormal code 0.5 at b = 0: 2**-128), with the scales row-major or
    group-major. An infinite weight (overflow) comes out as inf where x selects it and NaN
    elsewhere in its row (0 * inf), a NaN block makes its row NaN: as the reference's."""
    n, k = 72, 128
    q, s, want = _weight(n, k, bytes_)
    sc = s.t().contiguous().t() if group_major else s
    flag = _flag(s)
    for k0 in range(0, k, 16):
        x = torch.zeros(16, k, dtype=torch.bfloat16, device=DEV)
        x[torch.arange(16), k0 + torch.arange(16)] = 1.0
        y = torch.empty(16, n, dtype=OUT, device=DEV)
        assert dm.serves(x, q, k // 32, FP4, sc, flag)
        dm.decode_mma(x, q, sc, flag, None, y, k // 32, FP4, None)
        assert _same(y, x.float().cpu() @ want.T), k0
        if k0 == 0 and max(bytes_) > 128:
            assert y[3, 1].item() == float("inf") and y[0, 2].isnan()


@pytest.mark.parametrize("m", [1, 5, 16])
@pytest.mark.parametrize("split", [1, 3])
@pytest.mark.parametrize("tile", [None, {"STEP_K": 128}, {"WT": False, "num_warps": 4}])
def test_matches_emulated_matmul(m, split, tile):
    """Random activations and a quantized random weight (unaligned N, a bias, K split in
    ranges; steps of two and four blocks; either MMA orientation): the emulated path's
    float32-accumulated product, up to summation order and one bf16 rounding."""
    n, k = 130, 1024
    g = torch.Generator().manual_seed(m)
    codes, scale = mx_quantize(torch.randn(n, k, generator=g), MXElem.FP4_E2M1, 32, 1)
    w = mx_dequantize(codes, scale, MXElem.FP4_E2M1, 32, 1, torch.bfloat16).float()
    x = torch.randn(m, k, generator=g).to(torch.bfloat16)
    bias = torch.randn(n, generator=g).to(torch.bfloat16)
    want = x.float() @ w.T + bias.float()
    q, s = pack_mx_codes(codes, MXElem.FP4_E2M1).to(DEV), scale.to(DEV)
    sg = s.t().contiguous().t()
    y = torch.empty(m, n, dtype=OUT, device=DEV)
    dm.decode_mma(x.to(DEV), q, sg, _flag(s), bias.to(DEV), y, k // 32, FP4, split, tile=tile)
    assert max_rel_error(want, y.float().cpu()) < 4e-3


def test_serves_bf16_activations_and_the_flag():
    x = torch.zeros(1, 256, dtype=torch.bfloat16, device=DEV)
    q, s, _ = _weight(8, 256, SMALL)
    flag = _flag(s)
    assert dm.serves(x, q, 8, FP4, s, flag)
    assert not dm.serves(x.half(), q, 8, FP4, s, flag)  # the emulated path rounds to fp16
    assert not dm.serves(x, q, 8, FP4, s, None)  # no flag: unknown scales
    assert not dm.serves(x, q, 8, FP4, s, flag.float())
    assert not dm.serves(x, q, 16, FP4, s, flag)  # blocks of 16
