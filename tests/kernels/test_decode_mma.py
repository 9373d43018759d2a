"""kernels/decode_mma.py: the decode linears on the matrix units with bf16-pair dequantization.

Runs under TRITON_INTERPRET=1 on CPU tensors (``make kernels-interpret``: the float path) and
on a GPU (the inline-assembly path); the plain CPU unit run skips it. One-hot activations make
each output one dequantized weight, (q - z) * s: those must match the reference bit for bit,
which pins every nibble and byte to its column.
"""

import pytest
import torch
from _pairwise import pairwise
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


# every format x activation dtype with every split (one K range, two, three) and every row
# count (1 and 3 padded to ROWS 8, the 16-row tile), each pair once: 18 of 54 cases
@pytest.mark.parametrize(
    "fmt,split,m",
    pairwise(["int4", "int8", "fp8", "int4-fp16", "int8-fp16", "fp8-fp16"], [1, 2, 3], [1, 3, 16]),
)
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
              {"WT": False, "PREF": True, "STEP_K": 64}, {"IMMA": False}]  # fmt: skip
W4A8_TILE_IDS = dict(zip(("default", "wt-pref", "step64", "bf16"), W4A8_TILES, strict=True))


# every activation mode on every tile (the orientations, 4 or 2 groups a step loaded ahead,
# the bf16 MMA) and each with both splits and with 1 row and 5, each pair once: 12 of 48 cases
@pytest.mark.parametrize(
    "mode,tile,split,m", pairwise(["dynamic", "static", "asym"], W4A8_TILE_IDS, [1, 2], [1, 5])
)
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


@pytest.mark.parametrize("asym", [False, True], ids=["sym", "asym"])
@pytest.mark.parametrize("gs", [32, 256])
@pytest.mark.parametrize("tile", W4A8_TILES)
def test_w4a8_integer_mma_extreme_group_sums(gs, tile, asym):
    """The integer MMA's sums, read back as float32 from their IMMA_BASE start, at their
    extremes: q = -8 against x = -128 over a whole group of 256 (16 S = 2**22, the float's
    next binade) and q = 7 against -128; one group per output, so y is the reference's
    (S * s) * xs bit for bit. With zero points at their extremes (x - z = -255 and 255:
    the second dot, against z, at the same extremes) as well."""
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
    xz = torch.tensor([127, -128, -128, 0], dtype=torch.int32) if asym else None
    want = ia.int_act_mm(xq, xs, xz, wq, s4, None, None, torch.float32, 0)
    y = torch.empty(m, n, device=DEV)
    dm.decode_mma(xq.to(DEV), wq.to(DEV), s4.to(DEV), None, None, y, 1, WeightFormat.INT4_SYM,
                  1, x_scale=xs.to(DEV), tile=tile,
                  x_zero=None if xz is None else xz.to(DEV))  # fmt: skip
    assert torch.equal(want, y.cpu())


TILES = [None, {"WT": False, "PREF": False, "num_warps": 4}, {"WT": True, "PREF": False},
         {"WT": False, "PREF": True, "num_warps": 4},
         {"WT": True, "PREF": False, "LOOP_STAGES": 3}, {"CHAINS": 2}]  # fmt: skip
TILE_IDS = {f"tile{i}": t for i, t in enumerate(TILES)}


# every tile (orientation, PREF, LOOP_STAGES, CHAINS) with every group size (PREF's 4, 2 and
# 1 groups a step), and each of those with K split three ways and not: 18 of 36 cases
@pytest.mark.parametrize("tile,gs,split", pairwise(TILE_IDS, [32, 64, 128], [None, 3]))
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


# every group size (4, 2, 1 groups a 128-code tile) at every row padding (8, 16, ROWS_TILE's
# 32, and 64 with x as operand A), and each of those split and not: 12 of 24 cases
@pytest.mark.parametrize("gs,m,split", pairwise([32, 64, 128], [1, 9, 24, 40], [None, 3]))
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
