"""kernels/wt_rows_fp6.py: MX fp6 weights (e3m2, e2m3) at 65-128 rows on wt_rows' tile.

Bit for bit the emulated path's weights in x's dtype with one-hot activations (every code at
every position of its 16-code unit, under E8M0 bytes on the one-multiply path and the BIG
one: scales past 2**3 / 2**1, a NaN block, overflow), and the emulated path's product for
random weights (unaligned N, a bias, K split), directly and through mx_decode_triton as the
dispatch calls it. Under TRITON_INTERPRET=1 (the integer and float32 path: make
kernels-interpret) and on an sm90 GPU (the inline assembly, one unit an instance)."""

import pytest
import torch
from _mx_cases import out_dtype, random_case, same
from _pairwise import pairwise
from aoq.kernels import mx_decode, wt_rows, wt_rows_fp6, wt_rows_mx
from aoq.kernels._common import INTERPRET
from test_decode_mma_fp6 import BIG, ELEMS, HOST, LARGE, SMALL, WFMTS, XDTS, _flag, _weight

from aoq.formats.mx import pack_mx_codes
from aoq.testing.metrics import max_rel_error

GPU = torch.cuda.is_available() and not INTERPRET and wt_rows._sm90(-1)
runs = pytest.mark.skipif(
    not (INTERPRET or GPU), reason="needs TRITON_INTERPRET=1 before import, or an sm90 GPU"
)
DEV = "cuda" if GPU else "cpu"


@runs
@pytest.mark.parametrize("wfmt,big,xdt,host", pairwise(WFMTS, BIG, XDTS, HOST))
def test_one_hot_is_each_emulated_weight_exactly(wfmt, big, xdt, host):
    """x's 128 rows one-hot over 128 columns at a time: y[r, n] = the emulated weight [n, k0 +
    r] in x's dtype, every code at every position of its unit (test_decode_mma_fp6._weight's
    rows 0-3), under every byte; an infinite weight gives inf where x selects it and NaN
    elsewhere in its row (0 * inf), a NaN block NaN for its row, as the reference's."""
    n, k = 72, 256
    small = SMALL[wfmt]
    q, s, want = _weight(wfmt, n, k, small + LARGE if big else small, dtype=xdt)
    q, s = q.to(DEV), s.to(DEV)
    gm = s.t().contiguous().t()
    flag = _flag(s, wfmt, host).to(DEV)
    for k0 in (0, 128):
        x = torch.zeros(128, k, dtype=xdt, device=DEV)
        x[torch.arange(128), k0 + torch.arange(128)] = 1.0
        assert wt_rows_mx.serves(x, q, gm, flag, 32, wfmt)
        y = torch.empty(128, n, dtype=out_dtype(xdt), device=DEV)
        wt_rows_fp6.wt_rows_fp6(x, q, gm, flag, None, y, wfmt)
        assert same(y, x.float().cpu() @ want.T), k0


@runs
@pytest.mark.parametrize(
    "rows_split,wfmt,xdt",
    pairwise({"65-1": (65, 1), "100-3": (100, 3), "128-2": (128, 2)}, WFMTS, XDTS),  # fmt: skip
)
def test_matches_emulated_matmul(rows_split, wfmt, xdt):
    """Random activations and a quantized random weight (N 130, a bias, K split in ranges):
    the emulated path's float32-accumulated product, up to summation order and one rounding
    to x's dtype."""
    (m, split), (n, k) = rows_split, (130, 768)
    codes, scale, x, bias, want = random_case(ELEMS[wfmt], n, k, m, xdt, m)
    q, s = pack_mx_codes(codes, ELEMS[wfmt]).to(DEV), scale.view(torch.uint8).to(DEV)
    y = torch.empty(m, n, dtype=out_dtype(xdt), device=DEV)
    wt_rows_fp6.wt_rows_fp6(x.to(DEV), q, s.t().contiguous().t(), _flag(s, wfmt).to(DEV),
                            bias.to(DEV), y, wfmt, split)  # fmt: skip
    assert max_rel_error(want, y.float().cpu()) < 4e-3


@runs
def test_the_decode_entry_takes_it(monkeypatch):
    """mx_decode_triton, as the dispatch calls it past 64 rows (the weight's group-major bytes
    and BIG flag), runs wt_rows_fp6 and returns the emulated product."""
    monkeypatch.setattr(wt_rows, "ENABLED", True)
    wfmt = WFMTS["e2m3"]
    codes, scale, x, bias, want = random_case(ELEMS[wfmt], 128, 512, 96, torch.bfloat16, 5)
    q, s = pack_mx_codes(codes, ELEMS[wfmt]).to(DEV), scale.view(torch.uint8).to(DEV)
    gm, flag, x = s.t().contiguous().t(), _flag(s, wfmt).to(DEV), x.to(DEV)
    assert mx_decode.mma_rows(x, q, gm, flag, 32, wfmt) == 96
    assert mx_decode.fp6_refusal(x, q, gm, flag, 32, ELEMS[wfmt]) is None
    calls = []
    real = wt_rows_fp6.wt_rows_fp6
    monkeypatch.setattr(wt_rows_fp6, "wt_rows_fp6", lambda *a: calls.append(1) or real(*a))
    y = mx_decode.mx_decode_triton(x, q, gm, None, ELEMS[wfmt].value, 32, bias.to(DEV),
                                   big_scales=flag)  # fmt: skip
    assert calls == [1]
    assert max_rel_error(want, y.float().cpu()) < 4e-3


