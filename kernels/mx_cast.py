"""MX casts of a 2-D tensor along dim 0 or dim 1: the six casts of MX training need both.

Two ops, registered with torch.library; the CPU implementation is the aoq.formats.mx
reference, the CUDA (and ROCm) implementation the Triton kernels below, bit for bit the same:

    aoq::mx_cast(x, elem, block_size, dim, scale_rounding) -> (qdata, scale)
        qdata  uint8 codes packed along ``dim`` (MXTensor.qdata's layout): fp8 / int8 one
               byte each; fp4 two per byte, first element in the low nibble; fp6 four in
               three bytes (aoq.formats.packing)   [R, C * bits / 8] or [R * bits / 8, C]
        scale  uint8 E8M0 bytes, 0xFF = NaN block  [R, C / B] (dim 1) or [R / B, C] (dim 0)
    aoq::mx_qdq(x, elem, block_size, dim, scale_rounding) -> x's dtype [R, C]
        quantize then dequantize in one pass (emulated MX GEMMs multiply these)

Tiles. Each thread loads 16 contiguous bytes at a time, each block is reduced inside one
warp (registers, then shuffles: no shared memory, no barriers), codes are stored at the
load's width, and consecutive programs read consecutive memory (the access pattern of a
copy). bf16, B = 32, the default tiles (``cast_tile``)::

    dim 1  blocks are runs of B consecutive elements of the flattened tensor; a program takes
           NB = 256 of them (16 KB) as [NB, H, W], W = B / H: thread t holds 8 elements of
           each of the H = 2 pieces of one block, so 2 lanes share a block and its scale
                block b: | piece 0: lane 0 | lane 1 | piece 1: lane 0 | lane 1 |
    dim 0  blocks run down columns; a program takes one block-row, B rows x 256 columns,
           as [L, CG, RPT, CW] = [4, 4, 8, 64]: row = l * RPT + i, col = g * CW + c
                lanes 0..7 of a warp: 8 columns each, 64 columns   (x 4 warps = CG)
                lanes  +8, +16, +24: the next 8-row quarters of the block   (L = 4)
           a thread holds 8 consecutive rows x 8 columns; a block = 4 lanes, 2 shuffles;
           programs walk the columns of a block-row first, so whole rows stream together.

Packing happens in registers: along dim 1 a thread's 8 codes split into pairs / quads;
along dim 0 its 8 consecutive rows (a register permutation puts rows last) do.

Exactness: the kernels repeat the reference step by step (aoq/formats/mx.py). The block max
is an integer max of |x|'s float32 bits, which also flags NaN/Inf blocks (bits >= Inf's);
the shared exponent comes from those bits (a subnormal amax through an exact int -> float
conversion), powers of two are built from bits, and no libdevice call is made (Triton
flushes subnormals only there). Rounding (RNE, saturating) is one float add: |v| + 2^(e +
23 - mbits) with e = max(exponent(|v|), emin) leaves |v| rounded to the element grid (the
sum's ulp is the grid's step at v), and the code is the bits of that value times
2^(bias - 127) shifted right by 23 - mbits: the float32 encoding re-biased, an element
subnormal landing on a float32 subnormal with the same bits. Saturation is a min on the
code. fp8 on NVIDIA sm90+ may instead use the float8 conversion (RNE, subnormals,
satfinite), two elements per instruction.

Speed. Goal: >= 80% of device-copy bandwidth at 8192 x 8192 bf16 (read 128 MiB, write 64
MiB of fp8 codes + 2 MiB of scales). The first kernels reached 54% (dim 1) and 24% (dim 0)
on an H200. Why, from their sm90 SASS (compiled here, no GPU needed) and access pattern:
- dim 0 transposed each [64, 128] tile in registers (tl.trans) so that blocks became rows,
  and back for the store: 4 KB of shared memory and 7 barriers per tile, 160 shuffles and
  ~80 shared loads/stores per thread, the block reduction spread across warps.
- both read 64 x 128 tiles, 256 contiguous bytes per row, the program id walking down the
  rows first: the ~1000 resident programs of an H200 each read 256-byte pieces of 64 rows
  16 KB apart, not the whole DRAM pages a copy streams. dim 1 (fp8) spent only ~11
  instructions per element, so its 54% points at this pattern, not at arithmetic.
- NaN/Inf detection was a second reduction (a sum of x * 0) beside the max; the integer
  rounding path spent 26 (dim 1) / 40 (dim 0) instructions per element, two of them float
  -> int conversions (a quarter of the FMA rate); scales went out one byte per thread.
What each change moves: blocks reduced inside a warp (dim 0: no shared memory or barriers,
16 shuffles); one integer max for amax and NaN/Inf; programs over 16 contiguous KB of rows,
walking along them (the DRAM pattern of a copy); codes stored at the load's width (no
layout conversion); two lanes per dim-1 block (half the per-block scale work); rounding by
one float add and no float -> int conversion; packing in registers (fp4 writes 32 MiB, not
64). SASS instructions per element, sm90, first kernels -> these (dim 1 | dim 0): fp8 via
cvt 10.9 -> 8.6 | 25.0 -> 11.1; fp8 integer path 26.0 -> 18.0 | 40.3 -> 20.5; fp4 26.0 ->
18.5 | 40.3 -> 20.8 (now packed); fp6 -> 21.0 | 21.8. At 80% of copy an H200 SM must cast ~4
elements a clock: ~35 of its 128 issue slots for fp8, ~75 for fp4/fp6 (about 9 of whose
~19 instructions use the integer pipe, 64 a clock). Measured: bench/mx_cast_speed.py.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from aoq.kernels._common import INTERPRET, out_dtype_for
from aoq.kernels.mx_ops import (
    PACK_GROUP,
    Dim0Tile,
    Dim1Tile,
    Tile,
    _check,
    _warp_size,
    cast_tile,
    mx_cast,
    mx_cast_reference,
    mx_qdq,
    mx_qdq_reference,
    packed_shape,
    scale_shape,
    triton_block_ok,
)
from torch import Tensor

from aoq.formats.mx import MXElem, ScaleRounding, parse_choice

FRAC_MASK = tl.constexpr(0x7FFFFF)  # kernels read globals only as constexprs


@triton.jit
def _exp2i(n, NORMAL: tl.constexpr):
    """2^n as float32 for int32 n in [-149, 127], from the bits; NORMAL: n >= -126 is known
    (2^-shared for float elements: shared <= 127 - emax + 1 <= 126)."""
    normal = (tl.maximum(n + 127, 1) << 23).to(tl.float32, bitcast=True)
    if NORMAL:
        return normal
    sub = (1 << tl.minimum(tl.maximum(n + 149, 0), 22)).to(tl.float32, bitcast=True)
    return tl.where(n >= -126, normal, sub)


@triton.jit
def _amax_bits(x, AXIS: tl.constexpr):
    """|x|'s largest float32 bits along AXIS as int32 (a max at or above 0x7F800000, Inf's
    bits, marks a block holding NaN or Inf): an unsigned max of the bits shifted left by
    one, which drops the sign (a multiply, spared the integer pipe), then shifted back."""
    b2 = x.to(tl.float32).to(tl.uint32, bitcast=True) << 1
    return (tl.max(b2, axis=AXIS) >> 1).to(tl.int32)


@triton.jit
def _shared_exp(amax, EMAX: tl.constexpr, MAX_FRAC: tl.constexpr, RCEIL: tl.constexpr):
    """Block amax bits (int32) -> (shared exponent int32 in [-127, 127], ok: finite block).
    FLOOR: floor(log2(amax)) - emax; RCEIL adds 1 when frac(amax) > frac(max_elem)."""
    mant = amax & FRAC_MASK
    mant_f = mant.to(tl.float32).to(tl.int32, bitcast=True)  # exact: normalizes a subnormal
    subnormal = (amax >> 23) == 0
    shared = tl.where(subnormal, (mant_f >> 23) - 276, (amax >> 23) - 127) - EMAX
    if RCEIL:
        frac = tl.where(subnormal, mant_f & FRAC_MASK, mant)
        shared += (frac > MAX_FRAC).to(tl.int32)
    shared = tl.minimum(tl.maximum(shared, -127), 127)
    return tl.where(amax == 0, -127, shared), amax < 0x7F800000


@triton.jit
def _grid_add(v, SHIFT: tl.constexpr, MIN_NORMAL_BITS: tl.constexpr, IS_INT: tl.constexpr):
    """(|v| + m, m) with m = 2^(e + SHIFT), e = max(exponent(v), emin): m's ulp is the element
    grid's step at v, so the add rounds |v| to nearest even on the grid and subtracting m
    again is exact (int8: m = 2^17, step 2^-6, and the sum's low bits are the code). The
    exponent comes from |v| * 2^SHIFT (a float multiply spares the integer pipe an add)."""
    a = tl.abs(v)
    if IS_INT:
        m = tl.full(v.shape, 131072.0, tl.float32)
    else:
        e = (a * (1 << SHIFT)).to(tl.int32, bitcast=True) & 0x7F800000
        m = tl.maximum(e, MIN_NORMAL_BITS + (SHIFT << 23)).to(tl.float32, bitcast=True)
    return a + m, m


@triton.jit
def _codes(
    x, inv, ok, BITS: tl.constexpr, SHIFT: tl.constexpr, MIN_NORMAL_BITS: tl.constexpr,
    ELEM_SCALE: tl.constexpr, MAX_CODE: tl.constexpr, IS_INT: tl.constexpr,
    HW_FP8: tl.constexpr, FP8_TY: tl.constexpr,
):  # fmt: skip
    """Element codes (int32 bit patterns, 0 in NaN/Inf blocks) of v = x * inv, RNE, saturated.
    With r = |v| rounded by _grid_add, r * 2^(bias - 127) is a float32 whose bits shifted right
    by SHIFT are r's code (the exponent field re-biased; an element subnormal lands on a
    float32 subnormal with the same significand); saturation is a min on the code."""
    v = x.to(tl.float32) * inv
    if HW_FP8:  # cvt.rn.satfinite.e4m3x2.f32 (sm90+): RNE with subnormals, saturating
        return tl.where(ok, v, 0.0).to(FP8_TY).to(tl.uint8, bitcast=True).to(tl.int32)
    t, m = _grid_add(v, SHIFT, MIN_NORMAL_BITS, IS_INT)
    limit = tl.where(ok, MAX_CODE, 0)  # NaN/Inf blocks: code 0
    b = v.to(tl.int32, bitcast=True)
    if IS_INT:
        mag = tl.minimum(t.to(tl.int32, bitcast=True) - 0x48000000, limit)  # minus 2^17's bits
        return tl.where(b < 0, -mag, mag) & 0xFF
    r = t - m
    code = ((r * ELEM_SCALE).to(tl.uint32, bitcast=True) >> SHIFT).to(tl.int32)
    sign = (b >> (32 - BITS)) & tl.where(ok, 1 << (BITS - 1), 0)
    return tl.minimum(code, limit) | sign


@triton.jit
def _qdq(
    x, inv, scl, ok, SHIFT: tl.constexpr, MIN_NORMAL_BITS: tl.constexpr,
    MAX_NORMAL: tl.constexpr, IS_INT: tl.constexpr, HW_FP8: tl.constexpr, FP8_TY: tl.constexpr,
):  # fmt: skip
    """decode(code) * 2^shared of v = x * inv in float32 (NaN in NaN/Inf blocks)."""
    v = x.to(tl.float32) * inv
    if HW_FP8:
        r = v.to(FP8_TY).to(tl.float32)
    else:
        t, m = _grid_add(v, SHIFT, MIN_NORMAL_BITS, IS_INT)
        r = tl.minimum(t - m, MAX_NORMAL)
        b = v.to(tl.int32, bitcast=True)
        signed = (r.to(tl.int32, bitcast=True) | (b & -2147483648)).to(tl.float32, bitcast=True)
        r = tl.where(r == 0.0, 0.0, signed) if IS_INT else signed  # int8 has no -0
    return tl.where(ok, r * scl, float("nan"))


@triton.jit
def _store_fp6(p, step, q, mask):
    """q [..., 4k] -> four 6-bit codes per three bytes at p + t * step, t = 0, 1, 2 (pack_fp6);
    p [..., k] points at each quad's first byte. The 24-bit word c0 | c1 << 6 | c2 << 12 |
    c3 << 18 is a sum over the quad (disjoint bits), inside one thread."""
    quads = tl.reshape(q, q.shape[:-1] + [q.shape[-1] // 4, 4])
    w = tl.sum(quads << (tl.arange(0, 4) * 6), axis=len(quads.shape) - 1)
    tl.store(p, w.to(tl.uint8), mask)
    tl.store(p + step, (w >> 8).to(tl.uint8), mask)
    tl.store(p + 2 * step, (w >> 16).to(tl.uint8), mask)


@triton.jit
def _pairs(q):
    """q [..., 2k] -> [..., k] bytes, first element in the low nibble (pack_uint4)."""
    lo, hi = tl.split(tl.reshape(q, q.shape[:-1] + [q.shape[-1] // 2, 2]))
    return (lo | (hi << 4)).to(tl.uint8)


@triton.jit
def _mx_cast_dim1_kernel(
    x_ptr, out_ptr, scale_ptr,
    NBLK,
    QDQ: tl.constexpr, BLOCK: tl.constexpr, NB: tl.constexpr, H: tl.constexpr,
    VEC: tl.constexpr, EVEN: tl.constexpr, PACK: tl.constexpr, BITS: tl.constexpr,
    SHIFT: tl.constexpr, ELEM_SCALE: tl.constexpr, MIN_NORMAL_BITS: tl.constexpr,
    MAX_CODE: tl.constexpr, MAX_NORMAL: tl.constexpr, EMAX: tl.constexpr,
    MAX_FRAC: tl.constexpr, RCEIL: tl.constexpr, IS_INT: tl.constexpr, HW_FP8: tl.constexpr,
    FP8_TY: tl.constexpr,
):  # fmt: skip
    """NB consecutive blocks of the flattened tensor as [NB, H, W]: a block is H pieces of W =
    BLOCK / H elements, and a thread holds one 16-byte vector of each piece (H per block)."""
    W: tl.constexpr = BLOCK // H
    b0 = tl.program_id(0).to(tl.int64) * NB  # first block; int64 only in the program origin
    offs_b = tl.arange(0, NB)[:, None, None]
    offs_h = tl.arange(0, H)[None, :, None]
    offs_w = tl.max_contiguous(tl.arange(0, W), VEC)[None, None, :]
    bmask = None if EVEN else offs_b < NBLK - b0  # EVEN: every program's blocks exist
    offs = offs_b * BLOCK + offs_h * W + offs_w
    x = tl.load(x_ptr + b0 * BLOCK + offs, bmask)
    amax = tl.max(_amax_bits(x, 2), axis=1)  # in-thread and BLOCK / H / VEC lanes, pieces
    shared, ok = _shared_exp(amax, EMAX, MAX_FRAC, RCEIL)
    inv = _exp2i(-shared, not IS_INT)[:, None, None]
    if QDQ:
        y = _qdq(
            x, inv, _exp2i(shared, False)[:, None, None], ok[:, None, None], SHIFT,
            MIN_NORMAL_BITS, MAX_NORMAL, IS_INT, HW_FP8, FP8_TY,
        )  # fmt: skip
        tl.store(out_ptr + b0 * BLOCK + offs, y.to(out_ptr.dtype.element_ty), bmask)
    else:
        q = _codes(
            x, inv, ok[:, None, None], BITS, SHIFT, MIN_NORMAL_BITS, ELEM_SCALE, MAX_CODE,
            IS_INT, HW_FP8, FP8_TY,
        )  # fmt: skip
        s = tl.where(ok, shared + 127, 255).to(tl.uint8)
        offs_s = tl.arange(0, NB)
        tl.store(scale_ptr + b0 + offs_s, s, None if EVEN else offs_s < NBLK - b0)
        PB: tl.constexpr = W * BITS // 8  # bytes of one piece
        out = out_ptr + (b0 + offs_b) * (BLOCK * BITS // 8) + offs_h * PB
        if PACK == 1:
            tl.store(out + offs_w, q, bmask)
        elif PACK == 2:
            tl.store(out + tl.max_contiguous(tl.arange(0, W // 2), VEC // 2), _pairs(q), bmask)
        else:
            _store_fp6(out + tl.arange(0, W // 4)[None, None, :] * 3, 1, q, bmask)


@triton.jit
def _mx_cast_dim0_kernel(
    x_ptr, out_ptr, scale_ptr,
    C, NBR, NCT, stride_xr, stride_or, stride_sr,
    QDQ: tl.constexpr, BLOCK: tl.constexpr, LANES: tl.constexpr, CG: tl.constexpr,
    RB: tl.constexpr, WARP: tl.constexpr, VEC: tl.constexpr, EVEN: tl.constexpr,
    PACK: tl.constexpr, BITS: tl.constexpr, SHIFT: tl.constexpr, ELEM_SCALE: tl.constexpr,
    MIN_NORMAL_BITS: tl.constexpr, MAX_CODE: tl.constexpr, MAX_NORMAL: tl.constexpr,
    EMAX: tl.constexpr, MAX_FRAC: tl.constexpr, RCEIL: tl.constexpr, IS_INT: tl.constexpr,
    HW_FP8: tl.constexpr, FP8_TY: tl.constexpr,
):  # fmt: skip
    """RB block-rows x CG * CW columns as [LANES, RB * CG, RPT, CW]: group g is column group
    g % CG of block-row g // CG; row = lane * RPT + i within the block."""
    RPT: tl.constexpr = BLOCK // LANES  # consecutive rows a thread holds
    CW: tl.constexpr = VEC * (WARP // LANES)  # columns of one warp (WARP threads: 32, 64)
    pid = tl.program_id(0)
    blk0 = (pid // NCT).to(tl.int64) * RB  # the first block-row; column tiles vary fastest
    col0 = (pid % NCT) * (CG * CW)
    g = tl.arange(0, RB * CG)
    lane = tl.arange(0, LANES)[:, None, None, None]
    rb = (g // CG)[None, :, None, None]
    cols = (g % CG * CW)[None, :, None, None]
    cols += tl.max_contiguous(tl.arange(0, CW), VEC)[None, None, None, :]
    rows = rb * BLOCK + lane * RPT + tl.arange(0, RPT)[None, None, :, None]
    mask = None if EVEN else (cols < C - col0) & (rb < NBR - blk0)  # EVEN: whole tiles
    x = tl.load(x_ptr + blk0 * BLOCK * stride_xr + col0 + rows * stride_xr + cols, mask)
    amax = tl.max(_amax_bits(x, 2), axis=0)  # in-thread rows, then lanes: [RB * CG, CW]
    shared, ok = _shared_exp(amax, EMAX, MAX_FRAC, RCEIL)
    inv = _exp2i(-shared, not IS_INT)[None, :, None, :]
    if QDQ:
        y = _qdq(
            x, inv, _exp2i(shared, False)[None, :, None, :], ok[None, :, None, :], SHIFT,
            MIN_NORMAL_BITS, MAX_NORMAL, IS_INT, HW_FP8, FP8_TY,
        )  # fmt: skip
        o_ptrs = out_ptr + blk0 * BLOCK * stride_or + col0 + rows * stride_or + cols
        tl.store(o_ptrs, y.to(out_ptr.dtype.element_ty), mask)
    else:
        q = _codes(
            x, inv, ok[None, :, None, :], BITS, SHIFT, MIN_NORMAL_BITS, ELEM_SCALE, MAX_CODE,
            IS_INT, HW_FP8, FP8_TY,
        )  # fmt: skip
        s_rb = (g // CG)[:, None]
        s_cols = (g % CG * CW)[:, None] + tl.max_contiguous(tl.arange(0, CW), VEC)[None, :]
        s = tl.where(ok, shared + 127, 255).to(tl.uint8)
        s_mask = None if EVEN else (s_cols < C - col0) & (s_rb < NBR - blk0)
        s_ptrs = scale_ptr + blk0 * stride_sr + col0 + s_rb * stride_sr + s_cols
        tl.store(s_ptrs, s, s_mask)
        # packed rows: PACK code rows -> PACK * BITS / 8 byte rows, in a thread's registers
        # ([LANES, G, CW, RPT] is a register permutation): row lane * RPT / PACK + j
        out = out_ptr + blk0 * (BLOCK * BITS // 8) * stride_or + col0
        if PACK == 1:
            tl.store(out + rows * stride_or + cols, q, mask)
        else:
            qt = tl.permute(q, (0, 1, 3, 2))
            j = tl.arange(0, RPT // PACK)[None, None, None, :]
            prow = (rb * BLOCK + lane * RPT) // PACK + j  # [LANES, G, 1, RPT / PACK]
            p = out + prow * (PACK * BITS // 8) * stride_or + tl.permute(cols, (0, 1, 3, 2))
            m = None if EVEN else tl.permute(mask, (0, 1, 3, 2))
            if PACK == 2:
                tl.store(p, _pairs(qt), m)
            else:
                _store_fp6(p, stride_or, qt, m)


_FP8_TY = {MXElem.FP8_E4M3: tl.float8e4nv, MXElem.FP8_E5M2: tl.float8e5}


def _has_fp8_cvt(device: torch.device) -> bool:
    """NVIDIA sm90+: Triton converts float32 to e4m3 / e5m2 in one instruction (RNE). Not
    sm89: there it goes through float16 (cvt.rn.satfinite.e4m3x2.f16x2), a double rounding
    that misrounds values just past a tie; the integer path serves sm89."""
    return (
        device.type == "cuda"
        and torch.version.hip is None
        and torch.cuda.get_device_capability(device) >= (9, 0)
    )


def _elem_constants(elem: MXElem, rule: ScaleRounding, hw_fp8: bool) -> dict[str, object]:
    """The element format as kernel constexprs (see _codes / _qdq / _shared_exp)."""
    s = elem.spec
    is_int = elem is MXElem.INT8
    emin = 1 - s.bias  # exponent of the first normal binade (and of the subnormal step)
    shift = 23 - s.mbits
    mant_max = round((s.max_normal / 2.0**s.emax - 1) * 2**s.mbits)
    return dict(
        BITS=s.bits,
        SHIFT=shift,
        MIN_NORMAL_BITS=(127 + emin) << 23,
        ELEM_SCALE=2.0 ** (s.bias - 127),
        MAX_CODE=127 if is_int else ((s.emax + s.bias) << s.mbits) | mant_max,
        MAX_NORMAL=s.max_normal,
        EMAX=s.emax,
        MAX_FRAC=int(torch.tensor(s.max_normal).view(torch.int32)) & 0x7FFFFF,
        RCEIL=rule is ScaleRounding.RCEIL,
        IS_INT=is_int,
        HW_FP8=hw_fp8,
        FP8_TY=_FP8_TY.get(elem, tl.float8e4nv),
    )


def mx_cast_triton(
    x: Tensor,
    elem: MXElem | str,
    block_size: int,
    dim: int,
    scale_rounding: ScaleRounding | str = ScaleRounding.FLOOR,
    qdq: bool = False,
    tile: Tile | None = None,
    hw_fp8: bool | None = None,
) -> tuple[Tensor, Tensor | None]:
    """Launch the Triton cast: (packed codes uint8, scale uint8) or, with qdq, (x.dtype
    values, None). Runs on GPU tensors, or on CPU tensors under TRITON_INTERPRET=1; a
    non-contiguous x is copied first. ``tile`` overrides cast_tile's choice (bench sweeps);
    ``hw_fp8`` rounds fp8 elements with the GPU's float8 conversion (default: on NVIDIA
    sm90+) instead of the integer path every element format takes."""
    elem = parse_choice(MXElem, elem, "MX element")
    rule = parse_choice(ScaleRounding, scale_rounding, "scale_rounding")
    _check(x, elem.value, block_size, dim, rule.value)
    if not triton_block_ok(block_size):
        raise ValueError(
            f"the Triton MX cast takes block sizes 8, 16, ..., 256, got {block_size}; "
            "torch.ops.aoq.mx_cast runs the reference for the others"
        )
    if x.device.type == "cpu" and not INTERPRET:
        raise RuntimeError(
            "mx_cast_triton got a CPU tensor but its kernel was defined for GPUs; set "
            "TRITON_INTERPRET=1 before aoq is first imported to run it on CPU, or call "
            "torch.ops.aoq.mx_cast (the reference on CPU)"
        )
    x = x.contiguous()
    shape = (x.shape[0], x.shape[1])
    if qdq:
        out = torch.empty(shape, dtype=out_dtype_for(x.dtype), device=x.device)
    else:
        out = torch.empty(packed_shape(shape, elem, dim), dtype=torch.uint8, device=x.device)
    scale = torch.empty(scale_shape(shape, block_size, dim), dtype=torch.uint8, device=x.device)
    if x.numel():
        vec = min(16 // x.element_size(), block_size)
        tile = tile or cast_tile(dim, shape, block_size, elem, vec)
        hw = (_has_fp8_cvt(x.device) if hw_fp8 is None else hw_fp8) and elem in _FP8_TY
        consts = _elem_constants(elem, rule, hw)
        pack = 1 if qdq else PACK_GROUP.get(elem.spec.bits, 1)
        _launch(x, out, scale, dim, block_size, qdq, tile, vec, pack, consts)
    return (out.to(x.dtype), None) if qdq else (out, scale)


def _launch(
    x: Tensor, out: Tensor, scale: Tensor, dim: int, block: int, qdq: bool, tile: Tile,
    vec: int, pack: int, consts: dict[str, object],
) -> None:  # fmt: skip
    r, c = x.shape
    if dim == 1:
        if not isinstance(tile, Dim1Tile) or block % (tile.pieces * pack):
            raise ValueError(f"tile {tile.label} does not fit dim 1 with block_size {block}")
        nblk = r * c // block
        _mx_cast_dim1_kernel[(triton.cdiv(nblk, tile.blocks),)](
            x, out, scale, nblk,
            QDQ=qdq, BLOCK=block, NB=tile.blocks, H=tile.pieces, VEC=min(vec, block // tile.pieces),
            EVEN=nblk % tile.blocks == 0, PACK=pack, num_warps=tile.warps, **consts,
        )  # fmt: skip
        return
    if not isinstance(tile, Dim0Tile) or 32 % tile.lanes or block % (tile.lanes * pack):
        raise ValueError(
            f"tile {tile.label} does not fit dim 0 with block_size {block}: lanes must divide "
            f"32 and leave whole groups of {pack} rows to each lane"
        )
    warp = _warp_size()
    tile_c = tile.groups * vec * (warp // tile.lanes)
    nct, nbr = triton.cdiv(c, tile_c), r // block
    _mx_cast_dim0_kernel[(nct * triton.cdiv(nbr, tile.rows),)](
        x, out, scale, c, nbr, nct, x.stride(0), out.stride(0), scale.stride(0),
        QDQ=qdq, BLOCK=block, LANES=tile.lanes, CG=tile.groups, RB=tile.rows, WARP=warp,
        VEC=vec, EVEN=c % tile_c == 0 and nbr % tile.rows == 0, PACK=pack,
        num_warps=tile.warps, **consts,
    )  # fmt: skip


# --- the CUDA / ROCm implementation of the ops in kernels/mx_ops.py -----------------------


@mx_cast.register_kernel("cuda")
def _mx_cast_cuda(
    x: Tensor, elem: str, block_size: int, dim: int, scale_rounding: str
) -> tuple[Tensor, Tensor]:
    if not triton_block_ok(block_size):
        return mx_cast_reference(x, elem, block_size, dim, scale_rounding)
    codes, scale = mx_cast_triton(x, elem, block_size, dim, scale_rounding)
    assert scale is not None
    return codes, scale


@mx_qdq.register_kernel("cuda")
def _mx_qdq_cuda(x: Tensor, elem: str, block_size: int, dim: int, scale_rounding: str) -> Tensor:
    if not triton_block_ok(block_size):
        return mx_qdq_reference(x, elem, block_size, dim, scale_rounding)
    return mx_cast_triton(x, elem, block_size, dim, scale_rounding, qdq=True)[0]
