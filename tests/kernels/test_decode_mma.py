"""kernels/decode_mma.py: the decode linears on the matrix units with bf16-pair dequantization.

Runs under TRITON_INTERPRET=1 on CPU tensors (``make kernels-interpret``: the float path) and
on a GPU (the inline-assembly path); the plain CPU unit run skips it. One-hot activations make
each output one dequantized weight, (q - z) * s: those must match the reference bit for bit,
which pins every nibble and byte to its column.
"""

import pytest
import torch
from aoq.kernels import decode_mma as dm
from aoq.kernels import weight_only as wo
from aoq.kernels._common import INTERPRET, WeightFormat

from aoq.formats import affine
from aoq.formats.packing import pack_uint4, pack_zero_words, unpack_uint4
from aoq.testing.metrics import max_rel_error

GPU = torch.cuda.is_available() and not INTERPRET
pytestmark = pytest.mark.skipif(
    not (INTERPRET or GPU), reason="needs TRITON_INTERPRET=1 before import, or a GPU"
)
DEV = "cuda" if GPU else "cpu"
OUT = torch.bfloat16 if GPU else torch.float32  # the interpreter's kernels store float32


def _int4(n: int, k: int, gs: int) -> tuple[torch.Tensor, ...]:
    q, s, z = affine.quantize_uint4_asymmetric(torch.randn(n, k, device=DEV), gs)
    return pack_uint4(q), s, z


def _run(x, q, s, z, bias, groups, wfmt, split=None) -> torch.Tensor:
    out = x.dtype if GPU and x.dtype == torch.float16 else OUT
    y = torch.empty(x.shape[0], q.shape[0], dtype=out, device=DEV)
    assert dm.serves(x, q, groups, wfmt)
    dm.decode_mma(x, q, s, z, bias, y, groups, wfmt, split)
    return y


