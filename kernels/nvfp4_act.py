"""NVFP4 activations quantized and dequantized on the GPU: ``aoq::nvfp4_qdq`` in Triton.

    nvfp4_qdq_triton(x)      x [..., K] (K a multiple of 16) -> NVFP4 values in x's dtype

The math is aoq.formats.nvfp4 (nvfp4_quantize with a dynamic tensor scale, then
nvfp4_dequantize to x's dtype), bit for bit, one float32 IEEE operation at a time::

    amax     largest finite |x| of the whole tensor     (the integer max of |x|'s float32 bits)
    ts       amax / 2688 (div_rn), 1.0 if that is 0
    per block of 16 along K, with amax_b its largest |x|:
    s        (amax_b / 6) / ts, at most 448                                (two div_rn)
    scale    s rounded to float8 e4m3 (RNE, subnormals kept)  (one add on the e4m3 grid)
    d        scale * ts
    value    RNE_fp4(x / d) saturated at 6, times d (div_rn; 0 where d is 0), cast to x's dtype
    a block holding NaN or Inf: all NaN (its scale is e4m3's NaN)

Rounding to a grid is mx_steps.on_grid (the MX casts' add of a power of two whose ulp is the
grid's step), used twice: for the block scale on the e4m3 grid and for the element on the
fp4 grid. No float8 conversion instruction is used, so gfx942 (whose float8 is e4m3fnuz)
computes the OCP scale too.

Two launches, because a dynamic tensor scale needs the whole tensor's amax before the first
block: ``_amax_kernel`` writes one partial maximum per program (at most MAX_PARTIALS), and
every program of ``_qdq_kernel`` folds them all (a few KB from L2) before its tile. No
buffer is zeroed and no atomics are used: an eager call is two launches into fresh buffers,
which aoq/plans.py replays.

Why: NVFP4 x NVFP4 linears are emulated on GPUs without an NVFP4 GEMM (everything before
sm100). Their activation quantize-dequantize was the reference in torch ops (a dozen
full-tensor passes): 1.4 ms of a 1024 x 1024 layer's eager call and 0.08-0.11x bf16 on an
H200 (run 258d77).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from aoq.kernels import mx_steps as st
from aoq.kernels._common import FLOAT_DTYPES, backend_of, out_dtype_for
from aoq.kernels._launch import launch

from aoq.formats.mx import MXElem, ScaleRounding
from aoq.formats.nvfp4 import E2M1_MAX, E4M3_MAX, NVFP4_BLOCK

FINITE = tl.constexpr(0x7F800000)
"""Float32 bits of +Inf: |x|'s bits at or above it are Inf or NaN."""
MAX_PARTIALS = 1024
"""Programs of the amax pass at most; the qdq programs each read this many partials."""
AMAX_CHUNK = 4096
"""Elements an amax program reads per step (4 warps, 32 a thread)."""
TILE_BLOCKS = 64
"""Blocks of 16 a qdq program converts (1024 elements, 4 warps)."""
_FP4 = st.elem_constants(MXElem.FP4_E2M1, ScaleRounding.FLOOR, False)
_E4M3 = st.elem_constants(MXElem.FP8_E4M3, ScaleRounding.FLOOR, False)
QDQ_CONSTS = dict(
    BS=NVFP4_BLOCK, E2M1=E2M1_MAX, E4M3=E4M3_MAX,
    FP4_SHIFT=_FP4["SHIFT"], FP4_MIN_NORMAL=_FP4["MIN_NORMAL_BITS"],
    E4M3_SHIFT=_E4M3["SHIFT"], E4M3_MIN_NORMAL=_E4M3["MIN_NORMAL_BITS"],
)  # fmt: skip
"""The format constexprs of ``_qdq_kernel`` (its launch and its compile-target spec)."""


@triton.jit
def _amax_kernel(x_ptr, part_ptr, n, per_prog, CHUNK: tl.constexpr):
    """part[p] = the largest finite |x| (as float32 bits) of elements [p * per_prog, ...)."""
    pid = tl.program_id(0)
    start = pid.to(tl.int64) * per_prog
    tl.store(part_ptr + pid, amax_bits_of(x_ptr, start, per_prog, n, CHUNK))


@triton.jit
def amax_bits_of(x_ptr, start, count, n, CHUNK: tl.constexpr):
    """The largest finite |x| of elements [start, start + count) below n, as float32 bits
    (int32; 0 if none), read in steps of CHUNK: the amax pass's partial, and a one-row
    decode's whole row."""
    hi = tl.zeros((CHUNK,), tl.int32)
    for off in range(0, count, CHUNK):
        offs = start + off + tl.arange(0, CHUNK)
        x = tl.load(x_ptr + offs, mask=offs < n)
        bits = x.to(tl.float32).to(tl.int32, bitcast=True) & 0x7FFFFFFF
        hi = tl.maximum(hi, tl.where(bits < FINITE, bits, 0))
    return tl.max(hi, axis=0)


