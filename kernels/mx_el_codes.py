"""MX fp4 and fp8 codes times each code's own step: bf16_codes.py's placements and one
``fma.rn.bf16x2`` a pair (two for BIG), as there, but with the step an operand per code
instead of one built from the first of the four codes an assembly instance packs.

Why: bf16_codes' MX fp4 / fp8 assembly reads one E8M0 byte for the four codes it takes, which
holds where Triton's layout gives a thread four consecutive codes of a row (decode_mma's
loads). With the decoded weights as wgmma's register operand (wt_rows_mx.py) the layout
packs codes of two rows, and that assembly scaled them by the wrong block (relative error
0.07-0.31 on an H200, session 54), as MX int8's per-code steps (bf16_codes.int8_steps) and
NVFP4's did not. Here the E8M0 bytes become bf16 steps a row at a time (:func:`mx_steps`: a
few instructions for a step's four blocks, not per code), which _common.block_columns spreads
over the step's columns like the bytes before.

Steps: p = 2**(min(b, LIMIT) - BIAS) with the placement's 2**-c folded in (e4m3: LIMIT 134,
BIAS 7; e5m2: 142, 15; fp4: 128, 1; bf16_codes._mx_scale's), and for BIG q = 2**(max(b,
LIMIT) - LIMIT), NaN for b = 255: v * 2**(b - 127) rounded once, the emulated path's weight.
fp16 x: each pair as two float32 (a shift, a mask) times p (and q) as float32, then one
``cvt.rn.f16x2.f32``, as bf16_codes._f16_pair."""

from __future__ import annotations

import triton
import triton.language as tl
from aoq.kernels.bf16_codes import _FP4_HEAD, _FP4_PAIR, _fp8_head


def _mul(src: str, out: str, p: str, q: str | None, f16: bool) -> str:
    """PTX: the bf16 pair ``src`` times the per-code step pair ``p`` (and ``q``) into ``out``
    (bf16x2; ``f16``: through float32 to fp16x2)."""
    if not f16:
        if q is None:
            return f"fma.rn.bf16x2 {out}, {src}, {p}, nz;\n"
        return f"fma.rn.bf16x2 {src}, {src}, {p}, nz;\nfma.rn.bf16x2 {out}, {src}, {q}, nz;\n"
    s = f"shl.b32 a0, {src}, 16;\nand.b32 a1, {src}, 0xFFFF0000;\n"
    for f in (p,) if q is None else (p, q):
        s += f"shl.b32 e0, {f}, 16;\nand.b32 e1, {f}, 0xFFFF0000;\n"
        s += "mul.rn.f32 a0, a0, e0;\nmul.rn.f32 a1, a1, e1;\n"
    return s + f"cvt.rn.f16x2.f32 {out}, a1, a0;\n"


_F16_REGS = ".reg .b32 a0, a1, e0, e1;\n"


def mxfp8_el_asm(big: bool, f16: bool, e5m2: bool) -> str:
    """Four MX fp8 codes ($2) -> four bf16 (fp16) ($0 $1), codes 0 and 1 times the steps in
    $3, 2 and 3 times $4 (BIG: then times $5 / $6)."""
    q0, q1 = ("$5", "$6") if big else (None, None)
    body = _mul("h0", "$0", "$3", q0, f16) + _mul("h1", "$1", "$4", q1, f16)
    return "{" + _fp8_head(e5m2) + (_F16_REGS if f16 else "") + body + "}"


def fp4_el_asm(big: bool, f16: bool) -> str:
    """Four bytes of MX fp4 codes ($4) -> low nibbles ($0 $1) and high nibbles ($2 $3) of two
    bytes each, bytes 0 and 1 times the steps in $5, 2 and 3 times $6 (BIG: then $7 / $8)."""
    pairs = []
    for t, lo, hi, p, q in (("t0", 0, 2, "$5", "$7"), ("t1", 1, 3, "$6", "$8")):
        qq = q if big else None
        pairs.append(_FP4_PAIR.format(t=t, mul=_mul("m", f"${lo}", p, qq, f16),
                                      mul_hi=_mul("m", f"${hi}", p, qq, f16)))  # fmt: skip
    return "{" + _FP4_HEAD + (_F16_REGS if f16 else "") + "".join(pairs) + "}"


