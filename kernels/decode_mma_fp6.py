"""decode_mma.py's main loop for MX fp6 weights (WFMT 6 e3m2, 7 e2m3): four codes in three
bytes, read in place (no derived copy of the codes) and multiplied on the matrix units.

Triton's tiles have power-of-two sides, and a row's codes come in 12-byte units of 16. A step
of BLOCK_K codes (C = BLOCK_K / 16 units) loads its bytes as three uint8 planes [BLOCK_N, 4 C]:
plane t holds the four bytes of word t of each unit (4-byte runs, which the pipeliner copies
with cp.async). kernels/fp6_codes.py turns a unit's three words into four tensors of the
planes' shape, output t holding the unit's codes 4 t .. 4 t + 3 at its four columns; each
meets x's columns 16 u + 4 t + i (loaded in runs of four to match): four MMAs of K = 4 C a
step, the weights as operand A (WT), no code moved between threads.

The block's power of two is in the weights' values, so the float32 accumulator needs no
per-block scaling. The E8M0 bytes come group-major, one [BLOCK_N] vector per block of the
step, a step ahead, and reach the columns through _common.block_columns (a gathered 2-D load
of them made Triton move every decoded weight through shared memory). Steps are 128 codes
(decode_mma.FP6_STEP): 64-code steps came out wrong on an H100.

XQDQ (M = 1, MX activations: mx_decode.mx_decode_triton's ``one_row``): x's row is
quantize-dequantized here, step by step, to the values the activation kernel would have
stored (mx_steps' element constants as A_*): each block's amax from the step's row read in
order, picked per column by selects (the x tiles' columns are permuted), then the same qdq
per element. One launch instead of two at eager M = 1.

Why: fp6 ran the emulated path at decode, dequantize to bf16 then the BLAS GEMV, 0.27x bf16
F.linear at M = 1 (H100 run 0936fc: 178.7 us at 8192^2), and the generic MX decode kernel's
fp6 tile (byte loads three apart, float32 values) was slower still (H200, session 10: 290 us
against the emulated 164). Here: 25.5-28.7 us at M = 1 (H100, bench/NOTES.md session 31).
"""

from __future__ import annotations

import triton
import triton.language as tl
from aoq.kernels import mx_steps as st
from aoq.kernels._common import block_columns, mma
from aoq.kernels.fp6_codes import fp6_codes
from aoq.kernels.mx_packed import in_x_dtype


@triton.jit
def _step_scales(s_rows, nmask, k0, k_hi, stride_sg, BS: tl.constexpr, NB: tl.constexpr):
    """The E8M0 bytes [BLOCK_N] of the NB blocks of the step at k0 (zeros from k_hi on), as
    int32; a step of fewer than four blocks repeats its first (nothing reads the copies)."""
    m = nmask & (k0 < k_hi)
    g = k0 // BS * stride_sg
    s0 = tl.load(s_rows + g, mask=m, other=0).to(tl.int32)
    s1, s2, s3 = s0, s0, s0
    if NB > 1:
        s1 = tl.load(s_rows + g + stride_sg, mask=m, other=0).to(tl.int32)
    if NB > 2:
        s2 = tl.load(s_rows + g + 2 * stride_sg, mask=m, other=0).to(tl.int32)
        s3 = tl.load(s_rows + g + 3 * stride_sg, mask=m, other=0).to(tl.int32)
    return s0, s1, s2, s3


@triton.jit
def _pick(v, blk, NB: tl.constexpr):
    """v [NB]'s entry at each of blk's block indices, by selects (no gather)."""
    idx = tl.arange(0, NB)
    out = tl.zeros(blk.shape, v.dtype)
    for j in tl.static_range(NB):
        out = tl.where(blk == j, tl.sum(tl.where(idx == j, v, 0), axis=0), out)
    return out


