"""NVFP4 weight codes as bf16 (or fp16) pairs for decode_mma's WFMT 9 (decode_mma_steps.py).

NVFP4 is fp4 e2m1 codes (two a byte, the first in the low nibble) in blocks of 16, each block
scaled by an e4m3 value times one float32 tensor scale: the emulated path's weight is
``f32(v * f32(e4m3 * ts))`` rounded once to x's dtype (aoq.formats.nvfp4). That scale is an
arbitrary float32, so unlike MX's power of two it cannot ride a bf16 multiply; the product is
taken in float32 as the reference takes it:

- MX fp4's placement (kernels/bf16_codes.py) gives the bf16 of v * 2**-126 for a pair of
  codes; one ``fma.rn.bf16x2`` by 2**126 makes it v, exactly (v is 0, 0.5 ... 6);
- each half as a float32 (a shift, a mask), times the block's float32 scale d (one
  rounding: the reference's product), and one ``cvt.rn.bf16x2.f32`` (``f16x2``) rounds the
  pair to x's dtype as the reference's cast does. A NaN block scale (e4m3 0x7F) makes the
  block NaN, 0 * NaN included, as the reference's.

With bf16 x the kernel takes a cheaper exact route instead (``NVX``, decode_mma.TILE's):
v has at most two significant bits and an e4m3 value four, so v * e4m3 is exact in bf16.
The placement's v * 2**-126 times p = e4m3 * 2**118 (one ``fma.rn.bf16x2``, p a bf16 whose
range 2**109 to 2**126.8 bf16 holds) is v * e4m3 * 2**-8, exact; the MMA sums those times x
in float32, and the tensor scale times 2**8 multiplies the sums once at the end. Each
output is then the product of the quantized values with float32 summation only, closer to
the float64 reference than the emulated path's rounded weights (sm90: 589 -> 426
instructions a 64-code step).

The kernel's group is two NVFP4 blocks (32 codes: an MMA's K of 16 for each nibble half), so
the scale input holds each column's block's d ([R, 16]: columns 0-7 the first block's low and
high nibbles' half, 8-15 the second's), one step per byte into the assembly.

Two cheaper builds decoded wrong on an H100 while the interpreter was right (session 32,
bench/NOTES.md): the steps broadcast to the columns by a join and a reshape
(_common.block_columns) gave each row the next row's steps, and each block summed apart on
the MMA (its values in k order, a join and a reshape of the nibble halves, then times the
block's step: 424 SASS instructions a 64-code step against this build's 589) scrambled the
codes. This build selects each column's step with ``tl.where``. Since session 52 NVFP4's
tile takes decode_mma's WIDE steps instead (decode_mma_wide.py): a step's two groups, four
blocks over 32 byte columns, spread by block_columns at NB 4 (right on the GPU, unlike NB 2
over 16), which leaves the decoded codes in the MMA operand's layout where the select sent
them through shared memory (sm90: 426 -> 314 instructions a step at 8 rows; H200 M 1 31.3
-> 24.8 µs at 8192^2).
"""

from __future__ import annotations

import triton
import triton.language as tl
from aoq.kernels.bf16_codes import _FP4_HEAD, _FP4_PAIR
from aoq.kernels.mx_dequant import elem_value
from aoq.kernels.mx_packed import rne_bf16


def _nvfp4_asm(f16: bool) -> str:
    """Four bytes ($4) -> low nibbles ($0 $1) and high nibbles ($2 $3) of two bytes each, each
    byte's codes times its own float32 step ($5-$8: byte i's is $(5 + i)), rounded once to
    bf16 (fp16). Whether the four bytes an instance packs share a block depends on the layout
    Triton gives the codes, so none is assumed."""
    ty = "f16x2" if f16 else "bf16x2"
    mul = (
        "fma.rn.bf16x2 m, m, p, nz;\nshl.b32 f0, m, 16;\nand.b32 f1, m, 0xFFFF0000;\n"
        "mul.rn.f32 f0, f0, ${d0};\nmul.rn.f32 f1, f1, ${d1};\n"
        f"cvt.rn.{ty}.f32 ${{o}}, f1, f0;\n"
    )
    pairs = [
        _FP4_PAIR.format(
            t=t, mul=mul.format(o=lo, d0=d, d1=d + 1), mul_hi=mul.format(o=hi, d0=d, d1=d + 1)
        )
        for t, lo, hi, d in (("t0", 0, 2, 5), ("t1", 1, 3, 7))
    ]
    head = _FP4_HEAD + ".reg .b32 f0, f1;\nmov.b32 p, 0x7E807E80;\n"  # p: 2**126, both halves
    return "{" + head + "".join(pairs) + "}"


