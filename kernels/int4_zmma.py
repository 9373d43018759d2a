"""decode_mma's ZMMA probe (off in decode_mma.TILE): int4 codes as base + q and the zero
point as a third MMA operand, -(base + z), instead of bf16_codes.int4_codes's subtraction.
sm90 loop 357 -> 324 instructions a 64 x 128-code step, but 2-6 % slower on an H100 and 7-10 %
on an H200 (bench/NOTES.md, session 34): the longer chain of dependent MMAs costs more than
the FMAs it saves. Kept so that a later tile or GPU can time it again
(``python -m bench.decode_rows --formats int4 --extra '{"int4": [{"TILED": true, "ZMMA": 1}]}'``).
"""

from __future__ import annotations

import triton
import triton.language as tl

_INT4_BASE = """{{
.reg .b32 t0, t1;
prmt.b32 t0, $6, 0, 0x4140;
prmt.b32 t1, $6, 0, 0x4342;
lop3.b32 $0, t0, 0x000F000F, {magic}, 0xea;
lop3.b32 $1, t1, 0x000F000F, {magic}, 0xea;
shr.b32 t0, t0, 4;
shr.b32 t1, t1, 4;
lop3.b32 $2, t0, 0x000F000F, {magic}, 0xea;
lop3.b32 $3, t1, 0x000F000F, {magic}, 0xea;
mov.b32 $4, $7;
mov.b32 $5, $8;
}}"""
_INT4_BASE_ASM = tl.constexpr(_INT4_BASE.format(magic="0x43004300"))
"""ZMMA: four bytes ($6) -> the low nibbles' and the high nibbles' base + q (bf16 128 + q;
$0 $1, $2 $3), no subtraction: the zero point goes into the MMA as its own operand
(:func:`int4_base_codes`), -(base + z) passed through ($7 $8 -> $4 $5) so that it comes out in the
codes' registers' layout, the MMA operand's (a broadcast converted by Triton went through
shared memory: sm90 loop 357 -> 485 instructions)."""
_INT4_BASE_F16_ASM = tl.constexpr(_INT4_BASE.format(magic="0x64006400"))


@triton.jit
def int4_base_codes(b, z, ASM: tl.constexpr, F16: tl.constexpr = False):
    """ZMMA: uint8 [R, C] bytes, int32 [R] zero points -> (base + q_lo, base + q_hi,
    -(base + z) on every column), base bf16 128.0 (F16: fp16 1024.0), all exact; the MMA of
    the third with x's columns adds -(base + z) times their sum, so the three MMAs sum
    (q - z) x. Two instructions a code fewer than int4_codes's subtraction (1 against 1.5),
    for one more MMA a pair; the cancellation costs float32 rounding of the larger sums.
    float32 under the interpreter."""
    if ASM and F16:
        zb = tl.broadcast_to((-1024.0 - z.to(tl.float32)).to(tl.float16)[:, None], b.shape)
        lo, hi, zb = tl.inline_asm_elementwise(
            _INT4_BASE_F16_ASM, "=r,=r,=r,=r,=r,=r,r,r,r", [b, zb],
            dtype=(tl.float16, tl.float16, tl.float16), is_pure=True, pack=4,
        )  # fmt: skip
    elif ASM:
        zb = tl.broadcast_to((-128.0 - z.to(tl.float32)).to(tl.bfloat16)[:, None], b.shape)
        lo, hi, zb = tl.inline_asm_elementwise(
            _INT4_BASE_ASM, "=r,=r,=r,=r,=r,=r,r,r,r", [b, zb],
            dtype=(tl.bfloat16, tl.bfloat16, tl.bfloat16), is_pure=True, pack=4,
        )  # fmt: skip
    else:
        p = b.to(tl.int32)
        zb = tl.broadcast_to((-128.0 - z.to(tl.float32))[:, None], b.shape)
        lo = (p & 0xF).to(tl.float32) + 128.0
        hi = (p >> 4).to(tl.float32) + 128.0
    return lo, hi, zb
