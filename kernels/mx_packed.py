"""The MX casts' arithmetic two bf16 elements at a time (kernels/mx_cast.py, ``PACKED``).

A bf16 tensor read as uint32 words holds two elements per register (the first in the low
half). NVIDIA sm90 computes on such pairs in one instruction: ``mul/add.rn.bf16x2`` (RNE,
subnormals kept) and ``min/max.u16x2``; every other step is a 32-bit integer operation whose
halves cannot disturb each other (each half's value stays in [0, 0xFFFF]). Half the
instructions of the float32 path per element: the SASS count of the fp4 dim-1 cast drops
from 18.9 to ~9 a element, under the ~13 an H200 SM can issue at 80 % of copy bandwidth.

Exactness, with B = bf16 bits, v = x * 2^-shared (exact: a power of two, and a product below
2^-126 rounds to code 0 in every element format), a = min(|v|, max_normal) (saturation
first: rounding a value <= max_normal cannot pass it; a NaN/Inf block clamps to 0):

    M = max(B(a) & 0x7F80, B(2^emin))        2^e, e = max(exponent(a), emin)
    m = M + ((7 - mbits) << 7)               2^(e + 7 - mbits): bf16's ulp at m is the
                                             element grid's step 2^(e - mbits)
    t = a + m  (one RNE add)                 B(t) - B(m) = round(a / step)
    code = B(t) - M + (M >> (7 - mbits)) - K,    K = ((7 - mbits) << 7) + ((128 - bias) << mbits)

the last line being ((e + bias - 1) << mbits) + round(a / step), the element's exponent and
mantissa fields (e = emin covers subnormals: the field is then 0). INT8 (fixed point 1.6):
m = 2, so B(t) - B(2) = round(a * 64). ``ASM`` false (the interpreter, which has no inline
assembly) runs the same steps on float32 halves with an explicit RNE to bf16 (the
interpreter's own float32 -> bf16 conversion truncates).
"""

from __future__ import annotations

import triton
import triton.language as tl

LOW = tl.constexpr(0xFFFF)
ABS2 = tl.constexpr(0x7FFF7FFF)
SIGN2 = tl.constexpr(0x80008000)
NAN2 = tl.constexpr(0xFFFFFFFF)  # the reference's NaN: bf16 0xFFFF


# --- paired operations: one instruction on sm90 (ASM), float32 / integer halves otherwise --


@triton.jit
def _halves_f32(p):
    return (p << 16).to(tl.float32, bitcast=True), (p & 0xFFFF0000).to(tl.float32, bitcast=True)


@triton.jit
def rne_bf16(f):
    """float32 -> bf16 bits (uint32 < 2^16), round to nearest even (finite f)."""
    b = f.to(tl.uint32, bitcast=True)
    return (b + 0x7FFF + ((b >> 16) & 1)) >> 16


@triton.jit
def _mul2(a, b, ASM: tl.constexpr):
    if ASM:
        return tl.inline_asm_elementwise(
            "mul.rn.bf16x2 $0, $1, $2;", "=r,r,r", [a, b], dtype=tl.uint32, is_pure=True, pack=1
        )
    alo, ahi = _halves_f32(a)
    blo, bhi = _halves_f32(b)
    return rne_bf16(alo * blo) | (rne_bf16(ahi * bhi) << 16)


@triton.jit
def _add2(a, b, ASM: tl.constexpr):
    """a + b per half, one rounding (the float32 sums here are exact: the operands' bits
    span fewer than 24 binades)."""
    if ASM:
        return tl.inline_asm_elementwise(
            "add.rn.bf16x2 $0, $1, $2;", "=r,r,r", [a, b], dtype=tl.uint32, is_pure=True, pack=1
        )
    alo, ahi = _halves_f32(a)
    blo, bhi = _halves_f32(b)
    return rne_bf16(alo + blo) | (rne_bf16(ahi + bhi) << 16)


@triton.jit
def _min2(a, b, ASM: tl.constexpr):
    """Unsigned 16-bit min per half (on non-negative bf16 bits: the float min, NaN losing)."""
    if ASM:
        return tl.inline_asm_elementwise(
            "min.u16x2 $0, $1, $2;", "=r,r,r", [a, b], dtype=tl.uint32, is_pure=True, pack=1
        )
    return tl.minimum(a & LOW, b & LOW) | (tl.minimum(a >> 16, b >> 16) << 16)


@triton.jit
def _max2(a, b, ASM: tl.constexpr):
    if ASM:
        return _max2_asm(a, b)
    return tl.maximum(a & LOW, b & LOW) | (tl.maximum(a >> 16, b >> 16) << 16)


@triton.jit
def _max2_asm(a, b):
    return tl.inline_asm_elementwise(
        "max.u16x2 $0, $1, $2;", "=r,r,r", [a, b], dtype=tl.uint32, is_pure=True, pack=1
    )


@triton.jit
def amax2(p, AXIS: tl.constexpr, ASM: tl.constexpr):
    """Per-half max of |x|'s bf16 bits along AXIS (>= 0x7F80 in a half: NaN or Inf there)."""
    a = p & ABS2
    if ASM:
        return tl.reduce(a, AXIS, _max2_asm)
    return tl.max(a & LOW, AXIS) | (tl.max(a >> 16, AXIS) << 16)  # the interpreter's fast max


