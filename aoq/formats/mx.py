"""OCP Microscaling (MX v1.0) reference math: one E8M0 scale per block of elements.

A block is ``block_size`` (32 in the spec) consecutive elements along ``axis``. Per block::

    amax       = max_i |x_i|                                        (x cast to float32 first)
    shared_exp = floor(log2(amax)) - emax_elem                      FLOOR (the spec, sec. 6.3)
               = ceil(log2(amax / max_elem))                        RCEIL (NVIDIA), exact
    shared_exp = clamp(shared_exp, -127, 127)       amax == 0 gives -127
    scale byte = shared_exp + 127                                   E8M0: 2^(byte - 127)
    P_i        = sat(RNE_elem(x_i / 2^shared_exp))                  element codes
    x_i       ~= decode(P_i) * 2^shared_exp

A block holding NaN or +-Inf gets scale byte 0xFF (NaN), all its codes are 0, and it
dequantizes to all-NaN. RNE_elem rounds to nearest, ties to even, on the element format's
grid (subnormals included); sat clamps to +-max_elem (elements never hold Inf or NaN).
INT8 elements are fixed point 1.6: value = code * 2^-6, code in [-127, 127].

Exactness (what a kernel must reproduce bit for bit): RNE_elem is the only rounding.
floor(log2) comes from the float32 bits (exact for subnormals and powers of two); 2^n is
built from bits; x / 2^s is the exact product x * 2^-s (a result below 2^-126 may lose bits,
but it rounds to 0 in every element format anyway). RCEIL is ceil(log2(amax / max_elem)) in
exact arithmetic: the FLOOR exponent, plus 1 when amax's significand exceeds max_elem's. It
is not the ceil of a float32-rounded quotient (the two differ only when that quotient is a
float32 subnormal). Dequantization decode(P) * 2^s is exact for every scale byte < 0xFF
(products above the float32 range give Inf).
"""

from __future__ import annotations

import enum
import struct

import torch

from aoq.formats.mx_elem import (
    FP32_FRAC_MASK,
    SUBBYTE,
    ElemSpec,
    MXElem,
    decode_elem,
    encode_elem,
    exp2i,
    exp_frac,
    floor_log2,
    parse_choice,
    round_to_elem,
)
from aoq.formats.packing import pack_fp6, pack_uint4, unpack_fp6, unpack_uint4

E8M0_BIAS = 127
E8M0_NAN = 0xFF


class ScaleRounding(enum.Enum):
    """How a block's amax becomes its shared exponent."""

    FLOOR = "floor"
    """The OCP spec: floor(log2(amax)) - emax_elem; the block max may saturate."""
    RCEIL = "rceil"
    """NVIDIA: ceil(log2(amax / max_elem)); never saturates, may waste up to one binade."""


def e8m0_to_float32(scale_e8m0: torch.Tensor) -> torch.Tensor:
    """E8M0 byte b (uint8 or torch.float8_e8m0fnu) -> float32: 0xFF -> NaN, else 2^(b - 127).

    b = 0 gives 2^-127, a float32 subnormal (exact).
    """
    b = scale_e8m0
    if b.dtype != torch.uint8:
        if b.dtype != getattr(torch, "float8_e8m0fnu", None):
            raise TypeError(f"E8M0 scales must be uint8 or float8_e8m0fnu, got {b.dtype}")
        b = b.view(torch.uint8)
    value = exp2i(b.to(torch.int32) - E8M0_BIAS)
    return torch.where(b == E8M0_NAN, torch.nan, value)


# --- blocks ----------------------------------------------------------------------------------


