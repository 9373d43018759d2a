"""kernels/wt_rows.py: weight-only int8, e4m3 and int4 at 65-128 rows with the weights as the
MMA's register operand, x and the codes through device-made tensor descriptors.

The serving rules run anywhere; the kernel runs under TRITON_INTERPRET=1 (``make
kernels-interpret``) and on an sm90 GPU: against the float64 product of the weights
aoq.formats dequantizes (the reference), split or not, with and without a bias, and
through weight_only_mm's decode entry (the path the dispatch takes)."""

import pytest
import torch
import torch.nn.functional as F
from _pairwise import pairwise
from aoq.kernels import splitk, wt_rows
from aoq.kernels import weight_only as wo
from aoq.kernels._common import INTERPRET, Strategy, WeightFormat
from torch import nn

import aoq
from aoq import dispatch, plans
from aoq.backends import Backend
from aoq.formats import affine, float8, packing

GPU = torch.cuda.is_available() and not INTERPRET and wt_rows._sm90(-1)
runs = pytest.mark.skipif(
    not (INTERPRET or GPU), reason="needs TRITON_INTERPRET=1 before import, or an sm90 GPU"
)
DEV = "cuda" if GPU else "cpu"


@pytest.fixture
def enabled(monkeypatch):
    monkeypatch.setattr(wt_rows, "ENABLED", True)


