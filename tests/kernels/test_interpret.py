"""The Triton kernels under TRITON_INTERPRET=1 on CPU tensors, against aoq.formats.

Runs only in a session that set TRITON_INTERPRET=1 before importing aoq (``make
test-kernels`` does; the plain unit run skips this file). Integer paths are bit-exact
(activation codes, scales and zero points; W8A8 outputs, whose float epilogue repeats the
reference's operations in order); float paths keep the 2x-plain-torch rule of the matrix.
"""

import pytest
import torch
from _act_cases import fp8_case, int_act_case
from aoq.kernels import act_quant as aq
from aoq.kernels import int_act_mm as ia
from aoq.kernels import splitk
from aoq.kernels import weight_dequant as dq
from aoq.kernels import weight_only as wo
from aoq.kernels._common import INTERPRET

import aoq
from aoq.formats import affine
from aoq.formats.packing import pack_uint4
from aoq.testing.cases import inference_configs
from aoq.testing.metrics import bit_equal, max_rel_error
from aoq.testing.oracle import float64_linear, float_torch_error


def config_ids(configs):
    return [c.id for c in configs]


pytestmark = pytest.mark.skipif(not INTERPRET, reason="needs TRITON_INTERPRET=1 before import")

SCHEMES = {
    "int8_weight_only",
    "int8_int8",
    "int4_weight_only",
    "int8_int4",
    "fp8_weight_only",
    "fp8_fp8",
}
CONFIGS = [
    c
    for c in inference_configs()
    if aoq.quantize_(torch.nn.Linear(256, 32), c).weight.scheme.value in SCHEMES
]
DTYPES = [torch.bfloat16, torch.float16, torch.float32]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(
    "shape",
    [(1, 64), (37, 200), (3, 9000), (20, 9000), (20, 17000), (1100, 24), (0, 64)],
    ids=str,
)
def test_act_quant_bit_exact(dtype, shape):
    x = torch.randn(shape, dtype=dtype) * 3
    if x.numel():
        x[0, :5] = torch.tensor([0.0, 1.5, -2.5, 1e-30, 65.0]).to(dtype)  # ties, tiny, outlier
    for mode, scale in ((0, None), (1, None), (2, torch.tensor(0.035))):
        got = aq.quantize_int8_act_triton(x, mode, scale)
        want = aq.quantize_int8_act(x, mode, scale)
        assert all(bit_equal(g, w) for g, w in zip(got, want, strict=True)), mode
    for per_row in (True, False):
        got = aq.quantize_fp8_act_triton(x, per_row, torch.float8_e4m3fn)
        want = aq.quantize_fp8_act(x, per_row, torch.float8_e4m3fn)
        assert all(bit_equal(g, w) for g, w in zip(got, want, strict=True)), per_row


@pytest.mark.parametrize("m", [1, 5, 40])
@pytest.mark.parametrize("mode", [0, 1, 2], ids=["sym", "asym", "static"])
def test_int_act_mm_bit_exact(m, mode):
    xq, xs, zero, bias, bias_int, weights = int_act_case(m, 256, 96, mode)
    for wq, ws in weights:
        for strategy in (0, 1):
            got = ia.int_act_mm_triton(
                xq, xs, zero, wq, ws, bias, bias_int, torch.float32, strategy
            )
            want = ia.int_act_mm(xq, xs, zero, wq, ws, bias, bias_int, torch.float32, strategy)
            if wq.dtype == torch.int8:  # one accumulator: the same float ops in the same order
                assert bit_equal(got, want)
            else:  # groups summed in another order: float32 rounding only
                assert max_rel_error(want, got) < 1e-6


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
@pytest.mark.parametrize("group,k", [(32, 256), (64, 256), (256, 256), (32, 160), (64, 192)])
def test_dequantize_weight_exact(dtype, group, k):
    """Tiles 128 codes wide: several whole groups below 128 (W4A8's 32: a block of scales
    and zero points a tile), one group's part past it; K not a multiple of the tile (the
    last tile's groups beyond K masked)."""
    w = torch.randn(40, k)
    q, s, z = affine.quantize_uint4_asymmetric(w, group)
    got = dq.dequantize_weight_triton(pack_uint4(q), s, z, k, dtype)
    assert bit_equal(got, dq.dequantize_weight(pack_uint4(q), s, z, k, dtype))


