"""Affine integer formats: the reference math (the spec) for int8 and int4.

Everything is computed in float32 whatever the input dtype (float64 included), and every
scale is float32. Division is a true division (x / s, IEEE round to nearest) and rounding
is round-half-to-even (torch.round); kernels must reproduce both bit for bit.

Weights ``w`` are [N, K]; groups run along K (the reduction axis), ``g`` elements each, so
scales are [N, K // g] (per channel: g = K, scales [N, 1]).

Symmetric int8 (weights per channel/group, activations per token)::

    s = max(amax / 127, TINY)         q = clamp(round(x / s), -127, 127)      x ~ q * s

Asymmetric uint4 (int4 weight-only, per group), zero is always exactly representable::

    lo = min(min(x), 0)   hi = max(max(x), 0)
    s  = max((hi - lo) / 15, TINY)    z = clamp(round(-lo / s), 0, 15)
    q  = clamp(round(x / s) + z, 0, 15)                                    x ~ (q - z) * s

Symmetric int4 (W4A8 weights, per group): s = max(amax / 7, TINY), q = clamp(round(x / s), -8, 7).

Asymmetric int8 activations (per token): s = max((hi - lo) / 255, TINY),
z = clamp(round(-lo / s) - 128, -128, 127), q = clamp(round(x / s) + z, -128, 127).

TINY (the smallest normal float32) keeps all-zero groups finite: their codes are 0.
"""

from __future__ import annotations

import torch

from aoq.formats.arith import true_div

TINY = torch.finfo(torch.float32).tiny
INT8_MAX = 127
INT4_SYM_MIN, INT4_SYM_MAX = -8, 7
UINT4_MAX = 15


def check_group_size(k: int, group_size: int) -> None:
    """Raise a ValueError naming the fix when ``k`` cannot be split into groups."""
    if group_size <= 0:
        raise ValueError(f"group_size={group_size} must be positive")
    if k % group_size:
        options = [g for g in (16, 32, 64, 128, 256) if k % g == 0]
        fix = f"pick group_size from {tuple(options)}" if options else "pad K to a multiple of 32"
        raise ValueError(f"K={k} is not divisible by group_size={group_size}; pad K or {fix}")


def _grouped(x: torch.Tensor, group_size: int | None) -> torch.Tensor:
    """[..., K] float32 -> [..., K // g, g] (a view when possible)."""
    k = x.shape[-1]
    g = k if group_size is None else group_size
    check_group_size(k, g)
    return x.reshape(*x.shape[:-1], k // g, g)


def _round_clamp(v: torch.Tensor, lo: int, hi: int) -> torch.Tensor:
    return torch.clamp(torch.round(v), lo, hi)


# --- symmetric int8 -------------------------------------------------------------------------


def quantize_int8_symmetric(
    x: torch.Tensor, group_size: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """x [..., K] -> (q int8 [..., K], s float32 [..., K // g]); g = K when group_size is None."""
    xg = _grouped(x.to(torch.float32), group_size)
    amax = xg.abs().amax(dim=-1, keepdim=True)
    s = torch.clamp(true_div(amax, INT8_MAX), min=TINY)
    q = _round_clamp(xg / s, -INT8_MAX, INT8_MAX).to(torch.int8)
    return q.reshape(x.shape), s.squeeze(-1)


def dequantize_symmetric(q: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """q [..., K] (int8, or signed int4 values in int8) with s [..., G] -> float32 [..., K]."""
    k = q.shape[-1]
    g = k // s.shape[-1]
    w = q.to(torch.float32).reshape(*q.shape[:-1], s.shape[-1], g) * s.unsqueeze(-1)
    return w.reshape(q.shape)


# --- int4 ------------------------------------------------------------------------------------


def quantize_uint4_asymmetric(
    x: torch.Tensor, group_size: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """x [N, K] -> (q uint8 codes in [0, 15] [N, K], s float32 [N, G], z uint8 [N, G])."""
    xg = _grouped(x.to(torch.float32), group_size)
    lo = torch.clamp(xg.amin(dim=-1, keepdim=True), max=0.0)
    hi = torch.clamp(xg.amax(dim=-1, keepdim=True), min=0.0)
    s = torch.clamp(true_div(hi - lo, UINT4_MAX), min=TINY)
    z = _round_clamp(-lo / s, 0, UINT4_MAX)
    q = torch.clamp(torch.round(xg / s) + z, 0, UINT4_MAX).to(torch.uint8)
    return q.reshape(x.shape), s.squeeze(-1), z.squeeze(-1).to(torch.uint8)


def dequantize_uint4_asymmetric(q: torch.Tensor, s: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """Unpacked codes q [N, K] with s, z [N, G] -> float32 [N, K]: (q - z) * s."""
    n, k = q.shape
    groups = s.shape[-1]
    qg = q.to(torch.float32).reshape(n, groups, k // groups)
    return ((qg - z.to(torch.float32).unsqueeze(-1)) * s.unsqueeze(-1)).reshape(n, k)


def quantize_int4_symmetric(x: torch.Tensor, group_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """x [N, K] -> (q int8 holding values in [-8, 7] [N, K], s float32 [N, G])."""
    xg = _grouped(x.to(torch.float32), group_size)
    amax = xg.abs().amax(dim=-1, keepdim=True)
    s = torch.clamp(true_div(amax, INT4_SYM_MAX), min=TINY)
    q = _round_clamp(xg / s, INT4_SYM_MIN, INT4_SYM_MAX).to(torch.int8)
    return q.reshape(x.shape), s.squeeze(-1)


# --- activations (per token, along the last dim) ---------------------------------------------


def quantize_per_token_int8(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric per-token int8: x [M, K] -> (q int8 [M, K], s float32 [M])."""
    q, s = quantize_int8_symmetric(x, None)
    return q, s.squeeze(-1)


def quantize_per_token_int8_asymmetric(
    x: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Asymmetric per-token int8: x [M, K] -> (q int8, s float32 [M], z int32 [M])."""
    xf = x.to(torch.float32)
    lo = torch.clamp(xf.amin(dim=-1, keepdim=True), max=0.0)
    hi = torch.clamp(xf.amax(dim=-1, keepdim=True), min=0.0)
    s = torch.clamp(true_div(hi - lo, 255), min=TINY)
    z = _round_clamp(-lo / s - 128, -128, 127)
    q = torch.clamp(torch.round(xf / s) + z, -128, 127).to(torch.int8)
    return q, s.squeeze(-1), z.squeeze(-1).to(torch.int32)


def quantize_static_int8(x: torch.Tensor, act_scale: torch.Tensor) -> torch.Tensor:
    """Static symmetric int8 with a calibrated float32 scalar scale (zero point 0)."""
    return _round_clamp(x.to(torch.float32) / act_scale, -INT8_MAX, INT8_MAX).to(torch.int8)


def quantize_bias_int32(bias: torch.Tensor, bias_scale: torch.Tensor) -> torch.Tensor:
    """Bias in integer units of ``bias_scale`` (= act_scale * weight scale), zero point 0."""
    limit = 2**31 - 1
    b = torch.round(bias.to(torch.float32) / bias_scale)
    if b.abs().max().item() > limit if b.numel() else False:
        raise ValueError(
            "bias does not fit int32 in units of act_scale * weight_scale; "
            "the calibrated act_scale is too small for this layer"
        )
    return b.to(torch.int32)
