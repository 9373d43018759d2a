"""Integer-activation linears: W8A8 (int8 per-channel weights) and W4A8 (int4 symmetric
groupwise weights), int8 activations per token (symmetric, asymmetric) or static.

Math (aoq.formats.linear.int_act_linear), with exact int32 accumulators from the int8 MMA::

    acc[m, n, g] = Σ_{k in g} xq[m, k] · wq[n, k]  −  xz[m] · Σ_{k in g} wq[n, k]   (asym)
    static bias: acc[m, n, g*(n)] += bq[n]
    y[m, n] = xs[m] · Σ_g float(acc[m, n, g]) · ws[n, g]  (+ float bias)

Per-channel weights keep one accumulator over all of K and scale it in the epilogue (so the
float32 result matches the reference bit for bit); groupwise weights flush one group's
accumulator into a float32 sum at the end of each group, which needs BLOCK_K to divide the
group size (configs.fit_group caps it). int4 codes are unpacked in the main loop (nibble −
8 -> int8). At 17-256 rows K may be split (mid_rows.py).

Op (namespace ``aoq``): ``int_act_mm``; CPU runs the reference.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl
from aoq.kernels import _common, mid_rows, splitk
from aoq.kernels import decode_mma as dm
from aoq.kernels._common import (
    FLOAT_DTYPES,
    Strategy,
    WeightFormat,
    backend_of,
    check_2d,
    epilogue,
    m_bucket,
    mma,
    out_dtype_for,
    unpack_nibbles,
)
from aoq.kernels._launch import launch
from aoq.kernels.act_one_row import one_row_scale, quantize_one_row
from aoq.kernels.configs import autotune, decode_tile, fit_group, mm_configs
from aoq.kernels.w4a8_gemv import w4a8_gemv
from aoq.kernels.w4a8_mma import serves as rows_mma_serves
from aoq.kernels.w4a8_mma import w4a8_mma
from triton.language.extra.cuda import gdc_wait

from aoq.formats import linear as ref
from aoq.formats.packing import unpack_uint4

W4 = WeightFormat.INT4_SYM


@triton.jit
def _flush(acc, accf, g, s_ptr, offs_n, nmask, G, bq, gstar, HAS_BIAS_INT: tl.constexpr):
    """Group g is complete: add the static bias where g == g*(n), scale, start a new group."""
    if HAS_BIAS_INT:
        acc += tl.where(gstar == g, bq, 0)[None, :]
    ws = tl.load(s_ptr + offs_n.to(tl.int64) * G + g, mask=nmask, other=0.0)
    return tl.zeros_like(acc), accf + acc.to(tl.float32) * ws[None, :]


@triton.jit
def _int_act_mm_kernel(
    xq_ptr, xs_ptr, xz_ptr, w_ptr, s_ptr, b_ptr, bq_ptr, gstar_ptr, y_ptr, p_ptr, c_ptr,
    M, N, K, G, K_SPLIT, stride_xm, stride_wn, stride_ym, M_KEY,
    INT4: tl.constexpr, GROUP_SIZE: tl.constexpr, PER_CHANNEL: tl.constexpr,
    ASYM: tl.constexpr, STATIC: tl.constexpr, HAS_BIAS: tl.constexpr, HAS_BIAS_INT: tl.constexpr,
    UPCAST: tl.constexpr, PRECISION: tl.constexpr, SPLIT_K: tl.constexpr, TAIL: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, XQ: tl.constexpr = False,
    PDL: tl.constexpr = False, TRIGGER: tl.constexpr = False, AHEAD: tl.constexpr = False,
):  # fmt: skip
    """Program (n, m, s) covers K range s (splitk.py; K_SPLIT = K when SPLIT_K == 1; s > 0:
    decode, mid_rows.py). With SPLIT_K > 1 it stores its partial (int32 per-channel sums,
    float32 group sums); the column tile's last program (TAIL, splitk.finish) or
    splitk.reduce_partials adds the bias, scales and casts. XQ (M = 1): xq_ptr is the float
    activation row, quantized here (one_row_scale: the scale to xs_ptr unless STATIC), the codes
    of quantize_int8_act_triton. PDL: launched with programmatic dependent launch after the
    kernel that wrote x (and xs, xz), which it waits for before reading anything but the
    weights. TRIGGER: splitk.trigger. AHEAD (split decode with PDL, int8 per-channel weights,
    not XQ): the first step's weights are loaded before the wait and that step is done before
    the loop, so they stream while the activation kernel still runs."""
    splitk.trigger(TRIGGER)
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    pid_k = tl.program_id(2)
    MODE: tl.constexpr = 1 if ASYM else (2 if STATIC else 0)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mmask = offs_m < M
    nmask = offs_n < N
    x_rows = xq_ptr + offs_m.to(tl.int64)[:, None] * stride_xm
    w_rows = w_ptr + offs_n.to(tl.int64)[:, None] * stride_wn
    w_cols = w_ptr + offs_n.to(tl.int64)[None, :] * stride_wn
    k_lo, k_hi = splitk.k_range(pid_k, K, K_SPLIT, SPLIT_K)
    if AHEAD:  # the first step's weights, before the wait
        wt, offs_k, kmask = splitk.first_step(w_cols, k_lo, K, nmask, BLOCK_K)
    if PDL:
        gdc_wait()
    if XQ:
        s1, z1 = one_row_scale(xq_ptr, xs_ptr, xs_ptr, K, MODE, STATIC, False, 127.0, 2048)
        xz = tl.zeros((BLOCK_M,), tl.int32) + z1.to(tl.int32)
    elif ASYM:
        xz = tl.load(xz_ptr + offs_m, mask=mmask, other=0)
    bq = tl.load(bq_ptr + offs_n, mask=nmask & HAS_BIAS_INT, other=0)
    gstar = tl.load(gstar_ptr + offs_n, mask=nmask & HAS_BIAS_INT & (not PER_CHANNEL), other=-1)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
    accf = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if AHEAD:
        xt = tl.load(x_rows + offs_k[None, :], mask=mmask[:, None] & kmask[None, :], other=0)
        acc = mma(xt, wt, acc, UPCAST, PRECISION)
        if ASYM:
            acc -= xz[:, None] * tl.sum(wt.to(tl.int32), axis=0)[None, :]
    for k0 in range(k_lo + (BLOCK_K if AHEAD else 0), k_hi, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        kmask = offs_k < K
        xt = tl.load(x_rows + offs_k[None, :], mask=mmask[:, None] & kmask[None, :], other=0)
        if XQ:
            xt = quantize_one_row(xt, s1, z1, tl.int8, MODE, 127.0)
        if INT4:
            offs_b = k0 // 2 + tl.arange(0, BLOCK_K // 2)
            bmask = nmask[:, None] & (offs_b < K // 2)[None, :]
            packed = tl.load(w_rows + offs_b[None, :], mask=bmask, other=0x88)
            wt = tl.trans((unpack_nibbles(packed) - 8).to(tl.int8))
        else:  # [BLOCK_K, BLOCK_N], transposed by the pointers (K-major B operand)
            wt = tl.load(w_cols + offs_k[:, None], mask=kmask[:, None] & nmask[None, :], other=0)
        acc = mma(xt, wt, acc, UPCAST, PRECISION)
        if ASYM:
            wsum = tl.sum(wt.to(tl.int32), axis=0)
            acc -= xz[:, None] * wsum[None, :]
        # the end of group g: one tile per group needs no run-time branch (a constexpr test)
        if GROUP_SIZE == BLOCK_K:  # noqa: SIM114 - constexpr branch, then a run-time one
            acc, accf = _flush(acc, accf, k0 // GROUP_SIZE, s_ptr, offs_n, nmask, G,
                               bq, gstar, HAS_BIAS_INT)  # fmt: skip
        elif not PER_CHANNEL and (k0 + BLOCK_K) % GROUP_SIZE == 0:
            acc, accf = _flush(acc, accf, k0 // GROUP_SIZE, s_ptr, offs_n, nmask, G,
                               bq, gstar, HAS_BIAS_INT)  # fmt: skip
    if SPLIT_K > 1:
        part = p_ptr + pid_k.to(tl.int64) * M * N + offs_m.to(tl.int64)[:, None] * N
        pmask = mmask[:, None] & nmask[None, :]
        if PER_CHANNEL:
            tl.store(part + offs_n[None, :], acc, mask=pmask)
        else:
            tl.store(part + offs_n[None, :], accf, mask=pmask)
        if TAIL:
            splitk.finish(p_ptr, c_ptr, bq_ptr, s_ptr, xs_ptr, b_ptr, y_ptr, M, N, stride_ym,
                          SPLIT_K, TAIL, BLOCK_N)  # fmt: skip
        return
    if PER_CHANNEL:
        if HAS_BIAS_INT:
            acc += bq[None, :]
        accf = acc.to(tl.float32)
    epilogue(accf, s_ptr, xs_ptr, b_ptr, y_ptr, offs_m, offs_n, M, N, stride_ym,
             PER_CHANNEL, True, STATIC, HAS_BIAS)  # fmt: skip


_TUNED: dict[tuple, object] = {}


def _tuned(strategy: Strategy, device: torch.device, group_size: int):
    backend = backend_of(device)
    key = (backend, strategy, group_size)
    if key not in _TUNED:
        configs = fit_group(mm_configs(backend, strategy, gemv=False, int_dot=True), group_size)
        _TUNED[key] = autotune(_int_act_mm_kernel, configs, ["M_KEY", "N", "K", "INT4",
                                                             "PER_CHANNEL"])  # fmt: skip
    return _TUNED[key]


GEMV_ROWS = 3
"""W4A8 decode takes the dp4a GEMV (w4a8_gemv: the codes loaded once for every row, up to
its MAX_ROWS) up to this many rows (symmetric activations: below ROWS_MMA_FROM), the matrix
units above (w4a8_mma), with programmatic dependent launch up to here (triton_linear._pdl).
H200, session 34: M 3 20.8 / 18.6 / 19.1 us on the GEMV against decode_mma's 23.9 / 21.3 /
23.5 (8192^2 / 4096 x 14336 / 14336 x 4096), M 4 a tie: the GEMV's dp4a work grows with rows."""

