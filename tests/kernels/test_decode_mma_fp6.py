"""kernels/decode_mma.py with MX fp6 weights (WFMT 6 e3m2, 7 e2m3; decode_mma_fp6.py's loop and
fp6_codes.py's pairs): checked against the emulated path's weights (aoq.formats.mx.
mx_dequantize to x's dtype), bit for bit with one-hot activations, for every one of the 64
codes at every position of a 16-code unit, under E8M0 bytes on both the one-multiply path and
the BIG one (scales past 2**3 / 2**1, NaN blocks, overflow). Under TRITON_INTERPRET=1 (the
integer and float32 path) and on a GPU (the inline assembly)."""

import pytest
import torch
from _mx_cases import DEV, NEEDS_KERNELS, OUT, one_hot_decodes, out_dtype, random_case, same
from _pairwise import pairwise
from aoq.kernels import decode_mma as dm
from aoq.kernels._common import WeightFormat

from aoq.formats.mx import MXElem, mx_dequantize, mx_quantize, pack_mx_codes
from aoq.tensors.mx import big_scale_flag
from aoq.testing.metrics import max_rel_error

pytestmark = NEEDS_KERNELS
E3M2 = WeightFormat.MX_FP6_E3M2
E2M3 = WeightFormat.MX_FP6_E2M3
ELEMS = {E3M2: MXElem.FP6_E3M2, E2M3: MXElem.FP6_E2M3}
LIMIT = {E3M2: 130, E2M3: 128}
SMALL = {E3M2: [0, 1, 2, 60, 100, 127, 129, 130], E2M3: [0, 1, 2, 60, 100, 126, 127, 128]}
"""E8M0 bytes whose 2**(b - 3) (e2m3: 2**(b - 1)) is a bf16: one multiply."""
LARGE = [131, 140, 200, 250]
"""Bytes past both limits (every fp6 value stays finite up to 250: 28 * 2**123)."""
WFMTS = {"e3m2": E3M2, "e2m3": E2M3}
XDTS = {"bf16": torch.bfloat16, "fp16": torch.float16}
BIG = {"one-multiply": False, "big": True}
HOST = {"host-flag": True, "device-flag": False}


def _flag(scale: torch.Tensor, wfmt, host: bool = True) -> torch.Tensor:
    """The weight's BIG flag as MXWeight.build_derived computes it, or (``host`` False) as
    under graph capture: the answer on the device."""
    if host:
        return big_scale_flag(scale, LIMIT[wfmt])
    return (scale > LIMIT[wfmt]).any().to(torch.int32).reshape(1)


