"""kernels/w4a8_mma.py: W4A8 decode at 2..16 rows on row-major codes, against the reference
(aoq.formats' int_act_linear through int_act_mm's CPU op), at every split, step and scale
layout it takes, its fused and separate reductions, and int_act_mm's routing to it.

Runs under TRITON_INTERPRET=1 on CPU tensors (``make kernels-interpret``) and on a GPU (the
assembly's nibbles, mma.sync); the plain CPU unit run skips it.
"""

import pytest
import torch
from _mx_cases import DEV, GPU, NEEDS_KERNELS
from _pairwise import pairwise
from aoq.kernels import act_quant as aq
from aoq.kernels import int_act_mm as ia
from aoq.kernels import splitk
from aoq.kernels import w4a8_mma as wm

from aoq.formats import affine
from aoq.formats.packing import pack_uint4
from aoq.testing.metrics import max_rel_error

pytestmark = NEEDS_KERNELS


def _case(m: int, n: int = 80, k: int = 2048, mode: int = 0, seed: int = 0):
    """(host, device) tuples of (xq, xs, xz, codes, row-major scales, bias): int8 activations
    (act_quant's mode: 0 symmetric, 1 with zero points, xz None otherwise, 2 one scalar
    scale), a row with wide values."""
    g = torch.Generator().manual_seed(seed + 13 * m + k)
    w, x = torch.randn(n, k, generator=g), torch.randn(m, k, generator=g)
    x[0, :7] *= 40
    xq, xs, xz = aq.quantize_int8_act(x, mode, torch.tensor(0.035))
    q4, s4 = affine.quantize_int4_symmetric(w, 32)
    host = (xq, xs, xz if mode == 1 else None, pack_uint4(q4 + 8), s4, torch.randn(n, generator=g))
    return host, tuple(t.to(DEV) if t is not None else None for t in host)


def _want(host, bias: bool = True) -> torch.Tensor:
    xq, xs, xz, wq, s4, b = host
    return ia.int_act_mm(xq, xs, xz, wq, s4, b if bias else None, None, torch.float32, 0)


def _run(dev, split=None, tile=None, bias=True, scales=None) -> torch.Tensor:
    xq, xs, xz, wq, s4, b = dev
    y = torch.empty(xq.shape[0], wq.shape[0], dtype=torch.float32, device=DEV)
    s = s4 if scales is None else scales
    return wm.w4a8_mma(xq, xs, wq, s, b if bias else None, y, split, tile, x_zero=xz)


# every row count (2, 5, 8 padded to 8 rows; 9, 16 to 16) with both activation forms, each
# of those split and not: 10 of 20 cases
@pytest.mark.parametrize("m,mode,split", pairwise([2, 5, 8, 9, 16], {"sym": 0, "zero": 1}, [1, 3]))
def test_matches_the_reference(m, split, mode):
    """Rows padded to 8 (M <= 8) or 16, K split or not, with and without a bias, symmetric
    activations or with zero points: the reference's product to float32 rounding (each
    group's integer sum is exact; the groups' scaled sums add in another order)."""
    host, dev = _case(m, mode=mode)
    for bias in (True, False):
        got = _run(dev, split, bias=bias)
        assert max_rel_error(_want(host, bias), got.cpu()) < 1e-6, bias


def test_static_activation_scale():
    """One scalar activation scale (the static form without an int32 bias)."""
    host, dev = _case(6, mode=2)
    assert host[1].dim() == 0
    assert max_rel_error(_want(host), _run(dev, 2).cpu()) < 1e-6


def test_zero_points_of_zero_give_the_symmetric_bits():
    """Symmetric codes through the zero-point loop with every z 0: the second dot reads back
    the base itself, so the sums are the symmetric loop's (at its one-accumulator form)
    bit for bit; the symmetric default (GACC) agrees to float32 rounding."""
    _, (xq, xs, _, wq, s4, b) = _case(9)
    y = torch.empty(9, wq.shape[0], dtype=torch.float32, device=DEV)
    zeros = torch.zeros(9, dtype=torch.int32, device=DEV)
    got = wm.w4a8_mma(xq, xs, wq, s4, b, y, 3, x_zero=zeros).clone()
    assert torch.equal(got, wm.w4a8_mma(xq, xs, wq, s4, b, y, 3, {"GACC": False}))
    assert max_rel_error(got.cpu(), wm.w4a8_mma(xq, xs, wq, s4, b, y, 3).cpu()) < 1e-6