ROWS_MMA = os.environ.get("AOQ_W4A8_ROWS", "1") != "0"
"""Off: W4A8 decode takes decode_mma above GEMV_ROWS, not w4a8_mma (A/B runs; session 40)."""

ROWS_MMA_FROM = 3
"""W4A8 decode takes w4a8_mma (the integer MMA on row-major codes) from this many rows,
before the GEMV's GEMV_ROWS. H100 (``python -m bench.decode_rows --formats w4a8gemv --ms 2,3
--extra '{"w4a8gemv": [{"MMA": true}]}'``, session 40): M 3 22.4 / 18.6 / 21.7 us against
the GEMV's 26.6 / 25.2 / 25.4 (zero points, session 41: 22.0 / 19.1 / 20.8 against 27.6 /
25.6 / 26.3); M 2 mixed, so it keeps the GEMV."""

PDL_ROWS = 2
"""W8A8, W4A8 and fp8 decode take programmatic dependent launch (``pdl``) up to this many
rows. H100, graph replays as above (``python -m bench.decode_rows --formats
w4a8gemv,w8a8act,fp8act``, session 21), plain -> PDL at M 1: W4A8 22.7 / 20.6 / 22.4 -> 22.0
/ 19.8 / 21.6 us, W8A8 30.8 / 27.6 / 29.0 -> 29.9 / 27.0 / 28.1, fp8 row 30.6 / 27.9 / 28.1
-> 29.8 / 27.2 / 27.8; M 2 0.7 us less; at M 8 and 16 within +-0.9 us either way."""


