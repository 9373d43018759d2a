"""Arithmetic that must round the same on every device."""

from __future__ import annotations

import functools

import torch


def true_div(a: torch.Tensor, b: float) -> torch.Tensor:
    """a / b as one IEEE float32 division, on any device. torch turns ``cuda_tensor / python
    float`` (or a CPU scalar tensor) into a multiply by the reciprocal, which rounds
    differently from the CPU (and from a kernel's ``div_rn``); dividing by a tensor on a's
    device keeps the true division everywhere."""
    if a.is_cuda and type(a) is torch.Tensor and not torch.compiler.is_compiling():
        return a / device_scalar(float(b), a.dtype, a.device)
    return a / torch.tensor(b, dtype=a.dtype, device=a.device)  # CPU, or traced: a constant


@functools.lru_cache(maxsize=256)
def device_scalar(value: float, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A 0-dim tensor on ``device``, made once: creating it per call is a host-to-device copy
    from pageable memory, which waits for the device and cannot be captured in a CUDA graph
    (H200 bench runs 191da5, cd18c5: every emulated MX row). Never written to."""
    return torch.tensor(value, dtype=dtype, device=device)
