"""kernels/wt_rows_mx.py: MX fp4 / e4m3 / e5m2 / int8 and NVFP4 weights at 65-128 rows with
the decoded weights as the MMA's register operand (wt_rows' tile, decode_mma's WIDE decode).

The serving rules run anywhere; the kernel runs under TRITON_INTERPRET=1 (``make
kernels-interpret``) and on an sm90 GPU: against the emulated path's float32-accumulated
product (its weights dequantized to x's dtype), split or not, with a bias, for each BIG flag
(known on the host, with and without a large scale, or read on the device), and through
mx_decode_triton (the path the dispatch takes)."""

import pytest
import torch
from _mx_cases import random_case
from aoq.kernels import mx_decode, wt_rows, wt_rows_mx
from aoq.kernels._common import INTERPRET, WeightFormat

from aoq.formats.mx import MXElem, mx_dequantize, pack_mx_codes
from aoq.formats.nvfp4 import nvfp4_dequantize, nvfp4_quantize
from aoq.formats.packing import pack_uint4
from aoq.tensors.mx import BIG_LIMIT, big_scale_flag
from aoq.testing.metrics import max_rel_error

GPU = torch.cuda.is_available() and not INTERPRET and wt_rows._sm90(-1)
runs = pytest.mark.skipif(
    not (INTERPRET or GPU), reason="needs TRITON_INTERPRET=1 before import, or an sm90 GPU"
)
DEV = "cuda" if GPU else "cpu"
FMT = {"nvfp4": WeightFormat.NVFP4, **{e.value: f for e, f in mx_decode.DECODE_MMA_FORMATS.items()}}


@pytest.fixture
def enabled(monkeypatch):
    monkeypatch.setattr(wt_rows, "ENABLED", True)


@pytest.fixture
def every_format(enabled, monkeypatch):
    """Every format served from 65 rows (MIN_ROWS keeps MX 8-bit off; the kernel takes them)."""
    monkeypatch.setattr(wt_rows_mx, "MIN_ROWS", dict.fromkeys(wt_rows_mx.MIN_ROWS, 65))


def _case(elem: str, m: int, xdt: torch.dtype, n: int = 192, k: int = 512, big: bool = False):
    """(x, codes, group-major scale bytes, BIG flag or tensor scale, bias, the emulated
    product) for a random weight [n, k]; ``big``: one block's scale raised past BIG_LIMIT."""
    g = torch.Generator().manual_seed(m)
    if elem == "nvfp4":
        codes, scale, ts = nvfp4_quantize(torch.randn(n, k, generator=g) * 0.02)
        w = nvfp4_dequantize(codes, scale, ts, 16, xdt).float()
        x = torch.randn(m, k, generator=g).to(xdt)
        bias = torch.randn(n, generator=g).to(xdt)
        s, q, zero = scale.view(torch.uint8), pack_uint4(codes), ts
    else:
        e = MXElem(elem)
        codes, scale, x, bias, _ = random_case(e, n, k, m, xdt, m)
        s = scale.view(torch.uint8).clone()
        if big:  # one block 2**(limit + 3 - 127): the second multiply (decode_mma_wide)
            s[5, 3] = min(BIG_LIMIT[e] + 3, 254)
            x = x / 64  # (its products stay finite in x's dtype)
        w = mx_dequantize(codes, s.view(scale.dtype), e, 32, 1, xdt).float()
        q, zero = pack_mx_codes(codes, e), big_scale_flag(s, BIG_LIMIT[e])
    want = x.float() @ w.T + bias.float()
    gm = s.t().contiguous().t()
    return x.to(DEV), q.to(DEV), gm.to(DEV), zero.to(DEV), bias.to(DEV), want


CASES = [
    ("fp4_e2m1", 128, torch.bfloat16, 1), ("fp4_e2m1", 65, torch.float16, 2),
    ("fp8_e4m3", 100, torch.bfloat16, 2), ("fp8_e4m3", 128, torch.float16, 1),
    ("fp8_e5m2", 112, torch.bfloat16, 1), ("int8", 65, torch.bfloat16, 1),
    ("int8", 128, torch.bfloat16, 3), ("nvfp4", 128, torch.bfloat16, 1),
    ("nvfp4", 96, torch.float16, 2),
]  # fmt: skip


