"""MX and NVFP4 weights dequantized on the GPU: packed codes and block scales -> [N, K] values.

    mx_dequantize_triton(qdata, scale, elem, block_size, dtype)      MXWeight / MXTensor (axis 1)
    nvfp4_dequantize_triton(qdata, scale, tensor_scale, dtype)       NVFP4Tensor

The math is aoq.formats.mx.mx_dequantize and aoq.formats.nvfp4.nvfp4_dequantize, bit for bit:
every code's value is built exactly in float32 from its fields, the block scale too, and one
float32 multiply (NVFP4: two, block scale times tensor scale first) gives the value, cast
once (round to nearest even) to the output dtype::

    fp8 / fp6 / fp4 code S.E.M   E == 0: M * 2^(1 - bias - mbits)       (subnormal)
                                 E >  0: (2^mbits + M) * 2^(E - bias - mbits)
                                 e4m3 S.1111.111: NaN;  e5m2 E = 31: Inf (M = 0) or NaN
    int8 code                    code * 2^-6 (fixed point 1.6)
    E8M0 byte b                  2^(b - 127) (b = 0: 2^-127, a float32 subnormal); 0xFF: NaN
    NVFP4 block scale            the e4m3 code's value (as above) * tensor_scale

On ROCm float32 flushes subnormals (Triton compiles AMD kernels with ftz): a value below
2^-126 (a block scale of 2^-127..2^-104 meeting small codes) comes out as 0 there, where the
reference keeps it; the codes' values themselves never pass through a subnormal.

Codes are read as packed (aoq.formats.packing): fp8 / int8 one byte each, fp4 two a byte (the
first element in the low nibble), fp6 four in three little-endian bytes. A program
dequantizes a [BLOCK_N, BLOCK_K] tile: the packed bytes of its rows, the codes' values, the
tile's block scales broadcast over their blocks (BLOCK_K a multiple of the block size).

Why: on GPUs without an MX GEMM (everything before sm100) MX and NVFP4 linears are emulated,
dequantize then matmul, and the reference dequantization in torch ops (a table lookup on
unpacked codes, a float32 tensor, a cast) took 0.4-0.6 ms for an 8192 x 8192 weight on an
H200 (run 3a9e1a). One pass reads the packed codes and writes the values: at least 2 bytes
an element, ~40 us at 8192^2.

Ops: the CUDA implementations of ``aoq::mx_dequantize`` and ``aoq::nvfp4_dequantize``
(aoq/tensors/mx.py, aoq/tensors/nvfp4.py) call these for 2-D weights blocked along their last
dim with a power-of-two block size; anything else runs the reference there.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from aoq.kernels._common import backend_of, out_dtype_for
from aoq.kernels._launch import launch

from aoq.formats.mx import MXElem
from aoq.formats.nvfp4 import NVFP4_BLOCK

E4M3 = (4, 3, 7, 1)
"""(EBITS, MBITS, BIAS, NAN) of float8 e4m3fn: NVFP4's block scales, MX fp8_e4m3 elements."""


def elem_params(elem: MXElem) -> tuple[int, int, int, int]:
    """(EBITS, MBITS, BIAS, NAN) of an MX element for :func:`elem_value`. NAN: 0 none (fp6,
    fp4, int8), 1 e4m3fn's S.1111.111, 2 IEEE (e5m2: exponent all ones)."""
    s = elem.spec
    nan = {MXElem.FP8_E4M3: 1, MXElem.FP8_E5M2: 2}.get(elem, 0)
    return s.ebits, s.mbits, s.bias, nan


@triton.jit
def elem_value(
    c, EBITS: tl.constexpr, MBITS: tl.constexpr, BIAS: tl.constexpr, NAN: tl.constexpr
):  # fmt: skip
    """int32 codes -> their float32 values, exact, without an int-to-float conversion and
    without subnormal intermediates (ROCm's float32 flushes them: ftz).

    Float elements (the bit pattern S.E.M in the low 1 + EBITS + MBITS bits; higher bits
    are ignored): E.M goes where float32 keeps the low bits of its exponent and the high
    bits of its mantissa, and an integer add rebiases the exponent: t = 2^(E - BIAS) (1 +
    M / 2^MBITS), the value of a normal code. A subnormal code (E = 0) is M 2^(1 - BIAS -
    MBITS) = 2 t - 2^(1 - BIAS), exact. S is ORed in last (-0.0 stays -0.0).
    EBITS == 0: MX int8 (two's complement in [-128, 127]): 2^23 + 128 + c read from the bits,
    less 2^23 + 128, times 2^-6."""
    if EBITS == 0:
        v = ((c + 128) | 0x4B000000).to(tl.float32, bitcast=True) - 8388736.0
        v = v * 0.015625
    else:
        mag = (c << (23 - MBITS)) & (((1 << (EBITS + MBITS)) - 1) << (23 - MBITS))
        t = (mag + ((127 - BIAS) << 23)).to(tl.float32, bitcast=True)
        min_normal = tl.full((), (128 - BIAS) << 23, tl.int32).to(tl.float32, bitcast=True)
        v = tl.where(mag < (1 << 23), 2.0 * t - min_normal, t)
        if NAN == 1:  # e4m3fn: S.1111.111
            v = tl.where(mag == (((1 << (EBITS + MBITS)) - 1) << (23 - MBITS)), float("nan"), v)
        elif NAN == 2:  # IEEE (e5m2): exponent all ones, Inf when M == 0
            e_ones = ((1 << EBITS) - 1) << 23
            special = tl.where(mag == e_ones, float("inf"), float("nan"))
            v = tl.where((mag & e_ones) == e_ones, special, v)
        sign = (c << (31 - EBITS - MBITS)) & -0x80000000
        v = (v.to(tl.int32, bitcast=True) | sign).to(tl.float32, bitcast=True)
    return v


