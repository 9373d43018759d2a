"""MX casts of a 2-D tensor along dim 0 or dim 1: the six casts of MX training need both.

Two ops, registered with torch.library; the CPU implementation is the aoq.formats.mx
reference, the CUDA (and ROCm) implementation the Triton kernel below, bit for bit the same:

    aoq::mx_cast(x, elem, block_size, dim, scale_rounding) -> (codes, scale)
        codes  uint8 [R, C]         element bit patterns, unpacked (fp8 bits, int8 two's
                                    complement, fp6 / fp4 codes in the low bits)
        scale  uint8 [R/B, C] (dim 0) or [R, C/B] (dim 1)   E8M0 bytes, 0xFF = NaN block
    aoq::mx_qdq(x, elem, block_size, dim, scale_rounding) -> x's dtype [R, C]
        quantize then dequantize in one pass (emulated MX GEMMs multiply these)

One program owns a [TILE_R, TILE_C] tile of whole blocks, loaded and stored along the
contiguous dim (coalesced); in registers it becomes one row per block::

    dim 1: [TILE_R, TILE_C] --reshape--> [TILE_R * TILE_C / B, B]   reduce each row
    dim 0: [TILE_R, TILE_C] --trans--> [TILE_C, TILE_R] --reshape--> [.., B]   (and back)

Exactness: the kernel repeats the reference step by step (see aoq/formats/mx.py): exponents
come from float32 bits (a subnormal amax through an exact int -> float conversion), powers of
two are built from bits, and no libdevice call is made (Triton flushes subnormals only there).
Element rounding (RNE, saturating) takes one of two paths, both bit-exact:
- integer: the element format's subnormal binade (and all of int8, one fixed step) rounds by
  adding and subtracting 2^23 * step; normal binades by integer RNE on the float32 bits; the
  codes are the re-biased float32 bits. Every format, every backend, the interpreter.
- hardware: fp8 elements on NVIDIA sm89+ go through the float8 conversion instruction (RNE
  with subnormals) after a clamp to +-max, one instruction for two elements.

Speed (H200, 8192x8192 bf16, reports/runs/20261121T062313Z-bench-cuda-f76eda.jsonl): dim 1
reaches 54% of the device-copy bandwidth (qdq 63%), dim 0 24% (qdq 34%): the kernel is bound
by per-element integer work and, along dim 0, the register transposes, not by memory yet.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl
from aoq.kernels.mx_ops import (
    _check,
    _is_pow2,
    mx_cast,
    mx_cast_reference,
    mx_qdq,
    mx_qdq_reference,
)
from torch import Tensor

from aoq.formats.mx import MXElem, ScaleRounding, parse_choice

FRAC_BITS = 0x7FFFFF
FRAC_MASK = tl.constexpr(FRAC_BITS)  # kernels read globals only as constexprs
# triton.jit reads TRITON_INTERPRET when a kernel is defined, i.e. when this module is imported
INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"


@triton.jit
def _exp2i(n):
    """2^n as float32 for int32 n in [-149, 127], from the bits."""
    normal = (tl.maximum(n + 127, 1) << 23).to(tl.float32, bitcast=True)
    sub = (1 << tl.minimum(tl.maximum(n + 149, 0), 22)).to(tl.float32, bitcast=True)
    return tl.where(n >= -126, normal, sub)


@triton.jit
def _scale_blocks(
    xb, EMAX: tl.constexpr, MAX_FRAC: tl.constexpr, RCEIL: tl.constexpr
):  # fmt: skip
    """xb float32 [NBLK, BLOCK] -> (v = x / 2^shared, 0 in NaN/Inf blocks; shared int32 [NBLK];
    ok [NBLK]: the block is finite)."""
    amax = tl.max(tl.abs(xb), axis=1)  # NaN/Inf blocks: whatever, their scale becomes NaN
    ok = tl.sum(xb * 0.0, axis=1) == 0.0  # x * 0 is NaN exactly for NaN and +-Inf
    # FLOOR = floor(log2(amax)) - emax; RCEIL adds 1 when frac(amax) > frac(max_elem)
    bits = amax.to(tl.int32, bitcast=True)
    mant = bits & FRAC_MASK
    mant_f = mant.to(tl.float32).to(tl.int32, bitcast=True)  # exact: normalizes a subnormal
    subnormal = ((bits >> 23) & 0xFF) == 0
    exp = tl.where(subnormal, ((mant_f >> 23) & 0xFF) - 276, ((bits >> 23) & 0xFF) - 127)
    shared = exp - EMAX
    if RCEIL:
        frac = tl.where(subnormal, mant_f & FRAC_MASK, mant)
        shared += (frac > MAX_FRAC).to(tl.int32)
    shared = tl.minimum(tl.maximum(shared, -127), 127)
    shared = tl.where(amax == 0.0, -127, shared)
    v = tl.where(ok[:, None], xb * _exp2i(-shared)[:, None], 0.0)
    return v, shared, ok


@triton.jit
def _round_to_elem(
    v, MBITS: tl.constexpr, MAX_NORMAL: tl.constexpr, MIN_NORMAL: tl.constexpr,
    SUB_MAGIC: tl.constexpr, IS_INT: tl.constexpr,
):  # fmt: skip
    """|v| rounded to nearest even on the element grid, saturated. The subnormal binade (all of
    int8: one fixed step) rounds by adding 2^23 * step; normal binades by integer RNE on bits."""
    a = tl.abs(v)
    r_sub = (a + SUB_MAGIC) - SUB_MAGIC
    if IS_INT:
        r_abs = r_sub
    else:
        b = a.to(tl.int32, bitcast=True)
        b = (b + ((1 << (22 - MBITS)) - 1) + ((b >> (23 - MBITS)) & 1)) & -(1 << (23 - MBITS))
        r_abs = tl.where(a < MIN_NORMAL, r_sub, b.to(tl.float32, bitcast=True))
    return tl.minimum(r_abs, MAX_NORMAL)


@triton.jit
def _mx_cast_kernel(
    x_ptr, out_ptr, scale_ptr,
    R, C,
    stride_xr, stride_xc, stride_or, stride_oc, stride_sr, stride_sc,
    AXIS: tl.constexpr, QDQ: tl.constexpr, BLOCK: tl.constexpr,
    TILE_R: tl.constexpr, TILE_C: tl.constexpr, EVEN: tl.constexpr,
    BITS: tl.constexpr, MBITS: tl.constexpr, BIAS: tl.constexpr, EMAX: tl.constexpr,
    MAX_NORMAL: tl.constexpr, MAX_FRAC: tl.constexpr, MIN_NORMAL: tl.constexpr,
    SUB_MAGIC: tl.constexpr, SUB_SCALE: tl.constexpr,
    IS_INT: tl.constexpr, RCEIL: tl.constexpr, HW_FP8: tl.constexpr, FP8_TY: tl.constexpr,
):  # fmt: skip
    # a [TILE_R, TILE_C] tile, loaded along the contiguous dim; int64 only in the tile origin
    row0 = tl.program_id(0).to(tl.int64) * TILE_R
    col0 = tl.program_id(1).to(tl.int64) * TILE_C
    offs_r = tl.arange(0, TILE_R)
    offs_c = tl.arange(0, TILE_C)
    mask = ((row0 + offs_r) < R)[:, None] & ((col0 + offs_c) < C)[None, :]
    x_ptrs = x_ptr + row0 * stride_xr + col0 * stride_xc
    x_ptrs += offs_r[:, None] * stride_xr + offs_c[None, :] * stride_xc
    x = tl.load(x_ptrs) if EVEN else tl.load(x_ptrs, mask, 0.0)
    x = x.to(tl.float32)
    if AXIS == 0:  # blocks run down the columns: make them rows of the transposed tile
        x = tl.trans(x)
    v, shared, ok = _scale_blocks(
        tl.reshape(x, [TILE_R * TILE_C // BLOCK, BLOCK]), EMAX, MAX_FRAC, RCEIL
    )
    if HW_FP8:  # cvt.rn to e4m3 / e5m2 (sm89+): RNE with subnormals; the clamp saturates
        q8 = tl.clamp(v, -MAX_NORMAL, MAX_NORMAL).to(FP8_TY)
        if QDQ:
            r = q8.to(tl.float32)
        else:
            y = q8.to(tl.uint8, bitcast=True)
    else:
        r_abs = _round_to_elem(v, MBITS, MAX_NORMAL, MIN_NORMAL, SUB_MAGIC, IS_INT)
        sign = v.to(tl.int32, bitcast=True) & -2147483648  # 0x80000000
        if QDQ:
            r = (r_abs.to(tl.int32, bitcast=True) | sign).to(tl.float32, bitcast=True)
            if IS_INT:
                r = tl.where(r_abs == 0.0, 0.0, r)  # two's complement has no -0
        elif IS_INT:
            y = ((tl.where(sign != 0, -r_abs, r_abs) * 64.0).to(tl.int32) & 0xFF).to(tl.uint8)
        else:  # S.E.M bits: normal = float32 bits re-biased, subnormal = r_abs / step
            normal = (r_abs.to(tl.int32, bitcast=True) >> (23 - MBITS)) - ((127 - BIAS) << MBITS)
            sub = (tl.minimum(r_abs, MIN_NORMAL) * SUB_SCALE).to(tl.int32)  # no int overflow
            mag = tl.where(r_abs < MIN_NORMAL, sub, normal)
            y = (mag | ((sign >> (32 - BITS)) & (1 << (BITS - 1)))).to(tl.uint8)
    if QDQ:
        y = tl.where(ok[:, None], r * _exp2i(shared)[:, None], float("nan"))
        y = y.to(out_ptr.dtype.element_ty)
    if AXIS == 0:  # noqa: SIM108  (constexpr branches)
        y = tl.trans(tl.reshape(y, [TILE_C, TILE_R]))
    else:
        y = tl.reshape(y, [TILE_R, TILE_C])
    out_ptrs = out_ptr + row0 * stride_or + col0 * stride_oc
    out_ptrs += offs_r[:, None] * stride_or + offs_c[None, :] * stride_oc
    if EVEN:
        tl.store(out_ptrs, y)
    else:
        tl.store(out_ptrs, y, mask)
    if not QDQ:
        scale = tl.where(ok, shared + 127, 255).to(tl.uint8)
        if AXIS == 0:  # [TILE_R // BLOCK, TILE_C]
            scale = tl.trans(tl.reshape(scale, [TILE_C, TILE_R // BLOCK]))
            srow0, scol0 = row0 // BLOCK, col0
            s_r, s_c = tl.arange(0, TILE_R // BLOCK), offs_c
            s_mask = ((srow0 + s_r) < R // BLOCK)[:, None] & ((scol0 + s_c) < C)[None, :]
        else:  # [TILE_R, TILE_C // BLOCK]
            scale = tl.reshape(scale, [TILE_R, TILE_C // BLOCK])
            srow0, scol0 = row0, col0 // BLOCK
            s_r, s_c = offs_r, tl.arange(0, TILE_C // BLOCK)
            s_mask = ((srow0 + s_r) < R)[:, None] & ((scol0 + s_c) < C // BLOCK)[None, :]
        s_ptrs = scale_ptr + srow0 * stride_sr + scol0 * stride_sc
        tl.store(s_ptrs + s_r[:, None] * stride_sr + s_c[None, :] * stride_sc, scale, s_mask)


def _tile(dim: int, block_size: int, interpret: bool) -> tuple[int, int, int]:
    """(TILE_R, TILE_C, num_warps): 8K-element tiles on a GPU (one memory-bound pass; the
    bench sweeps the alternatives), 16K under the interpreter (fewer programs, same numpy)."""
    if interpret:
        return 128, 128, 1
    return (max(64, block_size), 128, 4) if dim == 0 else (64, max(128, block_size), 4)


_FP8_TY = {MXElem.FP8_E4M3: tl.float8e4nv, MXElem.FP8_E5M2: tl.float8e5}


def _has_fp8_cvt(device: torch.device) -> bool:
    """NVIDIA sm89+ converts float32 to e4m3 / e5m2 in one instruction."""
    return (
        device.type == "cuda"
        and torch.version.hip is None
        and torch.cuda.get_device_capability(device) >= (8, 9)
    )


def mx_cast_triton(
    x: Tensor,
    elem: MXElem | str,
    block_size: int,
    dim: int,
    scale_rounding: ScaleRounding | str = ScaleRounding.FLOOR,
    qdq: bool = False,
    tile: tuple[int, int, int] | None = None,
    hw_fp8: bool | None = None,
) -> tuple[Tensor, Tensor | None]:
    """Launch the Triton cast: (codes uint8, scale uint8) or, with qdq, (x.dtype values, None).

    Runs on GPU tensors, or on CPU tensors under TRITON_INTERPRET=1. ``tile`` overrides
    (TILE_R, TILE_C, num_warps) (bench sweeps); block_size must be a power of two.
    ``hw_fp8`` rounds fp8 elements with the GPU's float8 conversion (default: on NVIDIA sm89+,
    where it exists) instead of the integer path that every element format can take.
    """
    elem = parse_choice(MXElem, elem, "MX element")
    rule = parse_choice(ScaleRounding, scale_rounding, "scale_rounding")
    _check(x, elem.value, block_size, dim, rule.value)
    if not _is_pow2(block_size):
        raise ValueError(f"the Triton MX cast needs a power-of-two block_size, got {block_size}")
    if x.device.type == "cpu" and not INTERPRET:
        raise RuntimeError(
            "mx_cast_triton got a CPU tensor but its kernel was defined for GPUs; set "
            "TRITON_INTERPRET=1 before aoq is first imported to run it on CPU, or call "
            "torch.ops.aoq.mx_cast (the reference on CPU)"
        )
    r, c = x.shape
    out = torch.empty((r, c), dtype=x.dtype if qdq else torch.uint8, device=x.device)
    s_shape = (r // block_size, c) if dim == 0 else (r, c // block_size)
    scale = torch.empty(s_shape, dtype=torch.uint8, device=x.device)
    if x.numel() == 0:
        return out, (None if qdq else scale)
    tile_r, tile_c, warps = tile or _tile(dim, block_size, INTERPRET)
    if (tile_r if dim == 0 else tile_c) % block_size:
        raise ValueError(f"tile {tile_r}x{tile_c} does not hold whole blocks along dim {dim}")
    spec = elem.spec
    max_frac = int(torch.tensor(spec.max_normal).view(torch.int32)) & FRAC_BITS
    is_int = elem is MXElem.INT8
    emin = 1 - spec.bias  # the exponent of the subnormal binade's step is emin - mbits
    if hw_fp8 is None:
        hw_fp8 = _has_fp8_cvt(x.device)
    hw_fp8 = hw_fp8 and elem in _FP8_TY
    grid = (triton.cdiv(r, tile_r), triton.cdiv(c, tile_c))
    _mx_cast_kernel[grid](
        x, out, scale,
        r, c,
        x.stride(0), x.stride(1), out.stride(0), out.stride(1), scale.stride(0), scale.stride(1),
        AXIS=dim, QDQ=qdq, BLOCK=block_size,
        TILE_R=tile_r, TILE_C=tile_c, EVEN=r % tile_r == 0 and c % tile_c == 0,
        BITS=spec.bits, MBITS=spec.mbits, BIAS=spec.bias, EMAX=spec.emax,
        MAX_NORMAL=spec.max_normal, MAX_FRAC=max_frac,
        MIN_NORMAL=float("inf") if is_int else 2.0**emin,
        SUB_MAGIC=2.0 ** (23 - spec.mbits + (0 if is_int else emin)),
        SUB_SCALE=2.0 ** (spec.mbits - emin),
        IS_INT=is_int, RCEIL=rule is ScaleRounding.RCEIL,
        HW_FP8=hw_fp8, FP8_TY=_FP8_TY.get(elem, tl.float8e4nv),
        num_warps=warps,
    )  # fmt: skip
    return out, (None if qdq else scale)


# --- the CUDA / ROCm implementation of the ops in kernels/mx_ops.py -----------------------


@mx_cast.register_kernel("cuda")
def _mx_cast_cuda(
    x: Tensor, elem: str, block_size: int, dim: int, scale_rounding: str
) -> tuple[Tensor, Tensor]:
    if not _is_pow2(block_size):
        return mx_cast_reference(x, elem, block_size, dim, scale_rounding)
    codes, scale = mx_cast_triton(x, elem, block_size, dim, scale_rounding)
    assert scale is not None
    return codes, scale


@mx_qdq.register_kernel("cuda")
def _mx_qdq_cuda(x: Tensor, elem: str, block_size: int, dim: int, scale_rounding: str) -> Tensor:
    if not _is_pow2(block_size):
        return mx_qdq_reference(x, elem, block_size, dim, scale_rounding)
    return mx_cast_triton(x, elem, block_size, dim, scale_rounding, qdq=True)[0]
