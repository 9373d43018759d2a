"""Decode (M <= 16) linears on MX and NVFP4 weights without a dequantized copy: each step
dequantizes a [BLOCK_N, BLOCK_K] weight tile in registers (kernels/mx_dequant.dequant_tile,
the reference's float32 values, cast to x's dtype) and multiplies it on the matrix units
(x padded to 16 rows) with float32 accumulation; K split across programs (splitk.py).

The weights the MMA sees are exactly the emulated path's (``emulated.*_dequant_mm``:
dequantize to x's dtype, then one matmul): MX values are exact in bf16 and fp16 (a short
significand times a power of two) except where they leave the dtype's range, NVFP4 values
round once from float32 as there. Only the order of the float32 sums differs.

Why: the emulated path writes and reads back the whole weight in x's dtype every call (an
8192 x 8192 weight: 134 MB, about as much traffic as bf16's own GEMV, plus the dequantize
pass), where this kernel reads the packed codes once: fp4 4.25 bits an element with its
E8M0 scales, fp6 6.25, fp8 / int8 8.25, NVFP4 4.5.

Op: none of its own; dispatch's ``triton.mxwo.decode``, ``triton.mx.decode`` (activations
MX quantize-dequantized first by the Triton cast) and ``triton.nvfp4wo.decode`` call
:func:`mx_decode` directly on GPUs and under the interpreter.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from aoq.kernels import splitk
from aoq.kernels._common import INTERPRET, backend_of, out_dtype_for
from aoq.kernels._launch import launch
from aoq.kernels.mx_dequant import block_scale, dequant_tile, elem_params, elem_value
from aoq.kernels.mx_packed import rne_bf16

from aoq.formats.mx import MXElem
from aoq.formats.nvfp4 import NVFP4_BLOCK


@triton.jit
def _mx_decode_kernel(
    x_ptr, q_ptr, s_ptr, ts_ptr, b_ptr, y_ptr, p_ptr,
    M, N, K, K_SPLIT, stride_xm, stride_qn, stride_sn, stride_ym,
    BITS: tl.constexpr, EBITS: tl.constexpr, MBITS: tl.constexpr, BIAS: tl.constexpr,
    NAN: tl.constexpr, NVFP4: tl.constexpr, BS: tl.constexpr, HAS_BIAS: tl.constexpr,
    SPLIT_K: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, UPCAST: tl.constexpr,
):  # fmt: skip
    """Program (n, s): outputs [16, BLOCK_N] over K range s (K_SPLIT long, a multiple of
    BLOCK_K). SPLIT_K > 1 stores float32 partials for splitk.reduce_partials (which adds
    the bias); else the bias is added here."""
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_m = tl.arange(0, 16)
    mmask = offs_m < M
    nmask = (offs_n < N)[:, None]
    xrows = x_ptr + offs_m.to(tl.int64)[:, None] * stride_xm
    rows = q_ptr + offs_n.to(tl.int64)[:, None] * stride_qn
    s_rows = s_ptr + offs_n.to(tl.int64)[:, None] * stride_sn
    acc = tl.zeros((16, BLOCK_N), dtype=tl.float32)
    k_lo = pid_k * K_SPLIT
    for k0 in range(k_lo, tl.minimum(K, k_lo + K_SPLIT), BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        xt = tl.load(xrows + offs_k[None, :], mask=mmask[:, None] & (offs_k < K)[None, :],
                     other=0.0)  # fmt: skip
        w = dequant_tile(rows, s_rows, ts_ptr, nmask, k0, K, BITS, EBITS, MBITS, BIAS, NAN,
                         NVFP4, BS, BLOCK_N, BLOCK_K)  # fmt: skip
        if UPCAST:  # the interpreter: float32 operands (its low-precision dot is not exact)
            if x_ptr.dtype.element_ty == tl.bfloat16:  # its bf16 casts truncate: RNE by hand
                w = (rne_bf16(w) << 16).to(tl.float32, bitcast=True)
            else:
                w = w.to(tl.float16).to(tl.float32)
            acc = tl.dot(xt.to(tl.float32), tl.trans(w), acc, input_precision="ieee")
        else:
            w = w.to(x_ptr.dtype.element_ty)  # the emulated path's weights
            acc = tl.dot(xt, tl.trans(w), acc)
    omask = mmask[:, None] & (offs_n < N)[None, :]
    if SPLIT_K > 1:
        part = p_ptr + pid_k.to(tl.int64) * M * N + offs_m.to(tl.int64)[:, None] * N
        tl.store(part + offs_n[None, :], acc, mask=omask)
    else:
        if HAS_BIAS:
            acc += tl.load(b_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)[None, :]
        y = y_ptr + offs_m.to(tl.int64)[:, None] * stride_ym + offs_n[None, :]
        tl.store(y, acc.to(y_ptr.dtype.element_ty), mask=omask)


@triton.jit
def _mx_gemv_kernel(
    x_ptr, q_ptr, s_ptr, ts_ptr, b_ptr, y_ptr, p_ptr, N, K, K_SPLIT, stride_qn, stride_sn,
    BITS: tl.constexpr, EBITS: tl.constexpr, MBITS: tl.constexpr, BIAS: tl.constexpr,
    NAN: tl.constexpr, NVFP4: tl.constexpr, BS: tl.constexpr, HAS_BIAS: tl.constexpr,
    SPLIT_K: tl.constexpr, BLOCK_N: tl.constexpr, GROUPS: tl.constexpr, ROUND: tl.constexpr,
):  # fmt: skip
    """M == 1 without the matrix units: a step is GROUPS blocks of BS elements of BLOCK_N
    rows, held as [BLOCK_N, GROUPS, units] (a unit: 1 byte = 1 code for fp8 / int8, 1 byte
    = 2 codes for fp4, 3 bytes = 4 codes for fp6), so codes are never interleaved: the i-th
    code of every unit meets the activations at stride U. MX: a block's products are summed,
    then scaled by its power of two (exact: the emulated path's weights are exact too).
    NVFP4 (ROUND): each weight is v * d rounded to x's dtype first, as the emulated path's."""
    U: tl.constexpr = 1 if BITS == 8 else (2 if BITS == 4 else 4)
    UB: tl.constexpr = 3 if BITS == 6 else 1
    UNITS: tl.constexpr = BS // U
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    nmask = (offs_n < N)[:, None, None]
    g = tl.arange(0, GROUPS)[None, :, None]
    j = tl.arange(0, UNITS)[None, None, :]
    unit = (g * UNITS + j) * UB  # [1, GROUPS, UNITS] byte offsets in a step
    rows = q_ptr + offs_n.to(tl.int64)[:, None, None] * stride_qn
    s_rows = s_ptr + offs_n.to(tl.int64)[:, None, None] * stride_sn + g
    xk = g * BS + j * U  # the first element of each unit
    acc = tl.zeros((BLOCK_N, GROUPS, UNITS), dtype=tl.float32)
    k_lo = pid_k * K_SPLIT
    for k0 in range(k_lo, tl.minimum(K, k_lo + K_SPLIT), GROUPS * BS):
        kmask = (k0 + xk) < K
        wq = rows + k0 // U * UB + unit
        w = tl.load(wq, mask=nmask & kmask, other=0).to(tl.int32)
        if BITS == 6:
            w |= tl.load(wq + 1, mask=nmask & kmask, other=0).to(tl.int32) << 8
            w |= tl.load(wq + 2, mask=nmask & kmask, other=0).to(tl.int32) << 16
        elif BITS == 8 and EBITS == 0:
            w = w.to(tl.int8).to(tl.int32)  # two's complement
        sb = tl.load(s_rows + k0 // BS, mask=nmask & ((k0 + g * BS) < K), other=0).to(tl.int32)
        d = block_scale(sb, ts_ptr, NVFP4)
        part = tl.zeros((BLOCK_N, GROUPS, UNITS), dtype=tl.float32)
        for i in tl.static_range(U):
            v = elem_value(w >> (i * (8 // U) if BITS == 4 else i * BITS), EBITS, MBITS, BIAS, NAN)
            xi = tl.load(x_ptr + k0 + xk + i, mask=kmask, other=0.0).to(tl.float32)
            if ROUND:
                v = (v * d).to(x_ptr.dtype.element_ty).to(tl.float32)
            part += v * xi
        if ROUND:
            acc += part
        else:
            acc += part * d
    out = tl.sum(tl.sum(acc, axis=2), axis=1)
    if SPLIT_K > 1:
        tl.store(p_ptr + pid_k.to(tl.int64) * N + offs_n, out, mask=offs_n < N)
    else:
        if HAS_BIAS:
            out += tl.load(b_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)
        tl.store(y_ptr + offs_n, out.to(y_ptr.dtype.element_ty), mask=offs_n < N)


GEMV_TILE = {"BLOCK_N": 32, "STEP_K": 256, "num_warps": 4, "per_sm": 8}
"""M == 1: rows per program, elements per step (whole blocks), warps, split-K target."""


TILE = {"BLOCK_N": 64, "BLOCK_K": 128, "num_warps": 4, "num_stages": 3, "per_sm": 4}
"""Outputs per program, K per step (at least one block), warps, pipeline depth, split-K
target of programs per SM (splitk.split_k)."""
MAX_BLOCK = 256
"""Block sizes the kernel takes: powers of two from 16 up to this (whole blocks a step)."""
X_DTYPES = (torch.bfloat16, torch.float16)


def serves(x: torch.Tensor, qdata: torch.Tensor, block_size: int) -> str | None:
    """None when the kernel takes the call, else why not: M <= 16 rows of bf16 / fp16 with
    unit stride, contiguous packed codes, a power-of-two block size in [16, MAX_BLOCK]."""
    m = x.shape[0]
    bs = block_size
    if x.dtype not in X_DTYPES:
        return f"{x.dtype} activations (the MX decode kernel multiplies bf16 or fp16)"
    if m > 16 or x.stride(-1) != 1:
        return f"M={m} > 16 or strided rows"
    if not qdata.is_contiguous():
        return "non-contiguous codes"
    if bs & (bs - 1) or not 16 <= bs <= MAX_BLOCK:
        return f"block_size={bs} (the MX decode kernel takes powers of two from 16 to {MAX_BLOCK})"
    return None


def mx_decode(
    x: torch.Tensor,
    qdata: torch.Tensor,
    scale: torch.Tensor,
    tensor_scale: torch.Tensor | None,
    elem: MXElem,
    block_size: int,
    bias: torch.Tensor | None,
    split: int | None = None,
    gemv: bool = True,
) -> torch.Tensor:
    """y = x · dequant(W)ᵀ (+ bias) in x's dtype (the caller checked :func:`serves`). MX:
    ``scale`` E8M0 [N, K / block_size]; NVFP4 (``tensor_scale`` given): e4m3 [N, K / 16] and
    elem fp4_e2m1. M == 1 runs the GEMV (``gemv=False``: the MMA kernel, for tests and
    benchmarks); ``split`` forces the split-K (tests)."""
    m, k = x.shape
    n = qdata.shape[0]
    nvfp4 = tensor_scale is not None
    if qdata.shape[1] * 8 != k * elem.spec.bits:
        raise ValueError(f"codes {tuple(qdata.shape)} do not hold K={k} {elem.value} elements")
    s = scale.view(torch.uint8)
    if s.shape != (n, k // block_size) or not s.is_contiguous():
        raise ValueError(f"scale {tuple(s.shape)}: expected contiguous ({n}, {k // block_size})")
    backend = backend_of(x.device)
    y = torch.empty((m, n), dtype=out_dtype_for(x.dtype), device=x.device)
    if m == 0 or n == 0:
        return y.to(x.dtype)
    ebits, mbits, bias_e, nan = elem_params(elem)
    ts = tensor_scale if tensor_scale is not None else s
    bs = NVFP4_BLOCK if nvfp4 else block_size
    fmt = dict(BITS=elem.spec.bits, EBITS=ebits, MBITS=mbits, BIAS=bias_e, NAN=nan, NVFP4=nvfp4,
               BS=bs, HAS_BIAS=bias is not None)  # fmt: skip
    if m == 1 and gemv:
        cfg = dict(GEMV_TILE)
        bn, per_sm = cfg.pop("BLOCK_N"), cfg.pop("per_sm")
        step = splitk.k_step(k, bs, max(cfg.pop("STEP_K"), bs))
        n_prog = triton.cdiv(n, bn)
        p = splitk.plan(y, backend, n_prog, k, step, split, per_sm=per_sm)
        launch(_mx_gemv_kernel, (n_prog, p.split),
            x, qdata, s, ts, bias if bias is not None else s, y, p.partials, n, k, p.k_split,
            qdata.stride(0), s.stride(0), SPLIT_K=p.split, BLOCK_N=bn, GROUPS=step // bs,
            ROUND=nvfp4, **fmt, **cfg,
        )  # fmt: skip
        if p.split > 1:
            splitk.reduce_partials(p.partials, y, bias=bias)
        return y.to(x.dtype)
    cfg = dict(TILE)
    bn = cfg.pop("BLOCK_N")
    bk = max(cfg.pop("BLOCK_K"), block_size)
    per_sm = cfg.pop("per_sm")
    n_prog = triton.cdiv(n, bn)
    p = splitk.plan(y, backend, n_prog, k, bk, split, per_sm=per_sm)
    launch(_mx_decode_kernel, (n_prog, p.split),
        x, qdata, s, ts, bias if bias is not None else s, y, p.partials,
        m, n, k, p.k_split, x.stride(0), qdata.stride(0), s.stride(0), y.stride(0),
        SPLIT_K=p.split, BLOCK_N=bn, BLOCK_K=bk, UPCAST=INTERPRET, **fmt, **cfg,
    )  # fmt: skip
    if p.split > 1:
        splitk.reduce_partials(p.partials, y, bias=bias)
    return y.to(x.dtype)
