"""NVFP4 reference math: fp4 e2m1 elements, one float8 e4m3 scale per 16 elements along the
last dim, and one float32 scale per tensor.

    tensor_scale = amax(|x|) / (448 * 6)                  float32; 1.0 if that is 0
    per block b (block_size = 16 consecutive elements of the last dim):
    block_scale  = e4m3(min((amax_b / 6) / tensor_scale, 448))        RNE cast, saturating
    d_b          = f32(block_scale) * tensor_scale                      the block's step
    P_i          = sat6(RNE_fp4(x_i / d_b))                             P_i = 0 where d_b == 0
    x_i         ~= decode(P_i) * d_b

448 and 6 are the largest e4m3 and e2m1 values, so the block holding amax maps onto +-6.
Every step above is one float32 IEEE operation rounded to nearest even, in the order written
(a kernel must use true division, e.g. Triton div_rn, not a reciprocal or an approximate
divide). A block scale that rounds to 0 (a block far below amax) makes the block all zero.
tensor_scale is 1.0 both for amax == 0 and when amax / 2688 underflows to 0.

NaN / Inf: tensor_scale is computed from the finite values only, so one bad value does not
change the other blocks. A block holding NaN or +-Inf gets the NaN block scale (e4m3 0x7F),
all-zero codes, and dequantizes to all NaN (0 * NaN).

Codes are unpacked uint8 bit patterns S.EE.M (see aoq.formats.mx.encode_elem); pack them two
per byte with aoq.formats.packing.pack_uint4.
"""

from __future__ import annotations

import torch

from aoq.formats.arith import true_div
from aoq.formats.mx import MXElem, decode_elem, encode_elem

E4M3_MAX = 448.0
E2M1_MAX = 6.0
NVFP4_BLOCK = 16


def _finite_abs(x: torch.Tensor) -> torch.Tensor:
    return torch.where(torch.isfinite(x), x.abs(), 0.0)


def nvfp4_tensor_scale(x: torch.Tensor) -> torch.Tensor:
    """float32 0-dim: amax(|x| over finite values) / (448 * 6), or 1.0 if that is 0."""
    xf = x.to(torch.float32)
    amax = _finite_abs(xf).amax() if xf.numel() else xf.new_zeros(())
    ts = true_div(amax, E4M3_MAX * E2M1_MAX)
    return torch.where(ts > 0, ts, 1.0)


def _blocks(x: torch.Tensor, block_size: int) -> torch.Tensor:
    if x.dim() == 0:
        raise ValueError("NVFP4 needs a tensor with at least one dim; got a 0-dim tensor")
    if not isinstance(block_size, int) or block_size <= 0:
        raise ValueError(f"block_size={block_size!r} must be a positive int (NVFP4 uses 16)")
    n = x.shape[-1]
    if n % block_size:
        pad = -(-n // block_size) * block_size
        raise ValueError(
            f"last dim {n} is not divisible by block_size={block_size}; pad it to a multiple "
            f"of {block_size} (e.g. {pad})"
        )
    return x.reshape(*x.shape[:-1], n // block_size, block_size)


def nvfp4_quantize(
    x: torch.Tensor, block_size: int = NVFP4_BLOCK, tensor_scale: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """x [..., K] (any float dtype) -> (codes uint8 [..., K], block_scale float8_e4m3fn
    [..., K // block_size], tensor_scale float32 0-dim).

    tensor_scale=None computes it from x (dynamic); pass a float32 scalar > 0 for a static one.
    """
    xb = _blocks(x.to(torch.float32), block_size)
    if tensor_scale is None:
        ts = nvfp4_tensor_scale(xb)
    else:
        ts = torch.as_tensor(tensor_scale, dtype=torch.float32, device=xb.device).reshape(())
        if not bool(torch.isfinite(ts)) or float(ts) <= 0:
            raise ValueError(f"tensor_scale must be finite and > 0, got {float(ts)}")
    block_ok = torch.isfinite(xb).all(dim=-1)
    amax_b = _finite_abs(xb).amax(dim=-1)
    s = true_div(amax_b, E2M1_MAX) / ts
    scale_f32 = s.clamp(max=E4M3_MAX).to(torch.float8_e4m3fn).to(torch.float32)
    d = scale_f32 * ts
    v = xb / torch.where(d > 0, d, 1.0).unsqueeze(-1)
    v = torch.where((block_ok & (d > 0)).unsqueeze(-1), v, 0.0)
    codes = encode_elem(v, MXElem.FP4_E2M1)
    block_scale = torch.where(block_ok, scale_f32, torch.nan).to(torch.float8_e4m3fn)
    return codes.flatten(-2), block_scale, ts


def nvfp4_dequantize(
    codes: torch.Tensor,
    block_scale: torch.Tensor,
    tensor_scale: torch.Tensor,
    block_size: int = NVFP4_BLOCK,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """decode(codes) * (f32(block_scale) * tensor_scale), in float32, then cast to dtype."""
    if block_scale.dtype != torch.float8_e4m3fn:
        raise TypeError(f"NVFP4 block scales must be float8_e4m3fn, got {block_scale.dtype}")
    vb = _blocks(decode_elem(codes, MXElem.FP4_E2M1), block_size)
    if block_scale.shape != vb.shape[:-1]:
        raise ValueError(
            f"block_scale shape {list(block_scale.shape)} does not match codes "
            f"{list(codes.shape)}: expected {list(vb.shape[:-1])}"
        )
    ts = torch.as_tensor(tensor_scale, dtype=torch.float32, device=vb.device)
    d = block_scale.to(torch.float32) * ts
    return (vb * d.unsqueeze(-1)).flatten(-2).to(dtype)
