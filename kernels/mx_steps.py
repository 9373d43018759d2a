"""Steps of the MX casts (kernels/mx_cast.py), one element at a time in float32: the block's
shared exponent, element codes and quantize-dequantize values, and the packed stores.

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
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from aoq.formats.mx import MXElem, ScaleRounding

FRAC_MASK = tl.constexpr(0x7FFFFF)  # kernels read globals only as constexprs
FP8_TY = {MXElem.FP8_E4M3: tl.float8e4nv, MXElem.FP8_E5M2: tl.float8e5}
"""The float8 elements Triton converts to in one instruction (sm90+)."""


@functools.cache
def elem_constants(elem: MXElem, rule: ScaleRounding, hw_fp8: bool) -> dict[str, object]:
    """The element format as the casts' constexprs (the steps below and mx_packed.py read
    them; ``HW_FP8``: fp8 through the hardware conversion, sm90+)."""
    s = elem.spec
    is_int = elem is MXElem.INT8
    emin = 1 - s.bias  # exponent of the first normal binade (and of the subnormal step)
    shift = 23 - s.mbits
    mant_max = round((s.max_normal / 2.0**s.emax - 1) * 2**s.mbits)
    maxn_bits = int(torch.tensor(s.max_normal, dtype=torch.bfloat16).view(torch.int16))
    assert float(torch.tensor(maxn_bits, dtype=torch.int16).view(torch.bfloat16)) == s.max_normal
    return dict(
        MBITS=s.mbits,
        BIAS=s.bias,
        MAXN_BITS=maxn_bits,  # bf16 bits (the PACKED path's constants)
        MIN_BITS=(127 + emin) << 7,
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
        FP8_TY=FP8_TY.get(elem, tl.float8e4nv),
    )


@triton.jit
def exp2i(n, NORMAL: tl.constexpr):
    """2^n as float32 for int32 n in [-149, 127], from the bits; NORMAL: n >= -126 is known
    (2^-shared for float elements: shared <= 127 - emax + 1 <= 126)."""
    normal = (tl.maximum(n + 127, 1) << 23).to(tl.float32, bitcast=True)
    if NORMAL:
        return normal
    sub = (1 << tl.minimum(tl.maximum(n + 149, 0), 22)).to(tl.float32, bitcast=True)
    return tl.where(n >= -126, normal, sub)


@triton.jit
def amax_bits(x, AXIS: tl.constexpr):
    """|x|'s largest float32 bits along AXIS as int32 (a max at or above 0x7F800000, Inf's
    bits, marks a block holding NaN or Inf): an unsigned max of the bits shifted left by
    one, which drops the sign (a multiply, spared the integer pipe), then shifted back."""
    b2 = x.to(tl.float32).to(tl.uint32, bitcast=True) << 1
    return (tl.max(b2, axis=AXIS) >> 1).to(tl.int32)


@triton.jit
def shared_exp(amax, EMAX: tl.constexpr, MAX_FRAC: tl.constexpr, RCEIL: tl.constexpr):
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
def grid_add(v, SHIFT: tl.constexpr, MIN_NORMAL_BITS: tl.constexpr, IS_INT: tl.constexpr):
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
def codes(
    x, inv, ok, BITS: tl.constexpr, SHIFT: tl.constexpr, MIN_NORMAL_BITS: tl.constexpr,
    ELEM_SCALE: tl.constexpr, MAX_CODE: tl.constexpr, IS_INT: tl.constexpr,
    HW_FP8: tl.constexpr, FP8_TY: tl.constexpr,
):  # fmt: skip
    """Element codes (int32 bit patterns, 0 in NaN/Inf blocks) of v = x * inv, RNE, saturated.
    With r = |v| rounded by grid_add, r * 2^(bias - 127) is a float32 whose bits shifted right
    by SHIFT are r's code (the exponent field re-biased; an element subnormal lands on a
    float32 subnormal with the same significand); saturation is a min on the code."""
    v = x.to(tl.float32) * inv
    if HW_FP8:  # cvt.rn.satfinite.e4m3x2.f32 (sm90+): RNE with subnormals, saturating
        return tl.where(ok, v, 0.0).to(FP8_TY).to(tl.uint8, bitcast=True).to(tl.int32)
    t, m = grid_add(v, SHIFT, MIN_NORMAL_BITS, IS_INT)
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
def on_grid(
    v, SHIFT: tl.constexpr, MIN_NORMAL_BITS: tl.constexpr, MAX_NORMAL: tl.constexpr,
    IS_INT: tl.constexpr,
):  # fmt: skip
    """decode(code) of float32 v: v rounded to the element grid (RNE), saturated at
    MAX_NORMAL, with v's sign (a negative v rounding to zero gives -0; int8 has no -0)."""
    t, m = grid_add(v, SHIFT, MIN_NORMAL_BITS, IS_INT)
    r = tl.minimum(t - m, MAX_NORMAL)
    b = v.to(tl.int32, bitcast=True)
    signed = (r.to(tl.int32, bitcast=True) | (b & -2147483648)).to(tl.float32, bitcast=True)
    return tl.where(r == 0.0, 0.0, signed) if IS_INT else signed