def _to_blocks(t: torch.Tensor, block_size: int, axis: int) -> torch.Tensor:
    """[..., n (at axis), ...] -> [..., n // block_size, block_size] with the blocked axis last."""
    if t.dim() == 0:
        raise ValueError("MX needs a tensor with at least one dim; got a 0-dim tensor")
    if not -t.dim() <= axis < t.dim():
        raise ValueError(f"axis={axis} is out of range for a {t.dim()}-dim tensor")
    if not isinstance(block_size, int) or block_size <= 0:
        raise ValueError(f"block_size={block_size!r} must be a positive int (the spec uses 32)")
    t = t.movedim(axis, -1)
    n = t.shape[-1]
    if n % block_size:
        pad = -(-n // block_size) * block_size
        raise ValueError(
            f"size {n} along axis {axis} is not divisible by block_size={block_size}; "
            f"pad that axis to a multiple of {block_size} (e.g. {pad}) or pick a block_size "
            f"that divides {n}"
        )
    return t.reshape(*t.shape[:-1], n // block_size, block_size)


def _from_blocks(tb: torch.Tensor, axis: int) -> torch.Tensor:
    return tb.flatten(-2).movedim(-1, axis).contiguous()


def mx_shared_exp(
    amax: torch.Tensor, elem: MXElem, scale_rounding: ScaleRounding = ScaleRounding.FLOOR
) -> torch.Tensor:
    """Block amax (finite float32 >= 0) -> shared exponent, int32 in [-127, 127].

    FLOOR: floor(log2(amax)) - emax_elem.
    RCEIL: the same, + 1 when frac(amax) > frac(max_elem) (23-bit significand fractions), which
    equals ceil(log2(amax / max_elem)) exactly. amax == 0 gives -127 under both rules.
    """
    exp, frac = exp_frac(amax)
    shared = exp - elem.spec.emax
    if scale_rounding is ScaleRounding.RCEIL:
        max_frac = struct.unpack("<I", struct.pack("<f", elem.spec.max_normal))[0] & FP32_FRAC_MASK
        shared = shared + (frac > max_frac).to(torch.int32)
    shared = shared.clamp(-E8M0_BIAS, E8M0_BIAS)
    return torch.where(amax == 0, -E8M0_BIAS, shared).to(torch.int32)


def mx_quantize(
    x: torch.Tensor,
    elem: MXElem | str,
    block_size: int = 32,
    axis: int = -1,
    scale_rounding: ScaleRounding | str = ScaleRounding.FLOOR,
) -> tuple[torch.Tensor, torch.Tensor]:
    """x (any float dtype) -> (codes with x's shape, E8M0 scale bytes uint8).

    codes: float8_e4m3fn / float8_e5m2 / int8 tensors, or uint8 bit patterns for fp6 and fp4
    (unpacked; see pack_mx_codes). scales: x's shape with the blocked axis divided by block_size.
    """
    elem = parse_choice(MXElem, elem, "MX element")
    rule = parse_choice(ScaleRounding, scale_rounding, "scale_rounding")
    xb = _to_blocks(x.to(torch.float32), block_size, axis)
    finite = torch.isfinite(xb)
    block_ok = finite.all(dim=-1)
    amax = torch.where(finite, xb.abs(), 0.0).amax(dim=-1)
    shared = mx_shared_exp(amax, elem, rule)
    v = xb * exp2i(-shared).unsqueeze(-1)
    v = torch.where(block_ok.unsqueeze(-1), v, 0.0)
    codes = encode_elem(v, elem)
    scale = torch.where(block_ok, shared + E8M0_BIAS, E8M0_NAN).to(torch.uint8)
    return _from_blocks(codes, axis), scale.movedim(-1, axis).contiguous()


def mx_dequantize(
    codes: torch.Tensor,
    scale_e8m0: torch.Tensor,
    elem: MXElem | str,
    block_size: int = 32,
    axis: int = -1,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """(codes, E8M0 scales) -> decode(codes) * 2^(scale - 127), computed in float32, then dtype."""
    elem = parse_choice(MXElem, elem, "MX element")
    vb = _to_blocks(decode_elem(codes, elem), block_size, axis)
    scale = e8m0_to_float32(scale_e8m0)
    if scale.dim() != codes.dim() or scale.movedim(axis, -1).shape != vb.shape[:-1]:
        want = list(codes.shape)
        want[axis] //= block_size
        raise ValueError(f"scale shape {list(scale.shape)} does not match codes: expected {want}")
    out = vb * scale.movedim(axis, -1).unsqueeze(-1)
    return _from_blocks(out, axis).to(dtype)


def pack_mx_codes(codes: torch.Tensor, elem: MXElem | str) -> torch.Tensor:
    """Unpacked codes -> uint8 storage along the last dim: fp8/int8 1 byte each (a view of the
    bits), fp4 two per byte (pack_uint4), fp6 four per three bytes (pack_fp6)."""
    elem = parse_choice(MXElem, elem, "MX element")
    if elem is MXElem.FP4_E2M1:
        return pack_uint4(codes)
    if elem in SUBBYTE:
        return pack_fp6(codes)
    return codes.view(torch.uint8)


def unpack_mx_codes(packed: torch.Tensor, elem: MXElem | str) -> torch.Tensor:
    """Inverse of pack_mx_codes."""
    elem = parse_choice(MXElem, elem, "MX element")
    if elem is MXElem.FP4_E2M1:
        return unpack_uint4(packed)
    if elem in SUBBYTE:
        return unpack_fp6(packed)
    return packed.view(elem.codes_dtype)


__all__ = [
    "E8M0_BIAS",
    "E8M0_NAN",
    "ElemSpec",
    "MXElem",
    "ScaleRounding",
    "decode_elem",
    "e8m0_to_float32",
    "encode_elem",
    "exp2i",
    "floor_log2",
    "mx_dequantize",
    "mx_quantize",
    "mx_shared_exp",
    "pack_mx_codes",
    "parse_choice",
    "round_to_elem",
    "unpack_mx_codes",
]