@pytest.mark.parametrize("group", [32, 128])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
def test_tiled_int4_is_the_row_major_weight(group, dtype):
    """int4 codes in tile_uint4's order give the row-major codes' bits through every
    weight-only path: the dequantize kernel, the prefill tile kernel, and the decode kernels
    (decode_mma for bf16 x, the FMA GEMV for float32 x, which the word GEMV leaves to it:
    at M = 1 that sums in another order than the word GEMV of row-major codes)."""
    from aoq.formats.packing import tile_uint4

    w = torch.randn(128, 256)
    q, s, z = affine.quantize_uint4_asymmetric(w, group)
    plain, tiled = pack_uint4(q), tile_uint4(pack_uint4(q))
    want = dq.dequantize_weight_triton(plain, s, z, 256, dtype)
    assert bit_equal(dq.dequantize_weight_triton(tiled, s, z, 256, dtype, True), want)
    assert bit_equal(dq.dequantize_weight(tiled, s, z, 256, dtype, True), want)
    bias = torch.randn(128)
    for m, strategy in ((1, 0), (3, 0), (40, 1)):
        x = torch.randn(m, 256).to(dtype)
        want = wo.weight_only_mm_triton(x, plain, s, z, bias, strategy)
        got = wo.weight_only_mm_triton(x, tiled, s, z, bias, strategy, True)
        if m == 1 and dtype == torch.float32:  # the word GEMV's sum order against the FMA's
            assert max_rel_error(want, got) < 1e-6
        else:
            assert bit_equal(got, want), (m, strategy)
    assert bit_equal(wo.weight_only_mm(x, tiled, s, z, bias, 1, True),
                     wo.weight_only_mm(x, plain, s, z, bias, 1))  # fmt: skip
    with pytest.raises(ValueError, match="do not tile"):
        wo.weight_only_mm_triton(x, plain[:100], s[:100], z[:100], None, 1, True)


@pytest.mark.parametrize("config", CONFIGS, ids=config_ids(CONFIGS))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("m", [1, 7, 33])
def test_linear_through_dispatch(config, dtype, m):
    """Every inference config on the interpret backend: the Triton kernel of its M band runs
    (no fallback) and the output keeps the 2x-plain-torch rule against the float64 oracle."""
    lin = aoq.quantize_(torch.nn.Linear(256, 48).to(dtype), config)
    x = torch.randn(m, 256, dtype=dtype)
    with aoq.strict(), aoq.trace_kernels() as trace:
        y = lin(x)
    rec = trace.records[0]
    assert rec.backend == "interpret" and rec.kernel.startswith("triton.")
    assert rec.kernel.endswith(".decode" if m <= 16 else ".prefill")
    budget = max(2 * float_torch_error(x, lin.weight, lin.bias), 1e-6)
    assert max_rel_error(float64_linear(x, lin.weight, lin.bias), y) <= budget


def test_unaligned_and_empty():
    lin = aoq.quantize_(torch.nn.Linear(200, 40), aoq.Int8WeightOnlyConfig())
    x = torch.randn(3, 200)
    budget = max(2 * float_torch_error(x, lin.weight, lin.bias), 1e-6)
    assert max_rel_error(float64_linear(x, lin.weight, lin.bias), lin(x)) <= budget
    assert lin(torch.randn(0, 200)).shape == (0, 40)


