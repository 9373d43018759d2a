"""Which backend serves a tensor, and what that backend can do.

``cpu``: the aoq.formats reference plus torch's CPU ops. ``cuda`` / ``rocm``: Triton kernels
(and cuBLAS / hipBLASLt through torch where faster). ``interpret``: the same Triton kernels
run by Triton's interpreter on CPU tensors (needs TRITON_INTERPRET=1 before any kernel is
defined; the conformance runner sets it for its worker processes).
"""

from __future__ import annotations

import enum
import functools
import os
from dataclasses import dataclass

import torch


class Backend(enum.Enum):
    """Execution backend of a quantized matmul."""

    CPU = "cpu"
    """Reference math and torch CPU ops."""
    CUDA = "cuda"
    """NVIDIA GPUs: Triton kernels, cuBLAS through torch."""
    ROCM = "rocm"
    """AMD GPUs: Triton kernels (HIP), hipBLASLt through torch."""
    INTERPRET = "interpret"
    """Triton kernels under TRITON_INTERPRET=1 on CPU tensors: CI's proxy for GPU logic."""


@dataclass(frozen=True)
class Platform:
    backend: Backend
    arch: str
    """``sm90`` / ``gfx942`` for GPUs, ``cpu`` otherwise."""

    def __str__(self) -> str:
        return f"{self.backend.value}-{self.arch}"


def interpret_enabled() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


@functools.cache
def _gpu_arch(index: int) -> str:
    if torch.version.hip is not None:
        name = torch.cuda.get_device_properties(index).gcnArchName
        return name.split(":")[0]
    major, minor = torch.cuda.get_device_capability(index)
    return f"sm{major}{minor}"


def platform_of(device: torch.device) -> Platform:
    """The platform that serves tensors on ``device``."""
    if device.type == "cuda":
        backend = Backend.ROCM if torch.version.hip is not None else Backend.CUDA
        return Platform(backend, _gpu_arch(device.index or 0))
    if device.type == "cpu" and interpret_enabled():
        return Platform(Backend.INTERPRET, "cpu")
    return Platform(Backend.CPU, "cpu")


def fp8_e4m3_dtype(device: torch.device) -> torch.dtype:
    """OCP e4m3fn everywhere except archs whose native fp8 is FNUZ (gfx942)."""
    if (
        device.type == "cuda"
        and torch.version.hip is not None
        and _gpu_arch(device.index or 0) == "gfx942"
    ):
        return torch.float8_e4m3fnuz
    return torch.float8_e4m3fn
