"""W4A8 at M = 1 without the matrix units: the GEMV ``int_act_mm`` runs for one activation row
(int4 symmetric groupwise weights, int8 activation codes, or the float row it quantizes itself:
XQ). Split K like the other decode kernels (splitk.py)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from aoq.kernels import _common, splitk
from aoq.kernels._common import MAGIC, backend_of, exact_float
from aoq.kernels._launch import launch
from aoq.kernels.act_one_row import one_row_scale, quantize_one_row
from triton.language.extra.cuda import gdc_wait

from aoq.backends import Backend

_DP4A = tl.constexpr("dp4a.u32.s32 $0, $1, $2, $3;")
"""$3 + the sum of four products: unsigned bytes of $1 times signed bytes of $2."""
_EVEN_ODD = tl.constexpr("""{
prmt.b32 $0, $2, $3, 0x6420;
prmt.b32 $1, $2, $3, 0x7531;
}""")
"""Words $2 = x[8j..8j+3], $3 = x[8j+4..8j+7] -> (x[8j], x[8j+2], x[8j+4], x[8j+6]) and the
odd ones: the activations that meet a word's low and high nibbles."""


@triton.jit
def _dp4a(a, b, c):
    return tl.inline_asm_elementwise(_DP4A, "=r,r,r,r", [a, b, c], dtype=tl.int32, is_pure=True,
                                     pack=1)  # fmt: skip