def _nvfp4_exact_asm() -> str:
    """NVX: four bytes ($4) -> low nibbles ($0 $1) and high nibbles ($2 $3), each byte's codes
    times its own bf16 step p ($5: bytes 0 and 1, $6: bytes 2 and 3), one ``fma.rn.bf16x2``
    a pair: MX fp4's placement (v * 2**-126) times p = e4m3 * 2**118 is v * e4m3 * 2**-8,
    exact in bf16 (two significant bits times four; 2**-18 to 2**3.4)."""
    pairs = [
        _FP4_PAIR.format(
            t=t, mul=f"fma.rn.bf16x2 ${lo}, m, {d}, nz;", mul_hi=f"fma.rn.bf16x2 ${hi}, m, {d}, nz;"
        )  # fmt: skip
        for t, lo, hi, d in (("t0", 0, 2, "$5"), ("t1", 1, 3, "$6"))
    ]
    return "{" + _FP4_HEAD + "".join(pairs) + "}"


_NVFP4_ASM = tl.constexpr(_nvfp4_asm(False))
_NVFP4_EXACT_ASM = tl.constexpr(_nvfp4_exact_asm())
NVX_STEP = tl.constexpr(2.0**118)
"""NVX: a block's step is its e4m3 value times this (float32 and bf16, exact: 2**109 to
2**126.8); the tensor scale times 2**8 multiplies the float32 sums at the end."""
_NVFP4_F16_ASM = tl.constexpr(_nvfp4_asm(True))


@triton.jit
def block_scales(sb, ts):
    """e4m3 block-scale bytes (int32) -> the blocks' float32 steps d = f32(e4m3) * ts."""
    return elem_value(sb, 4, 3, 7, 1) * ts


@triton.jit
def nvfp4_codes(b, d, ASM: tl.constexpr, F16: tl.constexpr = False):
    """uint8 [R, C] bytes of NVFP4 codes and float32 [R, C] steps (_common.block_columns of
    the group's two blocks) -> (low nibbles, high nibbles) times their step, rounded to bf16
    (F16: fp16), as [R, C] tensors; under the interpreter float32 holding those values."""
    if ASM:
        lo, hi = tl.inline_asm_elementwise(
            _NVFP4_F16_ASM if F16 else _NVFP4_ASM, "=r,=r,=r,=r,r,r,r,r,r", [b, d],
            dtype=(tl.float16, tl.float16) if F16 else (tl.bfloat16, tl.bfloat16),
            is_pure=True, pack=4,
        )  # fmt: skip
    else:
        p = b.to(tl.int32)
        lo = elem_value(p & 15, 2, 1, 1, 0) * d
        hi = elem_value(p >> 4, 2, 1, 1, 0) * d
        if F16:
            lo = lo.to(tl.float16).to(tl.float32)
            hi = hi.to(tl.float16).to(tl.float32)
        else:  # the interpreter's float32 -> bf16 cast truncates: round by hand
            lo = (rne_bf16(lo) << 16).to(tl.float32, bitcast=True)
            hi = (rne_bf16(hi) << 16).to(tl.float32, bitcast=True)
    return lo, hi


@triton.jit
def nvfp4_exact_codes(b, p, ASM: tl.constexpr):
    """NVX (bf16 x): uint8 [R, C] bytes of NVFP4 codes and float32 [R, C] steps p (each
    column's block's e4m3 value times NVX_STEP) -> (low nibbles, high nibbles) as v * e4m3 *
    2**-8, exact: bf16 from the assembly, float32 under the interpreter. The tensor scale is
    the caller's, once, on the float32 sums."""
    if ASM:
        lo, hi = tl.inline_asm_elementwise(
            _NVFP4_EXACT_ASM, "=r,=r,=r,=r,r,r,r", [b, p.to(tl.bfloat16)],
            dtype=(tl.bfloat16, tl.bfloat16), is_pure=True, pack=4,
        )  # fmt: skip
    else:
        q = b.to(tl.int32)
        d = p * 1.1754943508222875e-38  # 2**-126: the step e4m3 * 2**-8, exact
        lo = elem_value(q & 15, 2, 1, 1, 0) * d
        hi = elem_value(q >> 4, 2, 1, 1, 0) * d
    return lo, hi
