"""kernels/mid_rows.py: the prefill kernels with K split at 17-256 rows.

The split rule runs anywhere (the SM count stubbed); the kernels run under TRITON_INTERPRET=1
(``make kernels-interpret``), where a test forces the split: every prefill kernel with K
split two and three ways against the scheme's reference and against its unsplit launch.
W8A8's int32 partials sum exactly, so its output stays bit-exact.
"""

import pytest
import torch
from _act_cases import fp8_case, int_act_case
from aoq.kernels import act_quant as aq
from aoq.kernels import fp8_mm, mid_rows, splitk
from aoq.kernels import int_act_mm as ia
from aoq.kernels import weight_only as wo
from aoq.kernels._common import INTERPRET

from aoq.backends import Backend
from aoq.formats import affine, float8
from aoq.formats.packing import pack_uint4, tile_uint4
from aoq.testing.metrics import bit_equal, max_rel_error

interpret_only = pytest.mark.skipif(not INTERPRET, reason="needs TRITON_INTERPRET=1 before import")
CUDA0 = torch.device("cuda", 0)


@pytest.fixture
def h200(monkeypatch):
    """splitk.sm_count as an H100's or H200's: 132 SMs."""
    monkeypatch.setattr(splitk, "sm_count", lambda index: 132)


@pytest.mark.parametrize(
    ("m", "n", "k", "group", "want"),
    [
        (32, 4096, 14336, 0, 8),  # 32 tiles of 64 x 128, two an SM: eight ranges of 1792
        (64, 8192, 8192, 32, 4),  # W4A8's groups of 32: 64 tiles, four ranges
        (128, 8192, 8192, 0, 2),  # 128 x 128 tiles, one an SM: 64 tiles, two ranges
        (256, 8192, 8192, 0, 1),  # 128 tiles fill the wave: no split
        (32, 4096, 1024, 0, 2),  # ranges of at least splitk.MIN_K_PER_SPLIT
    ],
)
def test_split_fills_one_wave(h200, m, n, k, group, want):
    assert mid_rows.split(Backend.CUDA, CUDA0, m, n, k, group) == want


def test_tiles_by_rows():
    cfg, per_sm = mid_rows.tile(Backend.CUDA, 64)
    assert (cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["num_warps"], per_sm) == (64, 128, 4, 2)
    cfg, per_sm = mid_rows.tile(Backend.CUDA, 65, group_size=32)
    assert (cfg["BLOCK_M"], cfg["BLOCK_K"], cfg["num_warps"], per_sm) == (128, 32, 8, 1)
    assert mid_rows.tile(Backend.ROCM, 200)[0]["num_stages"] == 2


@pytest.mark.parametrize("m", [8, 16, 257, 4096])
def test_declines_outside_its_rows(h200, m):
    def launch(*_):
        raise AssertionError("launched")

    y = torch.empty(m, 4096)
    assert not mid_rows.run(y, Backend.CUDA, 14336, 0, None, launch)


def test_declines_when_off_or_unsplit(h200, monkeypatch):
    def launch(*_):
        raise AssertionError("launched")

    y = torch.empty(32, 4096)
    # the interpreter never splits by itself
    assert not mid_rows.run(y, Backend.INTERPRET, 14336, 0, None, launch)
    monkeypatch.setattr(mid_rows, "ENABLED", False)
    assert not mid_rows.run(y, Backend.CUDA, 14336, 0, None, launch)


def test_rule_tile_unsplit():
    """``rule_tile``: where no split is due the rule's tile still runs (fp8's bits depend on
    its tile), over all of K, with no partials."""
    grids = []

    def launch(grid, p, cfg):
        grids.append((grid, p.split, p.k_split, p.partials is y, cfg["BLOCK_M"]))

    y = torch.empty(32, 200)
    assert mid_rows.run(y, Backend.INTERPRET, 1024, 0, None, launch, rule_tile=True)
    assert grids == [((7, 1, 1), 1, 1024, True, 32)]
    assert not mid_rows.run(torch.empty(300, 200), Backend.INTERPRET, 1024, 0, None, launch,
                            rule_tile=True)  # fmt: skip


M_SHAPES = [40]  # two row tiles of the interpreter's 32 x 32, the second one 8 rows


@pytest.fixture
def reductions(monkeypatch):
    """The split launches' reductions, counted: a split that silently fell through to the
    unsplit kernel would give the same numbers."""
    calls = []
    real = splitk.reduce_partials

    def counted(partials, *args, **kwargs):
        calls.append(partials.shape[0])
        return real(partials, *args, **kwargs)

    monkeypatch.setattr(splitk, "reduce_partials", counted)
    return calls


@interpret_only
@pytest.mark.parametrize("m", M_SHAPES)
@pytest.mark.parametrize("mode", [0, 1, 2], ids=["sym", "asym", "static"])
def test_int_act_prefill_split(reductions, m, mode):
    xq, xs, zero, bias, bias_int, weights = int_act_case(m, 1024, 80, mode)
    for wq, ws in weights:
        args = (xq, xs, zero, wq, ws, bias, bias_int, torch.float32, 1)
        want = ia.int_act_mm(*args)
        unsplit = ia.int_act_mm_triton(*args)
        for split in (2, 3):
            got = ia.int_act_mm_triton(*args, split=split)
            assert reductions.pop() == split
            if wq.dtype == torch.int8:
                assert bit_equal(got, want) and bit_equal(got, unsplit), split
            else:
                assert max_rel_error(want, got) < 1e-6, split
    assert not reductions  # the unsplit launches reduced nothing