_FP8_EL = {(b, f, e): mxfp8_el_asm(b, f, e) for b in (0, 1) for f in (0, 1) for e in (0, 1)}
_FP4_EL = {(b, f): fp4_el_asm(b, f) for b in (0, 1) for f in (0, 1)}


@triton.constexpr_function
def _fp8_pick(big, f16, e5m2):
    return _FP8_EL[int(big), int(f16), int(e5m2)]


@triton.constexpr_function
def _fp4_pick(big, f16):
    return _FP4_EL[int(big), int(f16)]


@triton.jit
def mx_steps(sb, LIMIT: tl.constexpr, BIAS: tl.constexpr, BIG: tl.constexpr):
    """int32 [R] E8M0 bytes -> bf16 [R] steps (p, q): p = 2**(min(b, LIMIT) - BIAS); BIG: q =
    2**(max(b, LIMIT) - LIMIT), NaN for b = 255 (else q is p, unused)."""
    p = ((tl.minimum(sb, LIMIT) - BIAS + 127) << 7).to(tl.int16).to(tl.bfloat16, bitcast=True)
    q = p
    if BIG:
        qb = tl.where(sb == 255, 0x7FC0, (tl.maximum(sb, LIMIT) - LIMIT + 127) << 7)
        q = qb.to(tl.int16).to(tl.bfloat16, bitcast=True)
    return p, q


@triton.jit
def e8m0_steps(sb):
    """int32 [R] E8M0 bytes -> bf16 [R] 2**(b - 127): the exponent field b from b = 1, the
    subnormal 2**-127 at 0, NaN for 255 (a block's scale itself; CVT's multiplier)."""
    bits = tl.where(sb >= 1, sb << 7, 0x40)
    bits = tl.where(sb == 255, 0x7FC0, bits)
    return bits.to(tl.int16).to(tl.bfloat16, bitcast=True)


@triton.jit
def mxfp8_el_codes(q, p, pq, BIG: tl.constexpr, F16: tl.constexpr, E5M2: tl.constexpr):
    """uint8 [R, C] MX fp8 codes and bf16 [R, C] steps p (BIG: and ``pq``) -> their values
    v * 2**(b - 127), bf16 (F16: fp16). NVIDIA only (the interpreter: decode_mma_wide's
    float path)."""
    if BIG:
        w = tl.inline_asm_elementwise(_fp8_pick(BIG, F16, E5M2), "=r,=r,r,r,r,r,r", [q, p, pq],
                                      dtype=tl.float16 if F16 else tl.bfloat16, is_pure=True,
                                      pack=4)  # fmt: skip
    else:
        w = tl.inline_asm_elementwise(_fp8_pick(BIG, F16, E5M2), "=r,=r,r,r,r", [q, p],
                                      dtype=tl.float16 if F16 else tl.bfloat16, is_pure=True,
                                      pack=4)  # fmt: skip
    return w


@triton.jit
def fp4_el_codes(b, p, pq, BIG: tl.constexpr, F16: tl.constexpr):
    """uint8 [R, C] bytes of MX fp4 codes and bf16 [R, C] steps per byte p (BIG: and ``pq``)
    -> (low nibbles, high nibbles) [R, C] times 2**(b - 127), bf16 (F16: fp16)."""
    if BIG:
        lo, hi = tl.inline_asm_elementwise(
            _fp4_pick(BIG, F16), "=r,=r,=r,=r,r,r,r,r,r", [b, p, pq],
            dtype=(tl.float16, tl.float16) if F16 else (tl.bfloat16, tl.bfloat16), is_pure=True,
            pack=4,
        )  # fmt: skip
    else:
        lo, hi = tl.inline_asm_elementwise(
            _fp4_pick(BIG, F16), "=r,=r,=r,=r,r,r,r", [b, p],
            dtype=(tl.float16, tl.float16) if F16 else (tl.bfloat16, tl.bfloat16), is_pure=True,
            pack=4,
        )  # fmt: skip
    return lo, hi
