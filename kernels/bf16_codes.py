"""The codes of decode_mma.py's weights as bf16, two to a 32-bit register, by inline PTX
(the matrix unit then multiplies them with x exactly as given):

- int4 (``WFMT`` 1): a byte's two nibbles are the consecutive codes k = 2j, 2j + 1, i.e. one
  bf16x2 register of an MMA operand. ``prmt`` spreads two bytes to the halves of a
  word, ``lop3`` ORs each nibble into the mantissa of bf16 128.0 (0x4300: 128 + q, exact),
  and one ``fma.rn.bf16x2`` subtracts 128 + z: q - z, an exact small integer. 1.5
  instructions a code (fp16 x: the same with fp16 1024.0, 0x6400, and ``fma.rn.f16x2``).
  Each group's scale multiplies that group's float32 product tile
  after its MMA, so the weights are never rounded: (q - z) and x are exact in bf16 and the
  MMA accumulates their products in float32.
- int8 (``WFMT`` 0): ``prmt`` spreads two codes to the low bytes of a word's halves; one
  ``lop3`` writes each code's low seven bits into the mantissa of bf16 128.0 (128 + (q & 127)),
  another its sign bit into the mantissa of bf16 -128.0 (-128 or -256), and one
  ``fma.rn.bf16x2`` adds the two: q exactly. 2 instructions a code (an earlier float32 route,
  ``prmt`` into 2**23 and ``cvt`` to bf16, took 2.75 and ran 4-7 % slower: run of 2026-11-21,
  H200). The per-channel scale multiplies the accumulator once, at the end.
- fp8 e4m3fn (``WFMT`` 2, CUDA): ``prmt`` puts each code in the low byte of a half with its
  sign copied into the byte above; a shift by 4 and a mask leave sign, exponent and mantissa
  where bf16 keeps them, i.e. the bf16 of exponent e - 127 (subnormal codes included), and
  one multiply by 2**120 moves the exponent bias to e4m3's 7: exact for every finite code.
  The two NaN codes come out as 480; ``aoq.formats.float8.quantize_fp8`` writes them only in
  a row whose amax, hence scale, is NaN or infinite, so that output is not finite either way
  (the reference's NaN; here NaN, or +-inf for a row holding an infinite weight). Per-channel
  scale as int8. (The FMA GEMV of weight_only.py took 24.7 us at K = N = 8192;
  decode_mma 21.1.)
- MX fp4 e2m1 (``WFMT`` 4): ``prmt`` puts two bytes in the high bytes of a word's halves;
  shifts and one ``lop3`` each move a nibble's sign to bit 15 and its exponent and mantissa
  bits to where bf16 keeps the low exponent bits and the top mantissa bit: the bf16 of
  v * 2**-126 (the subnormal code 0.5 included). One ``fma.rn.bf16x2`` by the block's
  2**(b - 1) (b its E8M0 byte; one ``mad`` builds it in both halves) gives v * 2**(b - 127)
  rounded once: exactly the emulated path's bf16 weight (an MX fp4 value times a power of
  two is exact in bf16 unless it overflows, which rounds to inf as the reference's float32
  value does). 2.4 instructions a code. 2**(b - 1) is a bf16 only up to b = 128: a weight
  with a larger block scale (or a NaN one, 255) takes a second multiply by 2**(b - 128) (or
  NaN), chosen per launch by a flag the weight computes once (``BIG``).

- MX fp8 e4m3 (``WFMT`` 5): fp8's placement (the bf16 of v * 2**-120), and one
  ``fma.rn.bf16x2`` by the block's 2**(b - 7) instead of 2**120: v * 2**(b - 127) rounded once,
  the emulated path's bf16 weight, for b <= 134 (``BIG``: a second multiply above, NaN for
  255). 2.5 instructions a code. The NaN codes would come out finite: a weight holding one is
  not served (aoq.tensors.mx.MXWeight.build_derived). MX fp8 e5m2 (``WFMT`` 8): the same with
  the code shifted one bit further (its five exponent bits), the bf16 of v * 2**-112, times
  2**(b - 15), for b <= 142; its Inf and NaN codes are not served either.

fp16 x (MX fp4 and fp8): the same placement, then each bf16 as a float32 (a shift or a mask),
times 2**(b - c) in float32 (exact: float32 has bf16's exponent range; BIG's second multiply
above the same limits), and one ``cvt.rn.f16x2.f32`` rounding a pair to fp16 once: the
emulated path's fp16 weight (float32 value cast to fp16), subnormals, zeros and overflow to
inf included. 4.5 instructions a code for fp8, 4 for fp4.

Under the interpreter (no inline assembly) the same values come from plain integer and
float32 arithmetic, and the dot upcasts to float32 (the interpreter's bf16 dot is wrong).
The low nibbles meet the even activations and the high nibbles the odd ones: x's tile is
split in two by a reshape, so the codes are never interleaved.
"""