def int_act_mm_triton(
    xq: torch.Tensor,
    x_scale: torch.Tensor,
    x_zero: torch.Tensor | None,
    wq: torch.Tensor,
    w_scale: torch.Tensor,
    bias: torch.Tensor | None,
    bias_int: torch.Tensor | None,
    out_dtype: torch.dtype,
    strategy: int,
    split: int | None = None,
    pdl: bool = False,
) -> torch.Tensor:
    """Triton launcher of ``aoq::int_act_mm``. xq int8 [M, K]; x_scale float32 [M] or [];
    x_zero int32 [M] or None; wq int8 [N, K] or packed int4 uint8 [N, K // 2]; w_scale
    float32 [N, G] (row-major, or group-major: strides (1, N), which decode_mma reads as it
    is at 2 <= M <= 16 and the others copy); bias float [N]; bias_int int32 [N] (static).
    ``split``: force the split-K (tests; prefill: mid_rows.py). ``pdl``: the decode kernel
    (M <= 16) launches with programmatic dependent launch, waiting for the kernel before it
    (the activation kernel, with act_quant's ``trigger``) to read x (caller: _common.pdl)."""
    check_2d("xq", xq, (torch.int8,))
    return _int_act(xq, x_scale, x_zero, wq, w_scale, bias, bias_int, out_dtype, strategy, split,
                    x_zero is not None, False, pdl)  # fmt: skip


