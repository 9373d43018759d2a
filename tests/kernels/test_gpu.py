"""The kernels on a real GPU (skipped without one): every config through dispatch at each M
band against the float64 oracle, bit-exact activation codes and W8A8 outputs against the CPU
reference, opcheck of the CUDA implementations, strict mode, torch.compile parity."""

import pytest
import torch
import triton
import triton.language as tl
from aoq.kernels import act_quant as aq
from aoq.kernels import int_act_mm as ia
from test_interpret import CONFIGS

import aoq
from aoq.formats import affine
from aoq.testing.metrics import bit_equal, max_rel_error
from aoq.testing.oracle import float64_linear, float_torch_error


def config_ids(configs):
    return [c.id for c in configs]


pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")


@pytest.mark.parametrize("config", CONFIGS, ids=config_ids(CONFIGS))
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
@pytest.mark.parametrize("m", [1, 100, 600])
def test_linear_on_gpu(config, dtype, m):
    lin = aoq.quantize_(torch.nn.Linear(1024, 512, device="cuda").to(dtype), config)
    x = torch.randn(m, 1024, dtype=dtype, device="cuda")
    with aoq.trace_kernels() as trace:
        y = lin(x)
    rec = trace.records[0]
    fp32_fp8 = dtype == torch.float32 and rec.kernel.startswith("triton.fp8.")
    assert not rec.fallback or (fp32_fp8 and "float32 output" in rec.reason), rec.reason
    budget = max(2 * float_torch_error(x, lin.weight, lin.bias), 1e-6)
    err = max_rel_error(float64_linear(x, lin.weight, lin.bias), y)
    assert err <= budget, (rec.kernel, err, budget)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
@pytest.mark.parametrize(
    "shape", [(300, 5000), (20, 9000), (20, 17000)], ids=["one-tile", "wide-tile", "two-pass"]
)
def test_act_quant_bit_exact_vs_cpu(dtype, shape):
    x = torch.randn(shape, dtype=dtype) * 4
    x[0, :4] = torch.tensor([0.5, 1.5, -2.5, 1e-30]).to(dtype)
    xc = x.cuda()
    for mode, scale in ((0, None), (1, None), (2, torch.tensor(0.035))):
        got = aq.quantize_int8_act_triton(xc, mode, None if scale is None else scale.cuda())
        want = aq.quantize_int8_act(x, mode, scale)
        assert all(bit_equal(g.cpu(), w) for g, w in zip(got, want, strict=True)), mode
    for per_row in (True, False):
        for rows in (x, x[:1], x[:4, :256]):  # per tensor: one program writes the scale
            got = aq.quantize_fp8_act_triton(rows.cuda(), per_row, torch.float8_e4m3fn)
            want = aq.quantize_fp8_act(rows, per_row, torch.float8_e4m3fn)
            assert all(bit_equal(g.cpu(), w) for g, w in zip(got, want, strict=True)), per_row


@triton.jit
def _div_kernel(x_ptr, s_ptr, o_ptr, K: tl.constexpr):
    row = tl.program_id(0)
    offs = row * K + tl.arange(0, K)[None, :]
    s = tl.load(s_ptr + row + tl.arange(0, 1))
    tl.store(o_ptr + offs, aq.div_by_row(tl.load(x_ptr + offs), s, True))


