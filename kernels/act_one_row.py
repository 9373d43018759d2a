"""Activation quantization inside a decode kernel at M = 1: the row's scale (and zero point)
from one pass over x, and the codes of each tile, bit for bit those of kernels/act_quant.py's
kernel (the same helpers), so a decode kernel can quantize its own activation row in one
launch (fp8_mm, int_act_mm, w4a8_gemv)."""

from __future__ import annotations

import triton
import triton.language as tl
from aoq.kernels.act_amax import _tensor_scale
from aoq.kernels.act_quant import _codes, _scale_zero


@triton.jit
def one_row_scale(
    x_ptr, given_ptr, s_ptr, K,
    MODE: tl.constexpr, GIVEN: tl.constexpr, TENSOR: tl.constexpr, QMAX: tl.constexpr,
    BLOCK: tl.constexpr,
):  # fmt: skip
    """The (scale, zero point) float32 scalars of a one-row x [1, K], for kernels that
    quantize their activation tiles themselves at M = 1 (``quantize_one_row``): bit for bit
    the scale of _act_quant_kernel (int8 modes, float8 per row), or TENSOR, the per-tensor
    float8 scale of _row_amax_kernel (SCALE). GIVEN: the float32 scalar at given_ptr (static
    int8). Else the scale is also stored at s_ptr (by every program: the same bits) for
    epilogues that load it, and the program's threads are synchronised after the store.
    Maxima are taken element by element over the tiles, then reduced: the same value as the
    row's one reduction (max and min are exact)."""
    lo = tl.zeros((BLOCK,), tl.float32)
    hi = tl.zeros((BLOCK,), tl.float32)
    if GIVEN:
        s = tl.load(given_ptr).to(tl.float32)
        z = tl.min(lo, axis=0)
    else:
        for k0 in range(0, K, BLOCK):
            offs = k0 + tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < K, other=0.0).to(tl.float32)
            if MODE == 1:
                lo = tl.minimum(lo, x)
                hi = tl.maximum(hi, x)
            else:
                hi = tl.maximum(hi, tl.abs(x))
        if TENSOR:
            s = _tensor_scale(hi, QMAX)
            z = tl.min(lo, axis=0)
        elif MODE == 1:
            s, z = _scale_zero(tl.min(lo, axis=0), tl.max(hi, axis=0), MODE, QMAX)
        else:
            amax = tl.max(hi, axis=0)
            s, z = _scale_zero(-amax, amax, MODE, QMAX)
        tl.store(s_ptr, s)
        tl.debug_barrier()
    return s, z


@triton.jit
def quantize_one_row(x, s, z, q_dtype, MODE: tl.constexpr, QMAX: tl.constexpr):
    """Codes of an activation tile [R, C] of a one-row x (rows past the first are masked
    zeros: code 0 for any scale) with that row's scalars from one_row_scale."""
    sv = tl.zeros((x.shape[0],), tl.float32) + s
    zv = tl.zeros((x.shape[0],), tl.float32) + z
    return _codes(x, sv, zv, q_dtype, MODE, QMAX)