from __future__ import annotations

import triton
import triton.language as tl
from aoq.kernels.mx_dequant import e8m0_value, elem_value

_INT4_PAIRS = """{{
.reg .b32 t0, t1, u0, u1, one;
mov.b32 one, {one};
prmt.b32 t0, $4, 0, 0x4140;
prmt.b32 t1, $4, 0, 0x4342;
lop3.b32 u0, t0, 0x000F000F, {magic}, 0xea;
lop3.b32 u1, t1, 0x000F000F, {magic}, 0xea;
fma.rn.{ty}x2 $0, u0, one, $5;
fma.rn.{ty}x2 $1, u1, one, $5;
shr.b32 t0, t0, 4;
shr.b32 t1, t1, 4;
lop3.b32 u0, t0, 0x000F000F, {magic}, 0xea;
lop3.b32 u1, t1, 0x000F000F, {magic}, 0xea;
fma.rn.{ty}x2 $2, u0, one, $5;
fma.rn.{ty}x2 $3, u1, one, $5;
}}"""
_INT4_ASM = tl.constexpr(_INT4_PAIRS.format(one="0x3F803F80", magic="0x43004300", ty="bf16"))
"""Four bytes ($4) -> low nibbles (two words, $0 $1) and high nibbles ($2 $3), each code
minus 128 + z ($5: -(128 + z) in both halves)."""
_INT4_F16_ASM = tl.constexpr(_INT4_PAIRS.format(one="0x3C003C00", magic="0x64006400", ty="f16"))
"""The same for fp16 x: each nibble ORed into the mantissa of fp16 1024.0 (0x6400: 1024 + q,
exact, as any integer below 2048), $5 -(1024 + z) in both halves."""

_INT8_PAIRS = """
.reg .b32 h0, h1, m0, m1, c0, c1, one;
mov.b32 one, 0x3F803F80;
prmt.b32 h0, $2, 0, 0x4140;
prmt.b32 h1, $2, 0, 0x4342;
lop3.b32 m0, h0, 0x007F007F, 0x43004300, 0xea;
lop3.b32 m1, h1, 0x007F007F, 0x43004300, 0xea;
lop3.b32 c0, h0, 0x00800080, 0xC300C300, 0xea;
lop3.b32 c1, h1, 0x00800080, 0xC300C300, 0xea;
fma.rn.bf16x2 {o0}, m0, one, c0;
fma.rn.bf16x2 {o1}, m1, one, c1;
"""
_INT8_ASM = tl.constexpr("{" + _INT8_PAIRS.format(o0="$0", o1="$1") + "}")
"""Four int8 codes ($2) -> four bf16 (two words, the first code in the low half)."""

_MXINT8_ASM = tl.constexpr(
    "{\n.reg .b32 nz;\nmov.b32 nz, 0x80008000;"
    + _INT8_PAIRS.format(o0="m0", o1="m1")
    + "fma.rn.bf16x2 $0, m0, $3, nz;\nfma.rn.bf16x2 $1, m1, $4, nz;\n}"
)
"""Four MX int8 codes ($2) -> four bf16 (two words) times their own steps ($3: codes 0 and 1,
$4: 2 and 3; bf16 2**(b - 133)): _INT8_ASM's exact q, then one ``fma.rn.bf16x2`` by the step
and -0.0, exact (q has at most 7 significant bits; the step is a bf16 power of two, subnormal
below b = 7, so q * 2**(b - 133) is a bf16 value, down to 2**-133; 2**128 and past it round
to inf as the reference's float32 does; a NaN step gives NaN)."""