@triton.jit
def half_max(p):
    """The larger half of packed maxima."""
    return tl.maximum(p & LOW, p >> 16)


# --- per block: the scale as bf16 bits, the clamp, the sign mask --------------------------


@triton.jit
def exp2_bf16(n):
    """bf16 bits of 2^n for int32 n in [-133, 127] (n < -126: subnormal)."""
    return tl.where(n >= -126, (n + 127) << 7, 1 << tl.maximum(n + 133, 0)).to(tl.uint32)


@triton.jit
def block_halves(shared, ok, MAXN_BITS: tl.constexpr, BITS: tl.constexpr, IS_INT: tl.constexpr):
    """One half's per-block words: (2^-shared, the clamp (max_normal, 0 in a NaN/Inf block),
    the sign bit to keep (none there), all-ones where the block is finite) as bf16-wide
    uint32 values; pair two with ``pair``."""
    lim = tl.where(ok, MAXN_BITS, 0).to(tl.uint32)
    sign = tl.where(ok, 1 if IS_INT else 1 << (BITS - 1), 0).to(tl.uint32)
    keep = tl.where(ok, 0xFFFF, 0).to(tl.uint32)
    return exp2_bf16(-shared), exp2_bf16(shared), lim, sign, keep


@triton.jit
def pair(lo, hi):
    return lo | (hi << 16)


# --- the cast of a word: codes, or the quantize-dequantize value -------------------------


@triton.jit
def _round(p, inv2, lim2, MBITS: tl.constexpr, MIN_BITS: tl.constexpr, IS_INT: tl.constexpr,
           ASM: tl.constexpr):  # fmt: skip
    """(t, M): t = a + m rounded (see the module doc), M = 2^e's bits (INT8: 2.0's)."""
    a = _min2(_mul2(p, inv2, ASM) & ABS2, lim2, ASM)
    if IS_INT:
        big = tl.full(p.shape, 0x40004000, tl.uint32)  # 2.0 | 2.0
        return _add2(a, big, ASM), big
    big = _max2(a & 0x7F807F80, tl.full(p.shape, MIN_BITS * 0x10001, tl.uint32), ASM)
    return _add2(a, big + ((7 - MBITS) << 7) * 0x10001, ASM), big


@triton.jit
def codes2(
    p, inv2, lim2, sign2, BITS: tl.constexpr, MBITS: tl.constexpr, BIAS: tl.constexpr,
    MIN_BITS: tl.constexpr, IS_INT: tl.constexpr, ASM: tl.constexpr,
):  # fmt: skip
    """Element codes of the words p, one per half (int32 halves, 0 in NaN/Inf blocks)."""
    t, big = _round(p, inv2, lim2, MBITS, MIN_BITS, IS_INT, ASM)
    if IS_INT:  # two's complement per half: (mag ^ 0xFF) + 1 where negative (bit 8 dropped)
        mag = t - big
        neg = (p >> 15) & sign2
        return (mag ^ (neg * 0xFF)) + neg
    k: tl.constexpr = ((7 - MBITS) << 7) + ((128 - BIAS) << MBITS)
    code = t + (big >> (7 - MBITS)) - (big + k * 0x10001)
    return code | ((p >> (16 - BITS)) & sign2)


@triton.jit
def qdq2(
    p, inv2, scl2, lim2, keep2, MBITS: tl.constexpr, MIN_BITS: tl.constexpr,
    IS_INT: tl.constexpr, ASM: tl.constexpr,
):  # fmt: skip
    """decode(code) * 2^shared as bf16 words (NaN in NaN/Inf blocks; INT8 has no -0)."""
    t, big = _round(p, inv2, lim2, MBITS, MIN_BITS, IS_INT, ASM)
    if IS_INT:
        r = _add2(t, big | SIGN2, ASM)  # t - 2, exact
        sign = p & (r + 0x7FFF7FFF) & SIGN2  # no sign on a zero
    else:
        r = _add2(t, (big + ((7 - MBITS) << 7) * 0x10001) | SIGN2, ASM)  # t - m, exact
        sign = p & SIGN2
    y = _mul2(r | sign, scl2, ASM)
    return NAN2 ^ ((y ^ NAN2) & keep2)  # y where keep2's bits are set, else NaN


@triton.jit
def pair_codes(c, BITS: tl.constexpr):
    """A word's two codes as one value (int32), the first in the low BITS bits."""
    mask: tl.constexpr = (1 << BITS) - 1
    return ((c & mask) | ((c >> (16 - BITS)) & (mask << BITS))).to(tl.int32)


@triton.jit
def unpair(c):
    """[..., n] words of two codes -> [..., 2n] int32 codes, in element order."""
    both = tl.join((c & LOW).to(tl.int32), (c >> 16).to(tl.int32))
    return tl.reshape(both, c.shape[:-1] + [c.shape[-1] * 2])


@triton.jit
def in_x_dtype(v, x_ty: tl.constexpr, UPCAST: tl.constexpr):
    """float32 v rounded (RNE) to x's dtype: as that dtype on GPUs; as float32 under the
    interpreter (UPCAST), whose bf16 casts truncate (bf16 rounded by hand)."""
    if not UPCAST:
        r = v.to(x_ty)
    elif x_ty == tl.bfloat16:
        r = (rne_bf16(v) << 16).to(tl.float32, bitcast=True)
    else:
        r = v.to(tl.float16).to(tl.float32)
    return r