def _weight(fmt: str, n: int, k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(codes, scale [N, 1] float32, the weight aoq.formats dequantizes, as float64) on DEV."""
    w = torch.randn(n, k, device=DEV)
    if fmt == "int8":
        q, s = affine.quantize_int8_symmetric(w, None)
        s = s.reshape(-1, 1).float()
        return q, s, affine.dequantize_symmetric(q, s).double()
    q, s = float8.quantize_fp8(w, float8.Granularity.ROW)
    s = s.reshape(-1, 1).float()
    return q, s, float8.dequantize_fp8(q, s).double()


def _int4(n: int, k: int, tiled: bool, zeros: str) -> tuple[torch.Tensor, ...]:
    """(codes packed two a byte, plain or in tile order; scale [N, G] float32; zero points
    as ``zeros``: "rows" uint8 [N, G], "groups" the same values group-major (strides (1, N)),
    "words" packing.pack_zero_words with the scales group-major (aoq.tensors.int4's GPU
    layout for tiled codes); the weight aoq.formats dequantizes, as float64) on DEV."""
    q, s, z = affine.quantize_uint4_asymmetric(torch.randn(n, k, device=DEV), 128)
    s, z = s.float().contiguous(), z.to(torch.uint8).contiguous()
    deq = affine.dequantize_uint4_asymmetric(q, s, z).double()
    codes = packing.pack_uint4(q)
    codes = packing.tile_uint4(codes) if tiled else codes
    if zeros == "groups":
        s, z = s.t().contiguous().t(), z.t().contiguous().t()
    elif zeros == "words":
        s, z = s.t().contiguous().t(), packing.pack_zero_words(z)
    return codes, s, z, deq


def _x(m: int, k: int, dtype: torch.dtype) -> torch.Tensor:
    return torch.randn(m, k, device=DEV).to(dtype)


def _codes(fmt: str, n: int, k: int, tiled: bool = True, zeros: str | None = "words"):
    """(codes, scale, zero or None, the float64 weight): :func:`_int4` for "int4", else
    :func:`_weight`'s per-channel codes."""
    if fmt == "int4":
        return _int4(n, k, tiled, zeros)
    q, s, deq = _weight(fmt, n, k)
    return q, s, None, deq


def _launches(monkeypatch, key: str) -> list:
    """The value of constexpr ``key`` of each wt_rows launch from here on."""
    seen: list = []
    launch = wt_rows.launch
    monkeypatch.setattr(
        wt_rows, "launch", lambda *a, **kw: seen.append(kw[key]) or launch(*a, **kw)
    )
    return seen


def _near_float64(y: torch.Tensor, x: torch.Tensor, deq: torch.Tensor) -> bool:
    """y within two bf16 roundings of the float64 product x deqᵀ."""
    want = x.double() @ deq.T
    return bool(((y.double() - want).abs() <= 2 * 2.0**-7 * want.abs() + 1e-3).all())


def test_serves_its_rows_formats_and_shapes(enabled):
    x, q = torch.empty(120, 256, dtype=torch.bfloat16), torch.empty(128, 256, dtype=torch.int8)
    ok = INTERPRET  # CPU tensors: only the interpreter runs kernels on them
    assert wt_rows.serves(x, q, 1, WeightFormat.INT8) is ok
    assert wt_rows.serves(x.half(), q, 1, WeightFormat.FP8) is ok
    assert wt_rows.serves(x[:112], q, 1, WeightFormat.INT8) is ok
    assert not wt_rows.serves(x[:111], q, 1, WeightFormat.INT8)  # decode_mma's rows
    assert not wt_rows.serves(torch.empty(129, 256, dtype=torch.bfloat16), q, 1,
                              WeightFormat.INT8)  # fmt: skip
    assert not wt_rows.serves(x.float(), q, 1, WeightFormat.INT8)
    assert not wt_rows.serves(x, q, 2, WeightFormat.INT8)  # per channel only
    codes, s, z = torch.empty(128, 128, dtype=torch.uint8), torch.empty(128, 2), torch.empty(128, 2)
    assert wt_rows.serves(x, codes, 2, WeightFormat.UINT4, s, z) is ok  # groups of 128
    assert wt_rows.serves(x[:96], codes, 2, WeightFormat.UINT4, s, z) is ok  # int4 from 96
    assert not wt_rows.serves(x[:95], codes, 2, WeightFormat.UINT4, s, z)
    assert not wt_rows.serves(x, codes, 2, WeightFormat.UINT4, s)  # zero points needed
    assert not wt_rows.serves(x, codes, 4, WeightFormat.UINT4, s, z)  # groups of 64
    assert not wt_rows.serves(x, q[:96], 1, WeightFormat.INT8)  # N a multiple of BLOCK_N
    assert not wt_rows.serves(x[:, :192], q[:, :192], 1, WeightFormat.INT8)  # K of BLOCK_K
    assert not wt_rows.serves(torch.empty(256, 100, dtype=torch.bfloat16).t(), q, 1,
                              WeightFormat.INT8)  # fmt: skip
    flat = torch.empty(120 * 256 + 8, dtype=torch.bfloat16)
    assert wt_rows.serves(flat[8:].view(120, 256), q, 1, WeightFormat.INT8) is ok  # 16 bytes in
    assert not wt_rows.serves(flat[1:-7].view(120, 256), q, 1, WeightFormat.INT8)  # TMA: 2 bytes


def test_wide_tile_where_it_fills_a_wave(enabled, monkeypatch):
    """The wide tile: per-channel codes at 65-111 rows only where its programs fill a wave,
    int4 never, W4A8 at 65-95 rows always (with or without the probe flag W4A8_X_DESC, which
    is the 64-row tile's) and never from 96; N a multiple of 128."""
    for flag in (False, True):
        monkeypatch.setattr(wt_rows, "W4A8_X_DESC", flag)
        for full in (True, False):
            monkeypatch.setattr(wt_rows, "_fills_wave", lambda *a, full=full: full)
            for m, want in ((64, False), (65, full), (111, full), (112, False)):
                assert wt_rows.wide(m, 256, 512, 0, torch.device(DEV)) is want, (m, full)
            assert not wt_rows.wide(100, 192, 512, 0, torch.device(DEV))  # N 192
            for m, want in ((65, True), (95, True), (96, False), (128, False), (129, False)):
                assert wt_rows.wide(m, 256, 512, 2, torch.device(DEV)) is want, (m, full)
            assert not wt_rows.wide(100, 256, 512, 1, torch.device(DEV))
            x = torch.empty(100, 256, dtype=torch.bfloat16)
            q = torch.empty(256, 256, dtype=torch.int8)
            assert wt_rows.serves(x, q, 1, WeightFormat.INT8) is (full and INTERPRET)
            assert not wt_rows.serves(x, q[:192], 1, WeightFormat.INT8)  # decode_mma's 192 rows


@runs
def test_w4a8_reads_x_by_masked_loads_on_the_64_row_tile(monkeypatch):
    """W4A8 (WFMT 2) on the 64-row tile never takes x's descriptor (W4A8_X_DESC: its 3-stage
    loop raced there on an H200) at 96-128 rows; the wide tile at 65-95 reads x through it;
    the probe flag brings the descriptor back to the 64-row tile from X_DESC_ROWS."""
    from aoq.kernels import wt_rows_w4a8

    seen = _launches(monkeypatch, "X_DESC")
    codes = torch.randint(0, 256, (128, 128), dtype=torch.uint8, device=DEV)
    s = torch.rand(128, 8, device=DEV) + 0.1
    for m in (65, 95, 96, 128):
        wt_rows_w4a8.w4a8_rows(torch.randn(m, 256, device=DEV).to(torch.bfloat16), codes, s, None)
    assert seen == [True, True, False, False]
    monkeypatch.setattr(wt_rows, "W4A8_X_DESC", True)
    wt_rows_w4a8.w4a8_rows(torch.randn(128, 256, device=DEV).to(torch.bfloat16), codes, s, None)
    assert seen[-1] is True


def test_a_wave_is_most_sms(monkeypatch):
    """132 SMs (an H100 / H200): 8192^2 (64 programs of 128 rows, K in 2) and 14336 x 4096 (32,
    K in 4) fill 128 of them, 4096 x 14336 112 (K 4096 not split at one an SM): not a wave."""
    monkeypatch.setattr(splitk, "sm_count", lambda index: 132)
    fills = wt_rows._fills_wave.__wrapped__
    dev = torch.device("cuda", 0)
    splitk._ranges.cache_clear()  # (splits a real device would have cached, or this test)
    try:
        assert fills(dev, 8192, 8192) and fills(dev, 4096, 14336)
        assert not fills(dev, 14336, 4096)
    finally:
        splitk._ranges.cache_clear()
    assert not fills(torch.device("cpu"), 8192, 8192)  # the interpreter: no SMs


def test_off_serves_nothing(monkeypatch):
    monkeypatch.setattr(wt_rows, "ENABLED", False)
    x, q = torch.empty(120, 256, dtype=torch.bfloat16), torch.empty(128, 256, dtype=torch.int8)
    assert not wt_rows.serves(x, q, 1, WeightFormat.INT8)


def test_split_fills_two_programs_an_sm(monkeypatch):
    """splitk.plan at PER_SM: 8192^2 in 2, N 14336 unsplit, N 4096 in 4 (132 SMs)."""
    monkeypatch.setattr(splitk, "sm_count", lambda index: 132)
    dev = torch.device("cuda", 0)
    for n, k, want in ((8192, 8192, 2), (14336, 4096, 1), (4096, 14336, 4)):
        got = splitk.split_k(Backend.CUDA, dev, n // wt_rows.BLOCK_N, k, wt_rows.BLOCK_K,
                             per_sm=wt_rows.PER_SM)  # fmt: skip
        assert got == want, (n, k)


@runs
@pytest.mark.parametrize(
    ("fmt", "dtype", "m", "split", "bias"),
    pairwise(["int8", "fp8"], {"bf16": torch.bfloat16, "fp16": torch.float16}, [65, 100, 128],
             [1, 2, 3], [False, True]),
)  # fmt: skip
def test_matches_the_float64_product(fmt, dtype, m, split, bias):
    torch.manual_seed(0)
    n, k = 128, 384
    q, s, deq = _weight(fmt, n, k)
    x = _x(m, k, dtype)
    b = torch.randn(n, device=DEV).to(dtype) if bias else None
    y = torch.empty(m, n, dtype=dtype, device=DEV)
    wt_rows.wt_rows(x, q, s, None, b, y, split)
    want = x.double() @ deq.T + (b.double() if bias else 0)
    # float32 sums, then one rounding to x's dtype: within two of its ulps of the product
    ulp = 2.0**-7 if dtype == torch.bfloat16 else 2.0**-10
    assert ((y.double() - want).abs() <= 2 * ulp * want.abs() + 1e-3).all()


@runs
@pytest.mark.parametrize(
    ("tiled", "zeros", "dtype", "m", "split", "bias"),
    pairwise([False, True], ["rows", "groups", "words"], {"bf16": torch.bfloat16,
             "fp16": torch.float16}, [65, 128], [1, 2], [False, True]),
)  # fmt: skip
def test_int4_matches_the_float64_product(tiled, zeros, dtype, m, split, bias):
    """int4 in groups of 128: plain or tiled codes, zero points as bytes by rows, by groups,
    or as words (what aoq.tensors.int4 keeps on a GPU for tiled codes)."""
    torch.manual_seed(3)
    n, k = 128, 512
    codes, s, z, deq = _int4(n, k, tiled, zeros)
    x = _x(m, k, dtype)
    b = torch.randn(n, device=DEV).to(dtype) if bias else None
    y = torch.empty(m, n, dtype=dtype, device=DEV)
    wt_rows.wt_rows(x, codes, s, z, b, y, split, tiled)
    want = x.double() @ deq.T + (b.double() if bias else 0)
    ulp = 2.0**-7 if dtype == torch.bfloat16 else 2.0**-10
    assert ((y.double() - want).abs() <= 2 * ulp * want.abs() + 1e-3).all()


@runs
@pytest.mark.parametrize(("fmt", "m"), [("int8", 65), ("fp8", 128), ("int4", 100)])
def test_x_by_descriptor_or_by_pointers_the_same_sums(fmt, m, monkeypatch):
    """x through a tensor descriptor (from X_DESC_ROWS rows) or by masked loads: the same
    tiles in the same order, so the same bits."""
    torch.manual_seed(4)
    n, k = 128, 256
    if fmt == "int4":
        q, s, z, _ = _int4(n, k, True, "words")
    else:
        (q, s, _), z = _weight(fmt, n, k), None
    x = _x(m, k, torch.bfloat16)
    ys = []
    for rows in (1, wt_rows.ROWS + 1):
        monkeypatch.setattr(wt_rows, "X_DESC_ROWS", rows)
        y = torch.empty(m, n, dtype=torch.bfloat16, device=DEV)
        ys.append(wt_rows.wt_rows(x, q, s, z, None, y, 2, fmt == "int4"))
    assert torch.equal(ys[0], ys[1])


@runs
@pytest.mark.parametrize(("fmt", "tiled", "zeros"), [("int8", False, None), ("int4", False, "rows"),
                                                     ("int4", True, "words")])  # fmt: skip
def test_half_group_steps_the_float64_product(fmt, tiled, zeros, monkeypatch):
    """TILE's ``step`` 64 (a probe): per-channel codes, and int4 with two steps a group (the
    tiled codes' half tiles, each step's product times its group's scale)."""
    monkeypatch.setattr(wt_rows, "TILE", {0: {"step": 64, "per_sm": 4}, 1: {"step": 64}})
    torch.manual_seed(6)
    n, k, m = 128, 512, 100
    q, s, z, deq = _codes(fmt, n, k, tiled, zeros)
    x = _x(m, k, torch.bfloat16)
    y = torch.empty(m, n, dtype=torch.bfloat16, device=DEV)
    steps = _launches(monkeypatch, "BLOCK_K")
    wt_rows.wt_rows(x, q, s, z, None, y, 2, tiled)
    assert steps == [64]
    assert _near_float64(y, x, deq)


@runs
@pytest.mark.parametrize(("fmt", "tiled", "zeros", "step"), [("int8", False, None, 128),
                         ("int4", False, "rows", 128), ("int4", True, "words", 128),
                         ("int4", True, "words", 64)])  # fmt: skip
def test_wide_weight_tiles_the_float64_product(fmt, tiled, zeros, step, monkeypatch):
    """TILE's ``bn`` 128 (a probe: one program's 128 rows of W on eight warps, x read from L2
    half as often): tiled int4 codes as two tiles a box (a 4-D descriptor), whole or half
    tiles a step; N 192 not a multiple of 128 keeps 64."""
    tile = {"bn": 128, "warps": 8, "step": step, "stages": 2}
    monkeypatch.setattr(wt_rows, "TILE", {0: tile, 1: tile})
    torch.manual_seed(7)
    tiles = _launches(monkeypatch, "BLOCK_N")
    for n in (256, 192):
        k, m = 256, 100
        q, s, z, deq = _codes(fmt, n, k, tiled, zeros)
        x = _x(m, k, torch.bfloat16)
        y = torch.empty(m, n, dtype=torch.bfloat16, device=DEV)
        wt_rows.wt_rows(x, q, s, z, None, y, 2, tiled)
        assert tiles.pop() == (128 if n % 128 == 0 else 64)
        assert _near_float64(y, x, deq)


@runs
def test_the_decode_entry_takes_int8_on_the_wide_tile(enabled, monkeypatch):
    """Where the wide tile fills a wave, 100 rows of int8 go to wt_rows on it (x through its
    descriptor): the float64 product."""
    monkeypatch.setattr(wt_rows, "_fills_wave", lambda *a: True)
    torch.manual_seed(3)
    q, s, deq = _weight("int8", 256, 256)
    x = _x(100, 256, torch.bfloat16)
    tiles, descs = _launches(monkeypatch, "BLOCK_N"), _launches(monkeypatch, "X_DESC")
    warps = _launches(monkeypatch, "num_warps")
    y = wo.weight_only_mm_triton(x, q, s, None, None, int(Strategy.DECODE))
    assert (tiles, descs, warps) == ([128], [True], [8])
    assert _near_float64(y, x, deq)


@runs
@pytest.mark.parametrize(("fmt", "m"), [("int8", 64), ("int4", 40)])
def test_64_row_x_tiles_the_float64_product(fmt, m, monkeypatch):
    """TILE's ``rows`` 64 (a probe: x's box and the MMA's N at 64 rows where M fits them)."""
    monkeypatch.setattr(wt_rows, "TILE", {0: {"rows": 64}, 1: {"rows": 64}})
    monkeypatch.setattr(wt_rows, "MIN_ROWS", dict.fromkeys(wt_rows.MIN_ROWS, 33))
    torch.manual_seed(8)
    n, k = 128, 256
    q, s, z, deq = _codes(fmt, n, k)
    x = _x(m, k, torch.bfloat16)
    wfmt = WeightFormat.UINT4 if fmt == "int4" else WeightFormat.INT8
    assert wt_rows.serves(x, q, k // 128 if fmt == "int4" else 1, wfmt, s, z)
    rows = _launches(monkeypatch, "ROWS")
    y = torch.empty(m, n, dtype=torch.bfloat16, device=DEV)
    wt_rows.wt_rows(x, q, s, z, None, y, 2, fmt == "int4")
    assert rows == [64]
    assert _near_float64(y, x, deq)


def test_a_step_is_one_int4_tile():
    """Tiled codes: a program's step (BLOCK_N rows x BLOCK_K codes) is one of
    packing.tile_uint4's tiles, which the kernel's descriptor reads as one block."""
    assert (wt_rows.BLOCK_N, wt_rows.BLOCK_K // 2) == (packing.TILE_ROWS, packing.TILE_BYTES)


@runs
@pytest.mark.parametrize("fmt", ["int8", "fp8"])
def test_splits_agree_and_rows_past_m_stay_out(fmt):
    """Split or not the same sums up to float32 order; only M rows of y are written."""
    torch.manual_seed(1)
    q, s, _ = _weight(fmt, 128, 512)
    x = _x(70, 512, torch.bfloat16)
    ys = []
    for split in (1, 4):
        y = torch.full((72, 128), 7.0, dtype=torch.bfloat16, device=DEV)
        wt_rows.wt_rows(x, q, s, None, None, y[:70], split)
        assert (y[70:] == 7.0).all()
        ys.append(y[:70].float())
    assert torch.allclose(ys[0], ys[1], rtol=2**-7, atol=1e-3)


@runs
def test_the_decode_entry_takes_it(enabled, monkeypatch):
    """weight_only_mm's decode strategy hands its rows to wt_rows where it serves: int8 at 112
    (not at 111: decode_mma's), int4 at 96."""
    torch.manual_seed(2)
    q, s, deq = _weight("int8", 128, 256)
    x = _x(112, 256, torch.bfloat16)
    calls = []
    real = wt_rows.wt_rows
    monkeypatch.setattr(wt_rows, "wt_rows", lambda *a: calls.append(1) or real(*a))
    wo.weight_only_mm_triton(x[:111], q, s, None, None, int(Strategy.DECODE))
    assert calls == []
    y = wo.weight_only_mm_triton(x, q, s, None, None, int(Strategy.DECODE))
    assert calls == [1]
    want = x.double() @ deq.T
    assert ((y.double() - want).abs() <= 2 * 2.0**-7 * want.abs() + 1e-3).all()
    # int4 in tile order with its zero points as words, as a GPU weight holds them
    codes, s4, z4, deq4 = _int4(128, 256, True, "words")
    x = x[:96]
    y = wo.weight_only_mm_triton(x, codes, s4, z4, None, int(Strategy.DECODE), True)
    assert calls == [1, 1]
    want = x.double() @ deq4.T
    assert ((y.double() - want).abs() <= 2 * 2.0**-7 * want.abs() + 1e-3).all()


@pytest.mark.skipif(not GPU, reason="eager plans, threads and CUDA graphs: an sm90 GPU")
@pytest.mark.parametrize(
    "config",
    [aoq.Int8WeightOnlyConfig(), aoq.Float8WeightOnlyConfig(), aoq.Int4WeightOnlyConfig()],
    ids=["int8wo", "fp8wo", "int4wo"],
)
def test_served_through_the_library(enabled, monkeypatch, config):
    """A quantized Linear at 120 rows: served here under the decode strategy's name, the same
    bits as a normal call when an eager plan replays it (on this thread and another: Triton's
    allocator is per thread) and when a CUDA graph replays it with x rewritten, and within
    float32 order of decode_mma's result."""
    import threading

    lin = aoq.quantize_(nn.Linear(1024, 512, device="cuda", dtype=torch.bfloat16), config)
    w, b = lin.weight, lin.bias
    xs = [torch.randn(120, 1024, device="cuda", dtype=torch.bfloat16) for _ in range(4)]
    calls = []
    real = wt_rows.wt_rows
    monkeypatch.setattr(wt_rows, "wt_rows", lambda *a: calls.append(1) or real(*a))

    def normal(x):
        plans.forget(w)
        return F.linear(x, w, b)

    with torch.no_grad(), aoq.trace_kernels() as trace:
        got = [F.linear(x, w, b) for x in xs]  # normal, recorded, replay, replay
    assert calls, "wt_rows did not serve"
    assert {r.kernel for r in trace.records} == {dispatch.select(w.scheme, xs[0], w, b)[0].name}
    with torch.no_grad():
        assert all(torch.equal(g, normal(x)) for g, x in zip(got, xs, strict=True))
        for _ in range(2):  # normal() forgot the plans: record one again
            F.linear(xs[0], w, b)
        other = []
        thread = threading.Thread(target=lambda: other.append(F.linear(xs[1], w, b)))
        thread.start()
        thread.join()
        assert torch.equal(other[0], normal(xs[1]))
        x = xs[2].clone()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            y = F.linear(x, w, b)
        x.copy_(xs[3])
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(y, normal(xs[3]))
        monkeypatch.setattr(wt_rows, "ENABLED", False)
        mma = normal(xs[3]).float()
    assert torch.allclose(y.float(), mma, rtol=2**-7, atol=1e-2)
