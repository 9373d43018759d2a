"""kernels/decode_mma.py with NVFP4 weights (WFMT 9; kernels/nvfp4_codes.py). With bf16 x
(NVX, TILE's): each code times its block's e4m3 value, exact, and the tensor scale on the
float32 sums, checked against v * e4m3 * ts rounded once. With fp16 x (and NVX off): fp4
codes times their block's float32 step (e4m3 value times the tensor scale), rounded once to
x's dtype, checked against the emulated path's weights (aoq.formats.nvfp4.nvfp4_dequantize
to x's dtype). Both bit for bit with one-hot activations, for every code under e4m3 bytes
across their range (NaN 0x7F, subnormals, 448) and tensor scales that make the steps inexact
in bf16. Under TRITON_INTERPRET=1 (the float path) and on a GPU (the inline assembly); and
through mx_decode_triton, which routes group-major bytes here."""

import pytest
import torch
from _mx_cases import DEV, NEEDS_KERNELS, one_hot_decodes, out_dtype, same
from aoq.kernels import decode_mma as dm
from aoq.kernels import mx_decode
from aoq.kernels._common import WeightFormat

from aoq.formats.nvfp4 import nvfp4_dequantize, nvfp4_quantize
from aoq.formats.packing import pack_uint4
from aoq.testing.metrics import max_rel_error

pytestmark = NEEDS_KERNELS
NV = WeightFormat.NVFP4
BYTES = [0x00, 0x01, 0x07, 0x08, 0x30, 0x38, 0x3F, 0x55, 0x7E, 0xB8, 0xFE]
"""e4m3 block bytes: zero, subnormals, normals from 2**-6 to 448, and negatives."""


