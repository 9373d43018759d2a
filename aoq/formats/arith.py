"""Arithmetic that must round the same on every device."""

from __future__ import annotations

import torch


def true_div(a: torch.Tensor, b: float) -> torch.Tensor:
    """a / b as one IEEE float32 division, on any device. torch turns ``cuda_tensor / python
    float`` into a multiply by the reciprocal, which rounds differently from the CPU (and from
    a kernel's ``div_rn``); dividing by a tensor keeps the true division everywhere."""
    return a / torch.tensor(b, dtype=a.dtype, device=a.device)