def test_zero_points_at_the_ends_of_int8():
    """Rows all positive (z = -128), all negative (z = 127) and mixed, against codes at
    both ends of int4 (Σ q of a group from -256 to 224): z Σ q and the group sums at their
    widest still read back exactly from the shared base."""
    host, _ = _case(3, k=1024, mode=1)
    x = torch.randn(3, 1024, generator=torch.Generator().manual_seed(5))
    x[0], x[1] = x[0].abs() + 0.1, -x[1].abs() - 0.1
    xq, xs, xz = aq.quantize_int8_act(x, 1, None)
    assert xz[0] == -128 and xz[1] == 127
    wq = host[3].clone()
    wq[:8] = 0x00  # q = -8 everywhere
    wq[8:16] = 0xFF  # q = 7
    host = (xq, xs, xz, wq, *host[4:])
    dev = tuple(t.to(DEV) for t in host)
    assert max_rel_error(_want(host), _run(dev, 2).cpu()) < 1e-6


@pytest.mark.parametrize("k", [2080, 2112, 2176])
def test_steps_of_fewer_groups_where_k_asks(k):
    """K a multiple of 32 but not of 256: the step is the largest power-of-two number of
    groups up to TILE's that divides K (one, two or four groups here)."""
    host, dev = _case(4, k=k)
    assert wm.TILE["STEP_K"] // 32 > splitk.k_step(k, 32, wm.TILE["STEP_K"]) // 32
    assert max_rel_error(_want(host), _run(dev, 2).cpu()) < 1e-6


@pytest.mark.parametrize("n", [1, 17, 33])
def test_rows_past_n(n):
    """N not a multiple of the program's rows: the rows past N read row N - 1 and are not
    stored."""
    host, dev = _case(3, n=n)
    got = _run(dev)
    assert got.shape == (3, n)
    assert max_rel_error(_want(host), got.cpu()) < 1e-6


@pytest.mark.parametrize("tile", [{"BLOCK_N": 32}, {"STEP_K": 128}, {"STEP_K": 512}])
def test_other_tiles(tile):
    host, dev = _case(7)
    assert max_rel_error(_want(host), _run(dev, 2, tile).cpu()) < 1e-6


def test_scales_in_either_order():
    """Group-major scales (aoq.tensors.int4's CUDA layout, strides (1, N)) read at their
    strides: the same loaded values, so the same bits as row-major ones."""
    _, dev = _case(5)
    s_gm = dev[4].t().contiguous().t()
    assert s_gm.stride() == (1, s_gm.shape[0])
    assert torch.equal(_run(dev, 3, scales=s_gm), _run(dev, 3))


def test_fused_and_separate_reductions_agree(monkeypatch):
    """The split's partials summed by the column tile's last program (eager) or by the
    reduction kernel (graph capture, AOQ_FUSED_SPLITK=0): split order either way, the same
    bits."""
    _, dev = _case(6)
    fused = _run(dev, 3)
    monkeypatch.setattr(splitk, "FUSED", False)
    assert torch.equal(_run(dev, 3), fused)


def test_serves():
    _, (xq, _, _, wq, s4, _) = _case(4)
    assert wm.serves(xq, wq, s4)
    assert not wm.serves(xq[:1], wq, s4)  # one row: the GEMV's
    x17 = torch.zeros(17, xq.shape[1], dtype=torch.int8, device=DEV)
    assert not wm.serves(x17, wq, s4)
    assert not wm.serves(xq.float(), wq, s4)
    assert not wm.serves(xq, wq, s4[:, :-1])  # groups of 64 or more: decode_mma's
    assert not wm.serves(xq, wq.view(torch.int8), s4)
    assert not wm.serves(xq, wq[:, :-16], s4)


ROUTES = {(2, 0): "gemv", (3, 0): "rows", (5, 0): "rows", (2, 1): "gemv", (3, 1): "rows",
          (16, 1): "rows"}  # fmt: skip
"""(M, activation mode) -> the kernel int_act_mm's W4A8 decode runs."""


