"""Weight-only linears (int8, int4 asymmetric groupwise, fp8 per channel): y = x Wᵀ + b with W
dequantized from its codes inside the kernel (weight_dequant.py's tile helper, whose file
also holds the dequantize kernel behind the dequantize-then-BLAS prefill path).

Math (aoq.formats.linear.weight_only_linear): W[n, k] = (q[n, k] - z[n, g]) * s[n, g] with
g = k // group_size (no zero point for int8 and fp8); float32 accumulation; cast to x's dtype.
Per-channel weights (one scale per row) multiply the scale into the N outputs instead of the
N x K weights. Codes are read in the canonical checkpoint layout: row-major [N, K] (int4:
[N, K // 2], two codes per byte, low nibble first), so every row of a tile is one contiguous
run of K, the widest loads a GEMV can make.

Op (torch.library, namespace ``aoq``): ``weight_only_mm``. Its CPU implementation is the
aoq.formats reference; CUDA/ROCm run the Triton kernels below.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from aoq.kernels import _common, decode_mma, gemv, gemv_static, mid_rows, splitk, wt_rows
from aoq.kernels._common import (
    FLOAT_DTYPES,
    Strategy,
    WeightFormat,
    backend_of,
    check_2d,
    dot_flags,
    epilogue,
    m_bucket,
    mma,
    out_dtype_for,
)
from aoq.kernels._launch import launch
from aoq.kernels.configs import autotune, decode_tile, mm_configs
from aoq.kernels.weight_dequant import _check_tiled, _dequant_tile, _format, _reference_weight

from aoq.formats import linear as ref


@triton.jit
def _weight_only_mm_kernel(
    x_ptr, w_ptr, s_ptr, z_ptr, b_ptr, y_ptr, p_ptr,
    M, N, K, G, K_SPLIT, stride_xm, stride_wn, stride_ym, M_KEY,
    WFMT: tl.constexpr, GROUP_SIZE: tl.constexpr, PER_CHANNEL: tl.constexpr,
    HAS_BIAS: tl.constexpr, UPCAST: tl.constexpr, PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    TILED: tl.constexpr = False, SPLIT_K: tl.constexpr = 1, TRIGGER: tl.constexpr = False,
):  # fmt: skip
    """Prefill: [BLOCK_M, BLOCK_N] output tiles on the matrix units; program (n, m, s) over
    K range s (all of K when SPLIT_K == 1; else mid_rows.py: it stores its float32 partial
    and splitk.reduce_partials finishes). TRIGGER: splitk.trigger."""
    splitk.trigger(TRIGGER)
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    mmask = offs_m < M
    xrows = x_ptr + offs_m.to(tl.int64)[:, None] * stride_xm
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    k_lo, k_hi = splitk.k_range(tl.program_id(2), K, K_SPLIT, SPLIT_K)
    for k0 in range(k_lo, k_hi, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        xt = tl.load(xrows + offs_k[None, :], mask=mmask[:, None] & (offs_k < K)[None, :], other=0)
        w = _dequant_tile(w_ptr, s_ptr, z_ptr, offs_n, k0, N, K, G, stride_wn,
                          WFMT, GROUP_SIZE, not PER_CHANNEL, BLOCK_N, BLOCK_K, TILED)  # fmt: skip
        if not UPCAST:  # the interpreter keeps float32 (its downcasts do not round to even)
            w = w.to(xt.dtype)
        acc = mma(xt, tl.trans(w), acc, UPCAST, PRECISION)
    if SPLIT_K > 1:
        part = p_ptr + tl.program_id(2).to(tl.int64) * M * N + offs_m.to(tl.int64)[:, None] * N
        tl.store(part + offs_n[None, :], acc, mask=mmask[:, None] & (offs_n < N)[None, :])
    else:
        epilogue(acc, s_ptr, s_ptr, b_ptr, y_ptr, offs_m, offs_n, M, N, stride_ym,
                 PER_CHANNEL, False, False, HAS_BIAS)  # fmt: skip


@triton.jit
def _weight_only_decode_kernel(
    x_ptr, w_ptr, s_ptr, z_ptr, b_ptr, y_ptr, p_ptr, c_ptr,
    M, N, K, G, K_SPLIT, stride_xm, stride_wn, stride_ym,
    WFMT: tl.constexpr, GROUP_SIZE: tl.constexpr, PER_CHANNEL: tl.constexpr,
    HAS_BIAS: tl.constexpr, UPCAST: tl.constexpr, PRECISION: tl.constexpr,
    SPLIT_K: tl.constexpr, TAIL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr, TILED: tl.constexpr = False, TRIGGER: tl.constexpr = False,
    EVICT: tl.constexpr = False, UNROLL: tl.constexpr = 1, EVEN: tl.constexpr = False,
):  # fmt: skip
    """Decode (M <= BLOCK_M <= 16): programs over N x SPLIT_K ranges of K (splitk.py). M == 1
    is a GEMV: FMA into a [BLOCK_N, BLOCK_K] register tile, one cross-lane sum at the end;
    2..16 rows pad to one 16-row tile for the matrix units. With SPLIT_K > 1 each program
    stores its float32 partial [M, BLOCK_N], and the column tile's last program (TAIL,
    splitk.finish) or splitk.reduce_partials finishes. TRIGGER: splitk.trigger. EVICT: the
    GEMV's code loads' eviction policy (_dequant_tile's; a probe). UNROLL: the GEMV's K loop
    unrolled so; EVEN: its tiles lie inside the weight (N, K multiples of the block), loaded
    unmasked, so ptxas may issue several steps' loads before the first is used (probes;
    bench/NOTES.md session 29)."""
    splitk.trigger(TRIGGER)
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_m = tl.arange(0, BLOCK_M)
    k_lo = pid_k * K_SPLIT
    k_hi = tl.minimum(K, k_lo + K_SPLIT)
    if BLOCK_M == 1:
        acc2 = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
        for k0 in tl.range(k_lo, k_hi, BLOCK_K, loop_unroll_factor=UNROLL):
            offs_k = k0 + tl.arange(0, BLOCK_K)
            w = _dequant_tile(w_ptr, s_ptr, z_ptr, offs_n, k0, N, K, G, stride_wn, WFMT,
                              GROUP_SIZE, not PER_CHANNEL, BLOCK_N, BLOCK_K, TILED,
                              EVICT=EVICT, EVEN=EVEN)  # fmt: skip
            if EVEN:
                xv = tl.load(x_ptr + offs_k)
            else:
                xv = tl.load(x_ptr + offs_k, mask=offs_k < K, other=0)
            acc2 += w * xv.to(tl.float32)[None, :]
        acc = tl.sum(acc2, axis=1)[None, :]
    else:
        mmask = offs_m < M
        xrows = x_ptr + offs_m.to(tl.int64)[:, None] * stride_xm
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(k_lo, k_hi, BLOCK_K):
            offs_k = k0 + tl.arange(0, BLOCK_K)
            xmask = mmask[:, None] & (offs_k < K)[None, :]
            xt = tl.load(xrows + offs_k[None, :], mask=xmask, other=0)
            w = _dequant_tile(w_ptr, s_ptr, z_ptr, offs_n, k0, N, K, G, stride_wn, WFMT,
                              GROUP_SIZE, not PER_CHANNEL, BLOCK_N, BLOCK_K, TILED)  # fmt: skip
            if not UPCAST:
                w = w.to(xt.dtype)
            acc = mma(xt, tl.trans(w), acc, UPCAST, PRECISION)
    if SPLIT_K == 1:
        epilogue(acc, s_ptr, s_ptr, b_ptr, y_ptr, offs_m, offs_n, M, N, stride_ym,
                 PER_CHANNEL, False, False, HAS_BIAS)  # fmt: skip
    else:
        part = p_ptr + pid_k.to(tl.int64) * M * N + offs_m.to(tl.int64)[:, None] * N
        pmask = (offs_m < M)[:, None] & (offs_n < N)[None, :]
        tl.store(part + offs_n[None, :], acc, mask=pmask)
        if TAIL:
            splitk.finish(p_ptr, c_ptr, p_ptr, s_ptr, p_ptr, b_ptr, y_ptr, M, N, stride_ym,
                          SPLIT_K, TAIL, BLOCK_N)  # fmt: skip


# --- launchers --------------------------------------------------------------------------------

_TUNED: dict[object, object] = {}


def _tuned(device: torch.device):
    """The prefill kernel under the autotuner (tile shapes only: each output element is one
    program's K loop in order, so every config gives the same bits)."""
    backend = backend_of(device)
    if backend not in _TUNED:
        _TUNED[backend] = autotune(
            _weight_only_mm_kernel,
            mm_configs(backend, Strategy.PREFILL, False),
            ["M_KEY", "N", "K", "WFMT", "GROUP_SIZE", "PER_CHANNEL"],
        )
    return _TUNED[backend]


def _check(
    x: torch.Tensor, qdata: torch.Tensor, scale: torch.Tensor, tiled: bool = False
) -> tuple[int, WeightFormat]:
    check_2d("x", x, FLOAT_DTYPES)
    k = x.shape[1]
    wfmt = _format(qdata, k)
    check_2d("qdata", qdata, (qdata.dtype,))
    _check_tiled(wfmt, qdata, k, tiled)
    groups = scale.shape[-1] if scale.dim() == 2 else 1
    if k % groups or (wfmt is WeightFormat.UINT4 and (k // groups) % 2):
        raise ValueError(f"K={k} is not a multiple of {groups} groups of an even size")
    return groups, wfmt


def _per_channel(groups: int, wfmt: WeightFormat) -> bool:
    """One scale a row (int8 / fp8 with a single group): the scale multiplies the outputs."""
    return groups == 1 and wfmt is not WeightFormat.UINT4


def weight_only_mm_triton(
    x: torch.Tensor,
    qdata: torch.Tensor,
    scale: torch.Tensor,
    zero: torch.Tensor | None,
    bias: torch.Tensor | None,
    strategy: int,
    tiled: bool = False,
    split: int | None = None,
) -> torch.Tensor:
    """Triton launcher of ``aoq::weight_only_mm`` (x [M, K] float, codes [N, K | K/2];
    ``tiled``: int4 codes in aoq.formats.packing.tile_uint4's order). ``split``: force the
    split-K (tests; default: splitk.split_k at decode, mid_rows.py's rule at prefill)."""
    groups, wfmt = _check(x, qdata, scale, tiled)
    m, k = x.shape
    n = qdata.shape[0]
    y = torch.empty((m, n), dtype=out_dtype_for(x.dtype), device=x.device)
    if m == 0:
        return y.to(x.dtype)
    per_channel = _per_channel(groups, wfmt)
    if Strategy(strategy) is Strategy.DECODE and decodes(x, qdata, scale, zero, tiled):
        _decode(x, qdata, scale, zero, bias, y, groups, wfmt, per_channel, split, tiled)
        return y.to(x.dtype)
    upcast, precision = dot_flags(x.dtype)
    scale_c = scale.contiguous()
    z = zero.contiguous() if zero is not None else scale_c
    b = bias if bias is not None else scale_c

    flags = dict(
        WFMT=int(wfmt),
        GROUP_SIZE=k // groups,
        PER_CHANNEL=per_channel,
        HAS_BIAS=bias is not None,
        UPCAST=upcast,
        PRECISION=precision,
        TILED=tiled,
    )

    def split_launch(grid: tuple[int, int, int], p: splitk.Plan, cfg: dict) -> None:
        launch(_weight_only_mm_kernel, grid, x, qdata, scale_c, z, b, y, p.partials, m, n, k,
               groups, p.k_split, x.stride(0), qdata.stride(0), y.stride(0), m_bucket(m),
               SPLIT_K=p.split, TRIGGER=p.chain, **flags, **cfg)  # fmt: skip

    # 17-256 rows: K split where the tiles leave SMs idle (mid_rows.py)
    epi = dict(col_scale=scale_c.reshape(-1) if per_channel else None, bias=bias)
    if Strategy(strategy) is Strategy.PREFILL and mid_rows.run(
        y, backend_of(x.device), k, 0, split, split_launch, bk=64, **epi
    ):
        return y.to(x.dtype)

    def grid(meta: dict) -> tuple[int, int, int]:
        return (triton.cdiv(n, meta["BLOCK_N"]), triton.cdiv(m, meta["BLOCK_M"]), 1)

    launch(_tuned(x.device), grid,
        x, qdata, scale_c, z, b, y, y,
        m, n, k, groups, k, x.stride(0), qdata.stride(0), y.stride(0), m_bucket(m), **flags,
    )  # fmt: skip
    return y.to(x.dtype)


def decodes(
    x: torch.Tensor,
    qdata: torch.Tensor,
    scale: torch.Tensor,
    zero: torch.Tensor | None,
    tiled: bool = False,
) -> bool:
    """Whether the decode strategy serves these x rows: up to 16, and past that where
    decode_mma takes them (decode_mma_tiles.max_rows: 128 or 256 on sm90); else the prefill kernel.
    Asked by the dispatch's check too, so it refuses what the launcher would reject."""
    if x.shape[0] <= 16:
        return True
    try:
        groups, wfmt = _check(x, qdata, scale, tiled)
    except ValueError:
        return False
    return decode_mma.serves(x, qdata, groups, wfmt, scale, zero, tiled)


def _decode(
    x: torch.Tensor,
    qdata: torch.Tensor,
    scale: torch.Tensor,
    zero: torch.Tensor | None,
    bias: torch.Tensor | None,
    y: torch.Tensor,
    groups: int,
    wfmt: WeightFormat,
    per_channel: bool,
    split: int | None,
    tiled: bool = False,
) -> None:
    """The decode kernel with a tile and split chosen from the shape (configs.decode_tile,
    splitk.split_k): no timing autotune, so every process computes the same bits. At M == 1,
    per-channel int8 / fp8 codes go to the static-K GEMV (gemv_static.py) on the GPUs where
    it is the faster; integer codes go to the matrix-unit decode (decode_mma.py) where it
    serves, then at M == 1 to the word GEMV (gemv.py). Only decode_mma reads group-major int4
    scales and zero points (strides (1, N), aoq.tensors.int4's CUDA layout; for tiled codes
    the zero points as aoq.formats.packing.pack_zero_words): the others get them row-major.
    Tiled int4 codes skip the word GEMV (its loads assume rows). The static GEMV and
    decode_mma launch with programmatic dependent launch on sm90 and later
    (_common.DECODE_PDL). On sm90, per-channel int8 and e4m3 codes at 112-128 rows (65-111
    where wt_rows' wide tile fills a wave) and int4 in groups of 128 at 96-128 go to
    wt_rows.py (the weights as wgmma's register operand; ``AOQ_WT_ROWS=0``: to decode_mma)."""
    pdl = _common.decode_pdl(x.device)
    if wt_rows.serves(x, qdata, groups, wfmt, scale, zero):
        wt_rows.wt_rows(x, qdata, scale, zero, bias, y, split, tiled)
        return
    if gemv_static.serves(x, qdata, groups, wfmt):
        gemv_static.gemv_static(x, qdata, scale, bias, y, pdl=pdl)
        return
    if decode_mma.serves(x, qdata, groups, wfmt, scale, zero, tiled):
        decode_mma.decode_mma(x, qdata, scale, zero, bias, y, groups, wfmt, split, tiled=tiled,
                              pdl=pdl)  # fmt: skip
        return
    scale = scale.contiguous()
    zero = zero.contiguous() if zero is not None else scale
    if not tiled and gemv.gemv_words(x, qdata, scale, zero, bias, y, groups, wfmt, per_channel,
                                     split):  # fmt: skip
        return
    tile_decode(x, qdata, scale, zero, bias, y, groups, wfmt, split, tiled)


def tile_decode(x: torch.Tensor, qdata: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor,
                bias: torch.Tensor | None, y: torch.Tensor, groups: int, wfmt: WeightFormat,
                split: int | None, tiled: bool = False, tile: dict | None = None,
                ) -> None:  # fmt: skip
    """This file's own decode kernel (row-major scales; ``zero`` the scales where there are no
    zero points) at configs.decode_tile's tile, split for ``per_sm`` programs an SM (16 at
    M == 1, else 8). ``tile`` overrides either (probes: bench.decode_rows' ``GEMV``)."""
    per_channel = _per_channel(groups, wfmt)
    upcast, precision = dot_flags(x.dtype)
    m, k = x.shape
    n = qdata.shape[0]
    backend = backend_of(x.device)
    gs = k // groups
    cfg = decode_tile(backend, m, int4=wfmt is WeightFormat.UINT4, group_size=gs)
    cfg.update(tile or {})
    per_sm = cfg.pop("per_sm", 16 if m == 1 else 8)
    bn, bk = cfg["BLOCK_N"], cfg["BLOCK_K"]
    n_prog = triton.cdiv(n, bn)
    p = splitk.plan(y, backend, n_prog, k, bk, split, per_sm=per_sm)
    epi = dict(col_scale=scale if per_channel else None, bias=bias)
    launch(_weight_only_decode_kernel, (n_prog, p.split),
        x, qdata, scale, zero, bias if bias is not None else scale, y, p.partials,
        p.counter_arg(), m, n, k, groups, p.k_split, x.stride(0), qdata.stride(0), y.stride(0),
        WFMT=int(wfmt), GROUP_SIZE=gs, PER_CHANNEL=per_channel, HAS_BIAS=bias is not None,
        UPCAST=upcast, PRECISION=precision, SPLIT_K=p.split,
        TAIL=p.tail(splitk.epilogue_bits(**epi)), TILED=tiled, TRIGGER=p.chain, **cfg,
    )  # fmt: skip
    p.finish(y, **epi)


# --- torch.library ----------------------------------------------------------------------------


@torch.library.custom_op("aoq::weight_only_mm", mutates_args=(), device_types="cpu")
def weight_only_mm(
    x: torch.Tensor,
    qdata: torch.Tensor,
    scale: torch.Tensor,
    zero: torch.Tensor | None,
    bias: torch.Tensor | None,
    strategy: int,
    tiled: bool = False,
) -> torch.Tensor:
    """y = x dequant(W)ᵀ + b. CPU: the aoq.formats reference (strategy is ignored; tiled
    int4 codes are put back in rows first)."""
    w = _reference_weight(qdata, scale, zero, x.shape[1], tiled)
    return ref.weight_only_linear(x, w, bias)


@weight_only_mm.register_fake
def _(x, qdata, scale, zero, bias, strategy, tiled=False):  # type: ignore[no-untyped-def]
    return x.new_empty((x.shape[0], qdata.shape[0]))


weight_only_mm.register_kernel("cuda")(weight_only_mm_triton)
