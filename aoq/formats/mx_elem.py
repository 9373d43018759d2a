"""MX element formats (OCP MX v1.0): fp8 e4m3/e5m2, fp6 e2m3/e3m2, fp4 e2m1 and int8 (fixed
point 1.6). Round to nearest even onto each format's grid, saturating encode, exact decode,
and the float32 bit helpers they rest on. aoq.formats.mx builds the blocked formats on this.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
from typing import TypeVar

import torch

FP32_FRAC_MASK = 0x7FFFFF
_E = TypeVar("_E", bound=enum.Enum)


@dataclasses.dataclass(frozen=True)
class ElemSpec:
    """Element format parameters, as in the OCP MX v1.0 element tables (INT8: fixed point 1.6)."""

    ebits: int
    mbits: int
    bias: int
    emax: int  # exponent of the largest normal, emax_elem in the spec
    bits: int
    max_normal: float
    min_normal: float  # 2^(1 - bias); for INT8 the smallest step 2^-6
    min_subnormal: float  # 2^(1 - bias - mbits)


class MXElem(enum.Enum):
    """The element data type of an MX block format."""

    FP8_E4M3 = "fp8_e4m3"
    """MXFP8 E4M3: bias 7, no Inf, NaN = S.1111.111, max 448 = 1.75 * 2^8 (torch.float8_e4m3fn)."""
    FP8_E5M2 = "fp8_e5m2"
    """MXFP8 E5M2: IEEE-like, bias 15, max 57344 = 1.75 * 2^15 (torch.float8_e5m2)."""
    FP6_E2M3 = "fp6_e2m3"
    """MXFP6 E2M3: bias 1, no Inf/NaN, max 7.5 = 1.875 * 2^2, min subnormal 0.125."""
    FP6_E3M2 = "fp6_e3m2"
    """MXFP6 E3M2: bias 3, no Inf/NaN, max 28 = 1.75 * 2^4, min subnormal 0.0625."""
    FP4_E2M1 = "fp4_e2m1"
    """MXFP4 E2M1: bias 1, no Inf/NaN, values 0 0.5 1 1.5 2 3 4 6 (and negatives)."""
    INT8 = "int8"
    """MXINT8: two's complement code * 2^-6 (fixed point 1.6), codes in [-127, 127]."""

    @property
    def spec(self) -> ElemSpec:
        """Bit widths, bias, emax_elem, max/min values (see ElemSpec)."""
        return _SPECS[self]

    @property
    def codes_dtype(self) -> torch.dtype:
        """dtype of the unpacked codes mx_quantize returns."""
        return _CODES_DTYPE.get(self, torch.uint8)


_SPECS = {  # ebits mbits bias emax bits max_normal min_normal min_subnormal
    MXElem.FP8_E4M3: ElemSpec(4, 3, 7, 8, 8, 448.0, 2.0**-6, 2.0**-9),
    MXElem.FP8_E5M2: ElemSpec(5, 2, 15, 15, 8, 57344.0, 2.0**-14, 2.0**-16),
    MXElem.FP6_E2M3: ElemSpec(2, 3, 1, 2, 6, 7.5, 1.0, 0.125),
    MXElem.FP6_E3M2: ElemSpec(3, 2, 3, 4, 6, 28.0, 0.25, 0.0625),
    MXElem.FP4_E2M1: ElemSpec(2, 1, 1, 2, 4, 6.0, 1.0, 0.5),
    MXElem.INT8: ElemSpec(0, 6, 0, 0, 8, 127 / 64, 2.0**-6, 2.0**-6),
}
_CODES_DTYPE = {
    MXElem.FP8_E4M3: torch.float8_e4m3fn,
    MXElem.FP8_E5M2: torch.float8_e5m2,
    MXElem.INT8: torch.int8,
}
SUBBYTE = (MXElem.FP6_E2M3, MXElem.FP6_E3M2, MXElem.FP4_E2M1)


def parse_choice(cls: type[_E], value: _E | str, what: str) -> _E:
    """Public-edge conversion of a string to its enum member, e.g. "fp8_e4m3" -> FP8_E4M3."""
    if isinstance(value, cls):
        return value
    try:
        return cls(value)
    except ValueError:
        names = ", ".join(str(m.value) for m in cls)
        raise ValueError(f"unknown {what} {value!r}; expected one of: {names}") from None


# --- exact float32 bit helpers -----------------------------------------------------------------


def exp2i(n: torch.Tensor) -> torch.Tensor:
    """2^n as float32 for integer n in [-149, 127], exact, built from the bits (no pow).

    n >= -126: biased exponent field (n + 127) << 23;  n < -126: subnormal, mantissa bit n + 149.
    """
    n = n.to(torch.int32)
    normal = (n + 127).clamp(min=1) << 23
    subnormal = torch.ones_like(n) << (n + 149).clamp(0, 22)
    return torch.where(n >= -126, normal, subnormal).view(torch.float32)


