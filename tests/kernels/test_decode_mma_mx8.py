"""kernels/decode_mma.py with each MX block's scale on its float32 product tile
(decode_mma_steps._post_scaled_step): MX int8 (WFMT 10) always, MX fp8 e4m3 under the tile's
POST. The codes' own values (exact in bf16 and fp16) go through the MMA, the block's power of
two multiplies the float32 tile after it. Checked bit for bit with one-hot activations for
every code under every E8M0 byte (a NaN byte among them), and against the emulated matmul on
random weights. Under TRITON_INTERPRET=1 (the float path) and on a GPU (the PTX)."""

import functools

import pytest
import torch
import triton
import triton.language as tl
from _mx_cases import DEV, GPU, NEEDS_KERNELS, OUT, one_hot_decodes, out_dtype, random_decode
from _pairwise import pairwise
from aoq.kernels import decode_mma as dm
from aoq.kernels._common import WeightFormat
from aoq.kernels.bf16_codes import int8_steps

from aoq.formats.mx import MXElem, mx_dequantize, pack_mx_codes
from aoq.tensors.mx import BIG_LIMIT, big_scale_flag
from aoq.testing.metrics import max_rel_error

pytestmark = NEEDS_KERNELS
INT8 = WeightFormat.MX_INT8
FP8 = WeightFormat.MX_FP8
TILE = {INT8: {"WIDE": False}, FP8: {"POST": True, "WIDE": False}}
"""Each format's per-block tile: MX int8 takes the post-MMA scale (its TILE with fp16 x, and
at 32 rows), MX fp8 under POST."""
WIDE = {"WIDE": True, "STEP_K": 128}
"""MX int8's WIDE steps (decode_mma_wide.py; its TILE with bf16 x): each code times its
block's bf16 step 2**(b - 133), four blocks on one MMA; fp16 x keeps the post-MMA scale."""
CASES = pytest.mark.parametrize(
    "wfmt,tile", [*TILE.items(), (INT8, WIDE)], ids=["int8", "fp8-post", "int8-wide"]
)
OVERS = {
    "default": {}, "step64": {"STEP_K": 64}, "x-operand-a": {"WT": False, "num_warps": 4},
    "wide-x-operand-a": {"WIDE": True, "WT": False, "num_warps": 4}, "tile": None,
}  # fmt: skip
XDTS = {"bf16": torch.bfloat16, "fp16": torch.float16}
ELEMS = {INT8: MXElem.INT8, FP8: MXElem.FP8_E4M3}
BYTES = [0, 1, 2, 7, 60, 100, 127, 134, 135, 200, 246, 254]
"""E8M0 bytes from the smallest (int8's 2**-133, e4m3's subnormal 2**-136) to the largest
finite one; one post-MMA path takes them all."""


def _flag(wfmt, scale: torch.Tensor) -> torch.Tensor:
    """The BIG flag decode_mma takes with MX weights: unused by the post-MMA scale (int8: no
    byte is above 255, so never set)."""
    return big_scale_flag(scale, 255 if wfmt is INT8 else BIG_LIMIT[ELEMS[wfmt]])


def _codes(wfmt, n: int, k: int, g: torch.Generator) -> torch.Tensor:
    """Random codes, row 0 every code in turn: int8's -127..127, e4m3's 254 finite ones."""
    if wfmt is INT8:
        finite = torch.arange(-127, 128, dtype=torch.int8)
    else:
        bits = [c for c in range(256) if c & 0x7F != 0x7F]
        finite = torch.tensor(bits, dtype=torch.uint8).view(torch.float8_e4m3fn)
    codes = finite[torch.randint(0, len(finite), (n, k), generator=g)]
    codes[0] = finite[torch.arange(k) % len(finite)]
    return codes


