"""MX fp6 codes (e3m2 or e2m3, four in three little-endian bytes: aoq.formats.packing) as
bf16 pairs for decode_mma's WFMT 6 and 7 (kernels/decode_mma_fp6.py), by inline PTX.

A row's codes come in *units* of 16 codes, three 32-bit words (12 bytes): code i sits at bit
6 i of w0 | w1 << 32 | w2 << 64. The loop loads a step's bytes as three uint8 planes [rows,
4 C] (plane t: the four bytes of word t of each unit), so one assembly instance (pack 4)
gets one unit's three words, and returns four outputs of the planes' shape: output t holds
codes 4 t .. 4 t + 3 of the unit at its four columns, as two bf16 pairs.

Per unit: ``shf`` (a funnel shift) gives each group of four codes its own 24 bits g (codes
4-7 straddle w0 and w1, 8-11 w1 and w2). Codes 4 t and 4 t + 1 come from x = (g << 10 : g)
(halves high : low, each code at offset 0 of its half), 4 t + 2 and 4 t + 3 from (g : g >> 10)
(offset 2): a shift and a ``lop3`` select. Then, per pair (r the offset):

    e3m2 (S.EEE.MM)   a = (x shifted so E.M sits at bf16 bits 5-9) & 0x03E003E0
    e2m3 (S.EE.MMM)   a = (x shifted so E.M sits at bf16 bits 4-8) & 0x01F001F0
                      m = ((x << (10 - r)) & 0x80008000) | a            (one lop3)

m is the bf16 of v * 2**-124 (e3m2: its exponent bias 3 against bf16's 127) or v * 2**-126
(e2m3, bias 1), subnormal codes included (a bf16 subnormal). One ``fma.rn.bf16x2`` by the
block's 2**(b - 3) (or 2**(b - 1)) gives v * 2**(b - 127) rounded once: the emulated path's
bf16 weight (fp6 values times a power of two are exact in bf16 unless they overflow, which
rounds to inf as the reference's float32 value does: 28 * 2**127 is past float32's range
too). That power of two is a bf16 for b <= 130 (e2m3: 128); larger bytes (and NaN, 255) take
a second multiply (``BIG``, as MX fp4: kernels/bf16_codes.py). fp16 x: each bf16 as a
float32, times the powers of two in float32, one ``cvt.rn.f16x2.f32`` rounding a pair to
fp16: the emulated path's fp16 weight. About 3.8 instructions a code here; 5.0 in the sm90
main loop with the loads and MMAs.

The four packed columns are one unit's, so one scale byte ($11) serves the instance. Under
the interpreter the same values come from integer and float32 arithmetic
(kernels/mx_dequant.elem_value).
"""

from __future__ import annotations

import triton
import triton.language as tl
from aoq.kernels.bf16_codes import _mx_scale
from aoq.kernels.mx_dequant import e8m0_value, elem_value

E3M2_LIMIT = 130
"""The largest E8M0 byte whose 2**(b - 3) is a bf16 (e3m2's one-multiply path)."""
E2M3_LIMIT = 128
"""The same for e2m3's 2**(b - 1)."""
_SCALE_KIND = {False: "bf16x2", True: "f32"}


def _em(x: str, r: int, pos: int, mask: str) -> str:
    """a = the E.M bits of the code at offset r of each half of ``x``, moved to bit ``pos``."""
    s = pos - r
    move = f"shl.b32 a, {x}, {s};\n" if s > 0 else f"shr.b32 a, {x}, {-s};\n"
    return move + f"and.b32 a, a, {mask};\n"


def _scale_out(out: str, big: bool, f16: bool) -> str:
    """The pair m (bf16 of v * 2**-c) times the block's power of two into ``out``."""
    if not f16:
        if big:
            return f"fma.rn.bf16x2 m, m, p, nz;\nfma.rn.bf16x2 {out}, m, q, nz;\n"
        return f"fma.rn.bf16x2 {out}, m, p, nz;\n"
    muls = "".join(
        f"mul.rn.f32 f{i}, f{i}, p;\n" + (f"mul.rn.f32 f{i}, f{i}, q;\n" if big else "")
        for i in (0, 1)
    )
    return (
        f"shl.b32 f0, m, 16;\nand.b32 f1, m, 0xFFFF0000;\n{muls}cvt.rn.f16x2.f32 {out}, f1, f0;\n"
    )