@pytest.mark.parametrize("m", [1, 5])
@pytest.mark.parametrize("split", [1, 2, 3])
def test_weight_only_decode_split_k(m, split):
    """The decode kernel's K ranges and their in-order reduction (kernels/splitk.py), every
    weight format; int4 both with one group per K tile and with groups smaller than it."""
    w = torch.randn(72, 768)
    x = torch.randn(m, 768)
    bias = torch.randn(72)
    q8, s8 = affine.quantize_int8_symmetric(w, None)
    cases = [(q8, s8, None)]
    for gs in (128, 32):
        q, s, z = affine.quantize_uint4_asymmetric(w, gs)
        cases.append((pack_uint4(q), s, z))
    for q, s, z in cases:
        want = wo.weight_only_mm(x, q, s, z, bias, 0)
        got = wo.weight_only_mm_triton(x, q, s, z, bias, 0, split=split)
        assert max_rel_error(want, got) < 1e-6


@pytest.mark.parametrize("m", [1, 5])
@pytest.mark.parametrize("mode", [0, 1, 2], ids=["sym", "asym", "static"])
@pytest.mark.parametrize("split", [1, 2, 3])
def test_int_act_decode_split_k(m, mode, split):
    """W8A8 and W4A8 decode with K split (W4A8 at M=1 is the float GEMV whose group sums are
    exact integers): W8A8's int32 partials sum exactly, so its output stays bit-exact."""
    xq, xs, zero, bias, bias_int, weights = int_act_case(m, 1024, 80, mode)
    for wq, ws in weights:
        want = ia.int_act_mm(xq, xs, zero, wq, ws, bias, bias_int, torch.float32, 0)
        got = ia.int_act_mm_triton(
            xq, xs, zero, wq, ws, bias, bias_int, torch.float32, 0, split=split
        )
        if wq.dtype == torch.int8:
            assert bit_equal(got, want)
        else:
            assert max_rel_error(want, got) < 1e-6


@pytest.mark.parametrize("per_row", [True, False], ids=["row", "tensor"])
@pytest.mark.parametrize("m", [1, 5, 40])
def test_fp8_mm_decode_split_k(per_row, m):
    """fp8 x fp8 with K split across programs at decode (M <= 16; 40 rows are prefill):
    float32 partials summed in order, then both scales and the bias: the reference's value
    up to float32 summation order."""
    from aoq.kernels import fp8_mm

    xq, xs, wq, ws, bias = fp8_case(m, 1024, 72, per_row)
    want = fp8_mm.fp8_mm(xq, xs, wq, ws, bias, torch.float32, 0)
    for split in (1, 3):
        got = fp8_mm.fp8_mm_triton(xq, xs, wq, ws, bias, torch.float32, 0, split)
        assert max_rel_error(want, got) < 1e-6, split


def test_act_quant_tiles():
    """Decode rows (few) are read once up to 65536 features, 64 values a thread; many rows
    up to 16384 (two passes beyond: (20, 17000) above)."""
    assert aq._blocks(1, 14336) == (1, 16384, 8)
    assert aq._blocks(4096, 14336) == (1, 16384, 8)  # many rows: one read up to 16384
    assert aq._blocks(4096, 8192) == (1, 8192, 4)
    assert aq._blocks(4096, 20000)[1] == 16384  # two passes
    assert aq._blocks(16, 65536) == (1, 65536, 32)
    assert aq._blocks(1, 70000)[1] == 65536  # two passes
    assert aq._blocks(17, 14336) == (1, 16384, 8)
    assert aq._blocks(1, 4096) == (1, 4096, 4)


