"""decode_mma's WIDE steps for the formats whose scales are in the codes' values (MX fp4 and
fp8, NVFP4, MX int8 with bf16 x): a whole step of groups decoded at once and multiplied by one
MMA over its K (two for the nibble formats), with the MMA both orientations share
(:func:`_weights_mma`). Split from decode_mma_steps.py to keep each file readable."""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from aoq.kernels._common import WeightFormat, block_columns, block_columns8, mma
from aoq.kernels.bf16_codes import fp4_codes, int8_steps, mxfp8_codes, mxint8_codes
from aoq.kernels.mx_el_codes import e8m0_steps, fp4_el_codes, mx_steps, mxfp8_el_codes
from aoq.kernels.nvfp4_codes import nvfp4_codes, nvfp4_exact_codes


def wide_serves(
    wfmt: WeightFormat, groups: int, x_dtype: torch.dtype, tiled: bool = False, post: bool = False
) -> bool:
    """Whether a step of ``groups`` groups of ``wfmt`` can be WIDE: row-major codes decoded
    with their scale (not ``tiled`` codes nor MX fp8's ``post``-MMA scale), NVFP4's steps of
    two or four groups (not one: block_columns' two blocks over 16 columns miscompiled on sm90;
    four: _common.block_columns8), and MX int8
    with bf16 x only (its steps are bf16 values; fp16 and its int8 codes keep the per-group
    loop)."""
    if tiled or post:
        return False
    if wfmt is WeightFormat.NVFP4:
        return groups in (2, 4)
    if wfmt is WeightFormat.MX_INT8:
        return x_dtype == torch.bfloat16
    return True


@triton.jit
def _weights_mma(acc, acc_t, w, xt, UPCAST: tl.constexpr, WT: tl.constexpr):
    """(acc, acc_t) plus x's tile times the decoded weights w [BLOCK_N, C] (one per byte), in
    either orientation; w in x's dtype (bf16 or fp16: per-channel int8 / e4m3 codes exact in
    both, MX fp8 in fp16 already rounded as the emulated path's weights)."""
    if not UPCAST:
        w = w.to(xt.dtype)
    if WT:
        acc_t = mma(w, tl.trans(xt), acc_t, UPCAST, "ieee")
    else:
        acc = mma(xt, tl.trans(w), acc, UPCAST, "ieee")
    return acc, acc_t


