"""kernels/decode_mma.py's XMX: MX int8 weights against MX int8 activation codes on the
integer MMA, each block's int32 sums times both block scales after it
(decode_mma_steps._int8_block_step), and its entry kernels/mx_decode.mx_int8_xmx (the
activation cast, then the decode). Checked bit for bit against the emulated path where K is
one block (its float32 sum is exact, as the block's integer sum is), and to its summation
order on random data: under TRITON_INTERPRET=1 and on a GPU."""

import pytest
import torch
from _mx_cases import DEV, GPU, NEEDS_KERNELS, OUT
from _pairwise import pairwise
from aoq.kernels import decode_mma as dm
from aoq.kernels import mx_decode as mdc
from aoq.kernels._common import WeightFormat

from aoq.formats.mx import MXElem, mx_dequantize, mx_quantize, pack_mx_codes
from aoq.testing.metrics import max_rel_error

pytestmark = NEEDS_KERNELS
INT8 = WeightFormat.MX_INT8
OVERS = {"default": {}, "step64": {"STEP_K": 64}, "x-operand-a": {"WT": False, "num_warps": 4}}
NO_BIG = torch.zeros(0, dtype=torch.int32)
"""The weight's BIG flag: empty (the host knows no byte is beyond int8's one path)."""


def _side(rows: int, k: int, bs: int, g: torch.Generator, lo: int = 110, hi: int = 140):
    """Random MX int8 codes [rows, k] (every code -127..127 in row 0) under random E8M0
    bytes in [lo, hi) a block of ``bs``: (codes int8, bytes uint8, float32 values)."""
    codes = torch.randint(-127, 128, (rows, k), generator=g, dtype=torch.int8)
    codes[0] = (torch.arange(k) % 255 - 127).to(torch.int8)
    scale = torch.randint(lo, hi, (rows, k // bs), generator=g).to(torch.uint8)
    return codes, scale, mx_dequantize(codes, scale, MXElem.INT8, bs, 1, torch.float32)


def _decode(xc, xs, wc, ws, bs, split=None, tile=None, bias=None) -> torch.Tensor:
    n, k = wc.shape
    q = pack_mx_codes(wc, MXElem.INT8).to(DEV)
    gm = ws.t().contiguous().t().to(DEV)
    y = torch.empty(xc.shape[0], n, dtype=OUT, device=DEV)
    dm.decode_mma(xc.to(DEV), q, gm, NO_BIG.to(DEV), bias, y, k // bs, INT8, split, tile=tile,
                  x_block_scale=xs.to(DEV))  # fmt: skip
    return y.float().cpu()


@pytest.mark.parametrize("m", [1, 5, 16])
def test_one_block_is_the_emulated_value_bit_for_bit(m):
    """K = 32, one block: every output is the block's exact sum times both powers of two,
    rounded once to the output dtype, as the emulated product of the dequantized values; a
    NaN byte on either side makes its row or column NaN."""
    g = torch.Generator().manual_seed(m)
    n, k = 72, 32
    xc, xs, _ = _side(m, k, 32, g)
    wc, ws, _ = _side(n, k, 32, g, 100, 150)
    xs[m - 1, 0] = 255
    ws[3, 0] = 255
    xv, wv = (mx_dequantize(c, s, MXElem.INT8, 32, 1) for c, s in ((xc, xs), (wc, ws)))
    want = (xv.double() @ wv.double().T).to(OUT).float()
    got = _decode(xc, xs, wc, ws, 32)
    assert torch.equal(got.isnan(), want.isnan())
    assert want.isnan().any(dim=1)[m - 1] and want.isnan().any(dim=0)[3]
    ok = ~want.isnan()
    assert torch.equal(got[ok], want[ok])


# every block size (several blocks a step, one, a step inside one) on every tile (steps of
# 128 or 64, x as operand A) and each with every row count (1 and 5 padded to 8, 16) and
# split, each pair once: 9 of 27 cases
@pytest.mark.parametrize("bs,over,m,split", pairwise([32, 64, 256], OVERS, [1, 5, 16], [1, 3]))
def test_matches_emulated_matmul(m, split, bs, over):
    """Random codes and bytes, N unaligned, a bias, K split; steps of one or more blocks;
    either MMA orientation: the emulated float32 product up to summation order."""
    g = torch.Generator().manual_seed(7 * m + bs)
    n, k = 72, 1024
    xc, xs, xv = _side(m, k, bs, g)
    wc, ws, wv = _side(n, k, bs, g, 100, 150)
    bias = torch.randn(n, generator=g).to(torch.bfloat16)
    want = xv @ wv.T + bias.float()
    got = _decode(xc, xs, wc, ws, bs, split, over or None, bias.to(DEV))
    assert max_rel_error(want, got) < 4e-3


def test_eight_rows_are_sixteen_rows():
    g = torch.Generator().manual_seed(3)
    xc, xs, _ = _side(5, 256, 32, g)
    wc, ws, _ = _side(72, 256, 32, g, 100, 150)
    a, b = (_decode(xc, xs, wc, ws, 32, 3, {"ROWS": rows}) for rows in (16, 8))
    assert torch.equal(a, b) if GPU else max_rel_error(a, b) < 1e-6


@pytest.mark.parametrize("xdt", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("rule", ["floor", "rceil"])
def test_entry_is_the_emulated_path(xdt, rule):
    """mx_int8_xmx from bf16 / fp16 x: the reference's MX int8 quantize-dequantize of x
    (the config's activation), times the weight's values, up to summation order."""
    g = torch.Generator().manual_seed(11)
    m, n, k = 4, 72, 512
    x = (torch.randn(m, k, generator=g) * 3).to(xdt)
    w = torch.randn(n, k, generator=g)
    wc, ws = mx_quantize(w, MXElem.INT8, 32, 1)
    wv = mx_dequantize(wc, ws, MXElem.INT8, 32, 1, torch.float32)
    xc, xsc = mx_quantize(x.float(), MXElem.INT8, 32, 1, scale_rounding=rule)
    xv = mx_dequantize(xc, xsc, MXElem.INT8, 32, 1, torch.float32)
    q = pack_mx_codes(wc, MXElem.INT8).to(DEV)
    gm = ws.view(torch.uint8).t().contiguous().t().to(DEV)
    y = mdc.mx_int8_xmx(x.to(DEV), q, gm, NO_BIG.to(DEV), 32, None, rule, split=2)
    assert y.dtype == xdt
    assert max_rel_error(xv @ wv.T, y.float().cpu()) < 4e-3


def test_launcher_refuses_what_xmx_does_not_take():
    g = torch.Generator().manual_seed(1)
    xc, xs, _ = _side(2, 64, 32, g)
    wc, ws, _ = _side(8, 64, 32, g)
    q, gm = pack_mx_codes(wc, MXElem.INT8).to(DEV), ws.t().contiguous().t().to(DEV)
    y = torch.empty(2, 8, dtype=OUT, device=DEV)
    flag = NO_BIG.to(DEV)
    with pytest.raises(ValueError, match="x_block_scale"):  # int8 x without its bytes
        dm.decode_mma(xc.to(DEV), q, gm, flag, None, y, 2, INT8, None)
    with pytest.raises(ValueError, match="x_block_scale"):  # bytes of another shape
        dm.decode_mma(xc.to(DEV), q, gm, flag, None, y, 2, INT8, None,
                      x_block_scale=xs[:, :1].contiguous().to(DEV))  # fmt: skip
    with pytest.raises(ValueError, match="x_block_scale"):  # float x with bytes
        dm.decode_mma(xc.to(torch.bfloat16).to(DEV), q, gm, flag, None, y, 2, INT8, None,
                      x_block_scale=xs.to(DEV))  # fmt: skip