_NIBBLE_BYTES_ASM = tl.constexpr("""{
.reg .b32 t;
shl.b32 t, $2, 4;
lop3.b32 $0, t, 0xF0F0F0F0, 0x80808080, 0x6a;
lop3.b32 $1, $2, 0xF0F0F0F0, 0x80808080, 0x6a;
}""")
"""Four bytes ($2) -> 16 q of their low nibbles ($0) and of their high ones ($1), a byte
each: (a & 0xF0) ^ 0x80 (lop3 table 0x6a)."""


def _fp8_head(e5m2: bool = False) -> str:
    """Four float8 codes ($2) placed as the bf16 of v * 2**-120 (e4m3fn) or v * 2**-112
    (e5m2: its exponent field one bit wider, shifted one further) in h0, h1; nz: -0.0."""
    shift, mask = (5, "0x8FE08FE0") if e5m2 else (4, "0x87F087F0")
    return f"""
.reg .b32 h0, h1, p, q, nz;
mov.b32 nz, 0x80008000;
prmt.b32 h0, $2, 0, 0x9180;
prmt.b32 h1, $2, 0, 0xB3A2;
shl.b32 h0, h0, {shift};
shl.b32 h1, h1, {shift};
and.b32 h0, h0, {mask};
and.b32 h1, h1, {mask};
"""


_FP8_HEAD = _fp8_head()
_FP8_ONE = "fma.rn.bf16x2 $0, h0, p, nz;\nfma.rn.bf16x2 $1, h1, p, nz;\n"
_FP8_ASM = tl.constexpr("{" + _FP8_HEAD + "mov.b32 p, 0x7B807B80;\n" + _FP8_ONE + "}")
"""Four float8 e4m3fn codes ($2) -> four bf16 (p: 2**120 in both halves)."""


_FP4_HEAD = """
.reg .b32 t0, t1, a, c, m, p, q, nz;
mov.b32 nz, 0x80008000;
prmt.b32 t0, $4, 0, 0x1404;
prmt.b32 t1, $4, 0, 0x3424;
"""
_FP4_PAIR = """
shr.b32 a, {t}, 2;
shl.b32 c, {t}, 4;
lop3.b32 m, a, c, 0x81C081C0, 0xA8;
{mul}
shr.b32 a, {t}, 6;
and.b32 c, {t}, 0x80008000;
lop3.b32 m, a, c, 0x01C001C0, 0xEC;
{mul_hi}
"""
_FP4_ONE = "fma.rn.bf16x2 ${o}, m, p, nz;"
_FP4_TWO = "fma.rn.bf16x2 m, m, p, nz;\nfma.rn.bf16x2 ${o}, m, q, nz;"


_SCALE_BITS = {
    "bf16x2": ("0x00800080", lambda e: f"0x{e << 7:04X}{e << 7:04X}", "0x7FC07FC0"),
    "f32": ("0x00800000", lambda e: f"0x{e << 23:08X}", "0x7FC00000"),
}
"""Per kind of p and q: the multiplier that moves a byte into the exponent field (both
bf16 halves, or float32's), the bits of an exponent field e, and NaN."""


