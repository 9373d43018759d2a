"""Opaque wrappers around torch's CPU int8/int4 weight-only ops.

Inside torch.compile, inductor lowers ``aten._weight_int8pack_mm`` / ``_weight_int4pack_mm_for_cpu``
itself and may hand them a strided activation buffer, which they reject ("A must be
contiguous"). As torch.library custom ops they stay opaque: the eager body below runs, with
contiguous inputs, and a fake implementation gives torch.compile the output shape.
"""

from __future__ import annotations

import torch


@torch.library.custom_op("aoq::cpu_weight_int8pack_mm", mutates_args=(), device_types="cpu")
def weight_int8pack_mm(x: torch.Tensor, qdata: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """torch._weight_int8pack_mm(x [M, K], qdata int8 [N, K], scale [N] in x.dtype). The op
    reads the weight in 64-byte blocks, past the end of a storage that is not 64-byte aligned:
    eager dispatch refuses such a weight (tensors/int8.py), but a compiled graph reaches here
    without that check, so a misaligned weight is copied (the allocator aligns to 64)."""
    q = qdata.contiguous()
    if q.data_ptr() % 64:
        q = q.clone()
    return torch._weight_int8pack_mm(x.contiguous(), q, scale.contiguous())


@weight_int8pack_mm.register_fake
def _(x: torch.Tensor, qdata: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return x.new_empty(x.shape[0], qdata.shape[0])


@torch.library.custom_op("aoq::cpu_weight_int4pack_mm", mutates_args=(), device_types="cpu")
def weight_int4pack_mm(
    x: torch.Tensor, packed: torch.Tensor, group_size: int, scales_zeros: torch.Tensor
) -> torch.Tensor:
    """torch's CPU tinygemm: x [M, K] times the packed int4 weight [N, K // 2]."""
    return torch.ops.aten._weight_int4pack_mm_for_cpu(
        x.contiguous(), packed.contiguous(), group_size, scales_zeros.contiguous()
    )


@weight_int4pack_mm.register_fake
def _(
    x: torch.Tensor, packed: torch.Tensor, group_size: int, scales_zeros: torch.Tensor
) -> torch.Tensor:
    return x.new_empty(x.shape[0], packed.shape[0])