def _pair(x: str, r: int, out: str, e3m2: bool, big: bool, f16: bool) -> str:
    """The code at offset r of each half of ``x`` -> its value pair in ``out``."""
    pos, mask = (5, "0x03E003E0") if e3m2 else (4, "0x01F001F0")
    return (
        _em(x, r, pos, mask)
        + f"shl.b32 c, {x}, {10 - r};\n"
        + "lop3.b32 m, c, 0x80008000, a, 0xEA;\n"
        + _scale_out(out, big, f16)
    )


_GROUPS = (
    "mov.b32 g, $8;\n",  # codes 0-3: w0's bits 0-23
    "shf.r.clamp.b32 g, $8, $9, 24;\n",  # codes 4-7: bits 24-47 (w0 and w1)
    "shf.r.clamp.b32 g, $9, $10, 16;\n",  # codes 8-11: bits 48-71 (w1 and w2)
    "shr.b32 g, $10, 8;\n",  # codes 12-15: bits 72-95
)
"""Each group of four codes into the low 24 bits of g (6 bits a code from bit 0)."""


def _build(e3m2: bool, big: bool, f16: bool) -> str:
    """PTX for one unit of 16 codes: outputs $0-$7 (bf16 or fp16 pairs: codes 0-1, 2-3, ...,
    14-15), inputs $8 $9 $10 (the unit's words w0, w1, w2), $11-$14 (its E8M0 byte, the same
    in all four). Per group g: codes 4t and 4t + 1 from x = (g << 10 : g), halves high : low
    (offset 0 in each half); codes 4t + 2 and 4t + 3 from (g : g >> 10) (offset 2)."""
    limit, bias = (E3M2_LIMIT, 3) if e3m2 else (E2M3_LIMIT, 1)
    regs = ".reg .b32 g, t, x, a, c, m, p, q, nz, f0, f1;\n"
    body = [regs, "mov.b32 nz, 0x80008000;\n", _mx_scale(big, limit, bias, "$11", _SCALE_KIND[f16])]
    body.append("\n")
    for t, group in enumerate(_GROUPS):
        body.append(group)
        body.append("shl.b32 t, g, 10;\nlop3.b32 x, t, g, 0xFFFF0000, 0xE4;\n")
        body.append(_pair("x", 0, f"${2 * t}", e3m2, big, f16))
        body.append("shr.b32 t, g, 10;\nlop3.b32 x, g, t, 0xFFFF0000, 0xE4;\n")
        body.append(_pair("x", 2, f"${2 * t + 1}", e3m2, big, f16))
    return "{\n" + "".join(body) + "}"


_ASM = {
    (e, b, f): _build(e, b, f) for e in (False, True) for b in (False, True) for f in (False, True)
}


def _build_pair(e3m2: bool, big: bool, f16: bool) -> str:
    """PTX for one value pair of a unit: outputs $0 $1 (codes 2 i and 2 i + 1 as bf16 or
    fp16), inputs $2 $3 $4 (the unit's words w0, w1, w2), $5 (its E8M0 byte), $6 (i, 0-7).
    The pair's 12 bits start at bit 12 i of w0 | w1 << 32 | w2 << 64: a funnel shift of the
    two words they lie in (i is a constant of each register slot where :func:`fp6_pairs` is
    used, so ptxas folds the selects), then :func:`_pair` at offset 0."""
    limit, bias = (E3M2_LIMIT, 3) if e3m2 else (E2M3_LIMIT, 1)
    return (
        "{\n.reg .b32 g, t, x, a, c, m, p, q, nz, f0, f1, lo, hi, sh, o;\n"
        ".reg .pred lt3, lt6;\nmov.b32 nz, 0x80008000;\n"
        + _mx_scale(big, limit, bias, "$5", _SCALE_KIND[f16])
        + "\nsetp.lt.u32 lt3, $6, 3;\nsetp.lt.u32 lt6, $6, 6;\n"
        "selp.b32 lo, $3, $4, lt6;\nselp.b32 lo, $2, lo, lt3;\nselp.b32 hi, $3, $4, lt3;\n"
        "mul.lo.u32 sh, $6, 12;\nand.b32 sh, sh, 31;\nshf.r.clamp.b32 g, lo, hi, sh;\n"
        "shl.b32 t, g, 10;\nlop3.b32 x, t, g, 0xFFFF0000, 0xE4;\n"
        + _pair("x", 0, "o", e3m2, big, f16)
        + "mov.b32 {$0, $1}, o;\n}"
    )


_PAIR_ASM = {
    (e, b, f): _build_pair(e, b, f)
    for e in (False, True)
    for b in (False, True)
    for f in (False, True)
}


@triton.constexpr_function
def fp6_asm(e3m2, big, f16):
    """:func:`_build`'s PTX for these flags (built once, at import)."""
    return _ASM[bool(e3m2), bool(big), bool(f16)]


