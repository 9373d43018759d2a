"""The per-tensor float8 activation scale's passes (act_quant.quantize_fp8_act_triton): the
row maxima of |x|, then their maximum over QMAX as the scale, max(amax / QMAX, TINY), an IEEE
division as aoq.formats.float8's; one launch when one program holds every row."""

from __future__ import annotations

import triton
import triton.language as tl
from aoq.kernels._common import TINY_F32


@triton.jit
def _row_amax_kernel(
    x_ptr, out_ptr, M, K, stride_xm, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr,
    QMAX: tl.constexpr = 1.0, SCALE: tl.constexpr = False,
):  # fmt: skip
    """Row maxima of |x| into out [M]; SCALE (one program holds every row): the per-tensor
    scale into out [1] instead (_tensor_scale, as _tensor_scale_kernel: one launch less)."""
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    mmask = offs_m < M
    amax = tl.zeros((BLOCK_M,), tl.float32)
    for k0 in range(0, K, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        mask = mmask[:, None] & (offs_k < K)[None, :]
        x = tl.load(
            x_ptr + offs_m.to(tl.int64)[:, None] * stride_xm + offs_k[None, :], mask=mask, other=0.0
        )
        amax = tl.maximum(amax, tl.max(tl.abs(x.to(tl.float32)), axis=1))
    if SCALE:  # (rows past M hold 0)
        tl.store(out_ptr, _tensor_scale(amax, QMAX))
    else:
        tl.store(out_ptr + offs_m, amax, mask=mmask)


@triton.jit
def _tensor_scale_kernel(amax_ptr, s_ptr, M, QMAX: tl.constexpr, BLOCK: tl.constexpr):
    """One program: the per-tensor scale max(max_m amax[m] / QMAX, TINY) from the row maxima
    (IEEE division; a NaN row maximum makes the scale NaN, as torch.amax would)."""
    hi = tl.zeros((BLOCK,), tl.float32)
    for m0 in range(0, M, BLOCK):
        offs = m0 + tl.arange(0, BLOCK)
        v = tl.load(amax_ptr + offs, mask=offs < M, other=0.0)
        hi = tl.maximum(hi, v, propagate_nan=tl.PropagateNan.ALL)
    tl.store(s_ptr, _tensor_scale(hi, QMAX))


@triton.jit
def _tensor_scale(hi, QMAX: tl.constexpr):
    """max(max(hi) / QMAX, TINY) for row maxima ``hi`` (IEEE division; NaN if one is NaN)."""
    amax = tl.max(hi, axis=0)
    amax = tl.where(tl.max((hi != hi).to(tl.int32), axis=0) > 0, float("nan"), amax)
    return tl.maximum(tl.div_rn(amax, QMAX), TINY_F32, propagate_nan=tl.PropagateNan.ALL)