@triton.jit
def _wide_step(acc, acc_t, xrows, wrows, nmask, mmask, k0, s0, z0, s1, z1, s2, z2, s3, z3,
               WFMT: tl.constexpr, GROUP_SIZE: tl.constexpr, GROUPS: tl.constexpr,
               BLOCK_K: tl.constexpr, BIG: tl.constexpr, ASM: tl.constexpr,
               UPCAST: tl.constexpr, WT: tl.constexpr, NVX: tl.constexpr):  # fmt: skip
    """WIDE (the formats whose scales can ride the codes' values: MX fp4 and fp8, NVFP4; MX
    int8 with bf16 x, each code times its block's bf16 step 2**(b - 133)): the
    whole step of GROUPS groups decoded at once, each code by its own group's scale (NVFP4:
    block's step; spread over the step's columns by _common.block_columns, whose join and
    reshape take the layout of the MMA operand, where a select by column forced the decoded
    codes through shared memory: NVFP4's 16-row loop 449 -> 325 SASS instructions a 64-code
    step), then one MMA over the step's K (two for the nibbles: low with x's even
    columns, high with its odd) in place of one or two a group. The same weights as the
    per-group steps; the float32 sums in another order. Where x is the MMA's A operand on 4+
    warps (sm90: wgmma, the weights through shared memory), a group's MMA of K 16 or 32 is
    one round trip of its own: a step of 64-128 codes now takes one or two."""
    xt = tl.load(xrows + (k0 + tl.arange(0, BLOCK_K))[None, :], mask=mmask[:, None], other=0)
    if WFMT == 5 or WFMT == 8 or WFMT == 10:  # MX fp8 and int8: a byte a code
        b = tl.load(wrows + k0, mask=nmask[:, None], other=0)
        w = wide_bytes(b, s0, s1, s2, s3, WFMT, GROUPS, BLOCK_K, BIG, ASM, xt.dtype == tl.float16)
        acc, acc_t = _weights_mma(acc, acc_t, w, xt, UPCAST, WT)
    else:
        b = tl.load(wrows + k0 // 2, mask=nmask[:, None], other=0)
        C: tl.constexpr = BLOCK_K // 2
        lo, hi = wide_nibbles(b, s0, z0, s1, z1, s2, z2, s3, z3, WFMT, GROUPS, C, BIG, ASM,
                              xt.dtype == tl.float16, NVX)  # fmt: skip
        if not UPCAST:
            lo, hi = lo.to(xt.dtype), hi.to(xt.dtype)
        xe, xo = tl.split(tl.reshape(xt, (xt.shape[0], C, 2)))
        if WT:
            acc_t = mma(lo, tl.trans(xe), acc_t, UPCAST, "ieee")
            acc_t = mma(hi, tl.trans(xo), acc_t, UPCAST, "ieee")
        else:
            acc = mma(xe, tl.trans(lo), acc, UPCAST, "ieee")
            acc = mma(xo, tl.trans(hi), acc, UPCAST, "ieee")
    return acc, acc_t


@triton.jit
def _el_steps(s0, s1, s2, s3, W: tl.constexpr, GROUPS: tl.constexpr, LIMIT: tl.constexpr,
              BIAS: tl.constexpr, BIG: tl.constexpr):  # fmt: skip
    """EL: the blocks' bf16 steps (mx_el_codes.mx_steps) spread over a step's W columns."""
    p0, q0 = mx_steps(s0, LIMIT, BIAS, BIG)
    p1, q1 = mx_steps(s1, LIMIT, BIAS, BIG)
    p2, q2 = mx_steps(s2, LIMIT, BIAS, BIG)
    p3, q3 = mx_steps(s3, LIMIT, BIAS, BIG)
    p = block_columns(p0, p1, p2, p3, W, GROUPS)
    q = p
    if BIG:
        q = block_columns(q0, q1, q2, q3, W, GROUPS)
    return p, q


@triton.jit
def wide_bytes(b, s0, s1, s2, s3, WFMT: tl.constexpr, GROUPS: tl.constexpr,
               BLOCK_K: tl.constexpr, BIG: tl.constexpr, ASM: tl.constexpr,
               F16: tl.constexpr, EL: tl.constexpr = False,
               CVT: tl.constexpr = False):  # fmt: skip
    """A step's MX 8-bit codes b uint8 [R, BLOCK_K] (WFMT 5 e4m3, 8 e5m2, 10 int8) with the
    E8M0 bytes s0-s3 [R] (int32) of its GROUPS blocks -> their weights [R, BLOCK_K]: bf16
    (F16: fp16) from the assembly, float32 under the interpreter (decode_mma's WIDE steps,
    wt_rows_mx.py). EL: fp8 with a step per code (kernels/mx_el_codes.py: any layout). CVT
    (bf16, a GPU): the codes by Triton's own conversion, times each block's bf16 step
    (mx_el_codes.e8m0_steps; one rounding)."""
    if CVT and ASM and not F16:
        if WFMT == 10:
            v = b.to(tl.int8, bitcast=True).to(tl.bfloat16)
            p = block_columns(int8_steps(s0), int8_steps(s1), int8_steps(s2), int8_steps(s3),
                              BLOCK_K, GROUPS)  # fmt: skip
        else:
            if WFMT == 8:
                v = b.to(tl.float8e5, bitcast=True).to(tl.bfloat16)
            else:
                v = b.to(tl.float8e4nv, bitcast=True).to(tl.bfloat16)
            p = block_columns(e8m0_steps(s0), e8m0_steps(s1), e8m0_steps(s2), e8m0_steps(s3),
                              BLOCK_K, GROUPS)  # fmt: skip
        w = v * p
    elif EL and ASM and WFMT != 10:
        LIMIT: tl.constexpr = 142 if WFMT == 8 else 134
        p, q = _el_steps(s0, s1, s2, s3, BLOCK_K, GROUPS, LIMIT, LIMIT - 127, BIG)
        w = mxfp8_el_codes(b, p, q, BIG, F16, WFMT == 8)
    elif WFMT == 10 and ASM:  # int8: each block's bf16 step, built a row at a time
        p = block_columns(int8_steps(s0), int8_steps(s1), int8_steps(s2), int8_steps(s3),
                          BLOCK_K, GROUPS)  # fmt: skip
        w = mxint8_codes(b, p, ASM)
    elif WFMT == 10:
        w = mxint8_codes(b, block_columns(s0, s1, s2, s3, BLOCK_K, GROUPS), ASM)
    else:
        sbb = block_columns(s0, s1, s2, s3, BLOCK_K, GROUPS)
        w = mxfp8_codes(b, sbb, BIG, ASM, F16, WFMT == 8)
    return w


@triton.jit
def wide_nibbles(b, s0, z0, s1, z1, s2, z2, s3, z3, WFMT: tl.constexpr, GROUPS: tl.constexpr,
                 C: tl.constexpr, BIG: tl.constexpr, ASM: tl.constexpr, F16: tl.constexpr,
                 NVX: tl.constexpr, EL: tl.constexpr = False):  # fmt: skip
    """A step's nibble codes b uint8 [R, C] (WFMT 4 MX fp4: E8M0 bytes s0-s3 of its GROUPS
    blocks; 9 NVFP4: (s, z) each group's two blocks' float32 steps, two or four groups) ->
    (low nibbles, high nibbles) [R, C], as :func:`wide_bytes` (EL: MX fp4's too)."""
    if EL and ASM and WFMT == 4:
        p, q = _el_steps(s0, s1, s2, s3, C, GROUPS, 128, 1, BIG)
        lo, hi = fp4_el_codes(b, p, q, BIG, F16)
    elif WFMT == 9:  # NVFP4: each group's two blocks of 16 (8 bytes), their float32 steps
        tl.static_assert(GROUPS == 2 or GROUPS == 4, "WIDE NVFP4: two or four groups a step")
        if GROUPS == 4:
            d = block_columns8(s0, z0, s1, z1, s2, z2, s3, z3, C)
        else:
            d = block_columns(s0, z0, s1, z1, C, 4)
        if NVX:
            lo, hi = nvfp4_exact_codes(b, d, ASM)
        else:
            lo, hi = nvfp4_codes(b, d, ASM, F16)
    else:
        sbb = block_columns(s0, s1, s2, s3, C, GROUPS)
        lo, hi = fp4_codes(b, sbb, BIG, ASM, F16)
    return lo, hi