@triton.constexpr_function
def fp6_pair_asm(e3m2, big, f16):
    """:func:`_build_pair`'s PTX for these flags."""
    return _PAIR_ASM[bool(e3m2), bool(big), bool(f16)]


@triton.jit
def _code(wa, wb, OFF: tl.constexpr):
    """The 6-bit code at bit OFF of the 64 bits wb:wa (int32 words; OFF < 32)."""
    NB: tl.constexpr = 6 if OFF <= 26 else 32 - OFF
    c = (wa >> OFF) & ((1 << NB) - 1)
    if OFF > 26:
        c |= (wb << (32 - OFF)) & 63
    return c


@triton.jit
def _value(c, sb, E3M2: tl.constexpr, F16: tl.constexpr):
    """The interpreter's value of code c in a block of E8M0 byte sb: float32, exact (F16:
    rounded to fp16 as the reference's cast)."""
    if E3M2:
        v = elem_value(c, 3, 2, 3, 0) * e8m0_value(sb)
    else:
        v = elem_value(c, 2, 3, 1, 0) * e8m0_value(sb)
    if F16:
        v = v.to(tl.float16).to(tl.float32)
    return v


@triton.jit
def _word(b):
    """The interpreter's int32 word T of each unit from its plane bytes [R, 4 C]: [R, C]."""
    r = tl.reshape(b.to(tl.int32), (b.shape[0], b.shape[1] // 4, 4))
    sh = tl.arange(0, 4)[None, None, :] * 8
    return tl.sum(r << sh, axis=2)


@triton.jit
def fp6_codes(b0, b1, b2, sb, E3M2: tl.constexpr, BIG: tl.constexpr, ASM: tl.constexpr,
              F16: tl.constexpr = False):  # fmt: skip
    """uint8 planes [R, 4 C] (plane t: the four bytes of word t of each 16-code unit) and
    int32 E8M0 bytes [R, 4 C] (each unit's block, four times) -> four [R, 4 C] tensors, o_t
    holding codes 4 t .. 4 t + 3 of each unit at its four columns: bf16 (F16: fp16) pairs
    from the assembly; float32 under the interpreter."""
    if ASM:
        ty = tl.float16 if F16 else tl.bfloat16
        o0, o1, o2, o3 = tl.inline_asm_elementwise(
            fp6_asm(E3M2, BIG, F16), "=r,=r,=r,=r,=r,=r,=r,=r,r,r,r,r,r,r,r",
            [b0, b1, b2, sb], dtype=(ty,) * 4, is_pure=True, pack=4,
        )  # fmt: skip
    else:
        w0 = _word(b0)
        w1 = _word(b1)
        w2 = _word(b2)
        s = tl.reshape(sb, (sb.shape[0], sb.shape[1] // 4, 4))
        s = tl.max(s, axis=2)  # each unit's byte (its four copies are equal)
        o0 = _group(w0, w1, w2, s, 0, E3M2, F16)
        o1 = _group(w0, w1, w2, s, 1, E3M2, F16)
        o2 = _group(w0, w1, w2, s, 2, E3M2, F16)
        o3 = _group(w0, w1, w2, s, 3, E3M2, F16)
    return o0, o1, o2, o3


@triton.jit
def _group(w0, w1, w2, s, T: tl.constexpr, E3M2: tl.constexpr, F16: tl.constexpr):
    """The interpreter's values of codes 4 T .. 4 T + 3 of each unit, as [R, 4 C] (unit j's
    at columns 4 j ..)."""
    if T == 0:
        a = _value(_code(w0, w1, 0), s, E3M2, F16)
        b = _value(_code(w0, w1, 6), s, E3M2, F16)
        c = _value(_code(w0, w1, 12), s, E3M2, F16)
        d = _value(_code(w0, w1, 18), s, E3M2, F16)
    elif T == 1:
        a = _value(_code(w0, w1, 24), s, E3M2, F16)
        b = _value(_code(w0, w1, 30), s, E3M2, F16)
        c = _value(_code(w1, w2, 4), s, E3M2, F16)
        d = _value(_code(w1, w2, 10), s, E3M2, F16)
    elif T == 2:
        a = _value(_code(w1, w2, 16), s, E3M2, F16)
        b = _value(_code(w1, w2, 22), s, E3M2, F16)
        c = _value(_code(w1, w2, 28), s, E3M2, F16)
        d = _value(_code(w2, w2, 2), s, E3M2, F16)
    else:
        a = _value(_code(w2, w2, 8), s, E3M2, F16)
        b = _value(_code(w2, w2, 14), s, E3M2, F16)
        c = _value(_code(w2, w2, 20), s, E3M2, F16)
        d = _value(_code(w2, w2, 26), s, E3M2, F16)
    v = tl.join(tl.join(a, c), tl.join(b, d))  # [R, C, 2, 2]: a b c d in memory order
    return tl.reshape(v, (v.shape[0], v.shape[1] * 4))


@triton.jit
def _pairs(pa, pb, TY: tl.constexpr):
    """Two int32 tensors [R, C] of value pairs (low half first) -> [R, 4 C] of TY, each
    element's four values at its four columns in the order pa low, pa high, pb low, pb high."""
    p = tl.interleave(pa, pb)  # [R, 2 C]: pa's and pb's pairs in turn
    lo = (p & 0xFFFF).to(tl.uint16).to(TY, bitcast=True)
    hi = ((p >> 16) & 0xFFFF).to(tl.uint16).to(TY, bitcast=True)
    return tl.interleave(lo, hi)


@triton.jit
def fp6_word_codes(w0, w1, w2, su, E3M2: tl.constexpr, BIG: tl.constexpr, ASM: tl.constexpr,
                   F16: tl.constexpr = False):  # fmt: skip
    """:func:`fp6_codes` from each unit's three int32 words [R, C] and its E8M0 byte [R, C]:
    the same assembly, one unit an instance (pack 1), so no layout of the operands can mix
    the bytes of two rows (wgmma's register operand holds codes of rows r and r + 8 side by
    side: kernels/wt_rows_fp6.py); the pairs become [R, 4 C] tensors by bit operations."""
    if ASM:
        ty: tl.constexpr = tl.float16 if F16 else tl.bfloat16
        p0, p1, p2, p3, p4, p5, p6, p7 = tl.inline_asm_elementwise(
            fp6_asm(E3M2, BIG, F16), "=r,=r,=r,=r,=r,=r,=r,=r,r,r,r,r",
            [w0, w1, w2, su], dtype=(tl.int32,) * 8, is_pure=True, pack=1,
        )  # fmt: skip
        o0, o1, o2, o3 = (
            _pairs(p0, p1, ty),
            _pairs(p2, p3, ty),
            _pairs(p4, p5, ty),
            _pairs(p6, p7, ty),
        )
    else:
        o0 = _group(w0, w1, w2, su, 0, E3M2, F16)
        o1 = _group(w0, w1, w2, su, 1, E3M2, F16)
        o2 = _group(w0, w1, w2, su, 2, E3M2, F16)
        o3 = _group(w0, w1, w2, su, 3, E3M2, F16)
    return o0, o1, o2, o3


@triton.jit
def fp6_pairs(w0, w1, w2, su, i, E3M2: tl.constexpr, BIG: tl.constexpr, ASM: tl.constexpr,
              F16: tl.constexpr = False):  # fmt: skip
    """Codes 2 i and 2 i + 1 of each unit (its three int32 words, its E8M0 byte and i, all of
    one shape) as two tensors of that shape: bf16 (F16: fp16) from the assembly, one pair an
    instance (:func:`_build_pair`), float32 under the interpreter. The caller places them
    (kernels/wt_rows_fp6.py broadcasts a unit's words over its eight pairs)."""
    if ASM and F16:
        lo, hi = tl.inline_asm_elementwise(
            fp6_pair_asm(E3M2, BIG, F16), "=h,=h,r,r,r,r,r", [w0, w1, w2, su, i],
            dtype=(tl.float16, tl.float16), is_pure=True, pack=1,
        )  # fmt: skip
    elif ASM:
        lo, hi = tl.inline_asm_elementwise(
            fp6_pair_asm(E3M2, BIG, F16), "=h,=h,r,r,r,r,r", [w0, w1, w2, su, i],
            dtype=(tl.bfloat16, tl.bfloat16), is_pure=True, pack=1,
        )  # fmt: skip
    else:
        u0 = w0.to(tl.uint32, bitcast=True).to(tl.uint64)
        u1 = w1.to(tl.uint32, bitcast=True).to(tl.uint64)
        u2 = w2.to(tl.uint32, bitcast=True).to(tl.uint64)
        bit = (i * 12).to(tl.uint64)
        low = (u0 | (u1 << 32)) >> tl.minimum(bit, 48)
        high = (u1 | (u2 << 32)) >> (tl.maximum(bit, 32) - 32)
        f = tl.where(i < 5, low, high) & 0xFFF
        lo = _value((f & 63).to(tl.int32), su, E3M2, F16)
        hi = _value((f >> 6).to(tl.int32), su, E3M2, F16)
    return lo, hi