@triton.jit
def e8m0_value(b):
    """int32 E8M0 bytes -> 2^(b - 127) as float32 (b = 0: the subnormal 2^-127), 0xFF: NaN."""
    v = tl.where(b == 0, 0x00400000, b << 23).to(tl.float32, bitcast=True)
    return tl.where(b == 255, float("nan"), v)


@triton.jit
def block_scale(sb, ts_ptr, NVFP4: tl.constexpr):
    """int32 scale bytes -> float32 block scales: E8M0, or NVFP4's e4m3 value times the
    tensor scale (in that order, as the reference)."""
    if NVFP4:  # noqa: SIM108 - a constexpr branch
        d = elem_value(sb, 4, 3, 7, 1) * tl.load(ts_ptr)
    else:
        d = e8m0_value(sb)
    return d


@triton.jit
def dequant_tile(
    rows, s_rows, ts_ptr, nmask, k0, K,
    BITS: tl.constexpr, EBITS: tl.constexpr, MBITS: tl.constexpr, BIAS: tl.constexpr,
    NAN: tl.constexpr, NVFP4: tl.constexpr, BS: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    """float32 values [BLOCK_N, BLOCK_K] of elements k0.. of the rows whose packed codes
    start at ``rows`` and E8M0 / e4m3 scale bytes at ``s_rows`` ([BLOCK_N, 1] pointers;
    ``nmask`` [BLOCK_N, 1]). Elements at K and beyond read as code 0 with scale byte 0."""
    if BITS == 8:
        offs = k0 + tl.arange(0, BLOCK_K)
        c = tl.load(rows + offs[None, :], mask=nmask & (offs < K)[None, :], other=0)
        if EBITS == 0:
            c = c.to(tl.int8, bitcast=True)
        v = elem_value(c.to(tl.int32), EBITS, MBITS, BIAS, NAN)
    elif BITS == 4:  # two codes a byte, the first in the low nibble
        offs = k0 // 2 + tl.arange(0, BLOCK_K // 2)
        b = tl.load(rows + offs[None, :], mask=nmask & (offs < K // 2)[None, :], other=0)
        b = b.to(tl.int32)
        lo = elem_value(b & 15, EBITS, MBITS, BIAS, NAN)
        hi = elem_value(b >> 4, EBITS, MBITS, BIAS, NAN)
        v = tl.reshape(tl.join(lo, hi), (BLOCK_N, BLOCK_K))
    else:  # fp6: four codes in three little-endian bytes, w = c0 | c1 << 6 | c2 << 12 | c3 << 18
        offs = 3 * (k0 // 4 + tl.arange(0, BLOCK_K // 4))
        mask = nmask & (offs < K // 4 * 3)[None, :]
        w = tl.load(rows + offs[None, :], mask=mask, other=0).to(tl.int32)
        w |= tl.load(rows + (offs + 1)[None, :], mask=mask, other=0).to(tl.int32) << 8
        w |= tl.load(rows + (offs + 2)[None, :], mask=mask, other=0).to(tl.int32) << 16
        c0 = elem_value(w & 63, EBITS, MBITS, BIAS, NAN)
        c1 = elem_value((w >> 6) & 63, EBITS, MBITS, BIAS, NAN)
        c2 = elem_value((w >> 12) & 63, EBITS, MBITS, BIAS, NAN)
        c3 = elem_value((w >> 18) & 63, EBITS, MBITS, BIAS, NAN)
        # join adds a minor dim: [c0 c2] and [c1 c3] joined are c0 c1 c2 c3 in memory order
        v = tl.reshape(tl.join(tl.join(c0, c2), tl.join(c1, c3)), (BLOCK_N, BLOCK_K))
    offs_s = k0 // BS + tl.arange(0, BLOCK_K // BS)
    sb = tl.load(s_rows + offs_s[None, :], mask=nmask & (offs_s < K // BS)[None, :], other=0)
    sb = sb.to(tl.int32)
    d = block_scale(sb, ts_ptr, NVFP4)
    return tl.reshape(tl.reshape(v, (BLOCK_N, BLOCK_K // BS, BS)) * d[:, :, None],
                      (BLOCK_N, BLOCK_K))  # fmt: skip


@triton.jit
def _mx_dequant_kernel(
    q_ptr, s_ptr, ts_ptr, y_ptr, N, K, stride_qn, stride_sn, stride_yn,
    BITS: tl.constexpr, EBITS: tl.constexpr, MBITS: tl.constexpr, BIAS: tl.constexpr,
    NAN: tl.constexpr, NVFP4: tl.constexpr, BS: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    """Program (n, k): rows n * BLOCK_N.., elements k * BLOCK_K.. (BITS per code, BS a block)."""
    offs_n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    k0 = tl.program_id(1) * BLOCK_K
    nmask = (offs_n < N)[:, None]
    rows = q_ptr + offs_n.to(tl.int64)[:, None] * stride_qn
    s_rows = s_ptr + offs_n.to(tl.int64)[:, None] * stride_sn
    v = dequant_tile(rows, s_rows, ts_ptr, nmask, k0, K, BITS, EBITS, MBITS, BIAS, NAN, NVFP4,
                     BS, BLOCK_N, BLOCK_K)  # fmt: skip
    offs_k = k0 + tl.arange(0, BLOCK_K)
    out = y_ptr + offs_n.to(tl.int64)[:, None] * stride_yn + offs_k[None, :]
    tl.store(out, v.to(y_ptr.dtype.element_ty), mask=nmask & (offs_k < K)[None, :])


TILE = {"BLOCK_N": 16, "BLOCK_K": 256, "num_warps": 4}
"""Rows and elements per program (BLOCK_K grows to the block size when that is larger)."""
MAX_BLOCK = 1024
"""Block sizes the kernel takes: powers of two up to this (one tile holds whole blocks)."""


def serves(qdata: torch.Tensor, block_size: int, axis: int) -> bool:
    """2-D codes blocked along their last dim, contiguous rows, a power-of-two block size up
    to MAX_BLOCK (the MX spec's 32, NVFP4's 16)."""
    bs = block_size
    pow2 = bs > 0 and bs & (bs - 1) == 0
    return (
        qdata.dim() == 2 and axis in (1, -1) and qdata.stride(-1) == 1 and pow2 and bs <= MAX_BLOCK
    )


def _launch(
    qdata: torch.Tensor,
    scale: torch.Tensor,
    tensor_scale: torch.Tensor,
    k: int,
    params: tuple[int, int, int, int],
    bits: int,
    nvfp4: bool,
    block_size: int,
    dtype: torch.dtype,
) -> torch.Tensor:
    n = qdata.shape[0]
    s = scale.view(torch.uint8)
    if s.shape != (n, k // block_size) or s.stride(-1) != 1:
        raise ValueError(
            f"scale {tuple(s.shape)} (stride {s.stride()}): expected ({n}, {k // block_size}) "
            "with contiguous rows"
        )
    backend_of(qdata.device)
    y = torch.empty((n, k), dtype=out_dtype_for(dtype), device=qdata.device)
    if n == 0 or k == 0:
        return y.to(dtype)
    ebits, mbits, bias, nan = params
    bk = max(TILE["BLOCK_K"], block_size)
    grid = (triton.cdiv(n, TILE["BLOCK_N"]), triton.cdiv(k, bk))
    launch(_mx_dequant_kernel, grid,
        qdata, s, tensor_scale, y, n, k, qdata.stride(0), s.stride(0), y.stride(0),
        BITS=bits, EBITS=ebits, MBITS=mbits, BIAS=bias, NAN=nan, NVFP4=nvfp4, BS=block_size,
        BLOCK_N=TILE["BLOCK_N"], BLOCK_K=bk, num_warps=TILE["num_warps"],
    )  # fmt: skip
    return y.to(dtype)


def mx_dequantize_triton(
    qdata: torch.Tensor, scale: torch.Tensor, elem: MXElem, block_size: int, dtype: torch.dtype
) -> torch.Tensor:
    """uint8 codes [N, K * bits / 8] packed along K, E8M0 scales [N, K / block_size] (uint8 or
    float8_e8m0fnu) -> [N, K] ``dtype`` (the caller checked :func:`serves`)."""
    if qdata.dtype != torch.uint8:
        raise ValueError(f"MX codes are packed uint8, got {qdata.dtype}")
    bits = elem.spec.bits
    k = qdata.shape[1] * 8 // bits
    return _launch(qdata, scale, scale, k, elem_params(elem), bits, False, block_size, dtype)


def nvfp4_dequantize_triton(
    qdata: torch.Tensor, scale: torch.Tensor, tensor_scale: torch.Tensor, dtype: torch.dtype
) -> torch.Tensor:
    """uint8 fp4 pairs [N, K / 2], e4m3 block scales [N, K / 16] (uint8 or float8_e4m3fn),
    float32 tensor scale [] -> [N, K] ``dtype``."""
    if qdata.dtype != torch.uint8 or tensor_scale.dtype != torch.float32:
        raise ValueError(
            f"NVFP4: uint8 codes and a float32 tensor scale, got {qdata.dtype} and "
            f"{tensor_scale.dtype}"
        )
    k = qdata.shape[1] * 2
    params = elem_params(MXElem.FP4_E2M1)
    return _launch(qdata, scale, tensor_scale, k, params, 4, True, NVFP4_BLOCK, dtype)