def test_permuted_x_meets_each_plane():
    """permute_x: step column 16 u + 4 t + i lands at t * 32 + 4 u + i."""
    x = torch.arange(2 * 256).reshape(2, 256)
    xp = wt_rows_fp6.permute_x(x)
    for s0 in (0, 128):
        for u, t, i in ((0, 0, 0), (3, 2, 1), (7, 3, 3), (5, 1, 2)):
            assert xp[1, s0 + 32 * t + 4 * u + i] == x[1, s0 + 16 * u + 4 * t + i]


def test_frag_x_meets_each_unit_in_mma_layout():
    """permute_x_frag: in each 64 columns, unit q's code 4 j + 2 h + e (column 16 q + 4 j +
    2 h + e) lands at 16 j + 8 h + 2 q + e, where wgmma's register operand puts it in lane
    q's registers; a bijection on every step."""
    x = torch.arange(2 * 256).reshape(2, 256)
    xp = wt_rows_fp6.permute_x_frag(x)
    assert torch.equal(xp.sort(dim=1).values, x)
    for c0 in (0, 64, 192):
        for q, j, h, e in ((0, 0, 0, 0), (3, 2, 1, 1), (1, 3, 0, 1), (2, 1, 1, 0)):
            assert xp[1, c0 + 16 * j + 8 * h + 2 * q + e] == x[1, c0 + 16 * q + 4 * j + 2 * h + e]


@runs
def test_the_permute_kernel_is_permute_x_frag():
    """permuted_x_frag (the Triton copy an eager plan records) gives permute_x_frag's
    tensor, from rows with a stride past K too."""
    wide = torch.randn(5, 1280 + 64, dtype=torch.bfloat16, device=DEV)
    x = wide[:, :1280]
    got = wt_rows_fp6.permuted_x_frag(x)
    assert got.is_contiguous()
    assert torch.equal(got.cpu(), wt_rows_fp6.permute_x_frag(x.cpu().contiguous()))


@runs
@pytest.mark.parametrize("wfmt,big", pairwise(WFMTS, BIG))
def test_the_joined_scales_probe_is_each_emulated_weight_exactly(monkeypatch, wfmt, big):
    """TILE["su_load"] = False (the scale bytes spread by block_columns' join, session 56's
    default): the one-hot weights, bit for bit, under every byte."""
    monkeypatch.setitem(wt_rows_fp6.TILE, "su_load", False)
    n, k = 72, 256
    q, s, want = _weight(wfmt, n, k, SMALL[wfmt] + LARGE if big else SMALL[wfmt])
    q, s = q.to(DEV), s.to(DEV)
    for k0 in (0, 128):
        x = torch.zeros(128, k, dtype=torch.bfloat16, device=DEV)
        x[torch.arange(128), k0 + torch.arange(128)] = 1.0
        y = torch.empty(128, n, dtype=out_dtype(torch.bfloat16), device=DEV)
        wt_rows_fp6.wt_rows_fp6(x, q, s.t().contiguous().t(), _flag(s, wfmt).to(DEV), None, y,
                                wfmt)  # fmt: skip
        assert same(y, x.float().cpu() @ want.T), k0


@runs
def test_the_k32_probe_matches_emulated_matmul(monkeypatch):
    """TILE["frag"] = False (session 55's four K = 32 MMAs a step) gives the emulated path's
    product too."""
    monkeypatch.setitem(wt_rows_fp6.TILE, "frag", False)
    wfmt = WFMTS["e2m3"]
    codes, scale, x, bias, want = random_case(ELEMS[wfmt], 130, 512, 80, torch.bfloat16, 3)
    q, s = pack_mx_codes(codes, ELEMS[wfmt]).to(DEV), scale.view(torch.uint8).to(DEV)
    y = torch.empty(80, 130, dtype=out_dtype(torch.bfloat16), device=DEV)
    wt_rows_fp6.wt_rows_fp6(x.to(DEV), q, s.t().contiguous().t(), _flag(s, wfmt).to(DEV),
                            bias.to(DEV), y, wfmt, 2)  # fmt: skip
    assert max_rel_error(want, y.float().cpu()) < 4e-3


def test_serves():
    wfmt = WFMTS["e3m2"]
    x = torch.zeros(100, 256, dtype=torch.bfloat16, device=DEV)
    q, s, _ = _weight(wfmt, 64, 256, SMALL[wfmt])
    q, s = q.to(DEV), s.to(DEV)
    gm, flag = s.t().contiguous().t(), _flag(s, wfmt).to(DEV)
    ok = INTERPRET or GPU
    assert wt_rows_mx.serves(x, q, gm, flag, 32, wfmt) is ok
    assert wt_rows_mx.serves(x[:65], q, gm, flag, 32, wfmt) is ok
    assert not wt_rows_mx.serves(x[:64], q, gm, flag, 32, wfmt)  # decode_mma's rows
    assert not wt_rows_mx.serves(x.float(), q, gm, flag, 32, wfmt)
    assert not wt_rows_mx.serves(x, q, gm, None, 32, wfmt)  # no BIG flag
    assert not wt_rows_mx.serves(x, q, s, flag, 32, wfmt)  # row-major bytes
    x192, (q192, s192, _) = x[:, :192], _weight(wfmt, 64, 192, SMALL[wfmt])
    s192 = s192.to(DEV).t().contiguous().t()
    assert not wt_rows_mx.serves(x192, q192.to(DEV), s192, flag, 32, wfmt)  # K % 128
