"""Accuracy metrics shared by tests, the conformance matrix and bench."""

from __future__ import annotations

import math

import torch


def sqnr(reference: torch.Tensor, actual: torch.Tensor) -> float:
    """Signal to quantization-noise ratio in dB: 20 log10(||ref|| / ||ref - actual||), in
    float64. Identical tensors give +inf; an empty reference gives +inf too."""
    ref = reference.detach().to(torch.float64)
    err = (ref - actual.detach().to(torch.float64)).norm()
    if err == 0:
        return math.inf
    return float(20 * torch.log10(ref.norm() / err))


def max_rel_error(reference: torch.Tensor, actual: torch.Tensor) -> float:
    """||actual - ref|| / ||ref|| in float64 (0 for an all-zero match)."""
    ref = reference.detach().to(torch.float64)
    num = (actual.detach().to(torch.float64) - ref).norm()
    den = ref.norm()
    return float(num / den) if den > 0 else float(num)


def bit_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Same dtype, shape and bytes (NaNs compare by bit pattern; works for float8 too)."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.numel() == 0:
        return True
    ab = a.detach().contiguous().cpu().reshape(-1).view(torch.uint8)
    bb = b.detach().contiguous().cpu().reshape(-1).view(torch.uint8)
    return torch.equal(ab, bb)