@pytest.mark.parametrize(("m", "mode"), list(ROUTES))
def test_int_act_mm_routes_by_rows_and_mode(monkeypatch, m, mode):
    """Activations symmetric or with zero points take w4a8_mma from ROWS_MMA_FROM (3) rows,
    the GEMV below it; each the reference's product."""
    from aoq.kernels import decode_mma as dm

    calls = []
    real_r, real_g, real_d = ia.w4a8_mma, ia.w4a8_gemv, dm.decode_mma
    monkeypatch.setattr(ia, "w4a8_mma", lambda *a, **k: calls.append("rows") or real_r(*a, **k))
    monkeypatch.setattr(ia, "w4a8_gemv", lambda *a, **k: calls.append("gemv") or real_g(*a, **k))
    monkeypatch.setattr(dm, "decode_mma", lambda *a, **k: calls.append("mma") or real_d(*a, **k))
    assert ia.ROWS_MMA_FROM == 3 and ia.GEMV_ROWS == 3
    g = torch.Generator().manual_seed(7 * m + mode)
    w, x = torch.randn(80, 1024, generator=g), torch.randn(m, 1024, generator=g)
    xq, xs, xz = aq.quantize_int8_act(x, mode, None)
    q4, s4 = affine.quantize_int4_symmetric(w, 32)
    args = (xq, xs, xz if mode == 1 else None, pack_uint4(q4 + 8), s4, torch.randn(80, generator=g))
    want = ia.int_act_mm(*args, None, torch.float32, 0)
    dev = [t.to(DEV) if t is not None else None for t in args]
    got = ia.int_act_mm_triton(*dev, None, torch.float32, 0)
    assert calls == [ROUTES[m, mode]]
    assert max_rel_error(want, got.cpu()) < 1e-6


@pytest.mark.skipif(not GPU, reason="a GPU: programmatic dependent launch")
def test_pdl_gives_the_plain_launch_bits():
    from aoq.kernels import _common

    if not _common.pdl(torch.device(DEV)):
        pytest.skip("no programmatic dependent launch on this GPU")
    _, dev = _case(12)
    xq, xs, xz, wq, s4, b = dev
    y = torch.empty(12, wq.shape[0], dtype=torch.float32, device=DEV)
    got = wm.w4a8_mma(xq, xs, wq, s4, b, y, 3, pdl=True).clone()
    assert torch.equal(got, _run(dev, 3))
    _, dev = _case(12, mode=1)
    xq, xs, xz, wq, s4, b = dev
    got = wm.w4a8_mma(xq, xs, wq, s4, b, y, 3, pdl=True, x_zero=xz).clone()
    assert torch.equal(got, _run(dev, 3))


@pytest.mark.parametrize(("m", "split", "asked"), [(3, 3, True), (16, 2, True), (8, 1, False)])
def test_takes_pdl_when_asked(monkeypatch, m, split, asked):
    """Asked for programmatic dependent launch, w4a8_mma takes it at any rows and split: the
    caller's activation kernel places it late where that is faster (late_trigger)."""
    seen = []
    monkeypatch.setattr(wm, "launch", lambda *a, **k: seen.append((k["PDL"], k["launch_pdl"])))
    _, (xq, xs, _, wq, s4, b) = _case(m)
    y = torch.empty(m, wq.shape[0], dtype=torch.float32, device=DEV)
    wm.w4a8_mma(xq, xs, wq, s4, b, y, split, pdl=asked)
    assert seen == [(asked, asked)]


@pytest.mark.parametrize(("m", "split", "late"), [(4, 2, False), (5, 2, True), (16, 4, True),
                                                  (16, 1, False), (5, 1, False)])  # fmt: skip
def test_late_trigger_past_pdl_rows_where_k_is_split(monkeypatch, m, split, late):
    """The activation kernel places w4a8_mma as it ends from PDL_ROWS + 1 rows where TILE
    splits K (bench/NOTES.md, session 43: placed at once there, the split kernel ran slower);
    up to PDL_ROWS rows or unsplit, at once. The split is TILE's, from the shape."""
    asked = []

    def splits(backend, device, n_prog, k, step, per_sm):
        asked.append((n_prog, k, step, per_sm))
        return split

    monkeypatch.setattr(wm.splitk, "splits", splits)
    assert wm.PDL_ROWS == 4 and wm.late_trigger(m, 8192, 4096, torch.device(DEV)) is late
    step = splitk.k_step(4096, wm.GROUP_SIZE, wm.TILE["STEP_K"])
    assert asked in ([], [(8192 // wm.TILE["BLOCK_N"], 4096, step, wm.TILE["per_sm"])])
    assert bool(asked) == (m > wm.PDL_ROWS)