@interpret_only
@pytest.mark.parametrize("m", M_SHAPES)
@pytest.mark.parametrize("per_row", [True, False], ids=["row", "tensor"])
def test_fp8_prefill_split(reductions, m, per_row):
    xq, xs, wq, ws, bias = fp8_case(m, 1024, 72, per_row)
    want = fp8_mm.fp8_mm(xq, xs, wq, ws, bias, torch.float32, 1)
    for split in (2, 3):
        got = fp8_mm.fp8_mm_triton(xq, xs, wq, ws, bias, torch.float32, 1, split)
        assert reductions.pop() == split
        assert max_rel_error(want, got) < 1e-6, split


@interpret_only
@pytest.mark.parametrize("m", M_SHAPES)
def test_weight_only_prefill_split(reductions, m):
    w = torch.randn(72, 768)
    x = torch.randn(m, 768)
    bias = torch.randn(72)
    q8, s8 = affine.quantize_int8_symmetric(w, None)
    f8, fs = float8.quantize_fp8(w, float8.Granularity.ROW)
    cases = [(q8, s8, None, bias), (f8, fs, None, None)]
    for gs in (128, 32):
        q, s, z = affine.quantize_uint4_asymmetric(w, gs)
        cases.append((pack_uint4(q), s, z, bias))
    for q, s, z, b in cases:
        want = wo.weight_only_mm(x, q, s, z, b, 1)
        for split in (2, 3):
            got = wo.weight_only_mm_triton(x, q, s, z, b, 1, split=split)
            assert reductions.pop() == split
            assert max_rel_error(want, got) < 1e-6, (q.dtype, split)
    # int4 codes in tile_uint4's order: the row-major codes' bits, K ranges and all
    q, s, z = affine.quantize_uint4_asymmetric(torch.randn(128, 768), 128)
    plain = pack_uint4(q)
    for split in (2, 3):
        want = wo.weight_only_mm_triton(x, plain, s, z, None, 1, split=split)
        got = wo.weight_only_mm_triton(x, tile_uint4(plain), s, z, None, 1, True, split)
        assert reductions[-2:] == [split, split] and bit_equal(got, want), split


gpu_only = pytest.mark.skipif(
    INTERPRET or not torch.cuda.is_available(), reason="needs a CUDA GPU (not the interpreter)"
)


@gpu_only
@pytest.mark.parametrize("m", [17, 64, 100, 256])
def test_gpu_split_by_rule(reductions, monkeypatch, m):
    """On the GPU at K 14336, N 4096 (the shape whose prefill tiles leave most SMs idle),
    every prefill kernel splits by the rule and matches its unsplit launch: W8A8 bit for
    bit, the float sums up to their order (outputs in bf16)."""
    k, n = 14336, 4096
    w, x = torch.randn(n, k), torch.randn(m, k)
    q8, s8 = affine.quantize_int8_symmetric(w, None)
    q4, s4 = affine.quantize_int4_symmetric(w, 32)
    u4, us, uz = affine.quantize_uint4_asymmetric(w, 128)
    f8, fs = float8.quantize_fp8(w, float8.Granularity.ROW)
    xq, xs, _ = aq.quantize_int8_act(x, 0, None)
    fxq, fxs = aq.quantize_fp8_act(x, True, torch.float8_e4m3fn)
    xb = x.to(torch.bfloat16).cuda()
    bias = torch.randn(n, dtype=torch.bfloat16).cuda()
    cases = {
        "w8a8": lambda: ia.int_act_mm_triton(
            *(t.cuda() for t in (xq, xs)), None, q8.cuda(), s8.cuda(), bias, None,
            torch.bfloat16, 1),
        "w4a8": lambda: ia.int_act_mm_triton(
            *(t.cuda() for t in (xq, xs)), None, pack_uint4(q4 + 8).cuda(), s4.cuda(), bias,
            None, torch.bfloat16, 1),
        "fp8": lambda: fp8_mm.fp8_mm_triton(
            *(t.cuda() for t in (fxq, fxs, f8, fs)), bias, torch.bfloat16, 1),
        "int4wo": lambda: wo.weight_only_mm_triton(
            xb, pack_uint4(u4).cuda(), us.cuda(), uz.cuda(), bias, 1),
        "int8wo": lambda: wo.weight_only_mm_triton(xb, q8.cuda(), s8.cuda(), None, bias, 1),
    }  # fmt: skip
    device = xb.device
    for name, call in cases.items():
        got = call()
        group = 32 if name == "w4a8" else 0
        bk = 64 if name.endswith("wo") else 128
        want_split = mid_rows.split(Backend.CUDA, device, m, n, k, group, bk)
        assert want_split > 1 and reductions.pop() == want_split, name
        monkeypatch.setattr(mid_rows, "ENABLED", False)
        unsplit = call()
        monkeypatch.setattr(mid_rows, "ENABLED", True)
        assert not reductions, name
        if name == "w8a8":
            assert bit_equal(got, unsplit), name
        else:
            assert max_rel_error(unsplit, got) < 2e-3, name