def _weight(n: int, k: int, ts: float, nan: bool, dtype: torch.dtype, seed: int = 0):
    """Random codes (row 0 every code in turn), block bytes from BYTES (with ``nan``, row 2's
    second block NaN: 0x7F), tensor scale ``ts`` -> (packed codes, group-major bytes, tensor
    scale, the emulated ``dtype`` weight as float32)."""
    g = torch.Generator().manual_seed(seed)
    codes = torch.randint(0, 16, (n, k), generator=g, dtype=torch.uint8)
    codes[0] = torch.arange(k, dtype=torch.uint8) % 16
    pick = torch.randint(0, len(BYTES), (n, k // 16), generator=g)
    scale = torch.tensor(BYTES, dtype=torch.uint8)[pick]
    if nan:
        scale[2, 1] = 0x7F
    t = torch.tensor(ts, dtype=torch.float32)
    want = nvfp4_dequantize(codes, scale.view(torch.float8_e4m3fn), t, 16, dtype).float()
    gm = scale.t().contiguous().t()
    return pack_uint4(codes).to(DEV), gm.to(DEV), t.to(DEV), want


WIDE = pytest.mark.parametrize(
    "wide",
    [{"WIDE": False}, {"WIDE": True, "STEP_K": 64}, {"WIDE": True, "STEP_K": 128}],
    ids=["per-group", "wide", "wide128"],
)
"""The per-group steps, and WIDE's: a step's two or four groups (four or eight blocks, 64- or
128-code steps) decoded at once, each code by its own block's step, on one MMA over the
step's K (decode_mma_wide._wide_step)."""


@pytest.mark.parametrize("ts", [1.0, 0.0123, 3.7e-3])
@pytest.mark.parametrize("xdt", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@WIDE
def test_one_hot_is_each_emulated_weight_exactly(monkeypatch, ts, xdt, wide):
    """NVX off: row r of x is e_k for 16 columns k at a time: y[r, n] = the emulated path's
    weight [n, k] in x's dtype, every code under every byte (a NaN block makes its row
    NaN)."""
    monkeypatch.setitem(dm.TILE, NV, {**dm.TILE[NV], "NVX": False, **wide})
    n, k = 72, wide.get("STEP_K", 64)  # (one step)
    q, s, t, want = _weight(n, k, ts, True, xdt)
    for k0, x, y in one_hot_decodes(q, s, t, k // 16, NV, n, k, xdt):
        assert same(y, x.float().cpu() @ want.T), k0
    assert y[0, 2].isnan()


@pytest.mark.parametrize(("m", "split"), [(1, 1), (5, 3), (16, 2)])
@pytest.mark.parametrize("xdt", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_matches_emulated_matmul(m, split, xdt):
    """A quantized random weight (unaligned N, a bias, K split in ranges): the emulated
    path's product, up to float32 summation order and one rounding to x's dtype."""
    n, k = 130, 512
    g = torch.Generator().manual_seed(m)
    codes, scale, ts = nvfp4_quantize(torch.randn(n, k, generator=g) * 0.02)
    w = nvfp4_dequantize(codes, scale, ts, 16, xdt).float()
    x = torch.randn(m, k, generator=g).to(xdt)
    bias = torch.randn(n, generator=g).to(xdt)
    want = x.float() @ w.T + bias.float()
    gm = scale.view(torch.uint8).t().contiguous().t().to(DEV)
    y = torch.empty(m, n, dtype=out_dtype(xdt), device=DEV)
    dm.decode_mma(x.to(DEV), pack_uint4(codes).to(DEV), gm, ts.to(DEV), bias.to(DEV), y,
                  k // 16, NV, split)  # fmt: skip
    assert max_rel_error(want, y.float().cpu()) < 4e-3


@pytest.mark.parametrize("k", [96, 160])
def test_one_group_steps_decode_where_the_step_takes_one_group(k):
    """K an odd multiple of 32: each step holds one group (two blocks), which the tile's WIDE
    steps do not take (block_columns' two blocks over 16 columns miscompiled on sm90): the
    per-group steps serve it, the emulated product (it failed to compile before)."""
    g = torch.Generator().manual_seed(k)
    codes, scale, ts = nvfp4_quantize(torch.randn(72, k, generator=g) * 0.02)
    w = nvfp4_dequantize(codes, scale, ts, 16, torch.bfloat16).float()
    x = torch.randn(3, k, generator=g).to(torch.bfloat16)
    gm = scale.view(torch.uint8).t().contiguous().t().to(DEV)
    y = torch.empty(3, 72, dtype=out_dtype(torch.bfloat16), device=DEV)
    assert dm.TILE[NV]["WIDE"] and dm.serves(x.to(DEV), pack_uint4(codes).to(DEV), k // 16, NV,
                                             gm, ts.to(DEV))  # fmt: skip
    dm.decode_mma(x.to(DEV), pack_uint4(codes).to(DEV), gm, ts.to(DEV), None, y, k // 16, NV, None)
    assert max_rel_error(x.float() @ w.T, y.float().cpu()) < 4e-3


def test_quantized_weight_through_mx_decode_at_the_planned_split():
    """The linear path's call: mx_decode_triton routes group-major e4m3 bytes here; a
    quantized 256 x 256 weight, x one row, the split the planner picks. (It decoded to
    relative error 1.38 on an H100 while each column's step came from a join and reshape of
    the two blocks' steps, which gave rows the next row's steps; session 32.)"""
    g = torch.Generator().manual_seed(0)
    codes, scale, ts = nvfp4_quantize((torch.rand(256, 256, generator=g) - 0.5) / 8)
    w = nvfp4_dequantize(codes, scale, ts, 16, torch.bfloat16).float()
    x = torch.randn(1, 256, generator=g).to(torch.bfloat16)
    gm = scale.view(torch.uint8).t().contiguous().t().to(DEV)
    y = mx_decode.mx_decode_triton(x.to(DEV), pack_uint4(codes).to(DEV), gm, ts.to(DEV),
                                   "fp4_e2m1", 16, None)  # fmt: skip
    assert max_rel_error(x.float() @ w.T, y.float().cpu()) < 4e-3


def test_serves_what_it_computes():
    x = torch.zeros(1, 64, dtype=torch.bfloat16, device=DEV)
    q, s, t, _ = _weight(8, 64, 1.0, False, torch.bfloat16)
    assert dm.serves(x, q, 4, NV, s, t)
    assert dm.serves(x.half(), q, 4, NV, s, t)
    assert not dm.serves(x.float(), q, 4, NV, s, t)
    assert not dm.serves(x, q, 4, NV, s, None)  # no tensor scale
    assert not dm.serves(x, q, 2, NV, s, t)  # blocks of 32 are not NVFP4's
    x48 = torch.zeros(1, 48, dtype=torch.bfloat16, device=DEV)
    q48, s48, t48, _ = _weight(8, 48, 1.0, False, torch.bfloat16)
    assert not dm.serves(x48, q48, 3, NV, s48, t48)  # K not a multiple of 32


def _exact_weight(q, s, t, n: int, k: int) -> torch.Tensor:
    """v * e4m3 * ts in float64, rounded once to float32: NVX's weights (codes from the
    packed bytes, steps from the group-major bytes)."""
    from aoq.formats.packing import unpack_uint4

    codes = unpack_uint4(q.cpu()).to(torch.int64)
    mag = torch.tensor([0, 0.5, 1, 1.5, 2, 3, 4, 6], dtype=torch.float64)
    v = mag[codes & 7] * torch.where(codes >= 8, -1.0, 1.0).to(torch.float64)
    e = s.cpu().contiguous().view(torch.float8_e4m3fn).to(torch.float64)
    step = e.repeat_interleave(16, dim=1)[:, :k]
    return (v * step * t.cpu().double()).float()


@pytest.mark.parametrize("ts", [1.0, 0.0123, 3.7e-3])
@pytest.mark.parametrize("split", [None, 2])
@WIDE
def test_exact_steps_one_hot_is_each_weight_rounded_once(monkeypatch, ts, split, wide):
    """NVX (bf16 x, TILE's): each code times its block's e4m3 value, exact in bf16 (two significant
    bits times four, scaled by 2**-8), and the float32 sums times the tensor scale * 2**8 at
    the end: with x = e_k each output is v * e4m3 * ts rounded once to float32 (then to the
    output dtype), every code under every byte, a NaN block NaN."""
    monkeypatch.setitem(dm.TILE, NV, {**dm.TILE[NV], **wide})
    n, k = 72, wide.get("STEP_K", 64)  # (one step)
    q, s, t, _ = _weight(n, k, ts, True, torch.bfloat16)
    want = _exact_weight(q, s, t, n, k)
    for k0 in range(0, k, 16):
        x = torch.zeros(16, k, dtype=torch.bfloat16, device=DEV)
        x[torch.arange(16), k0 + torch.arange(16)] = 1.0
        y = torch.empty(16, n, dtype=out_dtype(torch.bfloat16), device=DEV)
        dm.decode_mma(x, q, s, t, None, y, k // 16, NV, split)
        assert same(y, x.float().cpu() @ want.T), k0
    assert y[0, 2].isnan()


def _random_exact(m: int, n: int, k: int) -> tuple:
    """A quantized random weight [n, k] and m rows of bf16 x, seeded by m -> (the generator,
    for what else a test draws; packed codes, group-major bytes, tensor scale; NVX's weight
    as float64; x)."""
    g = torch.Generator().manual_seed(m)
    codes, scale, ts = nvfp4_quantize(torch.randn(n, k, generator=g) * 0.02)
    gm = scale.view(torch.uint8).t().contiguous().t()
    q = pack_uint4(codes)
    w = _exact_weight(q, gm, ts, n, k).double()
    return g, q, gm, ts, w, torch.randn(m, k, generator=g).to(torch.bfloat16)


@pytest.mark.parametrize(("m", "split"), [(1, 1), (5, 3), (16, 2)])
def test_exact_steps_match_the_product(m, split):
    """NVX on a quantized random weight (unaligned N, a bias, K split): the float64 product
    of the quantized values, to float32 summation and the output's rounding."""
    n, k = 130, 512
    g, q, gm, ts, w, x = _random_exact(m, n, k)
    bias = torch.randn(n, generator=g).to(torch.bfloat16)
    want = x.double() @ w.T + bias.double()
    y = torch.empty(m, n, dtype=out_dtype(torch.bfloat16), device=DEV)
    dm.decode_mma(x.to(DEV), q.to(DEV), gm.to(DEV), ts.to(DEV), bias.to(DEV), y, k // 16, NV,
                  split)  # fmt: skip
    assert max_rel_error(want, y.double().cpu()) < 4e-3


@pytest.mark.parametrize(("m", "step"), [(1, 128), (8, 128), (9, 64)])
def test_steps_by_padding(monkeypatch, m, step):
    """TILE's ``at8``: x padded to 8 rows (M <= 8) takes 128-code steps (four groups, eight
    blocks: _common.block_columns8), 16 rows 64-code ones; the float64 product either way."""
    n, k = 130, 512
    g, q, gm, ts, w, x = _random_exact(m, n, k)
    steps = []
    launch = dm.launch
    monkeypatch.setattr(
        dm, "launch", lambda *a, **kw: steps.append(kw["BLOCK_K"]) or launch(*a, **kw)
    )
    y = torch.empty(m, n, dtype=out_dtype(torch.bfloat16), device=DEV)
    dm.decode_mma(x.to(DEV), q.to(DEV), gm.to(DEV), ts.to(DEV), None, y, k // 16, NV, None)
    assert steps == [step]
    assert max_rel_error(x.double() @ w.T, y.double().cpu()) < 4e-3
