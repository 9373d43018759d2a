"""Float8 reference math: scaled casts to e4m3 (OCP ``float8_e4m3fn``, or ``float8_e4m3fnuz``
on archs whose fp8 is the FNUZ variant, e.g. gfx942) with float32 scales.

Per row (``granularity=ROW``, along the last dim) or per tensor::

    s = max(amax / FMAX, TINY)      q = cast_rne(clamp(x / s, -FMAX, FMAX))     x ~ q * s

FMAX is 448 for e4m3fn and 240 for e4m3fnuz. The clamp makes the cast saturate; the cast
itself rounds to nearest even (torch's cast). NaN stays NaN.
"""

from __future__ import annotations

import enum

import torch

from aoq.formats.affine import TINY
from aoq.formats.arith import true_div

FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e4m3fnuz, torch.float8_e5m2)


class Granularity(enum.Enum):
    """Which elements share one float8 scale."""

    ROW = "row"
    """One scale per row along the last dim (per output channel / per token)."""
    TENSOR = "tensor"
    """One scale for the whole tensor."""


def fp8_max(dtype: torch.dtype) -> float:
    if dtype not in FP8_DTYPES:
        raise ValueError(f"{dtype} is not a float8 dtype; expected one of {FP8_DTYPES}")
    return float(torch.finfo(dtype).max)


def quantize_fp8(
    x: torch.Tensor, granularity: Granularity, dtype: torch.dtype = torch.float8_e4m3fn
) -> tuple[torch.Tensor, torch.Tensor]:
    """x [..., K] -> (q fp8 [..., K], s float32 [..., 1] for ROW or [1] for TENSOR)."""
    fmax = fp8_max(dtype)
    xf = x.to(torch.float32)
    if granularity is Granularity.ROW:
        amax = (
            xf.abs().amax(dim=-1, keepdim=True) if xf.numel() else xf.new_zeros(*xf.shape[:-1], 1)
        )
    else:
        amax = xf.abs().amax().reshape(1) if xf.numel() else xf.new_zeros(1)
    s = torch.clamp(true_div(amax, fmax), min=TINY)
    q = torch.clamp(xf / s, -fmax, fmax).to(dtype)
    return q, s


def dequantize_fp8(q: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """float32 q * s (s broadcasts: [..., 1] per row or [1] per tensor)."""
    return q.to(torch.float32) * s
