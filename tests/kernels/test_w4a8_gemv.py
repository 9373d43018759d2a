"""kernels/w4a8_gemv.py at several activation rows (ROWS 2-4: each step's codes loaded once
for every row) against the same GEMV one row at a time and the reference, and int_act_mm's
routing of W4A8 decode by M (GEMV_ROWS).

Runs under TRITON_INTERPRET=1 on CPU tensors (``make kernels-interpret``: the float path)
and on a GPU (the ``dp4a`` path); the plain CPU unit run skips it.
"""

import pytest
import torch
from _mx_cases import DEV, GPU, NEEDS_KERNELS
from _pairwise import pairwise
from aoq.kernels import act_quant as aq
from aoq.kernels import int_act_mm as ia
from aoq.kernels import w4a8_gemv as wg

from aoq.formats import affine
from aoq.formats.packing import pack_uint4
from aoq.testing.metrics import max_rel_error

pytestmark = NEEDS_KERNELS
MODES = {"sym": 0, "asym": 1, "static": 2}


def _case(m: int, mode: int, n: int = 80, k: int = 2048):
    g = torch.Generator().manual_seed(7 * m + mode)
    w, x = torch.randn(n, k, generator=g), torch.randn(m, k, generator=g)
    x[0, :7] *= 40  # a row with wide values
    xq, xs, xz = aq.quantize_int8_act(x, mode, torch.tensor(0.035))
    q4, s4 = affine.quantize_int4_symmetric(w, 32)
    bias_int = torch.randint(-999, 999, (n,), dtype=torch.int32, generator=g) if mode == 2 else None
    bias = None if mode == 2 else torch.randn(n, generator=g)
    host = (xq, xs, xz if mode == 1 else None, pack_uint4(q4 + 8), s4, bias, bias_int)
    return host, tuple(t.to(DEV) if isinstance(t, torch.Tensor) else t for t in host)


def _gemv(args, m: int, split: int | None, mode: int, tile: dict | None = None) -> torch.Tensor:
    """The GEMV's launch itself (int_act_mm's arguments) at M = m."""
    xq, xs, xz, wq, s4, bias, bias_int = args
    ws = s4.contiguous()
    gstar = ia.ref.bias_group(ws).to(torch.int32) if bias_int is not None else ws
    flags = dict(GROUP_SIZE=32, ASYM=mode == 1, STATIC=mode == 2, HAS_BIAS=bias is not None,
                 HAS_BIAS_INT=bias_int is not None)  # fmt: skip
    launch_args = (xq, xs, xz if xz is not None else xs, wq, ws,
                   bias if bias is not None else ws, bias_int if bias_int is not None else ws,
                   gstar)  # fmt: skip
    y = torch.empty(m, wq.shape[0], dtype=torch.float32, device=DEV)
    wg.w4a8_gemv(launch_args, y, xq.shape[1], 32, flags, split, False, tile=tile)
    return y


# every activation mode at every ROWS (2, 3, 4), each of those split and not: 9 of 18 cases
@pytest.mark.parametrize("mode,m,split", pairwise(MODES, [2, 3, 4], [1, 3]))
def test_rows_are_each_row_alone(m, mode, split):
    """Each row of an M-row launch is that row's M = 1 launch at the same step (GEMV_TILE's
    STEP_K_ROWS) bit for bit (the same exact group sums, steps and split, in the same
    float32 order), every activation mode
    (zero points, the static form's int32 bias), with K split or not; and the reference's
    product to float32 rounding."""
    host, dev = _case(m, mode)
    got = _gemv(dev, m, split, mode)
    xq, xs, xz = dev[:3]
    step = {"STEP_K": wg.GEMV_TILE["STEP_K_ROWS"].get(m, wg.GEMV_TILE["STEP_K"])}
    for r in range(m):
        row = (xq[r : r + 1], xs if mode == 2 else xs[r : r + 1],
               None if xz is None else xz[r : r + 1], *dev[3:])  # fmt: skip
        assert torch.equal(got[r : r + 1], _gemv(row, 1, split, mode, step)), r
    want = ia.int_act_mm(*host, torch.float32, 0)
    assert max_rel_error(want, got.cpu()) < 1e-6


def test_rows_refused_past_the_limit():
    _, dev = _case(wg.MAX_ROWS + 1, 0)
    with pytest.raises(ValueError, match="takes 1 to"):
        _gemv(dev, wg.MAX_ROWS + 1, 1, 0)


@pytest.mark.parametrize("rows", [1, 4])
def test_decode_takes_the_gemv_up_to_gemv_rows(monkeypatch, rows):
    """int_act_mm's W4A8 decode (symmetric activations): the GEMV for M <= GEMV_ROWS,
    w4a8_mma above (ROWS_MMA_FROM just past it here); both the reference's product."""
    monkeypatch.setattr(ia, "GEMV_ROWS", rows)
    monkeypatch.setattr(ia, "ROWS_MMA_FROM", rows + 1)
    calls = []
    real_g, real_r = wg.w4a8_gemv, ia.w4a8_mma
    monkeypatch.setattr(ia, "w4a8_gemv", lambda *a, **k: calls.append("gemv") or real_g(*a, **k))
    monkeypatch.setattr(ia, "w4a8_mma", lambda *a, **k: calls.append("rows") or real_r(*a, **k))
    for m in (1, 3, 5):
        host, dev = _case(m, 0)
        got = ia.int_act_mm_triton(*dev, torch.float32, 0)
        assert calls.pop() == ("gemv" if m <= rows else "rows"), m
        assert max_rel_error(ia.int_act_mm(*host, torch.float32, 0), got.cpu()) < 1e-6


def test_gemv_reads_group_major_scales_as_they_are(monkeypatch):
    """At GEMV rows int_act_mm hands the GEMV group-major scales (aoq.tensors.int4's CUDA
    layout, strides (1, N)) with their strides, not a row-major copy made every call (on an
    H100 that copy took the M 2 call from 20 to 38 us): row-major scales' bits under the
    interpreter; on a GPU the scale tile's layout orders a step's float32 sum over its groups,
    so float32 rounding."""
    monkeypatch.setattr(ia, "GEMV_ROWS", 2)
    _, dev = _case(2, 1)
    s_gm = dev[4].t().contiguous().t()
    copies = []
    real = torch.Tensor.contiguous
    monkeypatch.setattr(torch.Tensor, "contiguous",
                        lambda t, *a, **k: copies.append(t.shape) or real(t, *a, **k))  # fmt: skip
    got = ia.int_act_mm_triton(*dev[:4], s_gm, *dev[5:], torch.float32, 0)
    assert not copies
    monkeypatch.setattr(torch.Tensor, "contiguous", real)
    want = ia.int_act_mm_triton(*dev, torch.float32, 0)
    assert max_rel_error(got, want) < 1e-6 if GPU else torch.equal(got, want)
