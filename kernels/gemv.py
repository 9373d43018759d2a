"""The M == 1 weight-only GEMV for integer codes (int4 two per byte; int8 too): weights read
as 32-bit words, each code taken out of its word with a shift and a mask.

Why a kernel of its own (measured with bench/decode_sweep.py on an H200, K = N = 8192): the
tile GEMV of weight_only.py ran int4 at ~30 µs, 1.1 TB/s, a third of the DRAM floor. Its SASS
(``nvdisasm`` of the sm90 build) showed ~9 instructions per weight: the nibble interleave,
the int-to-float and zero-point steps, a per-element scale multiply, and the activation
converted per element (each thread owned one row, so nothing amortized the conversion).
Here, per code: one shift, one mask-and-or (2**23 + code as float32 bits), one subtract (of
2**23 plus the zero point: exact) and one FMA with the activation. No interleave: code i of
each word meets the activations at columns 8j + i (4j + i for int8), loaded strided. The
scale is applied once per row and group, after a sum over the tile (one group per K tile).
Each thread holds several rows of the same columns, so an activation is converted once per
tile per thread, not once per weight.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from aoq.kernels import splitk
from aoq.kernels._common import MAGIC, WeightFormat, backend_of
from aoq.kernels._launch import launch

GEMV_TILE = {"BLOCK_N": 128, "WORDS": 16, "num_warps": 4}
"""Rows per program, 32-bit words per row per loop step (16 words: 128 int4 codes, 64 bytes a
row), warps: the fastest of bench/decode_sweep.py's grid on an H200 (27.2 µs at K = N = 8192
against 30 µs for the tile GEMV). A rule, not a timing autotune (see splitk.py)."""
SERVES = (WeightFormat.UINT4,)
"""int8 codes stay on weight_only's tile GEMV: there they load the activations contiguous
and ran 22.6 µs against this kernel's 31 µs (its strided activation loads cost more than
the word trick saves when a word holds only four codes)."""


@triton.jit
def _gemv_words_kernel(
    x_ptr, w_ptr, s_ptr, z_ptr, b_ptr, y_ptr, p_ptr, c_ptr,
    N, K, G, K_SPLIT, stride_wn,
    INT4: tl.constexpr, GROUP_SIZE: tl.constexpr, PER_CHANNEL: tl.constexpr,
    HAS_BIAS: tl.constexpr, SPLIT_K: tl.constexpr, TAIL: tl.constexpr, BLOCK_N: tl.constexpr,
    WORDS: tl.constexpr,
    EVEN_K: tl.constexpr, TRIGGER: tl.constexpr = False,
):  # fmt: skip
    """y[n] = Σ_k (q[n, k] - z[n, g]) s[n, g] x[k] (+ b[n]); w_ptr holds uint32 words of codes
    (unsigned, so a shift is one logical shift), stride_wn in words. With SPLIT_K > 1:
    float32 partials, reduced by splitk.py (which then
    applies a per-channel scale and the bias). TRIGGER: splitk.trigger."""
    splitk.trigger(TRIGGER)
    CODES: tl.constexpr = 8 if INT4 else 4
    BITS: tl.constexpr = 4 if INT4 else 8
    MASK: tl.constexpr = 0xF if INT4 else 0xFF
    BLOCK_K: tl.constexpr = WORDS * CODES
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    nmask = offs_n < N
    offs_w = tl.arange(0, WORDS)
    rows = w_ptr + offs_n.to(tl.int64)[:, None] * stride_wn
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    k_lo = pid_k * K_SPLIT
    for k0 in range(k_lo, tl.minimum(K, k_lo + K_SPLIT), BLOCK_K):
        wk = k0 // CODES + offs_w
        words = tl.load(rows + wk[None, :], mask=nmask[:, None] & (wk < K // CODES)[None, :],
                        other=0)  # fmt: skip
        if INT4:
            g = k0 // GROUP_SIZE
            sidx = offs_n.to(tl.int64) * G + g
            zoff = tl.load(z_ptr + sidx, mask=nmask, other=0).to(tl.float32) + MAGIC
        else:
            zoff = tl.zeros((BLOCK_N,), dtype=tl.float32) + (MAGIC + 128.0)
        part = tl.zeros((BLOCK_N, WORDS), dtype=tl.float32)
        for i in tl.static_range(CODES):
            c = words >> (BITS * i)
            if not INT4:
                c = c ^ 0x80  # int8 two's complement -> q + 128
            # (c | 2**23 bits) & (2**23 bits | MASK): one LOP3 on NVIDIA
            c = (c | 0x4B000000) & (0x4B000000 | MASK)
            w = c.to(tl.float32, bitcast=True) - zoff[:, None]
            kx = k0 + CODES * offs_w + i
            if EVEN_K:  # whole tiles: no mask to compute per activation
                xi = tl.load(x_ptr + kx).to(tl.float32)
            else:
                xi = tl.load(x_ptr + kx, mask=kx < K, other=0).to(tl.float32)
            part += w * xi[None, :]
        t = tl.sum(part, axis=1)
        if PER_CHANNEL:
            acc += t
        else:
            g = k0 // GROUP_SIZE
            acc += t * tl.load(s_ptr + offs_n.to(tl.int64) * G + g, mask=nmask, other=0.0)
    if SPLIT_K > 1:
        tl.store(p_ptr + pid_k.to(tl.int64) * N + offs_n, acc, mask=nmask)
        if TAIL:
            splitk.finish(p_ptr, c_ptr, p_ptr, s_ptr, p_ptr, b_ptr, y_ptr, 1, N, N,
                          SPLIT_K, TAIL, BLOCK_N)  # fmt: skip
    else:
        if PER_CHANNEL:
            acc = acc * tl.load(s_ptr + offs_n, mask=nmask, other=0.0)
        if HAS_BIAS:
            acc = acc + tl.load(b_ptr + offs_n, mask=nmask, other=0.0).to(tl.float32)
        tl.store(y_ptr + offs_n, acc.to(y_ptr.dtype.element_ty), mask=nmask)


def gemv_words(
    x: torch.Tensor,
    qdata: torch.Tensor,
    scale: torch.Tensor,
    zero: torch.Tensor,
    bias: torch.Tensor | None,
    y: torch.Tensor,
    groups: int,
    wfmt: WeightFormat,
    per_channel: bool,
    split: int | None,
) -> bool:
    """Run the word GEMV if it serves this call (M == 1, int4 codes in whole aligned words,
    groups a multiple of the K tile; the kernel also takes int8, see SERVES); False leaves it
    to weight_only's tile GEMV."""
    m, k = x.shape
    if m != 1 or wfmt not in SERVES:
        return False
    int4 = wfmt is WeightFormat.UINT4
    codes = 8 if int4 else 4
    words = GEMV_TILE["WORDS"]
    gs = k // groups
    if k % codes or qdata.data_ptr() % 4 or not qdata.is_contiguous():
        return False
    if not per_channel:
        while words > 1 and gs % (words * codes):
            words //= 2
        if gs % (words * codes):
            return False
    n = qdata.shape[0]
    backend = backend_of(x.device)
    bn = GEMV_TILE["BLOCK_N"]
    n_prog = triton.cdiv(n, bn)
    block_k = words * codes
    p = splitk.plan(y, backend, n_prog, k, block_k, split, per_sm=16)
    w32 = qdata.view(torch.uint32)
    epi = dict(col_scale=scale if per_channel else None, bias=bias)
    launch(_gemv_words_kernel, (n_prog, p.split),
        x, w32, scale, zero, bias if bias is not None else scale, y, p.partials, p.counter_arg(),
        n, k, groups, p.k_split, w32.stride(0),
        INT4=int4, GROUP_SIZE=gs, PER_CHANNEL=per_channel, HAS_BIAS=bias is not None,
        SPLIT_K=p.split, TAIL=p.tail(splitk.epilogue_bits(**epi)), BLOCK_N=bn, WORDS=words,
        EVEN_K=k % p.k_split == 0 and p.k_split % block_k == 0,
        num_warps=GEMV_TILE["num_warps"], TRIGGER=p.chain,
    )  # fmt: skip
    p.finish(y, **epi)
    return True