def _mx_scale(big: bool, limit: int, bias: int, b: str, kind: str = "bf16x2") -> str:
    """p (and for ``big`` q) from the E8M0 byte in operand ``b``: 2**(b - bias) for b <=
    limit, as bf16 in both halves (``kind`` "f32": as float32); big: p = 2**(min(b, limit) -
    bias), q = 2**(max(b, limit) - limit), q NaN for b = 255. (A bf16 of exponent e - 127
    has the bits e << 7; a float32, e << 23.)"""
    mul, field, nan = _SCALE_BITS[kind]
    add = field(127 - bias)
    if not big:
        return f"mad.lo.u32 p, {b}, {mul}, {add};"
    return f"""
.reg .b32 e;
.reg .pred nan;
min.u32 e, {b}, {limit};
mad.lo.u32 p, e, {mul}, {add};
max.u32 e, {b}, {limit};
sub.u32 e, e, {limit - 127};
mul.lo.u32 q, e, {mul};
setp.eq.u32 nan, {b}, 255;
selp.b32 q, {nan}, q, nan;
"""


def _f16_pair(src: str, out: str, big: bool) -> str:
    """fp16 x: the bf16 pair ``src`` (two values v * 2**-c, exact) as two float32 (a shift,
    a mask), each times p (and q): v * 2**(b - 127), exact in float32 (or inf), then one
    ``cvt.rn.f16x2.f32`` rounds both to fp16 once, as the emulated path's cast does."""
    muls = "".join(
        f"mul.rn.f32 a{i}, a{i}, p;\n" + (f"mul.rn.f32 a{i}, a{i}, q;\n" if big else "")
        for i in (0, 1)
    )
    return (
        f"shl.b32 a0, {src}, 16;\nand.b32 a1, {src}, 0xFFFF0000;\n{muls}"
        f"cvt.rn.f16x2.f32 {out}, a1, a0;\n"
    )


def _fp4_asm(big: bool, f16: bool = False) -> str:
    """Four bytes ($4) -> low nibbles ($0 $1) and high nibbles ($2 $3) of two bytes each,
    times the block's power of two (from its E8M0 byte, $5); ``f16``: as fp16 pairs."""
    if f16:
        mul = _f16_pair("m", "${o}", big)
        scale = ".reg .b32 a0, a1;\n" + _mx_scale(big, 128, 1, "$5", "f32")
    else:
        mul = _FP4_TWO if big else _FP4_ONE
        scale = _mx_scale(big, 128, 1, "$5")  # p = 2**(b - 1) up to b = 128
    pairs = [
        _FP4_PAIR.format(t=t, mul=mul.format(o=lo), mul_hi=mul.format(o=hi))
        for t, lo, hi in (("t0", 0, 2), ("t1", 1, 3))
    ]
    return "{" + _FP4_HEAD + scale + "".join(pairs) + "}"


def _mxfp8_asm(big: bool, f16: bool = False, e5m2: bool = False) -> str:
    """Four MX fp8 e4m3 codes ($2) -> four bf16 ($0 $1) times their block's 2**(b - 127)
    (its E8M0 byte $3): p = 2**(b - 7) where fp8's placement multiplies by 2**120;
    ``f16``: four fp16. ``e5m2``: p = 2**(b - 15) (its placement's 2**112), to b = 142."""
    head = _fp8_head(e5m2)
    limit, bias = (142, 15) if e5m2 else (134, 7)
    if f16:
        scale = ".reg .b32 a0, a1;\n" + _mx_scale(big, limit, bias, "$3", "f32")
        muls = _f16_pair("h0", "$0", big) + _f16_pair("h1", "$1", big)
        return "{" + head + scale + "\n" + muls + "}"
    muls = _FP8_ONE
    if big:
        muls = "".join(
            f"fma.rn.bf16x2 h{i}, h{i}, p, nz;\nfma.rn.bf16x2 ${i}, h{i}, q, nz;\n" for i in (0, 1)
        )
    return "{" + head + _mx_scale(big, limit, bias, "$3") + "\n" + muls + "}"


_FP4_ASM = tl.constexpr(_fp4_asm(False))
_FP4_BIG_ASM = tl.constexpr(_fp4_asm(True))
_FP4_F16_ASM = tl.constexpr(_fp4_asm(False, True))
_FP4_F16_BIG_ASM = tl.constexpr(_fp4_asm(True, True))
_MXFP8_ASMS = {(b, f, e): _mxfp8_asm(b, f, e) for b in (0, 1) for f in (0, 1) for e in (0, 1)}