@pytest.mark.parametrize("mode", [0, 1, 2], ids=["sym", "asym", "static"])
def test_w4a8_small_m_routes_to_the_matrix_units(monkeypatch, mode):
    """GEMV_ROWS < M <= 16, activations without an int32 bias (symmetric or with zero points)
    go to the row-major integer-MMA decode (kernels/w4a8_mma.py), with row-major or
    group-major scales; the static-bias form stays on the int8 MMA kernel. All match the
    reference."""
    from aoq.kernels import decode_mma as dm

    calls = []
    real, real_r = dm.decode_mma, ia.w4a8_mma
    monkeypatch.setattr(dm, "decode_mma", lambda *a, **k: calls.append("mma") or real(*a, **k))
    monkeypatch.setattr(ia, "w4a8_mma", lambda *a, **k: calls.append("rows") or real_r(*a, **k))
    w, x = torch.randn(80, 1024), torch.randn(5, 1024)
    xq, xs, xz = aq.quantize_int8_act(x, mode, torch.tensor(0.035))
    zero = xz if mode == 1 else None
    bias_int = torch.randint(-999, 999, (80,), dtype=torch.int32) if mode == 2 else None
    q4, s4 = affine.quantize_int4_symmetric(w, 32)
    wq = pack_uint4(q4 + 8)
    bias = None if mode == 2 else torch.randn(80)
    want = ia.int_act_mm(xq, xs, zero, wq, s4, bias, bias_int, torch.float32, 0)
    got = ia.int_act_mm_triton(xq, xs, zero, wq, s4, bias, bias_int, torch.float32, 0)
    assert calls == {0: ["rows"], 1: ["rows"], 2: []}[mode]
    assert max_rel_error(want, got) < 1e-6
    s_gm = s4.t().contiguous().t()  # aoq.tensors.int4's CUDA layout
    got = ia.int_act_mm_triton(xq, xs, zero, wq, s_gm, bias, bias_int, torch.float32, 0)
    assert max_rel_error(want, got) < 1e-6


@pytest.mark.parametrize("mode", [0, 1, 2], ids=["sym", "asym", "static"])
@pytest.mark.parametrize("step", [64, 128, 256])
def test_w4a8_gemv_steps_of_several_groups(monkeypatch, mode, step):
    """The M = 1 GEMV reads several groups a step (STEP_K): each group's sum, zero-point
    term, static bias group and scale stay its own, with K split or not."""
    from aoq.kernels import w4a8_gemv

    monkeypatch.setitem(w4a8_gemv.GEMV_TILE, "STEP_K", step)
    monkeypatch.setitem(w4a8_gemv.GEMV_TILE, "BLOCK_N", 32)
    w = torch.randn(80, 1024)
    x = torch.randn(1, 1024)
    xq, xs, xz = aq.quantize_int8_act(x, mode, torch.tensor(0.035))
    zero = xz if mode == 1 else None
    bias_int = torch.randint(-999, 999, (80,), dtype=torch.int32) if mode == 2 else None
    bias = None if mode == 2 else torch.randn(80)
    q4, s4 = affine.quantize_int4_symmetric(w, 32)
    wq = pack_uint4(q4 + 8)
    want = ia.int_act_mm(xq, xs, zero, wq, s4, bias, bias_int, torch.float32, 0)
    for split in (1, 3):
        got = ia.int_act_mm_triton(xq, xs, zero, wq, s4, bias, bias_int, torch.float32, 0, split)
        assert max_rel_error(want, got) < 1e-6, split
    assert splitk.k_step(1024, 32, step) == step
    assert splitk.k_step(32 * 6, 32, 128) == 64  # 6 groups: steps of 2 divide K


