"""What decode_mma.py serves: the MX weight formats and their constants, :func:`serves` (the
launcher's precondition, which the dispatch checks) and :func:`ptx_codes` (which codes NVIDIA
converts by inline PTX). Split from the kernel file to keep each file readable; decode_mma.py
re-exports them."""

from __future__ import annotations

import torch
from aoq.kernels._common import WeightFormat, backend_of
from aoq.kernels.decode_mma_tiles import X_DTYPES, max_rows

from aoq.backends import Backend
from aoq.formats.packing import tiles_uint4

FP6_FORMATS = (WeightFormat.MX_FP6_E3M2, WeightFormat.MX_FP6_E2M3)
MX_FORMATS = (
    WeightFormat.MX_FP4,
    WeightFormat.MX_FP8,
    *FP6_FORMATS,
    WeightFormat.MX_FP8_E5M2,
    WeightFormat.MX_INT8,
)
FP6_STEP = 128
"""MX fp6's K step is a multiple of 128 codes (decode_mma_fp6.py: eight units a step). Steps
of 64 (four units: one MMA's K of 16) came out wrong on an H100 while the interpreter agreed
with the reference (session 31): Triton 3.6's layout for that K, not taken."""
BIG_MODE = {0: 0, 2: 1, 1: 2}
"""MX fp4's BIG flag's length -> the kernel's BIG (aoq.tensors.mx.big_scale_flag): [0] no
block scale above 2**1, [2] some, [1] the answer on the device."""


def serves(
    x: torch.Tensor,
    qdata: torch.Tensor,
    groups: int,
    wfmt: WeightFormat,
    scale: torch.Tensor | None = None,
    zero: torch.Tensor | None = None,
    tiled: bool = False,
) -> bool:
    """M <= 16 rows of bf16 activations (int4, int8 and e4m3 weight-only and W4A8: up to
    decode_mma_tiles.max_rows, 64-256 on sm90; fp16 too for int4, MX, per-channel int8 and
    e4m3: X_DTYPES; int8 codes for W4A8's symmetric int4), contiguous;
    int4 groups of 32..256 (powers of two; aoq.tensors.int4.DECODE_MMA_GROUPS mirrors them);
    per-channel int8 or float8 e4m3fn with K a multiple of 16 (fp8 on CUDA, where its
    conversion is assembly, and the interpreter). int4 scales [N, G] (and zero points, with
    the same strides) row-major or group-major. MX fp4 / fp8: blocks of 32..256 (their
    E8M0 bytes as the scale) and the weight's int32 BIG flag as ``zero``
    (aoq.tensors.mx.big_scale_flag: its length says whether the host knows its value); MX
    fp6 also K a multiple of FP6_STEP and codes 4-byte aligned in their storage (its offset:
    a fake tensor under torch.compile has no address). NVFP4: ``groups`` K / 16 (e4m3
    bytes as the scale), K a multiple of 32, the float32 tensor scale as ``zero``."""
    if wfmt is WeightFormat.NVFP4:
        if zero is None or zero.dtype != torch.float32 or zero.numel() != 1 or x.shape[1] % 32:
            return False
        if backend_of(x.device) is Backend.ROCM:  # its float path flushes subnormals
            return False
    mx = wfmt in MX_FORMATS
    if scale is not None and scale.dim() == 2 and scale.shape[1] > 1:
        if scale.stride() not in ((scale.shape[1], 1), (1, scale.shape[0])):
            return False
        own_zero = not mx and wfmt is not WeightFormat.NVFP4  # zero points beside the scales
        if zero is not None and own_zero and not _strides_agree(zero, scale):
            return False
        words = zero is not None and zero.dtype == torch.int32 and not mx
        if words and (scale.stride(0) != 1 or zero.shape[1] != -(-scale.shape[1] // 4)):
            return False  # pack_zero_words: group-major words of four groups
    m, k = x.shape
    if x.dtype not in X_DTYPES.get(wfmt, (torch.bfloat16,)):
        return False
    if m > 16 and m > max_rows(wfmt, x.device, x.dtype):
        return False
    if not (qdata.is_contiguous() and x.stride(1) == 1):
        return False
    if mx and (zero is None or zero.dtype != torch.int32 or zero.numel() not in BIG_MODE):
        return False
    if mx and backend_of(x.device) is Backend.ROCM:  # its float path flushes subnormals
        return False
    if tiled:  # int4 weight-only codes in tile_uint4's order
        gs = k // groups if k % groups == 0 else 0
        return wfmt is WeightFormat.UINT4 and gs >= 32 and tiles_uint4(qdata.shape[0], k, gs)
    if wfmt in FP6_FORMATS and (k % FP6_STEP or qdata.storage_offset() % 4):
        return False
    if wfmt is WeightFormat.NVFP4:
        return groups * 16 == k
    if wfmt in (WeightFormat.UINT4, WeightFormat.INT4_SYM) or mx:
        return k // groups in (32, 64, 128, 256) and k % groups == 0
    if wfmt is WeightFormat.FP8:
        if qdata.dtype != torch.float8_e4m3fn or backend_of(x.device) is Backend.ROCM:
            return False
    elif wfmt is not WeightFormat.INT8:
        return False
    return groups == 1 and k % 16 == 0


def check_xmx(
    wfmt: WeightFormat, x: torch.Tensor, xq: bool, x_block_scale: torch.Tensor | None, groups: int
) -> None:
    """decode_mma's check of MX int8 x against its XMX arguments: MX int8 weights take int8 x
    codes with their E8M0 bytes (``x_block_scale``), or bf16 / fp16 x; raises ValueError."""
    xmx = x_block_scale is not None
    if wfmt is WeightFormat.MX_INT8 and (x.dtype == torch.int8) != xmx:
        raise ValueError("MX int8 weights take int8 x with its x_block_scale, or bf16 / fp16 x")
    m = x.shape[0]
    if xmx and (
        wfmt is not WeightFormat.MX_INT8
        or x.dtype != torch.int8
        or xq
        or x_block_scale.dtype != torch.uint8
        or x_block_scale.shape != (m, groups)
        or not x_block_scale.is_contiguous()
    ):
        raise ValueError(
            "x_block_scale: MX int8 weights, int8 x codes and their contiguous uint8 E8M0 "
            f"bytes [{m}, {groups}]"
        )


def _strides_agree(zero: torch.Tensor, scale: torch.Tensor) -> bool:
    """The kernel addresses the zero points with the scales' strides: they must agree along
    every dimension the zero points have more than one of (a single column of zero-point
    words, K of at most four groups, has any stride there)."""
    dims = zip(zero.stride(), scale.stride(), zero.shape, strict=True)
    return all(zs == ss for zs, ss, size in dims if size > 1)


def ptx_codes(wfmt: WeightFormat, fp16: bool, has_fp8_cvt: bool) -> bool:
    """Whether NVIDIA converts the codes by inline PTX: to bf16 for bf16 x, and int4's and
    MX's to fp16 for fp16 x; per-channel codes with fp16 x take the float path (X_DTYPES),
    except e4m3 codes on a GPU without fp8 conversion instructions (below sm89): there the
    PTX's bf16 codes are cast to fp16 (exact). The launcher's rule and the compile specs'."""
    if not fp16 or wfmt in (WeightFormat.UINT4, WeightFormat.NVFP4, *MX_FORMATS):
        return True
    return wfmt is WeightFormat.FP8 and not has_fp8_cvt