@pytest.mark.parametrize("xdt", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("gs", [32, 64, 128, 256])
def test_int4_one_hot_is_each_weight_exactly(gs, xdt):
    """Row r of x is e_k for 16 columns k at a time: y[r, n] = (q[n, k] - z) * s exactly
    (an exact product in the MMA, then one float32 multiply, as the reference does), with
    bf16 activations and fp16 ones (on a GPU each its own PTX: bf16 128.0 or fp16 1024.0
    as the nibbles' base)."""
    n, k = 72, 2 * gs
    q, s, z = _int4(n, k, gs)
    q[0] = (torch.arange(k // 2) * 37 % 256).to(torch.uint8).to(DEV)  # every nibble, both places
    z[0, 0] = 15
    want = affine.dequantize_uint4_asymmetric(unpack_uint4(q), s, z).float()
    for k0 in range(0, k, 16):
        x = torch.zeros(16, k, dtype=xdt, device=DEV)
        x[torch.arange(16), k0 + torch.arange(16)] = 1.0
        got = _run(x, q, s, z, None, k // gs, WeightFormat.UINT4)
        assert torch.equal(got.float().T, want[:, k0 : k0 + 16].to(got.dtype).float()), k0


@pytest.mark.parametrize("xdt", [torch.bfloat16, torch.float16], ids=str)
def test_int8_one_hot_is_each_weight_exactly(xdt):
    n, k = 40, 256
    q, s = affine.quantize_int8_symmetric(torch.randn(n, k, device=DEV) * 3, None)
    q[0] = torch.arange(-128, 128, dtype=torch.int8)  # every code
    want = q.float() * s.reshape(-1, 1)
    for k0 in range(0, k, 16):
        x = torch.zeros(16, k, dtype=xdt, device=DEV)
        x[torch.arange(16), k0 + torch.arange(16)] = 1.0
        got = _run(x, q, s.reshape(-1), s, None, 1, WeightFormat.INT8)
        assert torch.equal(got.float().T, want[:, k0 : k0 + 16].to(got.dtype).float()), k0


@pytest.mark.parametrize("xdt", [torch.bfloat16, torch.float16], ids=str)
def test_fp8_one_hot_is_each_weight_exactly(xdt):
    """Every finite e4m3fn code (subnormals, both zeros, +-448) comes out as its value, with
    bf16 activations (the PTX conversion on a GPU) and fp16 ones (the float path)."""
    from aoq.formats import float8

    n, k = 40, 256
    q, s = float8.quantize_fp8(torch.randn(n, k, device=DEV) * 3, float8.Granularity.ROW)
    bits = torch.arange(256, dtype=torch.int32)
    bits = bits[(bits & 0x7F) != 0x7F].to(torch.uint8)  # all but the two NaN codes
    q.view(torch.uint8)[0, : bits.numel()] = bits.to(DEV)
    s = s.reshape(-1)
    want = q.float() * s.reshape(-1, 1)
    for k0 in range(0, k, 16):
        x = torch.zeros(16, k, dtype=xdt, device=DEV)
        x[torch.arange(16), k0 + torch.arange(16)] = 1.0
        got = _run(x, q, s, s, None, 1, WeightFormat.FP8)
        assert torch.equal(got.float().T, want[:, k0 : k0 + 16].to(got.dtype).float()), k0


@pytest.mark.parametrize("m", [1, 3, 16])
@pytest.mark.parametrize("split", [1, 2, 3])
@pytest.mark.parametrize("fmt", ["int4", "int8", "fp8", "int4-fp16", "int8-fp16", "fp8-fp16"])
def test_matches_reference(m, split, fmt):
    """Random activations, unaligned N, a bias, K split in ranges (kernels/splitk.py): the
    reference's value up to float32 summation order and bf16 rounding (and with fp16 x:
    X_DTYPES)."""
    n, k = 130, 1024
    fmt, _, xname = fmt.partition("-")
    xdt = torch.float16 if xname == "fp16" else torch.bfloat16
    x = torch.randn(m, k, device=DEV).to(xdt)
    bias = torch.randn(n, device=DEV).to(xdt)
    if fmt == "int4":
        q, s, z = _int4(n, k, 128)
        groups, wfmt, zero = k // 128, WeightFormat.UINT4, z
    elif fmt == "fp8":
        from aoq.formats import float8

        q, s = float8.quantize_fp8(torch.randn(n, k, device=DEV), float8.Granularity.ROW)
        s = s.reshape(-1)
        groups, wfmt, zero, z = 1, WeightFormat.FP8, s, None
    else:
        q, s = affine.quantize_int8_symmetric(torch.randn(n, k, device=DEV), None)
        groups, wfmt, zero, z = 1, WeightFormat.INT8, s, None
    want = wo.weight_only_mm(x.cpu(), q.cpu(), s.cpu(), None if z is None else z.cpu(),
                             bias.cpu(), 0).float()  # fmt: skip
    got = _run(x, q, s, zero, bias, groups, wfmt, split).float().cpu()
    # the reference rounds to bf16 (2^-9 relative) or fp16 (2^-12)
    assert max_rel_error(want, got) < (1e-3 if xdt == torch.float16 else 4e-3)


W4A8_TILES = [None, {"WT": True, "PREF": True, "num_warps": 2, "BLOCK_N": 64},
              {"WT": False, "PREF": True, "STEP_K": 64}]  # fmt: skip


@pytest.mark.parametrize("m", [1, 5])
@pytest.mark.parametrize("mode", ["dynamic", "static", "asym"])
@pytest.mark.parametrize("split", [1, 2])
@pytest.mark.parametrize("tile", W4A8_TILES)
def test_w4a8_group_sums_are_exact(m, mode, split, tile):
    """W4A8 (int8 activations, symmetric int4 weights in groups of 32): each group's float32
    sum is the exact integer of the reference's int32 accumulator (asymmetric activations:
    x - x_zero, up to 255 in magnitude, still exact in bf16), so the result is the
    reference's up to the order of the float epilogue, in either orientation, with the
    step's scales loaded ahead (4 or 2 groups a step) or not."""
    from aoq.kernels import act_quant as aq
    from aoq.kernels import int_act_mm as ia

    n, k = 72, 512
    q4, s4 = affine.quantize_int4_symmetric(torch.randn(n, k, device=DEV), 32)
    wq = pack_uint4(q4 + 8)
    x = torch.randn(m, k) + (2.0 if mode == "asym" else 0.0)
    xq, xs, xz = aq.quantize_int8_act(x, {"dynamic": 0, "asym": 1, "static": 2}[mode],
                                      torch.tensor(0.03))  # fmt: skip
    if mode == "asym":
        assert (xq.int() - xz[:, None]).abs().max() > 128  # beyond int8: the point of the test
        xz = xz.to(DEV)
    else:
        xz = None
    xq, xs = xq.to(DEV), xs.to(DEV)
    bias = torch.randn(n, device=DEV)
    want = ia.int_act_mm(xq.cpu(), xs.cpu(), None if xz is None else xz.cpu(), wq.cpu(),
                         s4.cpu(), bias.cpu(), None, torch.float32, 0)  # fmt: skip
    y = torch.empty(m, n, device=DEV)
    assert dm.serves(xq, wq, k // 32, WeightFormat.INT4_SYM)
    dm.decode_mma(xq, wq, s4, None, bias, y, k // 32, WeightFormat.INT4_SYM, split,
                  x_scale=xs, tile=tile, x_zero=xz)  # fmt: skip
    assert max_rel_error(want, y.cpu()) < 1e-6


@pytest.mark.parametrize("gs", [32, 256])
@pytest.mark.parametrize("tile", W4A8_TILES)
def test_w4a8_integer_mma_extreme_group_sums(gs, tile):
    """The integer MMA's sums, read back as float32 from their IMMA_BASE start, at their
    extremes: q = -8 against x = -128 over a whole group of 256 (16 S = 2**22, the float's
    next binade) and q = 7 against -128; one group per output, so y is the reference's
    (S * s) * xs bit for bit."""
    from aoq.kernels import int_act_mm as ia

    n, k, m = 72, gs, 4
    q4 = torch.full((n, k), -8, dtype=torch.int8)
    q4[1::2] = 7
    q4[2::4, ::3] = 3
    xq = torch.full((m, k), -128, dtype=torch.int8)
    xq[1] = 127
    xq[2, ::2] = 1
    s4 = torch.rand(n, 1) + 0.5
    xs = torch.rand(m) + 0.5
    wq = pack_uint4((q4 + 8).to(torch.uint8))
    want = ia.int_act_mm(xq, xs, None, wq, s4, None, None, torch.float32, 0)
    y = torch.empty(m, n, device=DEV)
    dm.decode_mma(xq.to(DEV), wq.to(DEV), s4.to(DEV), None, None, y, 1, WeightFormat.INT4_SYM,
                  1, x_scale=xs.to(DEV), tile=tile)  # fmt: skip
    assert torch.equal(want, y.cpu())


TILES = [None, {"WT": False, "PREF": False, "num_warps": 4}, {"WT": True, "PREF": False},
         {"WT": False, "PREF": True, "num_warps": 4},
         {"WT": True, "PREF": False, "LOOP_STAGES": 3}, {"CHAINS": 2}]  # fmt: skip


@pytest.mark.parametrize("gs", [32, 64, 128])
@pytest.mark.parametrize("tile", TILES)
@pytest.mark.parametrize("split", [None, 3])
def test_int4_layouts_and_orientations_agree(gs, tile, split):
    """Group-major scales and zero points (strides (1, N), the CUDA layout of
    aoq.tensors.int4), and group-major zero points as words of four groups (pack_zero_words),
    give the row-major result bit for bit, in either MMA orientation (WT: the weights as
    operand A), with the step's parameters loaded ahead (PREF: 4, 2 and 1 groups a step of
    128) or not, in a loop Triton pipelines whole (LOOP_STAGES), and a K range that ends
    mid-way through a step's prefetch (split 3). The orientations agree with each other up
    to float32 summation order."""
    n, k, m = 72, 768, 3
    q, s, z = _int4(n, k, gs)
    x = torch.randn(m, k, device=DEV).to(torch.bfloat16)
    sg, zg = s.t().contiguous().t(), z.t().contiguous().t()
    assert sg.stride() == (1, n) and dm.serves(x, q, k // gs, WeightFormat.UINT4, sg, zg)
    assert not dm.serves(x, q, k // gs, WeightFormat.UINT4, sg, z)  # strides must agree
    zw = pack_zero_words(z)
    assert dm.serves(x, q, k // gs, WeightFormat.UINT4, sg, zw)
    assert not dm.serves(x, q, k // gs, WeightFormat.UINT4, s, zw.contiguous())  # row-major
    ys = []
    for sc, zc in ((s, z), (sg, zg), (sg, zw)):
        ys.append(torch.empty(m, n, dtype=OUT, device=DEV))
        dm.decode_mma(x, q, sc, zc, None, ys[-1], k // gs, WeightFormat.UINT4, split, tile=tile)
    assert torch.equal(ys[0], ys[1]) and torch.equal(ys[0], ys[2])
    rule = _run(x, q, s, z, None, k // gs, WeightFormat.UINT4, split)
    assert max_rel_error(rule.float(), ys[1].float()) < 4e-3


@pytest.mark.parametrize("gs", [32, 64, 128])
@pytest.mark.parametrize("m", [1, 9, 24, 40])
@pytest.mark.parametrize("split", [None, 3])
def test_tiled_codes_are_the_row_major_codes(gs, m, split):
    """int4 codes in tile_uint4's order (64-row bands, 128-code tiles), with the zero points
    as pack_zero_words or bytes, give the row-major codes' result bit for bit (the rows the
    kernel reads are the same; only where they lie moved). serves refuses what does not
    tile, and groups wider than a tile."""
    from aoq.formats.packing import tile_uint4

    n, k = 192, 1024
    q, s, z = _int4(n, k, gs)
    x = torch.randn(m, k, device=DEV).to(torch.bfloat16)
    sg, zg, zw = s.t().contiguous().t(), z.t().contiguous().t(), pack_zero_words(z)
    tq = tile_uint4(q)
    want = torch.empty(m, n, dtype=OUT, device=DEV)
    dm.decode_mma(x, q, sg, zg, None, want, k // gs, WeightFormat.UINT4, split)
    for zc in (zw, zg):
        assert dm.serves(x, tq, k // gs, WeightFormat.UINT4, sg, zc, tiled=True)
        y = torch.empty(m, n, dtype=OUT, device=DEV)
        dm.decode_mma(x, tq, sg, zc, None, y, k // gs, WeightFormat.UINT4, split, tiled=True)
        assert torch.equal(y, want)
    assert not dm.serves(x, tq[:100], k // gs, WeightFormat.UINT4, sg[:100], zg[:100], True)
    q2, s2, z2 = _int4(n, k, 256)
    assert not dm.serves(x, tile_uint4(q2), k // 256, WeightFormat.UINT4, s2, z2, tiled=True)


@pytest.mark.parametrize("tile_b, tile_r", [(16, 64), (16, 16), (32, 64)])
@pytest.mark.parametrize("step", [32, 64])
def test_w4a8_group_tiles_are_the_row_major_codes(tile_b, tile_r, step):
    """W4A8 codes in other tiles (the probes' TILE_B x TILE_R, one group a tile at 16 bytes,
    Triton's pipeliner carrying the scales) give the row-major codes' bits: the kernel reads
    the same rows, only where they lie moved (bench/NOTES.md, session 27)."""
    from aoq.formats.packing import tile_uint4

    n, k, m = 128, 512, 16
    q4, s4 = affine.quantize_int4_symmetric(torch.randn(n, k), 32)
    wq = pack_uint4((q4 + 8).to(torch.uint8))
    xq = torch.randint(-128, 128, (m, k), dtype=torch.int8)
    xs, sg = torch.rand(m) + 0.5, s4.t().contiguous().t()
    want = torch.empty(m, n, device=DEV)
    dm.decode_mma(xq.to(DEV), wq.to(DEV), sg.to(DEV), None, None, want, k // 32,
                  WeightFormat.INT4_SYM, 2, x_scale=xs.to(DEV))  # fmt: skip
    tile = {"TILE_B": tile_b, "TILE_R": tile_r, "STEP_K": step, "PREF": False,
            "LOOP_STAGES": 5}  # fmt: skip
    y = torch.empty(m, n, device=DEV)
    dm.decode_mma(xq.to(DEV), tile_uint4(wq, tile_b, tile_r).to(DEV), sg.to(DEV), None, None,
                  y, k // 32, WeightFormat.INT4_SYM, 2, x_scale=xs.to(DEV), tile=tile,
                  tiled=True)  # fmt: skip
    assert torch.equal(y, want)


@pytest.mark.parametrize("wfmt", [WeightFormat.INT8, WeightFormat.FP8])
@pytest.mark.parametrize("tile_b, tile_r, step, bn", [(256, 32, 256, 32), (512, 64, 128, 64)])
def test_byte_codes_in_tiles_are_the_row_major_codes(wfmt, tile_b, tile_r, step, bn):
    """int8 / e4m3 codes in tile_uint4's tiles (a probe: each K step inside one tile, a step
    of a program's rows one run when the tile is the step) give the row-major codes' bits:
    the same bytes read from where they moved, summed in the same order."""
    from aoq.formats.packing import tile_uint4

    n, k, m = 128, 1024, 3
    if wfmt is WeightFormat.INT8:
        q = torch.randint(-128, 128, (n, k), dtype=torch.int8, device=DEV)
    else:
        q = (torch.randn(n, k, device=DEV) * 4).to(torch.float8_e4m3fn)
    s = torch.rand(n, 1, device=DEV) + 0.5
    x = torch.randn(m, k, device=DEV).to(torch.bfloat16)
    tile = {"BLOCK_N": bn, "STEP_K": step}
    want = torch.empty(m, n, dtype=OUT, device=DEV)
    dm.decode_mma(x, q, s, None, None, want, 1, wfmt, 2, tile=tile)
    tq = tile_uint4(q.view(torch.uint8), tile_b, tile_r).view(q.dtype)
    y = torch.empty(m, n, dtype=OUT, device=DEV)
    dm.decode_mma(x, tq, s, None, None, y, 1, wfmt, 2, tile={**tile, "TILE_B": tile_b,
                  "TILE_R": tile_r}, tiled=True)  # fmt: skip
    assert torch.equal(y, want)


@pytest.mark.parametrize("wfmt", [WeightFormat.UINT4, WeightFormat.INT8])
@pytest.mark.parametrize("split", [2, 3])
def test_interleaved_splits_cover_every_step_once(wfmt, split):
    """KINT (split s takes steps s, s + S, ...), int4's default and an override for the
    per-channel formats: every K step summed once, so the result is the contiguous splits'
    up to float32 summation order."""
    n, k, m = 64, 1024, 3
    if wfmt is WeightFormat.UINT4:
        q, s, z = _int4(n, k, 128)
        groups = k // 128
    else:
        q, s, z = torch.randint(-128, 128, (n, k), dtype=torch.int8, device=DEV), None, None
        s, groups = torch.rand(n, 1, device=DEV) + 0.5, 1
    x = torch.randn(m, k, device=DEV).to(torch.bfloat16)
    ys = []
    for kint in (False, True):
        ys.append(torch.empty(m, n, dtype=OUT, device=DEV))
        dm.decode_mma(x, q, s, z, None, ys[-1], groups, wfmt, split, tile={"KINT": kint})
    assert max_rel_error(ys[0].float(), ys[1].float()) < 4e-3


def test_wgmma_orientation_is_refused():
    """WT with 4 warps (Triton's wgmma path) summed wrong on an H200: the launcher refuses."""
    q, s, z = _int4(64, 256, 128)
    x = torch.randn(1, 256, device=DEV).to(torch.bfloat16)
    y = torch.empty(1, 64, dtype=OUT, device=DEV)
    with pytest.raises(ValueError, match="fewer than 4 warps"):
        dm.decode_mma(x, q, s, z, None, y, 2, WeightFormat.UINT4, None,
                      tile={"WT": True, "num_warps": 4})  # fmt: skip


def test_serves_only_what_it_computes():
    x = torch.zeros(1, 256, dtype=torch.bfloat16, device=DEV)
    q, _, _ = _int4(8, 256, 128)
    assert dm.serves(x, q, 2, WeightFormat.UINT4)
    assert not dm.serves(x.float(), q, 2, WeightFormat.UINT4)  # no float32 activations
    x17, x129, x257 = (torch.zeros(m, 256, dtype=torch.bfloat16, device=DEV)
                       for m in (17, 129, 257))  # fmt: skip
    # past 16 rows: int4 / int8 / e4m3 weight-only and W4A8 only, to 128 rows (int4), 256
    # (int8, e4m3) or 64 (W4A8) where timed (sm90, and the interpreter that tests them:
    # decode_mma_tiles.max_rows)
    wide = dm.max_rows(WeightFormat.UINT4, x.device) == 128
    assert dm.max_rows(WeightFormat.INT8, x.device) == (256 if wide else 16)
    assert dm.serves(x17, q, 2, WeightFormat.UINT4) == wide
    assert not dm.serves(x129, q, 2, WeightFormat.UINT4)
    q8w = torch.zeros(8, 256, dtype=torch.int8, device=DEV)
    assert dm.serves(x129, q8w, 1, WeightFormat.INT8) == wide
    assert not dm.serves(x257, q8w, 1, WeightFormat.INT8)
    x65 = torch.zeros(65, 256, dtype=torch.int8, device=DEV)
    assert dm.serves(x17.to(torch.int8), q, 2, WeightFormat.INT4_SYM) == wide  # W4A8: 64 rows
    assert not dm.serves(x65, q, 2, WeightFormat.INT4_SYM)
    assert not dm.serves(x, q, 16, WeightFormat.UINT4)  # groups of 16
    q8 = torch.zeros(8, 256, dtype=torch.int8, device=DEV)
    assert not dm.serves(x, q8, 2, WeightFormat.INT8)  # groupwise int8
    f8 = torch.zeros(8, 256, device=DEV).to(torch.float8_e4m3fn)
    assert dm.serves(x, f8, 1, WeightFormat.FP8)
    assert not dm.serves(x, f8.to(torch.float8_e5m2), 1, WeightFormat.FP8)  # e4m3fn only
    q8c = torch.zeros(8, 256, dtype=torch.int8, device=DEV)
    for fmt, w in ((WeightFormat.FP8, f8), (WeightFormat.INT8, q8c)):  # fp16 x: per channel
        assert dm.serves(x.half(), w, 1, fmt)
    assert dm.serves(x.half(), q, 2, WeightFormat.UINT4)  # and int4 (its fp16 PTX)
    assert not dm.serves(x.half(), q, 2, WeightFormat.INT4_SYM)  # W4A8 takes int8 codes
    _, s, z = _int4(8, 256, 128)  # K of two groups: one column of zero-point words,
    sg, zw = s.t().contiguous().t(), pack_zero_words(z)  # whose stride there is anything
    assert zw.shape[1] == 1 and dm.serves(x, q, 2, WeightFormat.UINT4, sg, zw)


def _eight_row_case(fmt: str, m: int) -> tuple[tuple, dict]:
    """decode_mma's arguments for ``fmt`` at M = m, with unaligned N and a bias."""
    n, k = 130, 1024
    g = torch.Generator().manual_seed(m)
    x = torch.randn(m, k, generator=g).to(torch.bfloat16).to(DEV)
    bias = torch.randn(n, generator=g).to(torch.bfloat16).to(DEV)
    w = torch.randn(n, k, generator=g).to(DEV)
    if fmt == "int4":
        q, s, z = _int4(n, k, 128)
        sg, zg = s.t().contiguous().t(), z.t().contiguous().t()
        return (x, q, sg, zg, bias, k // 128, WeightFormat.UINT4), {}
    if fmt == "int8":
        q, s = affine.quantize_int8_symmetric(w, None)
        return (x, q, s, None, bias, 1, WeightFormat.INT8), {}
    if fmt == "fp8":
        from aoq.formats import float8

        q, s = float8.quantize_fp8(w, float8.Granularity.ROW)
        return (x, q, s.reshape(-1), None, bias, 1, WeightFormat.FP8), {}
    from aoq.kernels import act_quant as aq

    q4, s4 = affine.quantize_int4_symmetric(w, 32)
    mode = {"w4a8": 0, "w4a8-asym": 1}[fmt]
    xq, xs, xz = aq.quantize_int8_act(x.float().cpu() + mode, mode, None)
    extra = {"x_scale": xs.to(DEV), "x_zero": xz.to(DEV) if mode else None}
    return (xq.to(DEV), pack_uint4(q4 + 8), s4.t().contiguous().t(), None, bias.float(),
            k // 32, WeightFormat.INT4_SYM), extra  # fmt: skip


@pytest.mark.parametrize("m", [1, 5, 8])
@pytest.mark.parametrize("split", [1, 3])
@pytest.mark.parametrize("fmt", ["int4", "int8", "fp8", "w4a8", "w4a8-asym"])
def test_eight_rows_are_sixteen_rows_bit_for_bit(m, split, fmt):
    """x padded to 8 rows (tile ROWS 8, M <= 8: NVIDIA's m16n8k16 with n = 8, half the
    MMAs and x's registers of the 16-row tile) gives the 16-row tile's output bit for bit:
    each output's products and their summation order do not depend on the padding (on a
    GPU; the interpreter's float32 dot is numpy's, whose summation order follows the shape:
    there the two agree to float32 rounding, exactly for W4A8's integer sums)."""
    args, extra = _eight_row_case(fmt, m)
    ys = []
    for rows in (16, 8):
        out = torch.float32 if fmt.startswith("w4a8") else OUT
        ys.append(torch.empty(m, args[1].shape[0], dtype=out, device=DEV))
        dm.decode_mma(*args[:5], ys[-1], *args[5:], split, tile={"ROWS": rows}, **extra)
    if GPU or fmt.startswith("w4a8"):
        assert torch.equal(ys[0], ys[1])
    else:
        assert max_rel_error(ys[0], ys[1]) < 1e-6


def test_rows_must_hold_x():
    args, _ = _eight_row_case("int8", 9)
    y = torch.empty(9, args[1].shape[0], dtype=OUT, device=DEV)
    with pytest.raises(ValueError, match="ROWS=8"):
        dm.decode_mma(*args[:5], y, *args[5:], None, tile={"ROWS": 8})
    with pytest.raises(ValueError, match="ROWS=24"):
        dm.decode_mma(*args[:5], y, *args[5:], None, tile={"ROWS": 24})
    args, _ = _eight_row_case("int8", 65)
    y = torch.empty(65, args[1].shape[0], dtype=OUT, device=DEV)
    with pytest.raises(ValueError, match="ROWS=64"):
        dm.decode_mma(*args[:5], y, *args[5:], None, tile={"ROWS": 64})


@pytest.mark.parametrize("m", [17, 32, 40, 64, 100, 200])
@pytest.mark.parametrize("split", [1, 3])
@pytest.mark.parametrize("fmt", ["int4", "int8", "fp8", "w4a8", "w4a8-asym"])
def test_rows_past_sixteen_are_sixteen_row_launches(m, split, fmt):
    """17-256 rows take ROWS_TILE's tile (x padded to 32, 64, 128 or 256, wider column tiles;
    past 32 rows with x as the MMA's A operand): each 16-row slice of the output is what a
    16-row launch of that slice gives, up to float32 summation order (other tiles, the same
    K ranges)."""
    wfmt = {"int4": WeightFormat.UINT4, "int8": WeightFormat.INT8, "fp8": WeightFormat.FP8}
    wfmt = wfmt.get(fmt, WeightFormat.INT4_SYM)
    if m > dm.max_rows(wfmt, torch.device(DEV)):
        pytest.skip(f"{fmt}: this device takes at most {dm.max_rows(wfmt, torch.device(DEV))} "
                    "rows (decode_mma_tiles.max_rows)")  # fmt: skip
    args, extra = _eight_row_case(fmt, m)
    out = torch.float32 if fmt.startswith("w4a8") else OUT
    y = torch.empty(m, args[1].shape[0], dtype=out, device=DEV)
    assert dm.serves(args[0], args[1], args[5], args[6], args[2], args[3])
    dm.decode_mma(*args[:5], y, *args[5:], split, **extra)
    for lo in range(0, m, 16):
        xs = args[0][lo : lo + 16].contiguous()
        want = torch.empty(xs.shape[0], args[1].shape[0], dtype=out, device=DEV)
        sub = {k: v[lo : lo + 16] if v is not None else None for k, v in extra.items()}
        dm.decode_mma(xs, *args[1:5], want, *args[5:], split, **sub)
        assert max_rel_error(want.float(), y[lo : lo + 16].float()) < 4e-3, lo


@pytest.mark.parametrize("m", [1, 16])
@pytest.mark.parametrize("split", [1, 3])
@pytest.mark.parametrize("fmt", ["int4", "w4a8", "w4a8-asym"])
def test_aligned_group_codes_are_the_same_bits(m, split, fmt):
    """The ALIGNED probe (each group's codes hinted as one aligned run, so sm90 loads them 16
    bytes at a time) reads the same bytes: the same output bit for bit."""
    args, extra = _eight_row_case(fmt, m)
    ys = []
    for tile in ({}, {"ALIGNED": True}):
        out = torch.float32 if fmt.startswith("w4a8") else OUT
        ys.append(torch.empty(m, args[1].shape[0], dtype=out, device=DEV))
        dm.decode_mma(*args[:5], ys[-1], *args[5:], split, tile=tile, **extra)
    assert torch.equal(ys[0], ys[1])


def test_weight_only_decode_takes_past_sixteen_rows_where_decode_mma_does(monkeypatch):
    """The weight-only launcher's decode strategy at 17-256 rows runs decode_mma where it
    serves them, else the prefill kernel; the dispatch's decode check names why it refuses
    (float32 x)."""
    from torch import nn

    import aoq
    from aoq.tensors import triton_linear as tlin

    n, k = 96, 512
    q, s = affine.quantize_int8_symmetric(torch.randn(n, k, device=DEV), None)
    ran = []
    real = dm.decode_mma
    monkeypatch.setattr(dm, "decode_mma", lambda *a, **kw: ran.append(a[0].shape) or real(*a, **kw))
    want = wo.weight_only_mm(torch.randn(1, k), q.cpu(), s.cpu(), None, None, 0)  # (warm)
    for x in (torch.randn(m, k, device=DEV) for m in (32, 64, 256)):
        x = x.to(torch.bfloat16)
        want = wo.weight_only_mm(x.cpu(), q.cpu(), s.cpu(), None, None, 0).float()
        got = wo.weight_only_mm_triton(x, q, s, None, None, 0).float().cpu()
        assert max_rel_error(want, got) < 4e-3
    wide = dm.max_rows(WeightFormat.INT8, torch.device(DEV)) == 256
    assert ran == ([(32, k), (64, k), (256, k)] if wide else [])
    lin = aoq.quantize_(nn.Linear(k, n, device=DEV), aoq.Int8WeightOnlyConfig())
    xb = torch.randn(32, k, device=DEV, dtype=torch.bfloat16)
    assert (tlin._wo_decode_check(xb, lin.weight, None) is None) == wide
    why = tlin._wo_decode_check(xb.float(), lin.weight, None)
    assert why is not None and "32 rows of torch.float32" in why


def test_w4a8_decode_check_past_sixteen_rows():
    """The dispatch's W4A8 decode check: past 16 rows only where decode_mma takes them (its
    max_rows: 64 on sm90 and the interpreter), and it says why it refuses."""
    from torch import nn

    import aoq
    from aoq.tensors import triton_linear as tlin

    lin = aoq.quantize_(nn.Linear(256, 64, device=DEV), aoq.Int8DynamicActivationInt4WeightConfig())
    most = dm.max_rows(WeightFormat.INT4_SYM, torch.device(DEV))
    for m in (16, 32, 64, 65):
        x = torch.randn(m, 256, device=DEV, dtype=torch.bfloat16)
        why = tlin._int_act_decode_check(x, lin.weight, None)
        assert (why is None) == (m <= max(16, most)), (m, why)
        if why is not None:
            assert f"{m} rows" in why and f"takes {most}" in why


def test_w4a8_int32_bias_past_sixteen_rows_takes_the_prefill_tiles():
    """A static W4A8 linear's int32 bias, which decode_mma leaves, past 16 rows: the decode
    entry passes its check and runs the prefill entry's tiles (int_act_mm), the same bits."""
    from torch import nn

    import aoq
    from aoq import dispatch
    from aoq.tensors import Int32Bias

    cfg = aoq.Int8DynamicActivationInt4WeightConfig(act_scale=0.05)
    lin = aoq.quantize_(nn.Linear(256, 64, device=DEV), cfg)
    assert isinstance(lin.bias, Int32Bias)
    x = torch.randn(32, 256, device=DEV, dtype=torch.bfloat16)
    decode, prefill = (dispatch._IMPLS[f"triton.w4a8.{s}"] for s in ("decode", "prefill"))
    if dm.max_rows(WeightFormat.INT4_SYM, x.device) < 32:
        assert "32 rows" in decode.check(x, lin.weight, lin.bias)
        return
    assert decode.check(x, lin.weight, lin.bias) is None
    y = decode.fn(x, lin.weight, lin.bias)
    assert torch.equal(y, prefill.fn(x, lin.weight, lin.bias))
