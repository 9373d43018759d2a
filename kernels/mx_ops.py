"""The MX cast ops, without Triton: ``aoq::mx_cast`` and ``aoq::mx_qdq`` with their CPU
implementation (the aoq.formats.mx reference) and fake implementation (torch.compile).
kernels/mx_cast.py registers the Triton implementation for CUDA/ROCm where Triton exists, so a
CPU-only install has the ops too. Signatures and layouts: see kernels/mx_cast.py.
"""

from __future__ import annotations

import torch
from torch import Tensor

from aoq.formats.mx import MXElem, ScaleRounding, mx_dequantize, mx_quantize, parse_choice


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _check(x: Tensor, elem: str, block_size: int, dim: int, scale_rounding: str) -> None:
    if x.dim() != 2:
        raise ValueError(f"mx_cast takes a 2-D tensor, got {x.dim()}-D; reshape it to 2-D first")
    if dim not in (0, 1):
        raise ValueError(f"dim={dim} must be 0 or 1")
    if not isinstance(block_size, int) or block_size <= 0 or x.shape[dim] % block_size:
        raise ValueError(
            f"size {x.shape[dim]} along dim {dim} is not divisible by block_size={block_size}; "
            f"pad dim {dim} to a multiple of {block_size}"
        )
    parse_choice(MXElem, elem, "MX element")
    parse_choice(ScaleRounding, scale_rounding, "scale_rounding")


# --- torch.library: reference everywhere, Triton on GPUs, fake for torch.compile ------------


def mx_cast_reference(
    x: Tensor, elem: str, block_size: int, dim: int, scale_rounding: str
) -> tuple[Tensor, Tensor]:
    _check(x, elem, block_size, dim, scale_rounding)
    codes, scale = mx_quantize(x, elem, block_size, dim, scale_rounding)
    return codes.view(torch.uint8), scale


def mx_qdq_reference(
    x: Tensor, elem: str, block_size: int, dim: int, scale_rounding: str
) -> Tensor:
    _check(x, elem, block_size, dim, scale_rounding)
    codes, scale = mx_quantize(x, elem, block_size, dim, scale_rounding)
    return mx_dequantize(codes, scale, elem, block_size, dim, dtype=x.dtype)


@torch.library.custom_op("aoq::mx_cast", mutates_args=())
def mx_cast(
    x: Tensor, elem: str, block_size: int, dim: int, scale_rounding: str
) -> tuple[Tensor, Tensor]:
    """MX-quantize 2-D x along ``dim``: (codes uint8 [R, C], E8M0 scale bytes uint8)."""
    return mx_cast_reference(x, elem, block_size, dim, scale_rounding)


@torch.library.custom_op("aoq::mx_qdq", mutates_args=())
def mx_qdq(x: Tensor, elem: str, block_size: int, dim: int, scale_rounding: str) -> Tensor:
    """MX quantize-dequantize of 2-D x along ``dim``, in x's dtype."""
    return mx_qdq_reference(x, elem, block_size, dim, scale_rounding)


@mx_cast.register_fake
def _mx_cast_fake(
    x: Tensor, elem: str, block_size: int, dim: int, scale_rounding: str
) -> tuple[Tensor, Tensor]:
    _check(x, elem, block_size, dim, scale_rounding)
    r, c = x.shape
    s_shape = (r // block_size, c) if dim == 0 else (r, c // block_size)
    return x.new_empty((r, c), dtype=torch.uint8), x.new_empty(s_shape, dtype=torch.uint8)


@mx_qdq.register_fake
def _mx_qdq_fake(x: Tensor, elem: str, block_size: int, dim: int, scale_rounding: str) -> Tensor:
    _check(x, elem, block_size, dim, scale_rounding)
    return torch.empty_like(x, memory_format=torch.contiguous_format)
