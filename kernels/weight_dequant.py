"""The dequantization of weight-only codes (int8, int4 asymmetric groupwise, fp8 per
channel): the tile helper every weight-only kernel dequantizes with (``_dequant_tile``,
used by weight_only.py's linears), and the dequantize kernel behind the
dequantize-then-BLAS prefill path, op ``aoq::dequantize_weight``.

Math (aoq.formats.affine / float8): W[n, k] = (q[n, k] - z[n, g]) * s[n, g] with
g = k // group_size (no zero point for int8 and fp8), in float32, cast once. Codes are the
checkpoint's row-major [N, K] (int4: [N, K // 2], two codes per byte, low nibble first), or
for int4 ``tiled`` the same bytes in aoq.formats.packing.tile_uint4's order.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from aoq.kernels._common import (
    MAGIC,
    WeightFormat,
    backend_of,
    exact_float,
    int4_cols,
    int4_rows,
    int8_float,
    out_dtype_for,
    unpack_nibbles,
)
from aoq.kernels._launch import launch

from aoq.formats import affine, float8
from aoq.formats.packing import TILE_BYTES, TILE_ROWS, unpack_uint4, untile_uint4


@triton.jit
def _dequant_tile(
    w_ptr, s_ptr, z_ptr, offs_n, k0, N, K, G, stride_wn,
    WFMT: tl.constexpr, GROUP_SIZE: tl.constexpr, SCALE: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, TILED: tl.constexpr = False,
    GROUP_BLOCKS: tl.constexpr = False, EVICT: tl.constexpr = False, EVEN: tl.constexpr = False,
):  # fmt: skip
    """float32 [BLOCK_N, BLOCK_K] weights at rows offs_n, columns k0..k0+BLOCK_K. SCALE=False
    returns the codes (minus zero point) for the caller to scale per channel later. TILED:
    int4 codes in aoq.formats.packing.tile_uint4's order. GROUP_BLOCKS: a tile of several
    whole groups loads its scales (and zero points) as one [BLOCK_N, groups] block, not one
    per element (the dequantize kernel's; the linears' tiles are not timed with it). EVICT:
    the byte codes loaded "evict_first" (a probe: Inductor streams weights so). EVEN: the tile
    lies inside the weight (N and K multiples of the block): its byte codes load unmasked."""
    policy: tl.constexpr = "evict_first" if EVICT else ""
    offs_k = k0 + tl.arange(0, BLOCK_K)
    rows = offs_n.to(tl.int64)[:, None] * stride_wn
    nmask = offs_n < N
    mask = nmask[:, None] & (offs_k < K)[None, :]
    if EVEN:  # (the constant True mask of a tile inside the weight: no predicate)
        mask = tl.full((BLOCK_N, BLOCK_K), True, tl.int1)
    if WFMT == 1:
        offs_b = k0 // 2 + tl.arange(0, BLOCK_K // 2)
        bmask = nmask[:, None] & (offs_b < K // 2)[None, :]
        at = int4_rows(offs_n, stride_wn, K, TILED)[:, None]
        if TILED and BLOCK_K <= 128:  # k0 a multiple of BLOCK_K: one run of a tile
            at += int4_cols(k0 // 2, TILED, BLOCK_K // 2) + tl.arange(0, BLOCK_K // 2)[None, :]
        else:
            at += int4_cols(offs_b, TILED)[None, :]
        q = unpack_nibbles(tl.load(w_ptr + at, mask=bmask, other=0))
        w = exact_float(q, 0)  # 2**23 + q: the zero point's subtraction removes the 2**23
        zoff = MAGIC
    elif WFMT == 2:
        w = tl.load(w_ptr + rows + offs_k[None, :], mask=mask, other=0.0, eviction_policy=policy)
        w = w.to(tl.float32)
    else:
        q = tl.load(w_ptr + rows + offs_k[None, :], mask=mask, other=0, eviction_policy=policy)
        w = int8_float(q)
    if SCALE or WFMT == 1:
        if GROUP_SIZE % BLOCK_K == 0:  # one group per tile: a [BLOCK_N] column of scales
            sidx = offs_n.to(tl.int64) * G + k0 // GROUP_SIZE
            if WFMT == 1:
                w = w - (zoff + tl.load(z_ptr + sidx, mask=nmask, other=0).to(tl.float32))[:, None]
            if SCALE:
                w = w * tl.load(s_ptr + sidx, mask=nmask, other=0.0)[:, None]
        elif GROUP_BLOCKS and BLOCK_K % GROUP_SIZE == 0:  # whole groups: a [BLOCK_N, GPT]
            GPT: tl.constexpr = BLOCK_K // GROUP_SIZE  # block of scales, broadcast
            offs_g = k0 // GROUP_SIZE + tl.arange(0, GPT)
            sidx = offs_n.to(tl.int64)[:, None] * G + offs_g[None, :]
            smask = nmask[:, None] & (offs_g < G)[None, :]
            w = tl.reshape(w, (BLOCK_N, GPT, GROUP_SIZE))
            if WFMT == 1:
                z = tl.load(z_ptr + sidx, mask=smask, other=0).to(tl.float32)
                w = w - (zoff + z)[:, :, None]
            if SCALE:
                w = w * tl.load(s_ptr + sidx, mask=smask, other=0.0)[:, :, None]
            w = tl.reshape(w, (BLOCK_N, BLOCK_K))
        else:  # several groups per tile: one scale per element
            sidx = offs_n.to(tl.int64)[:, None] * G + (offs_k // GROUP_SIZE)[None, :]
            if WFMT == 1:
                w = w - (zoff + tl.load(z_ptr + sidx, mask=mask, other=0).to(tl.float32))
            if SCALE:
                w = w * tl.load(s_ptr + sidx, mask=mask, other=0.0)
    return w


@triton.jit
def _dequantize_kernel(
    w_ptr, s_ptr, z_ptr, out_ptr, N, K, G, stride_wn,
    WFMT: tl.constexpr, GROUP_SIZE: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, TILED: tl.constexpr = False,
):  # fmt: skip
    offs_n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    k0 = tl.program_id(1) * BLOCK_K
    w = _dequant_tile(w_ptr, s_ptr, z_ptr, offs_n, k0, N, K, G, stride_wn,
                      WFMT, GROUP_SIZE, True, BLOCK_N, BLOCK_K, TILED, True)  # fmt: skip
    offs_k = k0 + tl.arange(0, BLOCK_K)
    mask = (offs_n < N)[:, None] & (offs_k < K)[None, :]
    out = out_ptr + offs_n.to(tl.int64)[:, None] * K + offs_k[None, :]
    tl.store(out, w.to(out_ptr.dtype.element_ty), mask=mask)


def _format(qdata: torch.Tensor, k: int) -> WeightFormat:
    if qdata.dtype == torch.int8:
        return WeightFormat.INT8
    if qdata.dtype == torch.uint8 and qdata.shape[1] * 2 == k:
        return WeightFormat.UINT4
    if qdata.dtype in float8.FP8_DTYPES:
        return WeightFormat.FP8
    raise ValueError(
        f"weight codes {qdata.dtype} {tuple(qdata.shape)} are not int8, packed uint4 or fp8"
    )


def _check_tiled(wfmt: WeightFormat, qdata: torch.Tensor, k: int, tiled: bool) -> None:
    if tiled and (wfmt is not WeightFormat.UINT4 or not qdata.is_contiguous()):
        raise ValueError(f"tiled codes are contiguous packed int4, not {qdata.dtype} {wfmt.name}")
    if tiled and (qdata.shape[0] % TILE_ROWS or k % (2 * TILE_BYTES)):
        raise ValueError(f"int4 codes [{qdata.shape[0]}, {k}] do not tile (tiles_uint4)")


# --- launcher ---------------------------------------------------------------------------------


def dequantize_weight_triton(
    qdata: torch.Tensor,
    scale: torch.Tensor,
    zero: torch.Tensor | None,
    k: int,
    dtype: torch.dtype,
    tiled: bool = False,
) -> torch.Tensor:
    """Triton launcher of ``aoq::dequantize_weight``: codes -> [N, K] ``dtype`` weights
    (``tiled``: int4 codes in tile_uint4's order)."""
    wfmt = _format(qdata, k)
    _check_tiled(wfmt, qdata, k, tiled)
    backend_of(qdata.device)
    n = qdata.shape[0]
    groups = scale.shape[-1] if scale.dim() == 2 else 1
    out = torch.empty((n, k), dtype=out_dtype_for(dtype), device=qdata.device)
    if n == 0 or k == 0:
        return out.to(dtype)
    # 16 rows x 256 codes (tiled int4: 32 x 128, one run of a tile): groups below 256 put
    # several whole groups in a tile, whose scales (and zero points) come as one [BLOCK_N,
    # groups] block. H100, K x N 8192^2 / 4096 x 14336 / 14336 x 4096 (bench/NOTES.md,
    # session 26): W4A8's groups of 32 88.4 / 79.3 / 78.0 us at 128 rows x one group (16
    # bytes of codes and one scattered scale a row) -> 68.1 / 59.7 / 59.4; int4 g128 66.4 /
    # 58.9 / 57.9 at 32 x 128 -> 64.5 / 56.8 / 56.6
    width = 128 if tiled else 256
    bk = min(width, k // groups) if k % groups == 0 else width
    bk = width if width % bk == 0 else bk
    bn = 32 * 128 // width
    scale_c = scale.contiguous()
    z = zero.contiguous() if zero is not None else scale_c
    grid = (triton.cdiv(n, bn), triton.cdiv(k, bk))
    launch(_dequantize_kernel, grid,
        qdata, scale_c, z, out, n, k, groups, qdata.stride(0),
        WFMT=int(wfmt), GROUP_SIZE=k // groups, BLOCK_N=bn, BLOCK_K=bk, TILED=tiled, num_warps=4,
    )  # fmt: skip
    return out.to(dtype)


# --- torch.library ----------------------------------------------------------------------------


def _reference_weight(
    qdata: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor | None, k: int, tiled: bool
) -> torch.Tensor:
    if qdata.dtype == torch.uint8 and qdata.shape[1] * 2 == k:
        assert zero is not None, "int4 weight-only codes need their zero points"
        packed = untile_uint4(qdata) if tiled else qdata
        return affine.dequantize_uint4_asymmetric(unpack_uint4(packed), scale, zero)
    if qdata.dtype in float8.FP8_DTYPES:
        return float8.dequantize_fp8(qdata, scale.reshape(-1, 1))
    return affine.dequantize_symmetric(qdata, scale)


@torch.library.custom_op("aoq::dequantize_weight", mutates_args=(), device_types="cpu")
def dequantize_weight(
    qdata: torch.Tensor,
    scale: torch.Tensor,
    zero: torch.Tensor | None,
    k: int,
    dtype: torch.dtype,
    tiled: bool = False,
) -> torch.Tensor:
    """Codes -> [N, K] weights in ``dtype`` (dequantized in float32, then cast once)."""
    return _reference_weight(qdata, scale, zero, k, tiled).to(dtype)


@dequantize_weight.register_fake
def _(qdata, scale, zero, k, dtype, tiled=False):  # type: ignore[no-untyped-def]
    return qdata.new_empty((qdata.shape[0], k), dtype=dtype)


dequantize_weight.register_kernel("cuda")(dequantize_weight_triton)