def exp_frac(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """For float32 a > 0 finite: (floor(log2(a)), 23-bit fraction of a's significand), int32.

    Subnormals are first scaled by 2^64 (exact) so they read as normal numbers.
    """
    sub = a < 2.0**-126
    bits = torch.where(sub, a * 2.0**64, a).view(torch.int32)
    exp = ((bits >> 23) & 0xFF) - 127 - torch.where(sub, 64, 0).to(torch.int32)
    return exp, bits & FP32_FRAC_MASK


def floor_log2(a: torch.Tensor) -> torch.Tensor:
    """floor(log2(a)) as int32 for finite float32 a > 0 (a == 0 gives a meaningless -191)."""
    return exp_frac(a)[0]


# --- element formats -----------------------------------------------------------------------------


def round_to_elem(v: torch.Tensor, elem: MXElem) -> torch.Tensor:
    """RNE of float32 v onto elem's value grid, saturated to +-max_normal (float32, exact values).

    Float formats, with emin = 1 - bias the exponent shared by subnormals and the first binade::

        e = max(floor(log2|v|), emin)        q = 2^(e - mbits)   (spacing of values near v)
        r = clamp(round_half_even(v / q) * q, -max_normal, max_normal)

    INT8: q = 2^-6 everywhere. v / q and * q are exact (powers of two); -0 stays -0. NaN stays NaN.
    """
    s = elem.spec
    if elem is MXElem.INT8:
        e = torch.zeros(v.shape, dtype=torch.int32, device=v.device)
    else:
        e = floor_log2(v.abs()).clamp(min=1 - s.bias)
    r = torch.round(v * exp2i(s.mbits - e)) * exp2i(e - s.mbits)
    return r.clamp(-s.max_normal, s.max_normal)


@functools.lru_cache(maxsize=64)
def _device_table(elem: MXElem, device: torch.device) -> torch.Tensor:
    """The decode table on ``device``, copied there once (a copy per call waits for the
    device and breaks CUDA-graph capture)."""
    return _decode_table(elem).to(device)


@functools.cache
def _decode_table(elem: MXElem) -> torch.Tensor:
    """Value of every sub-byte code, from the format definition (sign, exponent, mantissa)::

    E == 0:  (-1)^S * 2^(1 - bias) * (0 + M / 2^mbits)      subnormal
    E >  0:  (-1)^S * 2^(E - bias) * (1 + M / 2^mbits)      normal (no Inf/NaN in fp6/fp4)
    """
    s = elem.spec
    values = []
    for code in range(2**s.bits):
        sign = code >> (s.bits - 1)
        e_field = (code >> s.mbits) & ((1 << s.ebits) - 1)
        m_field = code & ((1 << s.mbits) - 1)
        if e_field == 0:
            mag = 2.0 ** (1 - s.bias) * (m_field / 2**s.mbits)
        else:
            mag = 2.0 ** (e_field - s.bias) * (1 + m_field / 2**s.mbits)
        values.append(-mag if sign else mag)
    return torch.tensor(values, dtype=torch.float32)


def encode_elem(v: torch.Tensor, elem: MXElem) -> torch.Tensor:
    """float32 v -> codes of elem (RNE, saturating): fp8 as torch float8, int8 as int8, fp6/fp4
    as uint8 bit patterns S.EEE.MM (sign, exponent field, mantissa field, in that order).

    With r = round_to_elem(v), e = max(floor(log2|r|), emin) and mant = |r| * 2^(mbits - e)
    (an integer, < 2^mbits for subnormals, in [2^mbits, 2^(mbits+1)) for normals)::

        normal:    exponent field = e + bias,  mantissa field = mant - 2^mbits
        subnormal: exponent field = 0,         mantissa field = mant
        both:      magnitude code = ((e + bias - 1) << mbits) + mant

    fp6/fp4/int8 have no NaN: v must not hold NaN (mx_quantize zeroes NaN/Inf blocks first).
    """
    if elem not in SUBBYTE and elem is not MXElem.INT8:
        return round_to_elem(v, elem).to(elem.codes_dtype)
    if not v.is_cuda and bool(torch.isnan(v).any()):
        # checked where it costs no device sync: on GPUs this would block every emulated MX
        # forward on the host and make it impossible to capture in a CUDA graph (H200 bench
        # run bbd8a5); the callers (mx_quantize, nvfp4_quantize) zero NaN/Inf blocks first
        raise ValueError(f"{elem.value} has no NaN encoding; got NaN in the values to encode")
    r = round_to_elem(v, elem)
    if elem is MXElem.INT8:
        return (r * 64).to(torch.int8)
    s = elem.spec
    a = r.abs()
    e = floor_log2(a).clamp(min=1 - s.bias)
    mant = (a * exp2i(s.mbits - e)).to(torch.int32)
    mag = ((e + s.bias - 1) << s.mbits) + mant
    sign = (r.view(torch.int32) < 0).to(torch.int32)  # the sign bit, so -0 keeps it
    return ((sign << (s.bits - 1)) | mag).to(torch.uint8)


def decode_elem(codes: torch.Tensor, elem: MXElem) -> torch.Tensor:
    """Codes of elem (as encode_elem returns them) -> float32 values, exact."""
    if codes.dtype != elem.codes_dtype:
        raise TypeError(f"{elem.value} codes must be {elem.codes_dtype}, got {codes.dtype}")
    if elem is MXElem.INT8:
        return codes.to(torch.float32) * 2.0**-6
    if elem not in SUBBYTE:
        return codes.to(torch.float32)
    # no device sync on GPUs (see encode_elem): codes there come from aoq's unpackers, which
    # cannot exceed the element's bits
    if not codes.is_cuda and codes.numel() and int(codes.max()) >= 2**elem.spec.bits:
        raise ValueError(
            f"{elem.value} codes must be < {2**elem.spec.bits}, got {int(codes.max())}"
        )
    if codes.is_cuda and type(codes) is torch.Tensor and not torch.compiler.is_compiling():
        return _device_table(elem, codes.device)[codes.long()]
    return _decode_table(elem).to(codes.device)[codes.long()]