@pytest.mark.parametrize("mode", [0, 1], ids=["sym", "asym"])
def test_w4a8_gemv_bits_do_not_depend_on_the_rows_a_program(mode):
    """Under the interpreter (numpy sums, no register layout) the GEMV's bits follow its step
    and split alone: 16, 32 or 64 rows a program (GEMV_TILE BLOCK_N, and XQ_BLOCK_N for the
    launch that quantizes x itself, which keeps the BLOCK_N launch's split) give one
    another's bits, and the x-quantizing launch the two-launch bits. On a GPU the layout
    can change a step's sum too (w4a8_gemv.GEMV_TILE): test_one_row's GPU test checks the
    tiles in use there."""
    from aoq.kernels import w4a8_gemv

    w, x = torch.randn(80, 2048), torch.randn(1, 2048)
    q4, s4 = affine.quantize_int4_symmetric(w, 32)
    wq = pack_uint4(q4 + 8)
    xq, xs, xz = aq.quantize_int8_act(x, mode, None)
    flags = dict(GROUP_SIZE=32, ASYM=mode == 1, STATIC=False, HAS_BIAS=False, HAS_BIAS_INT=False)
    for split in (1, 2):
        got = []
        for rows in (16, 32, 64):
            tile = {"BLOCK_N": rows, "STEP_K": 512, "XQ_BLOCK_N": rows}
            y = torch.empty(1, 80)
            w4a8_gemv.w4a8_gemv((xq, xs, xz, wq, s4, s4, s4, s4), y, 2048, 32, flags, split,
                                False, tile=tile)  # fmt: skip
            got.append(y)
            y1, xs1 = torch.empty(1, 80), torch.empty(1)
            w4a8_gemv.w4a8_gemv((x, xs1, xs1, wq, s4, s4, s4, s4), y1, 2048, 32, flags, split,
                                True, tile={**tile, "BLOCK_N": 16})  # fmt: skip
            got.append(y1)
        assert all(torch.equal(got[0], g) for g in got[1:]), split
    want = ia.int_act_mm(xq, xs, xz if mode == 1 else None, wq, s4, None, None, torch.float32, 0)
    assert max_rel_error(want, got[0]) < 1e-6


@pytest.mark.parametrize("step", [64, 256])
def test_w4a8_gemv_reads_scales_in_either_order(step):
    """The M = 1 GEMV takes the scales [N, G] row-major or group-major (strides)."""
    from aoq.kernels.w4a8_gemv import w4a8_gemv

    w, x = torch.randn(96, 1024), torch.randn(1, 1024)
    xq, xs, _ = aq.quantize_int8_act(x, 0, None)
    q4, s4 = affine.quantize_int4_symmetric(w, 32)
    wq = pack_uint4(q4 + 8)
    flags = dict(GROUP_SIZE=32, ASYM=False, STATIC=False, HAS_BIAS=False, HAS_BIAS_INT=False)
    want = ia.int_act_mm(xq, xs, None, wq, s4, None, None, torch.float32, 0)
    for scale in (s4, s4.t().contiguous().t()):
        y = torch.empty(1, 96)
        args = (xq, xs, xs, wq, scale, scale, scale, scale)
        w4a8_gemv(args, y, 1024, 32, flags, 1, False, tile={"STEP_K": step})
        assert max_rel_error(want, y) < 1e-6


@pytest.mark.parametrize("split", [1, 3])
def test_word_gemv_int8_and_int4(monkeypatch, split):
    """kernels/gemv.py serves int4 at M=1; its int8 branch (not dispatched, slower there on
    an H200) is kept correct too."""
    from aoq.kernels import gemv
    from aoq.kernels._common import WeightFormat

    monkeypatch.setattr(gemv, "SERVES", (WeightFormat.INT8, WeightFormat.UINT4))
    w, x, bias = torch.randn(72, 1024), torch.randn(1, 1024), torch.randn(72)
    q8, s8 = affine.quantize_int8_symmetric(w, None)
    q8g, s8g = affine.quantize_int8_symmetric(w, 64)
    q4, s4, z4 = affine.quantize_uint4_asymmetric(w, 128)
    for q, s, z in ((q8, s8, None), (q8g, s8g, None), (pack_uint4(q4), s4, z4)):
        want = wo.weight_only_mm(x, q, s, z, bias, 0)
        got = wo.weight_only_mm_triton(x, q, s, z, bias, 0, split=split)
        assert max_rel_error(want, got) < 1e-6