@triton.constexpr_function
def _mxfp8_pick(big, f16, e5m2):
    """_mxfp8_asm's PTX for these flags (built once, at import)."""
    return _MXFP8_ASMS[int(big), int(f16), int(e5m2)]


@triton.jit
def int4_codes(b, z, ASM: tl.constexpr, F16: tl.constexpr = False):
    """uint8 [R, C] bytes, int32 [R] zero points -> (q_lo - z, q_hi - z) as [R, C] tensors:
    bf16 from the assembly (F16: fp16); float32 under the interpreter."""
    if ASM and F16:
        zb = tl.broadcast_to((-1024.0 - z.to(tl.float32)).to(tl.float16)[:, None], b.shape)
        lo, hi = tl.inline_asm_elementwise(
            _INT4_F16_ASM, "=r,=r,=r,=r,r,r,r", [b, zb], dtype=(tl.float16, tl.float16),
            is_pure=True, pack=4,
        )  # fmt: skip
    elif ASM:
        zb = tl.broadcast_to((-128.0 - z.to(tl.float32)).to(tl.bfloat16)[:, None], b.shape)
        lo, hi = tl.inline_asm_elementwise(
            _INT4_ASM, "=r,=r,=r,=r,r,r,r", [b, zb], dtype=(tl.bfloat16, tl.bfloat16),
            is_pure=True, pack=4,
        )  # fmt: skip
    else:
        p = b.to(tl.int32)
        zf = z.to(tl.float32)[:, None]
        lo = (p & 0xF).to(tl.float32) - zf  # small integers: exact in bf16 too
        hi = (p >> 4).to(tl.float32) - zf
    return lo, hi


@triton.jit
def nibble_bytes(b, ASM: tl.constexpr):
    """uint8 [R, C] bytes of symmetric int4 codes (q + 8) -> (16 q of the low nibbles, 16 q
    of the high ones) as int8 [R, C]: a nibble moved to the top of its byte, its top bit
    flipped (16 (q + 8) - 128 = 16 q in two's complement). Three instructions for four
    bytes; the integer MMA's sums come out 16 times too large, exactly."""
    if ASM:
        lo, hi = tl.inline_asm_elementwise(
            _NIBBLE_BYTES_ASM, "=r,=r,r", [b], dtype=(tl.int8, tl.int8), is_pure=True, pack=4
        )
    else:
        lo = (((b & 0xF).to(tl.int32) - 8) * 16).to(tl.int8)
        hi = (((b >> 4).to(tl.int32) - 8) * 16).to(tl.int8)
    return lo, hi


@triton.jit
def byte_codes(q, WFMT: tl.constexpr, ASM: tl.constexpr):
    """[R, C] int8 codes (WFMT 0) or float8 e4m3fn bits as uint8 (WFMT 2) -> their values:
    bf16 from the assembly; float32 under the interpreter."""
    if ASM:
        w = tl.inline_asm_elementwise(
            _FP8_ASM if WFMT == 2 else _INT8_ASM, "=r,=r,r", [q], dtype=tl.bfloat16,
            is_pure=True, pack=4,
        )  # fmt: skip
    elif WFMT == 2:
        w = q.to(tl.float8e4nv, bitcast=True).to(tl.float32)
    else:
        w = q.to(tl.float32)
    return w


@triton.jit
def int8_steps(sb):
    """int32 [R] E8M0 bytes of MX int8 blocks -> their steps 2**(b - 133) (the code's 2**-6
    folded in) as bf16: the exponent field b - 6 from b = 7, the subnormal 2**b * 2**-133
    below it, NaN for 255."""
    bits = tl.where(sb >= 7, (sb - 6) << 7, 1 << tl.minimum(sb, 6))
    bits = tl.where(sb == 255, 0x7FC0, bits)
    return bits.to(tl.int16).to(tl.bfloat16, bitcast=True)