def _weight(wfmt, n: int, k: int, seed: int = 0) -> tuple:
    """(packed codes, bytes [N, K / 32], the weight's float32 values): random codes under
    bytes drawn from BYTES; row 1's first block one largest code (int8 127, e4m3 448) under
    byte 253 among zeros (e4m3: inf in float32), row 2's second block NaN (byte 255)."""
    g = torch.Generator().manual_seed(seed)
    codes = _codes(wfmt, n, k, g)
    pick = torch.randint(0, len(BYTES), (n, k // 32), generator=g)
    scale = torch.tensor(BYTES, dtype=torch.uint8)[pick]
    codes[1, :32] = 0
    codes[1, 3] = 127 if wfmt is INT8 else 448.0
    scale[1, 0], scale[2, 1] = 253, 255
    elem = ELEMS[wfmt]
    want = mx_dequantize(codes, scale, elem, 32, 1, torch.float32)
    return pack_mx_codes(codes, elem).to(DEV), scale.to(DEV), want


@CASES
@pytest.mark.parametrize("xdt", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_one_hot_is_each_weight_rounded_once(wfmt, tile, xdt):
    """Row r of x is e_k: y[r, n] is the weight [n, k] (code times its block's power of two,
    exact in float32) rounded once to x's dtype: what the emulated path's weight is wherever
    that is in range. A weight beyond float32 (e4m3 448 under byte 253) is inf where x
    selects it and its true product, 0, elsewhere in its row (the emulated path's inf weight
    gives NaN there: 0 * inf); a NaN block makes its row NaN."""
    n, k = 72, 256
    q, s, want = _weight(wfmt, n, k)
    sg = s.t().contiguous().t()
    nan_rows = want.isnan().any(dim=1)
    for k0, _, y in one_hot_decodes(q, sg, _flag(wfmt, s), k // 32, wfmt, n, k, xdt, tile):
        expect = want[:, k0 : k0 + 16].T.to(out_dtype(xdt)).float()
        expect[:, nan_rows] = float("nan")
        got = y.float().cpu()
        assert torch.equal(got.isnan(), expect.isnan()), k0
        ok = ~expect.isnan()
        assert torch.equal(got[ok], expect[ok]), k0
    if wfmt is FP8:
        assert want[1, 3].item() == float("inf")


# each format x activation dtype, each with every tile (steps of four blocks, of two, x as
# operand A, WIDE with x as operand A, the shipped one), row count (1 and 5 padded to 8, 16)
# and split, each pair once: 16 of 120 cases
@pytest.mark.parametrize(
    "wfmt,xdt,over,m,split",
    pairwise({"int8": INT8, "fp8-post": FP8}, XDTS, OVERS, [1, 5, 16], [1, 3], full=2),
)
def test_matches_emulated_matmul(m, split, over, wfmt, xdt):
    """Random activations and a quantized random weight (unaligned N, a bias, K split in
    ranges; steps of two and four blocks; either MMA orientation; MX int8's WIDE steps): the
    emulated path's float32-accumulated product, up to summation order and one rounding to
    x's dtype."""
    # None: the shipped tiles (MX int8: WIDE with bf16 x); WIDE: e4m3's scaled codes, not POST
    tile = None if over is None else {**({} if "WIDE" in over else TILE[wfmt]), **over}
    flag_of = functools.partial(_flag, wfmt)
    want, y = random_decode(ELEMS[wfmt], wfmt, flag_of, m, split, xdt, tile)
    assert max_rel_error(want, y) < 4e-3


def test_serves_int8_blocks_with_any_byte():
    x = torch.zeros(1, 256, dtype=torch.bfloat16, device=DEV)
    q, s, _ = _weight(INT8, 8, 256)
    flag = _flag(INT8, s)
    assert flag.numel() == 0  # no byte is beyond the one path: 255 is int8's limit
    assert dm.serves(x, q, 8, INT8, s, flag)
    assert dm.serves(x.half(), q, 8, INT8, s, flag)
    assert not dm.serves(x.float(), q, 8, INT8, s, flag)
    assert not dm.serves(x, q, 16, INT8, s, flag)  # blocks of 16


@pytest.mark.parametrize("m", [1, 8])
@CASES
def test_eight_rows_are_sixteen_rows_bit_for_bit(m, wfmt, tile):
    """x padded to 8 rows gives the 16-row tile's output bit for bit on a GPU (under the
    interpreter up to float32 summation order)."""
    n, k = 72, 256
    q, s, _ = _weight(wfmt, n, k)
    s[1, 0] = 127  # (no inf weight: its sums would follow the order)
    if tile is WIDE:  # (nor sums past float32 within a block: WIDE sums scaled weights)
        s[(s > 200) & (s != 255)] = 200
    sg = s.t().contiguous().t()
    x = torch.randn(m, k, generator=torch.Generator().manual_seed(m)).to(torch.bfloat16)
    ys = []
    for rows in (16, 8):
        ys.append(torch.empty(m, n, dtype=OUT, device=DEV))
        dm.decode_mma(x.to(DEV), q, sg, _flag(wfmt, s), None, ys[-1], k // 32, wfmt, 3,
                      tile={**(tile or {}), "ROWS": rows})  # fmt: skip
    assert torch.equal(ys[0].isnan(), ys[1].isnan())
    a, b = ys[0].nan_to_num(), ys[1].nan_to_num()
    assert torch.equal(a, b) if GPU else max_rel_error(a, b) < 1e-6


@pytest.mark.parametrize("bs", [64, 256])
@CASES
def test_larger_blocks(bs, wfmt, tile):
    """Blocks of 64 and 256 (one scale a group of that many codes, a step of one or more
    groups), K split three ways: the emulated matmul's product."""
    from aoq.formats.mx import mx_quantize

    n, k, m = 72, 1024, 3
    g = torch.Generator().manual_seed(bs)
    codes, scale = mx_quantize(torch.randn(n, k, generator=g), ELEMS[wfmt], bs, 1)
    w = mx_dequantize(codes, scale, ELEMS[wfmt], bs, 1, torch.bfloat16).float()
    x = torch.randn(m, k, generator=g).to(torch.bfloat16)
    q, s = pack_mx_codes(codes, ELEMS[wfmt]).to(DEV), scale.to(DEV)
    y = torch.empty(m, n, dtype=OUT, device=DEV)
    dm.decode_mma(x.to(DEV), q, s.t().contiguous().t(), _flag(wfmt, s), None, y, k // bs, wfmt,
                  3, tile=tile)  # fmt: skip
    assert max_rel_error(x.float() @ w.T, y.float().cpu()) < 4e-3


@triton.jit
def _steps(b_ptr, y_ptr):
    offs = tl.arange(0, 256)
    tl.store(y_ptr + offs, int8_steps(tl.load(b_ptr + offs)).to(tl.int16, bitcast=True))


def test_int8_steps_are_each_bytes_power_of_two_in_bf16():
    """bf16_codes.int8_steps (WIDE's MX int8 steps, built a row at a time on NVIDIA): byte b ->
    2**(b - 133) as bf16 bits, subnormal below b = 7 (2**-133 at b = 0), NaN for 255."""
    b = torch.arange(256, dtype=torch.int32, device=DEV)
    y = torch.empty(256, dtype=torch.int16, device=DEV)
    _steps[(1,)](b, y)  # (the bits: the interpreter's bf16 -> float32 flushes subnormals)
    want = torch.exp2(torch.arange(256, dtype=torch.float64) - 133).to(torch.bfloat16)
    assert torch.equal(y.cpu()[:255], want.view(torch.int16)[:255])
    assert y[255].item() == 0x7FC0  # NaN
    got = y.cpu().view(torch.bfloat16).double()
    assert got[0].item() == 2.0**-133 and got[6].item() == 2.0**-127 and got[254] == 2.0**121