def one_row_serves(x: torch.Tensor, wq: torch.Tensor, w_scale: torch.Tensor) -> bool:
    """:func:`int_act_linear_one_row` takes the call: one contiguous float row, K > 0, and
    int8 per-channel weights (the MMA decode) or int4 ones (the GEMV)."""
    if x.shape[0] != 1 or x.shape[1] == 0 or x.stride(1) != 1 or x.dtype not in FLOAT_DTYPES:
        return False
    groups = w_scale.shape[-1]
    if wq.dtype == torch.int8:
        return groups == 1
    gs = x.shape[1] // groups
    return wq.dtype == torch.uint8 and 32 <= gs <= 1 << 14 and gs & (gs - 1) == 0


def int_act_linear_one_row(
    x: torch.Tensor,
    mode: int,
    act_scale: torch.Tensor | None,
    wq: torch.Tensor,
    w_scale: torch.Tensor,
    bias: torch.Tensor | None,
    bias_int: torch.Tensor | None,
    out_dtype: torch.dtype,
    split: int | None = None,
) -> torch.Tensor:
    """x [1, K] float -> act_quant.quantize_int8_act_triton(x, mode, act_scale) then
    int_act_mm_triton at decode, in one launch with the same bits (the caller checked
    :func:`one_row_serves`): the decode kernel quantizes x's tiles itself (eager M = 1: one
    launch less, ~4 us of host time)."""
    static = mode == 2
    if static and (act_scale is None or act_scale.numel() != 1):
        raise ValueError("static int8 activations need a one-element float32 act_scale")
    if static:
        xs = act_scale.reshape(()).to(torch.float32)  # type: ignore[union-attr]
    else:
        xs = torch.empty(1, dtype=torch.float32, device=x.device)
    return _int_act(x, xs, None, wq, w_scale, bias, bias_int, out_dtype, 0, split, mode == 1, True)