@triton.jit
def tensor_scale(amax_bits, E2M1: tl.constexpr, E4M3: tl.constexpr):
    """The dynamic tensor scale of an amax (float32 bits): amax / 2688, 1.0 if that is 0."""
    ts = tl.div_rn(amax_bits.to(tl.float32, bitcast=True), E4M3 * E2M1)
    return tl.where(ts > 0.0, ts, 1.0)


@triton.jit
def qdq_blocks(
    x, ts, E2M1: tl.constexpr, E4M3: tl.constexpr, FP4_SHIFT: tl.constexpr,
    FP4_MIN_NORMAL: tl.constexpr, E4M3_SHIFT: tl.constexpr, E4M3_MIN_NORMAL: tl.constexpr,
):  # fmt: skip
    """float32 x [blocks, 16] -> the quantize-dequantize values (float32) under tensor scale
    ts: the module doc's steps, block by block."""
    ab = st.amax_bits(x, 1)
    ok = ab < FINITE  # no NaN / Inf in the block
    s = tl.minimum(tl.div_rn(tl.div_rn(ab.to(tl.float32, bitcast=True), E2M1), ts), E4M3)
    t, m = st.grid_add(s, E4M3_SHIFT, E4M3_MIN_NORMAL, False)
    d = (t - m) * ts  # the e4m3 block scale's value times the tensor scale
    live = d > 0.0
    v = tl.div_rn(x, tl.where(live, d, 1.0)[:, None])
    r = st.on_grid(v, FP4_SHIFT, FP4_MIN_NORMAL, E2M1, False)
    y = tl.where(live[:, None], r * d[:, None], 0.0)
    return tl.where(ok[:, None], y, float("nan"))


@triton.jit
def _qdq_kernel(
    x_ptr, part_ptr, y_ptr, nblk, n_parts, PARTS: tl.constexpr, NB: tl.constexpr,
    BS: tl.constexpr, E2M1: tl.constexpr, E4M3: tl.constexpr,
    FP4_SHIFT: tl.constexpr, FP4_MIN_NORMAL: tl.constexpr,
    E4M3_SHIFT: tl.constexpr, E4M3_MIN_NORMAL: tl.constexpr,
):  # fmt: skip
    """Blocks [pid * NB, ...) of BS consecutive elements: quantize-dequantize (module doc)."""
    offs_p = tl.arange(0, PARTS)
    amax_bits = tl.max(tl.load(part_ptr + offs_p, mask=offs_p < n_parts, other=0), axis=0)
    ts = tensor_scale(amax_bits, E2M1, E4M3)

    blocks = tl.program_id(0).to(tl.int64) * NB + tl.arange(0, NB)
    offs = blocks[:, None] * BS + tl.arange(0, BS)[None, :]
    mask = (blocks < nblk)[:, None]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = qdq_blocks(x, ts, E2M1, E4M3, FP4_SHIFT, FP4_MIN_NORMAL, E4M3_SHIFT, E4M3_MIN_NORMAL)
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def serves(x: torch.Tensor) -> bool:
    """A float tensor of at least one dim whose last dim is a multiple of 16."""
    return x.dim() >= 1 and x.dtype in FLOAT_DTYPES and x.shape[-1] % NVFP4_BLOCK == 0


def nvfp4_qdq_triton(x: torch.Tensor) -> torch.Tensor:
    """x [..., K] (bf16, fp16 or fp32; K a multiple of 16) -> the NVFP4 quantize-dequantize
    of x with a tensor scale from x's own amax, in x's dtype, contiguous."""
    if not serves(x):
        raise ValueError(
            f"nvfp4_qdq_triton takes a float tensor whose last dim is a multiple of "
            f"{NVFP4_BLOCK}; got {tuple(x.shape)} {x.dtype}"
        )
    backend_of(x.device)
    x = x.contiguous()
    n = x.numel()
    y = torch.empty(x.shape, dtype=out_dtype_for(x.dtype), device=x.device)
    if n == 0:
        return y.to(x.dtype)
    n_parts = min(triton.cdiv(n, AMAX_CHUNK), MAX_PARTIALS)
    per_prog = triton.cdiv(triton.cdiv(n, n_parts), AMAX_CHUNK) * AMAX_CHUNK
    n_parts = triton.cdiv(n, per_prog)
    parts = torch.empty((n_parts,), dtype=torch.int32, device=x.device)
    launch(_amax_kernel, (n_parts,), x, parts, n, per_prog, CHUNK=AMAX_CHUNK, num_warps=4)
    nblk = n // NVFP4_BLOCK
    launch(_qdq_kernel, (triton.cdiv(nblk, TILE_BLOCKS),),
        x, parts, y, nblk, n_parts, PARTS=triton.next_power_of_2(n_parts), NB=TILE_BLOCKS,
        **QDQ_CONSTS, num_warps=4,
    )  # fmt: skip
    return y.to(x.dtype)
