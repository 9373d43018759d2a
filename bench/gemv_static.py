"""A probe: the M = 1 weight-only GEMV for per-channel byte codes (int8, fp8 e4m3) with K and
the row stride compiled in, the way Inductor builds torchao's compiled decode.

Why (bench/NOTES.md, session 29): with a static K the loop over K unrolls completely, and
ptxas issues several steps' loads before the first multiply waits on them; aoq's own GEMV
(kernels/weight_only.py) runs K as an argument and issues one step, or two with its masks
dropped. Inductor's kernel of that structure beat aoq's decode_mma on the H200 at fp8
4096 x 14336 (16.9 against 17.6 µs). Here: one program per ``BLOCK_N`` rows over all of K
(no split), codes loaded ``evict_first``, x ``evict_last``, int8 codes made floats by
kernels._common.exact_float (the probe's first run converted them with I2F, a quarter of the
FMA rate: int8 lost 5-10 % against fp8 there), float32 products summed across
the [BLOCK_N, BLOCK_K] register tile at the end, the channel scale after. One compile per
(K, stride): a probe for ``bench.decode_rows`` (``STATIC``), not a dispatched kernel.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from aoq.kernels._common import MAGIC, exact_float


@triton.jit
def _gemv_static_kernel(
    x_ptr, w_ptr, s_ptr, y_ptr, N,
    K: tl.constexpr, STRIDE: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    """y[n] = s[n] * sum_k x[k] w[n, k] for rows n of this program (N a multiple of BLOCK_N,
    K of BLOCK_K: no masks)."""
    offs_n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    rows = w_ptr + offs_n.to(tl.int64)[:, None] * STRIDE
    acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    for k0 in tl.static_range(0, K, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        w = tl.load(rows + offs_k[None, :], eviction_policy="evict_first")
        xv = tl.load(x_ptr + offs_k, eviction_policy="evict_last")
        if w_ptr.dtype.element_ty == tl.int8:  # no int-to-float conversion (a quarter rate)
            wf = exact_float(w.to(tl.int32), 128) - (MAGIC + 128.0)
        else:
            wf = w.to(tl.float32)
        acc += wf * xv.to(tl.float32)[None, :]
    y = tl.sum(acc, axis=1) * tl.load(s_ptr + offs_n)
    tl.store(y_ptr + offs_n, y.to(y_ptr.dtype.element_ty))


def gemv_static(
    x: torch.Tensor,
    qdata: torch.Tensor,
    scale: torch.Tensor,
    y: torch.Tensor,
    block_n: int = 2,
    block_k: int = 1024,
    num_warps: int = 4,
) -> torch.Tensor:
    """y [1, N] = x [1, K] (codes [N, K] int8 or float8_e4m3fn)ᵀ x scale [N]."""
    n, k = qdata.shape
    if x.shape != (1, k) or n % block_n or k % block_k or scale.numel() != n:
        raise ValueError(f"gemv_static: x {tuple(x.shape)}, codes {tuple(qdata.shape)}, "
                         f"blocks {block_n} x {block_k}: one row, whole blocks")  # fmt: skip
    _gemv_static_kernel[(n // block_n,)](
        x, qdata, scale.reshape(-1), y, n,
        K=k, STRIDE=qdata.stride(0), BLOCK_N=block_n, BLOCK_K=block_k, num_warps=num_warps,
    )  # fmt: skip
    return y