@triton.jit
def _word(k, ALIGNED: tl.constexpr):
    """The code word of a row where the step at code ``k`` starts; ALIGNED: hinted a multiple
    of four words (every step starts at a multiple of 32 codes), so the step's words load 16
    bytes at a time."""
    if ALIGNED:
        return tl.multiple_of(k // 8, 4)
    return k // 8


@triton.jit
def _words_dot(
    accf, p, xw, ws, g, xz, bq, gstar, offs_g,
    GROUP_SIZE: tl.constexpr, GROUPS: tl.constexpr, WORDS: tl.constexpr, ASYM: tl.constexpr,
    HAS_BIAS_INT: tl.constexpr,
):  # fmt: skip
    """One step of the ``dp4a`` path: ``accf`` plus the step's GROUPS groups. ``p`` the codes'
    words [BLOCK_N, WORDS], ``xw`` the activation codes' words [2 * WORDS], ``ws`` the groups'
    scales [BLOCK_N, GROUPS], ``g`` the step's first group."""
    lo = p & 0x0F0F0F0F
    hi = (p >> 4) & 0x0F0F0F0F
    xa, xb = tl.split(tl.reshape(xw, (WORDS, 2)))
    xe, xo = tl.inline_asm_elementwise(
        _EVEN_ODD, "=r,=r,r,r", [xa, xb], dtype=(tl.int32, tl.int32), is_pure=True, pack=1
    )
    ones = tl.full((WORDS,), 0x01010101, tl.int32)
    xsum = _dp4a(ones, xe, _dp4a(ones, xo, tl.zeros_like(xe)))
    xsum = tl.sum(tl.reshape(xsum, (GROUPS, WORDS // GROUPS)), axis=1)
    dots = _dp4a(hi, xo[None, :], _dp4a(lo, xe[None, :], tl.zeros_like(p)))
    isum = tl.sum(tl.reshape(dots, (p.shape[0], GROUPS, WORDS // GROUPS)), axis=2)
    isum -= 8 * xsum[None, :]
    if ASYM:  # Σ (q + 8) over the group, less 8 per code
        ones2 = tl.full(p.shape, 0x01010101, tl.int32)
        qsum = _dp4a(hi, ones2, _dp4a(lo, ones2, tl.zeros_like(p)))
        qsum = tl.sum(tl.reshape(qsum, (p.shape[0], GROUPS, WORDS // GROUPS)), axis=2)
        isum -= xz * (qsum - 8 * GROUP_SIZE)
    gsum = isum.to(tl.float32)
    if HAS_BIAS_INT:
        mine = gstar[:, None] == (g + offs_g)[None, :]
        gsum += tl.where(mine, bq[:, None], 0).to(tl.float32)
    return accf + tl.sum(gsum * ws, axis=1)


@triton.jit
def _rows_dot(
    a0, a1, a2, a3, p, x_words, x_row, k0, ws, g, z0, z1, z2, z3, bq, gstar, offs_g,
    GROUP_SIZE: tl.constexpr, GROUPS: tl.constexpr, WORDS: tl.constexpr, ASYM: tl.constexpr,
    HAS_BIAS_INT: tl.constexpr, ROWS: tl.constexpr,
):  # fmt: skip
    """_words_dot for each of ROWS (1-4) activation rows, ``x_row`` int32 words apart, on the
    same code words ``p`` (loaded once; their nibble masks, common to every row, computed
    once by the compiler)."""
    wd = x_words + k0 // 4
    a0 = _words_dot(a0, p, tl.load(wd), ws, g, z0, bq, gstar, offs_g, GROUP_SIZE, GROUPS,
                    WORDS, ASYM, HAS_BIAS_INT)  # fmt: skip
    if ROWS > 1:
        a1 = _words_dot(a1, p, tl.load(wd + x_row), ws, g, z1, bq, gstar, offs_g, GROUP_SIZE,
                        GROUPS, WORDS, ASYM, HAS_BIAS_INT)  # fmt: skip
    if ROWS > 2:
        a2 = _words_dot(a2, p, tl.load(wd + 2 * x_row), ws, g, z2, bq, gstar, offs_g,
                        GROUP_SIZE, GROUPS, WORDS, ASYM, HAS_BIAS_INT)  # fmt: skip
    if ROWS > 3:
        a3 = _words_dot(a3, p, tl.load(wd + 3 * x_row), ws, g, z3, bq, gstar, offs_g,
                        GROUP_SIZE, GROUPS, WORDS, ASYM, HAS_BIAS_INT)  # fmt: skip
    return a0, a1, a2, a3


@triton.jit
def _float_dot(accf, lo, hi, x_row_ptr, k0, ws, g, xz, bq, gstar, offs_g, offs_h,
               GROUP_SIZE: tl.constexpr, GROUPS: tl.constexpr, HALF: tl.constexpr,
               ASYM: tl.constexpr, HAS_BIAS_INT: tl.constexpr, XQ: tl.constexpr,
               s1, z1, MODE: tl.constexpr):  # fmt: skip
    """The float path's step for one activation row (the interpreter, ROCm): float32 FMAs
    whose group sums are exact integers; ``lo``, ``hi`` the step's codes less 8."""
    xe = tl.load(x_row_ptr + k0 + offs_h)
    xo = tl.load(x_row_ptr + k0 + offs_h + 1)
    if XQ:
        xe = tl.reshape(quantize_one_row(xe[None, :], s1, z1, tl.int8, MODE, 127.0), (HALF,))
        xo = tl.reshape(quantize_one_row(xo[None, :], s1, z1, tl.int8, MODE, 127.0), (HALF,))
    xe = xe.to(tl.float32)
    xo = xo.to(tl.float32)
    prod = tl.reshape(lo * xe[None, :] + hi * xo[None, :],
                      (lo.shape[0], GROUPS, GROUP_SIZE // 2))  # fmt: skip
    gsum = tl.sum(prod, axis=2)  # [BLOCK_N, GROUPS]
    if ASYM:
        lh = tl.reshape(lo + hi, (lo.shape[0], GROUPS, GROUP_SIZE // 2))
        gsum -= xz.to(tl.float32) * tl.sum(lh, axis=2)
    if HAS_BIAS_INT:
        mine = gstar[:, None] == (g + offs_g)[None, :]
        gsum += tl.where(mine, bq[:, None], 0).to(tl.float32)
    return accf + tl.sum(gsum * ws, axis=1)


@triton.jit
def _row_out(accf, r, xs_ptr, b_ptr, y_ptr, p_ptr, offs_n, nmask, N, pid_k,
             STATIC: tl.constexpr, HAS_BIAS: tl.constexpr, SPLIT_K: tl.constexpr,
             ROWS: tl.constexpr):  # fmt: skip
    """Row r's float32 sums: its split-K partial, or y = sums * x's scale (+ bias)."""
    if SPLIT_K > 1:
        tl.store(p_ptr + (pid_k.to(tl.int64) * ROWS + r) * N + offs_n, accf, mask=nmask)
    else:
        y = accf * tl.load(xs_ptr + (0 if STATIC else r))
        if HAS_BIAS:
            y = y + tl.load(b_ptr + offs_n, mask=nmask, other=0.0).to(tl.float32)
        tl.store(y_ptr + r * N + offs_n, y.to(y_ptr.dtype.element_ty), mask=nmask)


@triton.jit
def _w4a8_gemv_kernel(
    xq_ptr, xs_ptr, xz_ptr, w_ptr, s_ptr, b_ptr, bq_ptr, gstar_ptr, y_ptr, p_ptr, c_ptr,
    N, K, stride_sn, stride_sg, K_SPLIT,
    GROUP_SIZE: tl.constexpr, GROUPS: tl.constexpr, ASYM: tl.constexpr, STATIC: tl.constexpr,
    HAS_BIAS: tl.constexpr, HAS_BIAS_INT: tl.constexpr, SPLIT_K: tl.constexpr,
    TAIL: tl.constexpr, BLOCK_N: tl.constexpr, ASM: tl.constexpr, XQ: tl.constexpr = False,
    PDL: tl.constexpr = False, TRIGGER: tl.constexpr = False, AHEAD: tl.constexpr = False,
    ALIGNED: tl.constexpr = False, ROWS: tl.constexpr = 1,
):  # fmt: skip
    """W4A8 at M == ROWS (1 to 4; x and y contiguous [ROWS, K] and [ROWS, N]) without the
    matrix units: GROUPS quantization groups a loop step, each step's codes loaded once for
    every row.

    ASM (CUDA): the codes stay integers. A 32-bit word holds 8 codes; masking its low and high
    nibbles gives two words of four unsigned bytes (q + 8), and one ``dp4a`` each multiplies
    them by four int8 activations and adds to an int32: 5 instructions for 8 codes. A group's
    sum is Σ (q + 8) x − 8 Σ x, the int32 the MMA path accumulates.
    Otherwise (the interpreter, ROCm): float32 FMAs whose group sums are the same exact
    integers (|q·x| <= 8 * 128 and a group of <= 2**14 codes stays below 2**24).
    Either way the float epilogue repeats the reference's operations (groups summed in
    another order: float32 rounding only). Codes are not interleaved: low nibbles meet the
    even activations, high nibbles the odd ones. XQ: xq_ptr is the float activation row,
    quantized here step by step (as _int_act_mm_kernel's XQ), the codes packed into words
    for ``dp4a``. PDL: launched with programmatic dependent launch after the kernel that
    wrote x (and xs, xz), which it waits for before reading them. TRIGGER: splitk.trigger.
    AHEAD (ASM, not XQ): the first step's codes and scales are loaded before the wait (the
    weights are not the previous kernel's output), so with PDL they stream while the
    activation kernel still runs; that step is done before the loop. ALIGNED (GEMV_TILE's,
    on): each step's code words hinted as aligned runs of four (every step starts at a
    multiple of 32 codes: groups are powers of two >= 32), so sm90 loads them 16 bytes at a
    time (ld.global.v4, not v2; bench/NOTES.md, sessions 24 and 25)."""
    splitk.trigger(TRIGGER)
    tl.static_assert(ROWS >= 1 and ROWS <= 4 and (ROWS == 1 or not XQ), "ROWS: 1-4, XQ at 1")
    MODE: tl.constexpr = 1 if ASYM else (2 if STATIC else 0)
    HALF: tl.constexpr = GROUP_SIZE * GROUPS // 2  # bytes of a row per step
    WORDS: tl.constexpr = HALF // 4
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    nmask = offs_n < N
    offs_h = 2 * tl.arange(0, HALF)
    offs_g = tl.arange(0, GROUPS)
    if ASM:  # 32-bit words (the launcher checked their alignment; K is a multiple of 32)
        w_rows = (
            w_ptr.to(tl.pointer_type(tl.int32))
            + offs_n.to(tl.int64)[:, None] * tl.multiple_of(K // 8, 4)
            + tl.arange(0, WORDS)[None, :]
        )
        x_words = xq_ptr.to(tl.pointer_type(tl.int32)) + tl.arange(0, 2 * WORDS)
    else:
        w_rows = w_ptr + offs_n.to(tl.int64)[:, None] * (K // 2) + tl.arange(0, HALF)[None, :]
    s_rows = s_ptr + offs_n.to(tl.int64)[:, None] * stride_sn + offs_g[None, :] * stride_sg
    k_lo = pid_k * K_SPLIT
    k_hi = tl.minimum(K, k_lo + K_SPLIT)
    STEP: tl.constexpr = 2 * HALF
    x_row = K // 4  # int32 words between activation rows
    if AHEAD:  # the first step's weights, before the wait (every range holds whole steps)
        p0 = tl.load(w_rows + _word(k_lo, ALIGNED), mask=nmask[:, None], other=0x08080808)
        ws0 = tl.load(s_rows + (k_lo // GROUP_SIZE) * stride_sg, mask=nmask[:, None], other=0.0)
    if PDL:  # x and its scale come from the kernel launched before this one
        gdc_wait()
    bq = tl.load(bq_ptr + offs_n, mask=nmask & HAS_BIAS_INT, other=0)
    gstar = tl.load(gstar_ptr + offs_n, mask=nmask & HAS_BIAS_INT, other=-1)
    z0, z1, z2, z3 = 0, 0, 0, 0
    s1 = 0.0
    if XQ:
        s1, zq = one_row_scale(xq_ptr, xs_ptr, xs_ptr, K, MODE, STATIC, False, 127.0, 2048)
        z0 = zq.to(tl.int32)
    elif ASYM:
        z0 = tl.load(xz_ptr)  # int32, a row's
        if ROWS > 1:
            z1 = tl.load(xz_ptr + 1)
        if ROWS > 2:
            z2 = tl.load(xz_ptr + 2)
        if ROWS > 3:
            z3 = tl.load(xz_ptr + 3)
    a0 = tl.zeros((BLOCK_N,), dtype=tl.float32)
    a1, a2, a3 = a0, a0, a0
    if AHEAD:
        a0, a1, a2, a3 = _rows_dot(a0, a1, a2, a3, p0, x_words, x_row, k_lo, ws0,
                                   k_lo // GROUP_SIZE, z0, z1, z2, z3, bq, gstar, offs_g,
                                   GROUP_SIZE, GROUPS, WORDS, ASYM, HAS_BIAS_INT, ROWS)  # fmt: skip
    for k0 in range(k_lo + (STEP if AHEAD else 0), k_hi, STEP):
        g = k0 // GROUP_SIZE
        if ASM:
            p = tl.load(w_rows + _word(k0, ALIGNED), mask=nmask[:, None], other=0x08080808)
            ws = tl.load(s_rows + g * stride_sg, mask=nmask[:, None], other=0.0)
            if XQ:  # four codes a word, the first in the low byte (the int8 tensor's bytes)
                xf = tl.load(xq_ptr + k0 + tl.arange(0, 8 * WORDS))[None, :]
                c = tl.reshape(quantize_one_row(xf, s1, z0, tl.int8, MODE, 127.0), (2 * WORDS, 4))
                c = (c.to(tl.int32) & 0xFF) << (8 * tl.arange(0, 4))[None, :]
                xw = tl.sum(c, axis=1)  # disjoint bytes: the sum is their OR
                a0 = _words_dot(a0, p, xw, ws, g, z0, bq, gstar, offs_g, GROUP_SIZE, GROUPS,
                                WORDS, ASYM, HAS_BIAS_INT)  # fmt: skip
            else:
                a0, a1, a2, a3 = _rows_dot(a0, a1, a2, a3, p, x_words, x_row, k0, ws, g, z0,
                                           z1, z2, z3, bq, gstar, offs_g, GROUP_SIZE, GROUPS,
                                           WORDS, ASYM, HAS_BIAS_INT, ROWS)  # fmt: skip
        else:
            pb = tl.load(w_rows + k0 // 2, mask=nmask[:, None], other=0x88).to(tl.int32)
            lo = exact_float(pb & 0xF, 0) - (MAGIC + 8.0)
            hi = exact_float(pb >> 4, 0) - (MAGIC + 8.0)
            # the scales after the codes (loaded first, gfx942 spilled to AGPRs)
            ws = tl.load(s_rows + g * stride_sg, mask=nmask[:, None], other=0.0)
            a0 = _float_dot(a0, lo, hi, xq_ptr, k0, ws, g, z0, bq, gstar, offs_g, offs_h,
                            GROUP_SIZE, GROUPS, HALF, ASYM, HAS_BIAS_INT, XQ, s1, z0,
                            MODE)  # fmt: skip
            if ROWS > 1:
                a1 = _float_dot(a1, lo, hi, xq_ptr + K, k0, ws, g, z1, bq, gstar, offs_g,
                                offs_h, GROUP_SIZE, GROUPS, HALF, ASYM, HAS_BIAS_INT, XQ, s1,
                                z0, MODE)  # fmt: skip
            if ROWS > 2:
                a2 = _float_dot(a2, lo, hi, xq_ptr + 2 * K, k0, ws, g, z2, bq, gstar, offs_g,
                                offs_h, GROUP_SIZE, GROUPS, HALF, ASYM, HAS_BIAS_INT, XQ, s1,
                                z0, MODE)  # fmt: skip
            if ROWS > 3:
                a3 = _float_dot(a3, lo, hi, xq_ptr + 3 * K, k0, ws, g, z3, bq, gstar, offs_g,
                                offs_h, GROUP_SIZE, GROUPS, HALF, ASYM, HAS_BIAS_INT, XQ, s1,
                                z0, MODE)  # fmt: skip
    _row_out(a0, 0, xs_ptr, b_ptr, y_ptr, p_ptr, offs_n, nmask, N, pid_k, STATIC, HAS_BIAS,
             SPLIT_K, ROWS)  # fmt: skip
    if ROWS > 1:
        _row_out(a1, 1, xs_ptr, b_ptr, y_ptr, p_ptr, offs_n, nmask, N, pid_k, STATIC,
                 HAS_BIAS, SPLIT_K, ROWS)  # fmt: skip
    if ROWS > 2:
        _row_out(a2, 2, xs_ptr, b_ptr, y_ptr, p_ptr, offs_n, nmask, N, pid_k, STATIC,
                 HAS_BIAS, SPLIT_K, ROWS)  # fmt: skip
    if ROWS > 3:
        _row_out(a3, 3, xs_ptr, b_ptr, y_ptr, p_ptr, offs_n, nmask, N, pid_k, STATIC,
                 HAS_BIAS, SPLIT_K, ROWS)  # fmt: skip
    if SPLIT_K > 1 and TAIL:
        splitk.finish(p_ptr, c_ptr, p_ptr, p_ptr, xs_ptr, b_ptr, y_ptr, ROWS, N, N, SPLIT_K,
                      TAIL, BLOCK_N)  # fmt: skip


GEMV_TILE = {
    "BLOCK_N": 16, "STEP_K": 1024, "num_warps": 2, "per_sm": 8, "XQ_BLOCK_N": 32,
    "XQ_num_warps": 2, "ALIGNED": True, "STEP_K_ROWS": {3: 512, 4: 512},
}  # fmt: skip
"""W4A8 GEMV: rows per program, K per loop step (whole groups: the largest power-of-two
multiple of the group up to STEP_K that divides K; ``STEP_K_ROWS``: the step at that many
activation rows, where a 1024-code step's values for every row crowd the registers: H200,
activation kernel + GEMV under PDL, M 3, 8192^2 / 4096 x 14336 / 14336 x 4096: 22.9 / 21.9 /
19.2 us at 1024, 20.8 / 18.6 / 19.1 at 512; M 4 27.0 / 25.3 / 26.0 against 24.1 / 21.5 /
22.2; session 34), warps, split-K target programs per SM;
``XQ_*``: the rows and warps of the launch that quantizes x itself (eager M = 1), whose
programs each quantize their own copy of a step of x, so fewer and wider ones pay off. Its
split is the BLOCK_N launch's (w4a8_gemv), so the float32 order of the exact group sums (a
step's groups, then the steps, then the splits) is the same; what can still differ is the
order inside a step's sum over its groups, which follows the register layout of
[rows, groups] and so the rows and warps. 16 rows and 32 rows on two warps gave one
another's bits on an H100 (every issue shape, and tests/kernels/test_one_row.py's GPU test:
the fused launch against the two launches); 64 rows, or 16 on one warp, did not, at 4096 x
14336. Change the two tiles together and rerun that test.
H100 graph replays, activation kernel + GEMV, M1, 8192^2 / 4096 x 14336 / 14336 x 4096
(bench.decode_rows, session 24): under PDL 64 x 256 20.8 / 18.4 / 19.6 us, 32 x 512 19.8 /
17.7 / 18.3, 16 x 1024 19.2-19.3 / 16.1-16.4 / 17.9-18.3 (4 warps 20.8 / 15.9-16.0 /
17.1-17.6); x quantized in the GEMV at the 16-row split: 32 rows 23.2 / 19.3-19.5 / 23.9-24.3
against 64 x 256's 26.5 / 23.4 / 29.2 and 16 rows' 28.4 / 24.8 / 27.1. A longer step is a
longer first step loaded before the wait (AHEAD). ``ALIGNED`` (the kernel's hint: 16-byte code
loads; same bits, tests/kernels/test_gpu.py), H100 session 25: under PDL 19.6 / 16.2 / 17.9 ->
19.2 / 15.9 / 17.6 us, x quantized in the GEMV 23.4 / 19.0 / 23.9 -> 22.3 / 18.0 / 22.8.
Earlier: session 8 (float32 path) four groups of 32 rows on 2 warps; session 9 (``dp4a``)
64 x 256."""


MAX_ROWS = 4
"""The most activation rows one launch takes (the kernel's accumulators are one a row)."""


def w4a8_gemv(
    args: tuple[torch.Tensor, ...],
    y: torch.Tensor,
    k: int,
    gs: int,
    flags: dict,
    split: int | None,
    xq_in_kernel: bool,
    pdl: bool = False,
    tile: dict | None = None,
) -> None:
    """Launch the GEMV into y [M, N] (M = 1 to :data:`MAX_ROWS`, x and y contiguous; the
    x-quantizing launch at M = 1 only): ``args`` the eight leading tensors of
    ``_w4a8_gemv_kernel`` (int_act_mm's order; the scales [N, G] in either order), ``flags``
    int_act_mm's constexprs (the ones this kernel does not take are left out), ``split`` a
    forced split-K, ``pdl`` a launch with programmatic dependent launch (the caller checked
    the GPU has it, _common.pdl: the kernel starts while the one before it, which wrote x
    and its scale, still runs, and waits for it before reading them), ``tile`` overrides of
    GEMV_TILE's keys."""
    xq, x_scale, wq, ws, bias = args[0], args[1], args[3], args[4], args[5]
    n = wq.shape[0]
    m = y.shape[0]
    if not 1 <= m <= (1 if xq_in_kernel else MAX_ROWS) or xq.shape[0] != m:
        raise ValueError(f"w4a8_gemv: M={m} (x {tuple(xq.shape)}); it takes 1 to {MAX_ROWS}")
    if m > 1 and (xq.stride() != (k, 1) or not y.is_contiguous()):
        raise ValueError("w4a8_gemv: x and y rows must be contiguous")
    backend = backend_of(y.device)
    cfg = {**GEMV_TILE, **(tile or {})}
    ahead = pdl and _common.PDL_AHEAD
    step = splitk.k_step(k, gs, cfg["STEP_K_ROWS"].get(m, cfg["STEP_K"]))
    p = splitk.plan(y, backend, triton.cdiv(n, cfg["BLOCK_N"]), k, step, split,
                    per_sm=cfg["per_sm"])  # fmt: skip
    if cfg["XQ_BLOCK_N"] < cfg["BLOCK_N"]:  # the plan's counters are per BLOCK_N tile
        raise ValueError(f"XQ_BLOCK_N {cfg['XQ_BLOCK_N']} < BLOCK_N {cfg['BLOCK_N']}")
    bn = cfg["XQ_BLOCK_N"] if xq_in_kernel else cfg["BLOCK_N"]
    warps = cfg["XQ_num_warps"] if xq_in_kernel else cfg["num_warps"]
    n_prog = triton.cdiv(n, bn)
    own = {key: flags[key] for key in ("GROUP_SIZE", "ASYM", "STATIC", "HAS_BIAS", "HAS_BIAS_INT")}
    x_words = xq_in_kernel or xq.data_ptr() % 4 == 0  # (a float row is read as floats)
    words = backend is Backend.CUDA and x_words and wq.data_ptr() % 4 == 0
    epi = dict(row_scale=x_scale, bias=bias if flags["HAS_BIAS"] else None)
    launch(_w4a8_gemv_kernel, (n_prog, p.split),
        *args, y, p.partials, p.counter_arg(), n, k, ws.stride(0), ws.stride(1), p.k_split,
        GROUPS=step // gs, SPLIT_K=p.split, TAIL=p.tail(splitk.epilogue_bits(**epi)),
        BLOCK_N=bn, ASM=words, num_warps=warps, XQ=xq_in_kernel, PDL=pdl,
        launch_pdl=pdl, TRIGGER=p.chain, AHEAD=ahead and words and not xq_in_kernel,
        ALIGNED=cfg["ALIGNED"], ROWS=m, **own,
    )  # fmt: skip
    p.finish(y, **epi)
