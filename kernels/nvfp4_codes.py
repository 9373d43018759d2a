"""NVFP4 weight codes for decode_mma's WFMT 9 (decode_mma_steps.py).

NVFP4 is fp4 e2m1 codes (two a byte, the first in the low nibble) in blocks of 16, each block
scaled by an e4m3 value times one float32 tensor scale: the emulated path's weight is
``f32(v * f32(e4m3 * ts))`` rounded once to x's dtype (aoq.formats.nvfp4). That step is an
arbitrary float32, so unlike MX's power of two it cannot ride the bf16 multiply that places
the codes. decode_mma takes each block apart instead, as int4 takes its groups:

- MX fp4's placement (kernels/bf16_codes.py) gives the bf16 of v * 2**-126 for a pair of
  codes; one ``fma.rn.bf16x2`` by 2**126 makes it v, exactly (v is 0, 0.5 ... 6; fp16 x: the
  same v as fp16);
- a block's 16 codes (8 bytes: byte j holds codes 2j and 2j + 1, the pair a thread holds in
  the MMA operand's layout) meet x's 16 columns in one MMA into zeros, whose float32 sums
  Σ v x then take the block's step d = f32(e4m3) * ts: one FMA per output a block.

Against the emulated weights this rounds differently (Σ v x times d, not Σ bf16(v d) x): with
one nonzero x per row it is the emulated weight bit for bit (f32(v d), rounded once to x's
dtype on the store), and otherwise the float32 product is closer to the exact one. A NaN
block step (e4m3 0x7F) makes its rows' outputs NaN, as the emulated matmul's 0 * NaN does.
The per-column steps the first build multiplied in instead took 589 SASS instructions a
64-code step on sm90 (shuffles to the operand's layout included) against MX fp4's 278.
"""

from __future__ import annotations

import triton
import triton.language as tl
from aoq.kernels.bf16_codes import _FP4_HEAD, _FP4_ONE, _FP4_PAIR, _f16_pair
from aoq.kernels.mx_dequant import elem_value


def _values_asm(f16: bool) -> str:
    """Four bytes ($4) -> the values v of their low nibbles ($0 $1) and high nibbles ($2 $3),
    two bytes each, as bf16 pairs (``f16``: fp16), exactly."""
    if f16:  # p: 2**126 as a float32
        mul, scale = _f16_pair("m", "${o}", False), ".reg .b32 a0, a1;\nmov.b32 p, 0x7E800000;\n"
    else:  # p: 2**126 in both bf16 halves
        mul, scale = _FP4_ONE, "mov.b32 p, 0x7E807E80;\n"
    pairs = [
        _FP4_PAIR.format(t=t, mul=mul.format(o=lo), mul_hi=mul.format(o=hi))
        for t, lo, hi in (("t0", 0, 2), ("t1", 1, 3))
    ]
    return "{" + _FP4_HEAD + scale + "".join(pairs) + "}"


_VALUES_ASM = tl.constexpr(_values_asm(False))
_VALUES_F16_ASM = tl.constexpr(_values_asm(True))


@triton.jit
def block_scales(sb, ts):
    """e4m3 block-scale bytes (int32) -> the blocks' float32 steps d = f32(e4m3) * ts."""
    return elem_value(sb, 4, 3, 7, 1) * ts


@triton.jit
def nvfp4_values(b, ASM: tl.constexpr, F16: tl.constexpr = False):
    """uint8 [R, C] bytes of NVFP4 codes -> (low nibbles' values, high nibbles' values) as
    [R, C] bf16 (F16: fp16) tensors, exact; under the interpreter float32."""
    if ASM:
        lo, hi = tl.inline_asm_elementwise(
            _VALUES_F16_ASM if F16 else _VALUES_ASM, "=r,=r,=r,=r,r", [b],
            dtype=(tl.float16, tl.float16) if F16 else (tl.bfloat16, tl.bfloat16),
            is_pure=True, pack=4,
        )  # fmt: skip
    else:
        p = b.to(tl.int32)
        lo = elem_value(p & 15, 2, 1, 1, 0)
        hi = elem_value(p >> 4, 2, 1, 1, 0)
    return lo, hi