@runs
@pytest.mark.parametrize("elem,m,xdt,split", CASES)
def test_matches_the_emulated_product(elem, m, xdt, split, every_format):
    """Each format at 65-128 rows (x by masked loads below wt_rows.X_DESC_ROWS, through its
    descriptor from there), K split or not, a bias: the emulated product."""
    x, q, gm, zero, bias, want = _case(elem, m, xdt)
    wfmt = FMT[elem]
    assert wt_rows_mx.serves(x, q, gm, zero, 16 if elem == "nvfp4" else 32, wfmt)
    y = torch.empty(m, q.shape[0], dtype=torch.float32 if INTERPRET else xdt, device=DEV)
    wt_rows_mx.wt_rows_mx(x, q, gm, zero, bias, y, wfmt, split)
    assert max_rel_error(want, y.float().cpu()) < 4e-3


@runs
@pytest.mark.parametrize("elem,split", [("fp4_e2m1", 1), ("nvfp4", 2)])
def test_n_not_a_multiple_of_the_tile(elem, split, enabled):
    """N 130 (the last column tile's codes past N read as TMA's zeros, its outputs not
    stored), through mx_decode_triton as the dispatch calls it: the emulated product."""
    x, q, gm, zero, bias, want = _case(elem, 100, torch.bfloat16, n=130)
    nv = elem == "nvfp4"
    assert wt_rows_mx.serves(x, q, gm, zero, 16 if nv else 32, FMT[elem])
    y = torch.empty(100, 130, dtype=torch.float32 if INTERPRET else torch.bfloat16, device=DEV)
    wt_rows_mx.wt_rows_mx(x, q, gm, zero, bias, y, FMT[elem], split)
    assert max_rel_error(want, y.float().cpu()) < 4e-3


@runs
@pytest.mark.parametrize("elem,n", [("fp4_e2m1", 256), ("nvfp4", 130)])
def test_wide_weight_tiles(elem, n, enabled, monkeypatch):
    """TILE's ``bn`` 128 on eight warps (a probe: x read from L2 half as often), N a multiple
    of it or not: the emulated product."""
    monkeypatch.setitem(wt_rows_mx.TILE, FMT[elem], {"bn": 128, "warps": 8, "step": 64})
    x, q, gm, zero, bias, want = _case(elem, 100, torch.bfloat16, n=n)
    y = torch.empty(100, n, dtype=torch.float32 if INTERPRET else torch.bfloat16, device=DEV)
    wt_rows_mx.wt_rows_mx(x, q, gm, zero, bias, y, FMT[elem], 2)
    assert max_rel_error(want, y.float().cpu()) < 4e-3


@runs
@pytest.mark.parametrize("elem,m", [("fp4_e2m1", 64), ("nvfp4", 48), ("int8", 64)])
def test_64_row_x_tiles(elem, m, enabled, monkeypatch):
    """TILE's ``rows`` 64 (a probe: x's box and the MMA's N at 64 rows): the emulated
    product."""
    monkeypatch.setitem(wt_rows_mx.TILE, FMT[elem], {"rows": 64, "step": 64})
    x, q, gm, zero, bias, want = _case(elem, m, torch.bfloat16)
    y = torch.empty(m, q.shape[0], dtype=torch.float32 if INTERPRET else torch.bfloat16, device=DEV)
    wt_rows_mx.wt_rows_mx(x, q, gm, zero, bias, y, FMT[elem], 2)
    assert max_rel_error(want, y.float().cpu()) < 4e-3


@pytest.mark.skipif(not GPU, reason="cvt is a GPU path: the interpreter runs the float decode")
@pytest.mark.parametrize("elem", ["fp8_e4m3", "fp8_e5m2", "int8"])
def test_hardware_conversion_matches_the_emulated_product(elem, every_format, monkeypatch):
    """TILE's ``cvt`` (MX 8-bit, bf16 x; on a GPU: Triton's conversion of the codes times each
    block's bf16 step): the emulated product, with a block scale past BIG_LIMIT (no second
    multiply: the step itself is a bf16 power of two)."""
    monkeypatch.setitem(wt_rows_mx.TILE, FMT[elem], {"cvt": 1})
    x, q, gm, zero, bias, want = _case(elem, 128, torch.bfloat16, big=True)
    y = torch.empty(128, q.shape[0], dtype=torch.float32 if INTERPRET else torch.bfloat16,
                    device=DEV)  # fmt: skip
    wt_rows_mx.wt_rows_mx(x, q, gm, zero, bias, y, FMT[elem], 2)
    assert max_rel_error(want, y.float().cpu()) < 4e-3


