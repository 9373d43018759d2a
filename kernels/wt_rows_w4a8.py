"""W4A8 at 65-128 rows on sm90 (``triton.w4a8.rows``): kernels/wt_rows.py's W4A8 tile (its
WFMT 2) multiplies the operands ``cublas.w4a8.dequant_mm`` multiplies, act_qdq's dequantized
activations and the weights (q - 8) · s rounded once to x's dtype, the weights made in
registers instead of a bf16 copy of the whole weight written and read back. On an H200 52.5-68.0
µs against the BLAS path's 86.4-99.7 at 65-128 rows of the three goal shapes (session 50).
x through its descriptor on the wide tile at 65-95 rows, by masked loads on the 64-row tile at
96-128 (wt_rows.W4A8_X_DESC: through its descriptor there, the loop raced on an H200, sessions
58-59)."""

from __future__ import annotations

import torch
from aoq.kernels import wt_rows

from aoq.formats import linear as ref
from aoq.formats.packing import unpack_uint4

W4A8_MIN_ROWS = 65
"""W4A8 (:func:`w4a8_rows`) from here: its other path past 64 rows dequantizes the weights
into a bf16 copy for cuBLAS (0.38-0.40x bf16 at 128 rows on an H200, run 0a4e49)."""


def serves_w4a8(x: torch.Tensor, qdata: torch.Tensor, scale: torch.Tensor) -> bool:
    """:func:`w4a8_rows` takes W4A8 at x's shape (its dequantized activations are a fresh
    contiguous tensor of x's shape and dtype): W4A8_MIN_ROWS..wt_rows.ROWS rows of bf16 / fp16 x;
    packed int4 codes [N, K / 2], contiguous, 16-byte aligned (by their storage offset: the
    dispatch asks under torch.compile too, of fake tensors); float32 scales [N, G], groups a
    power of two (K a multiple of BLOCK_K: a step never straddles two groups past it); N a
    multiple of BLOCK_N and K of BLOCK_K; sm90 or the interpreter; unless AOQ_WT_ROWS=0."""
    if not wt_rows.ENABLED or x.dim() != 2 or x.dtype not in wt_rows.X_DTYPES:
        return False
    m, k = x.shape
    n, g = scale.shape if scale.dim() == 2 else (0, 0)
    if not W4A8_MIN_ROWS <= m <= wt_rows.ROWS or not n or not g:
        return False
    if not k or k % wt_rows.BLOCK_K or n % wt_rows.BLOCK_N:
        return False
    gs = k // g
    if k % g or gs < 2 or gs & (gs - 1) or scale.dtype != torch.float32:
        return False
    if qdata.dtype != torch.uint8 or tuple(qdata.shape) != (n, k // 2):
        return False
    if not qdata.is_contiguous() or qdata.storage_offset() % 16:  # (traced: no data_ptr)
        return False
    return wt_rows._runs_on(x.device)


def w4a8_rows(
    xd: torch.Tensor,
    qdata: torch.Tensor,
    scale: torch.Tensor,
    bias: torch.Tensor | None,
    split: int | None = None,
) -> torch.Tensor:
    """W4A8 where :func:`serves_w4a8` holds: y = xd Wᵀ + bias in xd's dtype, xd the
    activations as act_qdq dequantizes them, W = ((q - 8) · scale[n, k // group]) rounded
    once to xd's dtype: both operands the values ``cublas.w4a8.dequant_mm`` multiplies, the
    weights made in registers instead of a bf16 copy in memory; float32 sums."""
    if not xd.is_contiguous() or xd.data_ptr() % 16:
        raise ValueError("w4a8_rows takes a contiguous, 16-byte aligned xd (act_qdq's output)")
    y = torch.empty(xd.shape[0], qdata.shape[0], dtype=xd.dtype, device=xd.device)
    group = xd.shape[1] // scale.shape[1]
    return wt_rows._run(xd, qdata, scale, scale, bias, y, split, 2, False, group)


@torch.library.custom_op("aoq::w4a8_rows_mm", mutates_args=(), device_types="cpu")
def w4a8_rows_mm(
    xd: torch.Tensor, qdata: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None
) -> torch.Tensor:
    """Reference on CPU: the weights dequantized in float32, rounded once to xd's dtype, then
    aoq.formats' weight-only product (float32 sums)."""
    codes = unpack_uint4(qdata).to(torch.float32) - 8
    w = codes * scale.repeat_interleave(xd.shape[1] // scale.shape[1], dim=1)
    return ref.weight_only_linear(xd, w.to(xd.dtype), bias)


@w4a8_rows_mm.register_fake
def _(xd, qdata, scale, bias):  # type: ignore[no-untyped-def]
    return xd.new_empty((xd.shape[0], qdata.shape[0]))


w4a8_rows_mm.register_kernel("cuda")(w4a8_rows)