@triton.jit
def qdq(
    x, inv, scl, ok, SHIFT: tl.constexpr, MIN_NORMAL_BITS: tl.constexpr,
    MAX_NORMAL: tl.constexpr, IS_INT: tl.constexpr, HW_FP8: tl.constexpr, FP8_TY: tl.constexpr,
):  # fmt: skip
    """decode(code) * 2^shared of v = x * inv in float32 (NaN in NaN/Inf blocks)."""
    v = x.to(tl.float32) * inv
    if HW_FP8:
        r = v.to(FP8_TY).to(tl.float32)
    else:
        r = on_grid(v, SHIFT, MIN_NORMAL_BITS, MAX_NORMAL, IS_INT)
    return tl.where(ok, r * scl, float("nan"))


@triton.jit
def store_fp6(p, step, q, mask):
    """q [..., 4k] -> four 6-bit codes per three bytes at p + t * step, t = 0, 1, 2 (pack_fp6);
    p [..., k] points at each quad's first byte. The 24-bit word c0 | c1 << 6 | c2 << 12 |
    c3 << 18 is a sum over the quad (disjoint bits), inside one thread."""
    quads = tl.reshape(q, q.shape[:-1] + [q.shape[-1] // 4, 4])
    w = tl.sum(quads << (tl.arange(0, 4) * 6), axis=len(quads.shape) - 1)
    tl.store(p, w.to(tl.uint8), mask)
    tl.store(p + step, (w >> 8).to(tl.uint8), mask)
    tl.store(p + 2 * step, (w >> 16).to(tl.uint8), mask)


@triton.jit
def pair_codes(q, BITS: tl.constexpr):
    """q [..., 2k] -> [..., k]: neighbouring codes as one value, the first in the low bits."""
    lo, hi = tl.split(tl.reshape(q, q.shape[:-1] + [q.shape[-1] // 2, 2]))
    return lo | (hi << BITS)


@triton.jit
def store_fp6_pairs(p, two, mask, VEC: tl.constexpr, ASM: tl.constexpr):
    """Pairs of 6-bit codes [..., k] (12 bits each) -> 3 bytes per 4 codes from byte pointers
    p [..., 1] (pack_fp6). A thread holding 8 codes writes its 6 bytes as three uint16 (the
    byte offsets are even: 6 per 8 codes); otherwise three bytes a quad."""
    a, b = tl.split(tl.reshape(two, two.shape[:-1] + [two.shape[-1] // 2, 2]))
    w = a | (b << 12)  # [..., k / 2] 24-bit quads
    n: tl.constexpr = w.shape[-1]
    if VEC >= 8:
        qa, qb = tl.split(tl.reshape(w, w.shape[:-1] + [n // 2, 2]))
        p16 = p.to(tl.pointer_type(tl.uint16)) + tl.arange(0, n // 2) * 3
        u0 = (qa & 0xFFFF).to(tl.uint16)
        u1 = ((qa >> 16) | ((qb & 0xFF) << 8)).to(tl.uint16)
        u2 = (qb >> 8).to(tl.uint16)
        if ASM and mask is None:  # stores in the values' layout (tl.store would convert)
            tl.inline_asm_elementwise(
                "st.global.b16 [$1], $2; st.global.b16 [$1+2], $3; st.global.b16 [$1+4], $4;"
                " mov.u32 $0, 0;",
                "=r,l,h,h,h", [p16, u0, u1, u2], dtype=tl.int32, is_pure=False, pack=1,
            )  # fmt: skip
        else:
            tl.store(p16, u0, mask)
            tl.store(p16 + 1, u1, mask)
            tl.store(p16 + 2, u2, mask)
    else:
        p8 = p + tl.arange(0, n) * 3
        tl.store(p8, w.to(tl.uint8), mask)
        tl.store(p8 + 1, (w >> 8).to(tl.uint8), mask)
        tl.store(p8 + 2, (w >> 16).to(tl.uint8), mask)


@triton.jit
def pairs(q):
    """q [..., 2k] -> [..., k] bytes, first element in the low nibble (pack_uint4)."""
    lo, hi = tl.split(tl.reshape(q, q.shape[:-1] + [q.shape[-1] // 2, 2]))
    return (lo | (hi << 4)).to(tl.uint8)