def _weight(wfmt, n: int, k: int, bytes_: list[int], dtype=torch.bfloat16, seed: int = 0):
    """Random codes with rows 0-3 every code at every position of a unit (row r, column c:
    code (4 r + c + c // 16) % 64), E8M0 bytes drawn from ``bytes_`` -> (packed codes, bytes
    [N, K / 32], the emulated ``dtype`` weight as float32). With bytes past the limit, row 4's
    first block holds one largest code among zeros under byte 253 (inf in any dtype), row 5's
    second block is NaN (byte 255)."""
    g = torch.Generator().manual_seed(seed)
    codes = torch.randint(0, 64, (n, k), generator=g, dtype=torch.uint8)
    c = torch.arange(k)
    for r in range(4):
        codes[r] = ((4 * r + c + c // 16) % 64).to(torch.uint8)
    pick = torch.randint(0, len(bytes_), (n, k // 32), generator=g)
    scale = torch.tensor(bytes_, dtype=torch.uint8)[pick]
    if max(bytes_) > LIMIT[wfmt]:
        codes[4, :32], codes[4, 3], scale[4, 0] = 0, 31, 253
        scale[5, 1] = 255
    elem = ELEMS[wfmt]
    want = mx_dequantize(codes, scale, elem, 32, 1, dtype).float()
    return pack_mx_codes(codes, elem).to(DEV), scale.to(DEV), want


# every element x scale path x activation dtype (each code under each byte, rounded to x's
# dtype), and every element x scale path with the BIG flag known on the host (BIG 0 or 1
# compiled) and on the device (BIG 2): 8 of 16 cases
@pytest.mark.parametrize(
    "wfmt,big,xdt,host",
    pairwise(WFMTS, BIG, XDTS, HOST, full=[(0, 1, 2), (0, 1, 3)]),
)
def test_one_hot_is_each_emulated_weight_exactly(wfmt, big, host, xdt):
    """Row r of x is e_k for 16 columns k at a time: y[r, n] = the emulated path's weight
    [n, k] in x's dtype (one exact product and zeros), every code at every position of its
    unit, under every byte (fp16: the small bytes round to zero or subnormals, the large ones
    overflow, as the reference's cast). An infinite weight gives inf where x selects it and
    NaN elsewhere in its row (0 * inf), a NaN block NaN for its row: as the reference's."""
    n, k = 72, 128
    small = SMALL[wfmt]
    q, s, want = _weight(wfmt, n, k, small + LARGE if big else small, dtype=xdt)
    sg = s.t().contiguous().t()
    flag = _flag(s, wfmt, host)
    for k0, x, y in one_hot_decodes(q, sg, flag, k // 32, wfmt, n, k, xdt):
        assert same(y, x.float().cpu() @ want.T), k0
        if k0 == 0 and big:  # (in fp16 more of row 4 overflows: 0 * inf makes y[3, 4] NaN)
            assert y[0, 5].isnan() and (xdt != torch.bfloat16 or y[3, 4].item() == float("inf"))


# each element with each activation dtype and each (rows, split): 1 row unsplit (x padded to
# 8), 5 rows in 3 ranges, 16 rows in 2; each pair once: 6 of 12 cases
@pytest.mark.parametrize(
    "rows_split,wfmt,xdt", pairwise({"1-1": (1, 1), "5-3": (5, 3), "16-2": (16, 2)}, WFMTS, XDTS)
)
def test_matches_emulated_matmul(rows_split, wfmt, xdt):
    """Random activations and a quantized random weight (unaligned N, a bias, K split in
    ranges; steps of four blocks of 32): the emulated path's float32-accumulated
    product, up to summation order and one rounding to x's dtype."""
    (m, split), (n, k) = rows_split, (130, 768)
    elem = ELEMS[wfmt]
    codes, scale, x, bias, want = random_case(elem, n, k, m, xdt, m)
    q, s = pack_mx_codes(codes, elem).to(DEV), scale.view(torch.uint8).to(DEV)
    y = torch.empty(m, n, dtype=out_dtype(xdt), device=DEV)
    dm.decode_mma(x.to(DEV), q, s.t().contiguous().t(), _flag(s, wfmt), bias.to(DEV), y,
                  k // 32, wfmt, split)  # fmt: skip
    assert max_rel_error(want, y.float().cpu()) < 4e-3


@pytest.mark.parametrize("bs", [64, 128, 256])
def test_larger_blocks(bs):
    """Blocks of 64-256 codes: two blocks a step, one, or a step inside one block."""
    n, k, elem = 40, 512, MXElem.FP6_E3M2
    g = torch.Generator().manual_seed(bs)
    codes, scale = mx_quantize(torch.randn(n, k, generator=g), elem, bs, 1)
    w = mx_dequantize(codes, scale, elem, bs, 1, torch.bfloat16).float()
    x = torch.randn(2, k, generator=g).to(torch.bfloat16)
    q, s = pack_mx_codes(codes, elem).to(DEV), scale.view(torch.uint8).to(DEV)
    y = torch.empty(2, n, dtype=OUT, device=DEV)
    assert dm.serves(x.to(DEV), q, k // bs, E3M2, s, _flag(s, E3M2))
    dm.decode_mma(x.to(DEV), q, s, _flag(s, E3M2), None, y, k // bs, E3M2, None)
    assert max_rel_error(x.float() @ w.T, y.float().cpu()) < 4e-3


def test_serves_what_it_computes():
    x = torch.zeros(1, 256, dtype=torch.bfloat16, device=DEV)
    q, s, _ = _weight(E3M2, 8, 256, SMALL[E3M2])
    flag = _flag(s, E3M2)
    assert dm.serves(x, q, 8, E3M2, s, flag)
    assert dm.serves(x.half(), q, 8, E3M2, s, flag)
    assert not dm.serves(x.float(), q, 8, E3M2, s, flag)
    assert not dm.serves(x, q, 8, E3M2, s, None)  # no flag: unknown scales
    assert not dm.serves(x, q, 16, E3M2, s, flag)  # blocks of 16
    x96 = torch.zeros(1, 96, dtype=torch.bfloat16, device=DEV)
    q96, s96, _ = _weight(E3M2, 8, 96, SMALL[E3M2])
    assert not dm.serves(x96, q96, 3, E3M2, s96, _flag(s96, E3M2))  # K not a multiple of 128