@runs
@pytest.mark.parametrize("flag", ["small", "big", "device"])
@pytest.mark.parametrize("elem", ["fp4_e2m1", "fp8_e4m3"])
def test_each_big_flag_matches_the_emulated_product(elem, flag, every_format):
    """The BIG flag known on the host without and with a block scale past BIG_LIMIT (the
    second multiply), and read on the device (its length 1: the second multiply everywhere)."""
    x, q, gm, zero, bias, want = _case(elem, 128, torch.bfloat16, big=flag != "small")
    if flag == "device":
        zero = torch.tensor([1], dtype=torch.int32, device=DEV)
    assert zero.numel() == {"small": 0, "big": 2, "device": 1}[flag]
    y = torch.empty(128, q.shape[0], dtype=torch.float32 if INTERPRET else torch.bfloat16,
                    device=DEV)  # fmt: skip
    wt_rows_mx.wt_rows_mx(x, q, gm, zero, bias, y, FMT[elem], 2)
    assert max_rel_error(want, y.float().cpu()) < 4e-3


@runs
@pytest.mark.parametrize(
    "elem,m", [("fp4_e2m1", 65), ("fp4_e2m1", 100), ("int8", 100), ("fp8_e4m3", 100), ("nvfp4", 65)]
)
def test_mx_decode_takes_the_rows(elem, m, enabled, monkeypatch):
    """mx_decode_triton (the dispatch's entry) sends MX fp4 and NVFP4 at 65-128 rows here
    (MIN_ROWS), MX int8 and e4m3 to decode_mma, and with wt_rows off MX fp4 to decode_mma;
    each the emulated product."""
    x, q, gm, zero, bias, want = _case(elem, m, torch.bfloat16)
    nv = elem == "nvfp4"
    ran = []
    real = wt_rows_mx.wt_rows_mx
    monkeypatch.setattr(wt_rows_mx, "wt_rows_mx", lambda *a, **k: ran.append(1) or real(*a, **k))
    args = (x, q, gm, zero if nv else None, "fp4_e2m1" if nv else elem, 16 if nv else 32, bias)
    kw = {} if nv else {"big_scales": zero}
    assert mx_decode.mma_rows(x, q, gm, zero, args[5], FMT[elem]) == m
    y = mx_decode.mx_decode_triton(*args, **kw)
    assert ran == ([1] if elem in ("fp4_e2m1", "nvfp4") else [])
    assert max_rel_error(want, y.float().cpu()) < 4e-3
    monkeypatch.setattr(wt_rows, "ENABLED", False)
    if nv:  # (decode_mma stops at 64 rows for NVFP4)
        assert mx_decode.mma_rows(x, q, gm, zero, 16, FMT[elem]) == 16
        return
    ran.clear()
    y = mx_decode.mx_decode_triton(*args, **kw)
    assert not ran
    assert max_rel_error(want, y.float().cpu()) < 4e-3


@runs
def test_serving_rules(every_format):
    """What serves refuses: rows outside MIN_ROWS..ROWS, MX int8 with fp16 x, blocks other
    than 32 (MX), row-major scale bytes, K not a multiple of the step, an unaligned x, codes
    not of the format's size (e4m3's bytes named fp6); off with AOQ_WT_ROWS=0."""
    x, q, gm, zero, _, _ = _case("fp8_e4m3", 100, torch.bfloat16)
    e4m3 = WeightFormat.MX_FP8
    assert wt_rows_mx.serves(x, q, gm, zero, 32, e4m3)
    assert not wt_rows_mx.serves(x[:64], q, gm, zero, 32, e4m3)
    big = torch.zeros(129, 512, dtype=torch.bfloat16, device=DEV)
    assert not wt_rows_mx.serves(big, q, gm, zero, 32, e4m3)
    assert not wt_rows_mx.serves(x, q, gm, zero, 64, e4m3)
    assert not wt_rows_mx.serves(x, q, gm.contiguous(), zero, 32, e4m3)
    xu = torch.empty(100 * 512 + 4, dtype=torch.bfloat16, device=DEV)[4:].view(100, 512)
    assert not wt_rows_mx.serves(xu, q, gm, zero, 32, e4m3)  # (8 bytes past an aligned base)
    assert not wt_rows_mx.serves(x, q, gm, zero, 32, WeightFormat.MX_FP6_E3M2)
    x8, q8, gm8, zero8, _, _ = _case("int8", 100, torch.float16)
    assert not wt_rows_mx.serves(x8, q8, gm8, zero8, 32, WeightFormat.MX_INT8)
    xk, qk, gmk, zk, _, _ = _case("nvfp4", 100, torch.bfloat16, k=544)
    assert not wt_rows_mx.serves(xk, qk, gmk, zk, 16, WeightFormat.NVFP4)
    wt_rows.ENABLED = False
    assert not wt_rows_mx.serves(x, q, gm, zero, 32, e4m3)