@pytest.mark.parametrize("qmax", [127.0, 448.0])
def test_division_by_reciprocal_is_ieee_division(qmax):
    """The activation kernels divide by a row's scale through its reciprocal and one
    correction (aq.div_by_row): every quotient equals CUDA's IEEE division, on 2^25 random
    x / (amax / qmax) over amaxes 2^-60..2^60 (a quarter of them right beside the ties
    (n + 1/2) * s that int8 rounding sees)."""
    g = torch.Generator(device="cuda").manual_seed(0)
    rows, k = 8192, 4096
    amax = torch.exp2(torch.empty(rows, device="cuda").uniform_(-60, 60, generator=g))
    amax *= torch.empty(rows, device="cuda").uniform_(1, 2, generator=g)
    s = amax / qmax
    x = (torch.rand(rows, k, device="cuda", generator=g) * 2 - 1) * amax[:, None]
    n = torch.randint(-128, 127, (rows, k // 4), device="cuda", generator=g) + 0.5
    ties = (n * s[:, None]).view(torch.int32)
    ties += torch.randint(-2, 3, ties.shape, device="cuda", generator=g, dtype=torch.int32)
    x[:, : k // 4] = ties.view(torch.float32)
    got = torch.empty_like(x)
    _div_kernel[(rows,)](x, s, got, K=k)
    want = x / s[:, None]
    bad = (got.view(torch.int32) != want.view(torch.int32)).sum().item()
    assert bad == 0, f"{bad} quotients differ from IEEE division"


@pytest.mark.parametrize("m", [1, 16, 600])
def test_w8a8_bit_exact_vs_cpu(m):
    w, x = torch.randn(512, 1024), torch.randn(m, 1024)
    q, s = affine.quantize_int8_symmetric(w, None)
    xq, xs, _ = aq.quantize_int8_act(x, 0, None)
    # no float bias: the GPU contracts "y * xs + b" into one FMA (seen on an H200: 1 ulp),
    # while the int32 accumulator and the scale products match the reference bit for bit
    for strategy in (0, 1):
        got = ia.int_act_mm_triton(xq.cuda(), xs.cuda(), None, q.cuda(), s.cuda(), None,
                                   None, torch.float32, strategy)  # fmt: skip
        assert bit_equal(got.cpu(), ia.int_act_mm(xq, xs, None, q, s, None, None, torch.float32, 0))


@pytest.mark.parametrize("mode", [0, 1, 2], ids=["sym", "asym", "static"])
@pytest.mark.parametrize("split", [1, 3])
def test_w4a8_decode_integer_paths(mode, split):
    """M = 1: the dp4a GEMV's group sums are the float path's exact integers, so the two
    agree bit for bit (the float path runs when the codes are not 4-byte aligned); M = 5:
    the bf16 matrix-unit decode. Both against the reference."""
    from aoq.formats.packing import pack_uint4

    w = torch.randn(80, 1024)
    q4, s4 = affine.quantize_int4_symmetric(w, 32)
    wq = pack_uint4(q4 + 8).cuda()
    bias_int = torch.randint(-999, 999, (80,), dtype=torch.int32) if mode == 2 else None
    bias = None if mode == 2 else torch.randn(80)
    for m in (1, 5):
        xq, xs, xz = aq.quantize_int8_act(torch.randn(m, 1024), mode, torch.tensor(0.035))
        zero = xz if mode == 1 else None
        want = ia.int_act_mm(xq, xs, zero, pack_uint4(q4 + 8), s4, bias, bias_int,
                             torch.float32, 0)  # fmt: skip
        given = (xq, xs, zero, wq, s4, bias, bias_int, torch.float32, 0, split)
        args = [a.cuda() if isinstance(a, torch.Tensor) else a for a in given]
        got = ia.int_act_mm_triton(*args)
        assert max_rel_error(want, got.cpu()) < 1e-6, m
        if m == 1:
            odd = torch.empty(1028, dtype=torch.int8, device="cuda")[1:1025].view(1, 1024)
            odd.copy_(args[0])
            assert odd.data_ptr() % 4 != 0
            assert bit_equal(got, ia.int_act_mm_triton(odd, *args[1:]))


PDL_CASES = ["w4a8", "w4a8-asym", "w8a8", "w8a8-asym", "fp8-row", "fp8-tensor"]


@pytest.mark.parametrize("case", PDL_CASES)
@pytest.mark.parametrize("m", [1, 5])
def test_programmatic_dependent_launch(case, m):
    """Decode with the activation kernel triggering and the decode kernel (W4A8's GEMV at
    M = 1 and decode_mma above, W8A8's and fp8's split-K kernels) launched with programmatic
    dependent launch (the GEMV and the W8A8 and fp8 kernels loading their first step's weights
    before the wait, _common.PDL_AHEAD): the bits of the plain launches, eagerly and replayed
    from a CUDA graph,
    the inputs rewritten between replays (a kernel that read x before the activation kernel
    finished would see the old values)."""
    from aoq.kernels._common import pdl
    from aoq.kernels.fp8_mm import fp8_mm_triton

    from aoq.formats import float8
    from aoq.formats.packing import pack_uint4

    if not pdl(torch.device("cuda")):
        pytest.skip("programmatic dependent launch needs sm90 or later")
    w = torch.randn(256, 4096, device="cuda")
    mode = 1 if case.endswith("asym") else 0
    if case.startswith("w4a8"):
        q4, s4 = affine.quantize_int4_symmetric(w, 32)
        wq, scale = pack_uint4(q4 + 8), s4 if m == 1 else s4.t().contiguous().t()
    elif case.startswith("w8a8"):
        wq, scale = affine.quantize_int8_symmetric(w, None)
    else:
        wq, scale = float8.quantize_fp8(w, float8.Granularity.ROW)

    def linear(x, on):
        if case.startswith("fp8"):
            xq, xs = aq.quantize_fp8_act_triton(x, case == "fp8-row", wq.dtype, on)
            return fp8_mm_triton(xq, xs, wq, scale, None, torch.bfloat16, 0, None, on)
        xq, xs, xz = aq.quantize_int8_act_triton(x, mode, None, on)
        zero = xz if mode == 1 else None
        return ia.int_act_mm_triton(xq, xs, zero, wq, scale, None, None, torch.bfloat16, 0,
                                    None, on)  # fmt: skip

    xs = [torch.randn(m, 4096, dtype=torch.bfloat16, device="cuda") for _ in range(3)]
    want = [linear(x, False) for x in xs]
    for x, y in zip(xs, want, strict=True):
        assert bit_equal(linear(x, True), y)
    x_in = xs[0].clone()
    linear(x_in, True)  # compiled before capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y_out = linear(x_in, True)
    for x, y in zip(xs, want, strict=True):
        x_in.copy_(x)
        graph.replay()
        assert bit_equal(y_out, y)


def test_opcheck_cuda():
    from test_ops import OPCHECK_TESTS, _cases

    for name, (op, args) in _cases().items():
        cargs = tuple(a.cuda() if isinstance(a, torch.Tensor) else a for a in args)
        tests = OPCHECK_TESTS if "fp8" not in name else OPCHECK_TESTS[1:]
        torch.library.opcheck(op, cargs, test_utils=tests)


@pytest.mark.parametrize("config", CONFIGS[:3], ids=config_ids(CONFIGS[:3]))
def test_compile_parity(config):
    lin = aoq.quantize_(torch.nn.Linear(1024, 512, device="cuda").to(torch.bfloat16), config)
    x = torch.randn(4, 1024, dtype=torch.bfloat16, device="cuda")
    torch.testing.assert_close(torch.compile(lin)(x), lin(x), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("config", CONFIGS, ids=config_ids(CONFIGS))
@pytest.mark.parametrize("m", [1, 5])
def test_chained_reduction_in_graphs(config, m, monkeypatch):
    """Under CUDA-graph capture the split-K reduction is a kernel of its own; where the GPU
    has programmatic dependent launch it is chained to the split kernel (splitk.Plan.chain:
    launched while the split kernel runs, waiting for its partials). Replays of the chained
    graph give the bits of the same graph with plain launches, x rewritten between replays
    (a reduction that read the partials early would see the last replay's)."""
    from aoq.kernels import splitk
    from aoq.kernels._common import pdl

    lin = aoq.quantize_(torch.nn.Linear(4096, 256, device="cuda").to(torch.bfloat16), config)
    xs = [torch.randn(m, 4096, dtype=torch.bfloat16, device="cuda") for _ in range(3)]
    real, chained = splitk.reduce_partials, []

    def spy(*args, **kw):
        chained.append(args[6] if len(args) > 6 else kw.get("chained", False))
        return real(*args, **kw)

    monkeypatch.setattr(splitk, "reduce_partials", spy)
    outs = []
    for chain in (True, False):
        monkeypatch.setattr(splitk, "CHAIN", chain)
        x_in = xs[0].clone()
        lin(x_in)  # compiled before capture
        graph = torch.cuda.CUDAGraph()
        chained.clear()
        with torch.cuda.graph(graph):
            y_out = lin(x_in)
        assert all(c == (chain and pdl(x_in.device)) for c in chained), chained
        replays = []
        for x in xs:
            x_in.copy_(x)
            graph.replay()
            replays.append(y_out.clone())
        outs.append(replays)
    for a, b in zip(*outs, strict=True):
        assert bit_equal(a, b)


def test_fp8_fast_accum_serves_bf16_outputs_only():
    """fp8-row-fast at prefill: a bf16 output comes from _scaled_mm's fast accumulation (not
    the exact config's bits, and within twice its error against the float64 product); fp16
    and float32 outputs are the exact config's, bit for bit."""
    import copy

    torch.manual_seed(0)
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        lin = torch.nn.Linear(4096, 1024, device="cuda").to(dtype)
        exact = aoq.quantize_(copy.deepcopy(lin), aoq.Float8DynamicActivationFloat8WeightConfig())
        fast = aoq.quantize_(
            copy.deepcopy(lin), aoq.Float8DynamicActivationFloat8WeightConfig(fast_accum=True)
        )
        x = torch.randn(512, 4096, dtype=dtype, device="cuda")
        with aoq.trace_kernels() as trace:
            y_exact, y_fast = exact(x), fast(x)
        kernels = {r.kernel for r in trace.records}
        assert all(not r.fallback for r in trace.records), trace.records
        if dtype is not torch.bfloat16:
            assert bit_equal(y_exact, y_fast), (dtype, kernels)
            continue
        assert kernels == {"cublas.fp8.scaled_mm"}, kernels
        assert not bit_equal(y_exact, y_fast)
        want = float64_linear(x, exact.weight, exact.bias)
        err_exact, err_fast = max_rel_error(want, y_exact), max_rel_error(want, y_fast)
        assert err_fast <= 2 * err_exact, (err_fast, err_exact)


@pytest.mark.parametrize("split", [None, 3])
def test_aligned_code_loads_give_the_same_bits(split):
    """ALIGNED (the W4A8 GEMV's words, on in GEMV_TILE, and decode_mma's group codes, a
    probe off in TILE, hinted as aligned runs: 16-byte loads) reads the same bytes: the same
    output bit for bit, plain, under PDL and in the x-quantizing launch."""
    from aoq.kernels import decode_mma as dm
    from aoq.kernels._common import WeightFormat, pdl
    from aoq.kernels.w4a8_gemv import w4a8_gemv

    from aoq.formats.packing import pack_uint4

    n, k = 4104, 4096
    w = torch.randn(n, k, device="cuda")
    q4, s4 = affine.quantize_int4_symmetric(w, 32)
    wq, sg = pack_uint4(q4 + 8), s4.t().contiguous().t()
    flags = dict(GROUP_SIZE=32, ASYM=False, STATIC=False, HAS_BIAS=False, HAS_BIAS_INT=False)
    x = torch.randn(1, k, dtype=torch.bfloat16, device="cuda")
    xq, xs, _ = aq.quantize_int8_act_triton(x, 0, None)
    on = pdl(torch.device("cuda"))
    for xq_in, use_pdl in ((False, False), (False, on), (True, False)):
        ys = []
        for tile in ({"ALIGNED": False}, {"ALIGNED": True}):
            y = torch.empty(1, n, dtype=torch.bfloat16, device="cuda")
            if xq_in:
                xs1 = torch.empty(1, dtype=torch.float32, device="cuda")
                w4a8_gemv((x, xs1, xs1, wq, s4, s4, s4, s4), y, k, 32, flags, split, True,
                          False, tile)  # fmt: skip
            else:
                if use_pdl:
                    xq, xs, _ = aq.quantize_int8_act_triton(x, 0, None, True)
                w4a8_gemv((xq, xs, xs, wq, s4, s4, s4, s4), y, k, 32, flags, split, False,
                          use_pdl, tile)  # fmt: skip
            ys.append(y)
        assert bit_equal(ys[0], ys[1]), (xq_in, use_pdl)
    x16 = torch.randn(16, k, dtype=torch.bfloat16, device="cuda")
    xq16, xs16, _ = aq.quantize_int8_act_triton(x16, 0, None)
    ys = []
    for tile in ({}, {"ALIGNED": True}):
        ys.append(torch.empty(16, n, dtype=torch.float32, device="cuda"))
        dm.decode_mma(xq16, wq, sg, None, None, ys[-1], k // 32, WeightFormat.INT4_SYM, split,
                      x_scale=xs16, tile=tile)  # fmt: skip
    assert bit_equal(ys[0], ys[1])