@triton.jit
def _x_qdq(xt, inv, scl, ok, mmask, A_SHIFT: tl.constexpr, A_MIN_NORMAL: tl.constexpr,
           A_MAX_NORMAL: tl.constexpr, A_IS_INT: tl.constexpr, A_HW_FP8: tl.constexpr,
           A_FP8_TY: tl.constexpr, UPCAST: tl.constexpr):  # fmt: skip
    """An x tile [ROWS, C] quantize-dequantized with its columns' block constants, rounded to
    x's dtype; the padding rows stay zero (a NaN block's qdq is NaN)."""
    q = st.qdq(xt, inv, scl, ok, A_SHIFT, A_MIN_NORMAL, A_MAX_NORMAL, A_IS_INT, A_HW_FP8,
               A_FP8_TY)  # fmt: skip
    return in_x_dtype(tl.where(mmask[:, None], q, 0.0), xt.dtype, UPCAST)


@triton.jit
def _steps(acc_t, x_ptr, xrows, wrow, s_rows, nmask, mmask, k_lo, k_hi, stride_sg,
           E3M2: tl.constexpr, BS: tl.constexpr, BLOCK_K: tl.constexpr, ASM: tl.constexpr,
           UPCAST: tl.constexpr, BIG: tl.constexpr, F16: tl.constexpr, XQDQ: tl.constexpr,
           A_SHIFT: tl.constexpr, A_MIN_NORMAL: tl.constexpr, A_MAX_NORMAL: tl.constexpr,
           A_IS_INT: tl.constexpr, A_HW_FP8: tl.constexpr, A_FP8_TY: tl.constexpr,
           A_EMAX: tl.constexpr, A_MAX_FRAC: tl.constexpr, A_RCEIL: tl.constexpr):  # fmt: skip
    C4: tl.constexpr = BLOCK_K // 4  # four columns a unit
    NB: tl.constexpr = max(BLOCK_K // BS, 1)
    tl.static_assert(NB == 1 or NB == 2 or NB == 4, "fp6: 1, 2 or 4 blocks a step")
    col = tl.arange(0, C4)
    units = 16 * (col // 4)  # each column's unit, as its first code
    xcol = units + col % 4  # o_t's column c meets x's column 16 (c // 4) + 4 t + c % 4
    bcol = 12 * (col // 4) + col % 4  # plane t's column c: byte 12 (c // 4) + 4 t + c % 4
    n0, n1, n2, n3 = _step_scales(s_rows, nmask, k_lo, k_hi, stride_sg, BS, NB)
    for k0 in range(k_lo, k_hi, BLOCK_K):
        sb = block_columns(n0, n1, n2, n3, C4, NB)  # each column's unit's block byte
        n0, n1, n2, n3 = _step_scales(s_rows, nmask, k0 + BLOCK_K, k_hi, stride_sg, BS, NB)
        wp = wrow + (k0 // 16 * 12 + bcol)[None, :]
        b0 = tl.load(wp, mask=nmask[:, None], other=0)
        b1 = tl.load(wp + 4, mask=nmask[:, None], other=0)
        b2 = tl.load(wp + 8, mask=nmask[:, None], other=0)
        o0, o1, o2, o3 = fp6_codes(b0, b1, b2, sb, E3M2, BIG, ASM, F16)
        if not UPCAST:  # (AMD's float path: float32 values, rounded once to x's dtype)
            xt: tl.constexpr = xrows.dtype.element_ty
            o0, o1, o2, o3 = o0.to(xt), o1.to(xt), o2.to(xt), o3.to(xt)
        xk = xrows + (k0 + xcol)[None, :]
        x0 = tl.load(xk, mask=mmask[:, None], other=0.0)
        x1 = tl.load(xk + 4, mask=mmask[:, None], other=0.0)
        x2 = tl.load(xk + 8, mask=mmask[:, None], other=0.0)
        x3 = tl.load(xk + 12, mask=mmask[:, None], other=0.0)
        if XQDQ:  # x's one row: each column's block constants, then the same qdq per element
            tl.static_assert(BS <= BLOCK_K, "XQDQ: whole blocks a step")
            xb = tl.reshape(tl.load(x_ptr + k0 + tl.arange(0, BLOCK_K)), (NB, BS))
            shared, ok = st.shared_exp(_pick(st.amax_bits(xb, 1), units // BS, NB), A_EMAX,
                                       A_MAX_FRAC, A_RCEIL)  # fmt: skip
            inv = st.exp2i(-shared, not A_IS_INT)[None, :]
            scl = st.exp2i(shared, False)[None, :]
            ok = ok[None, :]
            x0 = _x_qdq(x0, inv, scl, ok, mmask, A_SHIFT, A_MIN_NORMAL, A_MAX_NORMAL, A_IS_INT,
                        A_HW_FP8, A_FP8_TY, UPCAST)  # fmt: skip
            x1 = _x_qdq(x1, inv, scl, ok, mmask, A_SHIFT, A_MIN_NORMAL, A_MAX_NORMAL, A_IS_INT,
                        A_HW_FP8, A_FP8_TY, UPCAST)  # fmt: skip
            x2 = _x_qdq(x2, inv, scl, ok, mmask, A_SHIFT, A_MIN_NORMAL, A_MAX_NORMAL, A_IS_INT,
                        A_HW_FP8, A_FP8_TY, UPCAST)  # fmt: skip
            x3 = _x_qdq(x3, inv, scl, ok, mmask, A_SHIFT, A_MIN_NORMAL, A_MAX_NORMAL, A_IS_INT,
                        A_HW_FP8, A_FP8_TY, UPCAST)  # fmt: skip
        acc_t = mma(o0, tl.trans(x0), acc_t, UPCAST, "ieee")
        acc_t = mma(o1, tl.trans(x1), acc_t, UPCAST, "ieee")
        acc_t = mma(o2, tl.trans(x2), acc_t, UPCAST, "ieee")
        acc_t = mma(o3, tl.trans(x3), acc_t, UPCAST, "ieee")
    return acc_t


@triton.jit
def fp6_loop(acc_t, x_ptr, xrows, w_ptr, s_ptr, z_ptr, offs_n, nmask, mmask, k_lo, k_hi,
             stride_wn, stride_sn, stride_sg, E3M2: tl.constexpr, BS: tl.constexpr,
             BLOCK_K: tl.constexpr, ASM: tl.constexpr, UPCAST: tl.constexpr,
             BIG: tl.constexpr, XQDQ: tl.constexpr, A_SHIFT: tl.constexpr,
             A_MIN_NORMAL: tl.constexpr, A_MAX_NORMAL: tl.constexpr, A_IS_INT: tl.constexpr,
             A_HW_FP8: tl.constexpr, A_FP8_TY: tl.constexpr, A_EMAX: tl.constexpr,
             A_MAX_FRAC: tl.constexpr, A_RCEIL: tl.constexpr):  # fmt: skip
    """acc_t [BLOCK_N, ROWS] plus the products of K range [k_lo, k_hi) (multiples of
    BLOCK_K): the codes at w_ptr (rows ``stride_wn`` bytes apart, a multiple of 4), their E8M0
    bytes at s_ptr (strides stride_sn, stride_sg), BIG as decode_mma's (2: the int32 at z_ptr
    says); XQDQ and the A_* constants: the module's."""
    tl.static_assert(BLOCK_K % 128 == 0, "fp6: steps of 128 codes (decode_mma.FP6_STEP)")
    F16: tl.constexpr = xrows.dtype.element_ty == tl.float16
    wrow = w_ptr + (offs_n.to(tl.int64) * stride_wn)[:, None]
    s_rows = s_ptr + offs_n.to(tl.int64) * stride_sn
    big = BIG == 1
    if BIG == 2:  # one uniform branch per program (decode_mma's MX flag)
        big = tl.load(z_ptr) != 0
    if big:
        acc_t = _steps(acc_t, x_ptr, xrows, wrow, s_rows, nmask, mmask, k_lo, k_hi, stride_sg,
                       E3M2, BS, BLOCK_K, ASM, UPCAST, True, F16, XQDQ, A_SHIFT, A_MIN_NORMAL,
                       A_MAX_NORMAL, A_IS_INT, A_HW_FP8, A_FP8_TY, A_EMAX, A_MAX_FRAC,
                       A_RCEIL)  # fmt: skip
    else:
        acc_t = _steps(acc_t, x_ptr, xrows, wrow, s_rows, nmask, mmask, k_lo, k_hi, stride_sg,
                       E3M2, BS, BLOCK_K, ASM, UPCAST, False, F16, XQDQ, A_SHIFT, A_MIN_NORMAL,
                       A_MAX_NORMAL, A_IS_INT, A_HW_FP8, A_FP8_TY, A_EMAX, A_MAX_FRAC,
                       A_RCEIL)  # fmt: skip
    return acc_t