def _int_act(
    xq: torch.Tensor,
    x_scale: torch.Tensor,
    x_zero: torch.Tensor | None,
    wq: torch.Tensor,
    w_scale: torch.Tensor,
    bias: torch.Tensor | None,
    bias_int: torch.Tensor | None,
    out_dtype: torch.dtype,
    strategy: int,
    split: int | None,
    asym: bool,
    xq_in_kernel: bool,
    pdl: bool = False,
) -> torch.Tensor:
    """int_act_mm_triton's launches; ``xq_in_kernel``: xq is the float row the decode kernel
    quantizes (its scale into x_scale, a [1] buffer, or x_scale the static one)."""
    backend_of(xq.device)
    m, k = xq.shape
    n = wq.shape[0]
    int4 = wq.dtype == torch.uint8
    check_2d("wq", wq, (torch.uint8, torch.int8))
    if wq.shape[1] * (2 if int4 else 1) != k:
        raise ValueError(f"weight {tuple(wq.shape)} {wq.dtype} does not match K={k}")
    groups = w_scale.shape[-1]
    gs = k // groups
    per_channel = groups == 1
    if not per_channel and (gs < 32 or gs & (gs - 1)):
        raise ValueError(
            f"group_size={gs}: the Triton kernel takes powers of two >= 32 (one "
            "int8 MMA K step); use the reference kernel for other group sizes"
        )
    if out_dtype not in FLOAT_DTYPES:
        raise ValueError(f"out_dtype={out_dtype}; expected one of {FLOAT_DTYPES}")
    y = torch.empty((m, n), dtype=out_dtype_for(out_dtype), device=xq.device)
    if m == 0:
        return y.to(out_dtype)
    static = x_scale.dim() == 0
    decode = Strategy(strategy) is Strategy.DECODE
    rows_mma = ROWS_MMA and decode and int4 and m >= ROWS_MMA_FROM and bias_int is None
    if rows_mma and rows_mma_serves(xq, wq, w_scale):
        # up to 16 rows, groups of 32 on CUDA: the row-major codes read GEMV-like on the
        # integer MMA (w4a8_mma.py: 20 % under decode_mma on an H100)
        w4a8_mma(xq, x_scale, wq, w_scale, bias, y, split, pdl=pdl, x_zero=x_zero if asym else None)
        return y.to(out_dtype)
    rows = m == 1 or (m <= GEMV_ROWS and xq.is_contiguous())  # (its rows K apart)
    gemv = decode and int4 and rows and gs <= 1 << 14
    if (
        decode and int4 and not gemv and m > 1 and bias_int is None
        and dm.serves(xq, wq, groups, W4, w_scale)
    ):  # fmt: skip
        # GEMV_ROWS < M (16; sm90 64) on the matrix-unit decode (exact integer-MMA group sums;
        # zero points: a second dot, s. 51): 24-25 us vs 46 here at 8192^2, M 16 (H200, s. 15)
        dm.decode_mma(xq, wq, w_scale, None, bias, y, groups, W4, split, x_scale=x_scale,
                      x_zero=x_zero if asym else None, pdl=pdl)  # fmt: skip
        return y.to(out_dtype)
    # the GEMV reads the scales in either order (its strides); the MMA kernels row-major
    ws = w_scale if gemv else w_scale.contiguous()
    gstar = ref.bias_group(ws).to(torch.int32) if bias_int is not None and not per_channel else ws
    args = (
        xq, x_scale, x_zero if x_zero is not None else x_scale, wq, ws,
        bias if bias is not None else ws, bias_int if bias_int is not None else ws, gstar,
    )  # fmt: skip
    gs0 = 0 if per_channel else gs  # the group a kernel flushes (none: per channel)
    flags = dict(
        INT4=int4, GROUP_SIZE=gs0, PER_CHANNEL=per_channel,
        ASYM=asym, STATIC=static, HAS_BIAS=bias is not None,
        HAS_BIAS_INT=bias_int is not None, UPCAST=False, PRECISION="ieee",
    )  # fmt: skip
    fused = dict(XQ=True) if xq_in_kernel else {}
    backend = backend_of(xq.device)
    if gemv:
        w4a8_gemv(args, y, k, gs, flags, split, xq_in_kernel, pdl and not xq_in_kernel)
        return y.to(out_dtype)
    if xq_in_kernel and (int4 or m != 1 or Strategy(strategy) is not Strategy.DECODE):
        raise ValueError("the activation is quantized in the kernel at M = 1 decode only")
    part_dtype = torch.int32 if per_channel else torch.float32
    epi = dict(col_scale=ws if per_channel else None, row_scale=x_scale, bias=bias,
               bias_int=bias_int if per_channel else None)  # fmt: skip
    if Strategy(strategy) is Strategy.DECODE and m <= 16:
        # tile and split by rule (configs.decode_tile, splitk.split_k): no timing autotune
        cfg = decode_tile(backend, 16, int4=int4, group_size=gs0)
        cfg["BLOCK_K"] = max(32, cfg["BLOCK_K"])  # one int8 MMA K step
        n_prog = triton.cdiv(n, cfg["BLOCK_N"])
        p = splitk.plan(y, backend, n_prog, k, max(cfg["BLOCK_K"], gs0), split,
                        part_dtype=part_dtype)  # fmt: skip
        launch(_int_act_mm_kernel, (n_prog, 1, p.split),
            *args, y, p.partials, p.counter_arg(), m, n, k, groups, p.k_split, xq.stride(0),
            wq.stride(0), y.stride(0), m_bucket(m), SPLIT_K=p.split,
            TAIL=p.tail(splitk.epilogue_bits(**epi)), **flags, **fused, **cfg, PDL=pdl,
            launch_pdl=pdl, TRIGGER=p.chain,
            AHEAD=pdl and per_channel and not int4 and not xq_in_kernel and _common.PDL_AHEAD,
        )  # fmt: skip
        p.finish(y, **epi)
        return y.to(out_dtype)

    # W4A8 past 16 rows that decode_mma (above) leaves: prefill tiles, K split by mid_rows.py
    tiles = Strategy.PREFILL if m > 16 and int4 else Strategy(strategy)

    def split_launch(grid: tuple[int, int, int], p: splitk.Plan, cfg: dict) -> None:
        launch(_int_act_mm_kernel, grid, *args, y, p.partials, p.partials, m, n, k, groups,
               p.k_split, xq.stride(0), wq.stride(0), y.stride(0), m_bucket(m), SPLIT_K=p.split,
               TAIL=0, TRIGGER=p.chain, **flags, **cfg)  # fmt: skip

    if tiles is Strategy.PREFILL and mid_rows.run(y, backend, k, gs0, split, split_launch,
                                                  part_dtype, **epi):  # fmt: skip
        return y.to(out_dtype)

    def grid(meta: dict) -> tuple[int, int, int]:
        return (triton.cdiv(n, meta["BLOCK_N"]), triton.cdiv(m, meta["BLOCK_M"]), 1)

    launch(_tuned(tiles, xq.device, gs0), grid,
        *args, y, y, y, m, n, k, groups, k, xq.stride(0), wq.stride(0), y.stride(0),
        m_bucket(m), SPLIT_K=1, TAIL=0, **flags,
    )  # fmt: skip
    return y.to(out_dtype)


# --- torch.library ----------------------------------------------------------------------------


@torch.library.custom_op("aoq::int_act_mm", mutates_args=(), device_types="cpu")
def int_act_mm(
    xq: torch.Tensor,
    x_scale: torch.Tensor,
    x_zero: torch.Tensor | None,
    wq: torch.Tensor,
    w_scale: torch.Tensor,
    bias: torch.Tensor | None,
    bias_int: torch.Tensor | None,
    out_dtype: torch.dtype,
    strategy: int,
) -> torch.Tensor:
    """Reference (aoq.formats.linear.int_act_linear) on CPU; int4 codes are unpacked first."""
    codes = unpack_uint4(wq).to(torch.int8) - 8 if wq.dtype == torch.uint8 else wq
    return ref.int_act_linear(xq, x_scale, x_zero, codes, w_scale, out_dtype, bias, bias_int)


@int_act_mm.register_fake
def _(xq, x_scale, x_zero, wq, w_scale, bias, bias_int, out_dtype, strategy):  # type: ignore[no-untyped-def]
    return xq.new_empty((xq.shape[0], wq.shape[0]), dtype=out_dtype)


int_act_mm.register_kernel("cuda")(int_act_mm_triton)