@triton.jit
def mxint8_codes(q, p, ASM: tl.constexpr):
    """uint8 [R, C] MX int8 codes (two's complement bytes) and each code's step: bf16
    2**(b - 133) from :func:`int8_steps` (ASM), or the E8M0 byte as int32 (the interpreter)
    -> q * 2**(b - 133), exact: bf16 from the assembly, float32 under the interpreter."""
    if ASM:
        w = tl.inline_asm_elementwise(
            _MXINT8_ASM, "=r,=r,r,r,r", [q, p], dtype=tl.bfloat16, is_pure=True, pack=4
        )
    else:
        v = q.to(tl.int8, bitcast=True).to(tl.float32)
        w = v * (e8m0_value(p) * 0.015625)  # (powers of two: exact, down to 2**-133)
    return w


@triton.jit
def fp4_codes(b, sbb, BIG: tl.constexpr, ASM: tl.constexpr, F16: tl.constexpr = False):
    """uint8 [R, C] bytes of MX fp4 codes, int32 [R, C] E8M0 bytes of each byte's block (the
    assembly reads the first of the four bytes it takes: those must share a block, as four
    bytes of a row from a multiple of four do; BIG: some block of the weight has a byte above
    128) -> (low nibbles, high nibbles) times 2**(b - 127) as [R, C] tensors: bf16
    (F16: fp16) from the assembly; float32 under the interpreter (the reference's values,
    exact; F16: rounded to fp16 as the reference's cast)."""
    if ASM and F16:
        lo, hi = tl.inline_asm_elementwise(
            _FP4_F16_BIG_ASM if BIG else _FP4_F16_ASM, "=r,=r,=r,=r,r,r,r,r,r", [b, sbb],
            dtype=(tl.float16, tl.float16), is_pure=True, pack=4,
        )  # fmt: skip
    elif ASM:
        lo, hi = tl.inline_asm_elementwise(
            _FP4_BIG_ASM if BIG else _FP4_ASM, "=r,=r,=r,=r,r,r,r,r,r", [b, sbb],
            dtype=(tl.bfloat16, tl.bfloat16), is_pure=True, pack=4,
        )  # fmt: skip
    else:
        p = b.to(tl.int32)
        d = e8m0_value(sbb)
        lo = elem_value(p & 15, 2, 1, 1, 0) * d
        hi = elem_value(p >> 4, 2, 1, 1, 0) * d
        if F16:
            lo = lo.to(tl.float16).to(tl.float32)
            hi = hi.to(tl.float16).to(tl.float32)
    return lo, hi


@triton.jit
def mxfp8_codes(q, sbb, BIG: tl.constexpr, ASM: tl.constexpr, F16: tl.constexpr = False,
                E5M2: tl.constexpr = False):  # fmt: skip
    """uint8 [R, C] MX fp8 e4m3 (E5M2: e5m2) codes, int32 [R, C] E8M0 bytes of each code's
    block (the assembly reads the first of the four codes it takes: those must share a block;
    BIG: some byte of the weight is above 134; e5m2: 142) -> their values times 2**(b - 127):
    bf16 (F16: fp16) from the assembly; float32 under the interpreter (the reference's values,
    exact; rounded to fp16 under F16)."""
    if ASM:
        w = tl.inline_asm_elementwise(
            _mxfp8_pick(BIG, F16, E5M2), "=r,=r,r,r,r,r,r", [q, sbb],
            dtype=tl.float16 if F16 else tl.bfloat16, is_pure=True, pack=4,
        )  # fmt: skip
    else:
        if E5M2:
            w = elem_value(q.to(tl.int32), 5, 2, 15, 2) * e8m0_value(sbb)
        else:
            w = elem_value(q.to(tl.int32), 4, 3, 7, 1) * e8m0_value(sbb)
        if F16:
            w = w.to(tl.float16).to(tl.float32)
        else:  # exact in float32, then onto bf16's subnormal grid (2**-133, nearest even)
            # as the assembly's one rounding: adding 1.5 * 2**-110 (the sum's ulp 2**-133
            # for either sign) rounds, subtracting it is exact; larger values have no bits
            # that fine
            w = (w + 1.1555579666323415e-33) - 1.1555579666323415e-33
    return w
