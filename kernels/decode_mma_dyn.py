"""A probe of decode_mma's int4 tile with its work handed out at run time: persistent
programs take (column tile, K chunk) units from an atomic counter until none is left.

Why (bench/NOTES.md, session 39): under ncu the shipped split-K tile's SMs hold no warp of it
for a fifth of the kernel (its wave's uneven end), while DRAM runs near its copy rate in
between. A static partition (split-K exact to the wave, stream-K) gives every program the
same steps, but not the same time: programs whose loads come back later finish later. Here a
program that finishes a unit early takes the next one, so the SMs stop together.

Each unit is CS K steps of one column tile; its float32 partial goes to slot c (the chunk) of
a [C, M, N] buffer, so splitk.reduce_partials sums every output's chunks in chunk order: the
same bits whichever program ran which unit (not split-K's bits: the chunks are the split).
A program takes its next ticket before it runs the current unit, so the atomic's round trip
overlaps the unit. The last program to finish (a second counter counts them) sets both
counters back to zero, so the next launch finds them so.

The counters are one pair per device (:func:`ticket`): launches of this kernel on one device
must not overlap (one stream, or graphs replayed one at a time), which the bench's probes
keep to; served linears would need one pair per stream and per captured graph. int4 (UINT4)
only, as decode_mma_sk."""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from aoq.kernels import _common, splitk
from aoq.kernels._launch import launch
from aoq.kernels.decode_mma_sk import SK_KEYS, tile_range
from triton.language.extra.cuda import gdc_wait


@triton.jit
def _decode_mma_dyn_kernel(
    x_ptr, w_ptr, s_ptr, z_ptr, p_ptr, tk_ptr, M, N, K, stride_sn, stride_sg, stride_xm,
    stride_wn,
    WFMT: tl.constexpr, GROUP_SIZE: tl.constexpr, GROUPS: tl.constexpr, CS: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, ASM: tl.constexpr, UPCAST: tl.constexpr,
    WT: tl.constexpr = False, PREF: tl.constexpr = False, ROWS: tl.constexpr = 16,
    LOOP_STAGES: tl.constexpr = 0, ZW: tl.constexpr = False, TILED: tl.constexpr = False,
    PDL: tl.constexpr = False, TRIGGER: tl.constexpr = False, TILE_B: tl.constexpr = 64,
    TILE_R: tl.constexpr = 64,
):  # fmt: skip
    """Units u = t C + c (column tile t, chunk c of C = cdiv(K / BLOCK_K, CS)) from the
    counter at tk_ptr[0]; unit u's partial [ROWS, BLOCK_N] at slot c (module docstring)."""
    tl.static_assert(WFMT == 1, "dynamic units: int4 (UINT4) weights")
    splitk.trigger(TRIGGER)
    S = K // BLOCK_K
    C = tl.cdiv(S, CS)
    U = tl.cdiv(N, BLOCK_N) * C
    offs_m = tl.arange(0, ROWS)
    mmask = offs_m < M
    xrows = x_ptr + offs_m.to(tl.int64)[:, None] * stride_xm
    if PDL:
        gdc_wait()
    u = tl.atomic_add(tk_ptr, 1)
    while u < U:
        u_next = tl.atomic_add(tk_ptr, 1)  # the next unit's ticket, while this one runs
        t = u // C
        c = u - t * C
        k_lo = c * (CS * BLOCK_K)
        k_hi = tl.minimum(K, k_lo + CS * BLOCK_K)
        acc, offs_n, nmask = tile_range(
            xrows, w_ptr, s_ptr, z_ptr, t, k_lo, k_hi, mmask, N, K, stride_sn, stride_sg,
            stride_wn, WFMT, GROUP_SIZE, GROUPS, BLOCK_N, BLOCK_K, ASM, UPCAST, WT, PREF, ROWS,
            LOOP_STAGES, ZW, TILED, TILE_B, TILE_R,
        )  # fmt: skip
        rows = offs_m.to(tl.int64)[:, None] * N + offs_n[None, :]
        tl.store(p_ptr + c.to(tl.int64) * M * N + rows, acc, mask=mmask[:, None] & nmask[None, :])
        u = u_next
    if tl.atomic_add(tk_ptr + 1, 1) == tl.num_programs(0) - 1:  # the last program out
        tl.atomic_xchg(tk_ptr, 0)
        tl.atomic_xchg(tk_ptr + 1, 0)


_TICKETS: dict[tuple[str, int], torch.Tensor] = {}


def ticket(device: torch.device) -> torch.Tensor:
    """The device's pair of zeroed int32 counters (module docstring: one launch at a time);
    made on the first eager call, so that a graph captured later holds no allocation."""
    key = (device.type, device.index if device.index is not None else -1)
    t = _TICKETS.get(key)
    if t is None:
        t = _TICKETS[key] = torch.zeros(2, dtype=torch.int32, device=device)
    return t


def decode_mma_dyn(
    x: torch.Tensor,
    qdata: torch.Tensor,
    scale: torch.Tensor,
    zero: torch.Tensor,
    bias: torch.Tensor | None,
    y: torch.Tensor,
    n_programs: int,
    chunk_steps: int,
    cfg: dict,
    gs: int,
    bn: int,
    bk: int,
    asm: bool,
    pdl: bool,
) -> None:
    """int4 (UINT4) y = x W^T (+ bias) on ``n_programs`` persistent programs over units of
    ``chunk_steps`` K steps, then the reduction kernel over the chunks' slots (chained where
    the GPU has PDL). ``cfg``: decode_mma's resolved tile (decode_mma_sk.SK_KEYS of it)."""
    m, k = x.shape
    n = qdata.shape[0]
    chunks = triton.cdiv(k // bk, chunk_steps)
    part = torch.empty((chunks, m, n), dtype=torch.float32, device=y.device)
    chain = splitk.CHAIN and _common.pdl(y.device)
    launch(_decode_mma_dyn_kernel, (n_programs,),
        x, qdata, scale, zero, part, ticket(y.device), m, n, k, scale.stride(0),
        scale.stride(1), x.stride(0), qdata.stride(0),
        WFMT=1, GROUP_SIZE=gs, GROUPS=bk // gs, CS=chunk_steps, BLOCK_N=bn, BLOCK_K=bk,
        ASM=asm, UPCAST=_common.INTERPRET, PDL=pdl, launch_pdl=pdl, TRIGGER=chain,
        **{key: cfg[key] for key in SK_KEYS if key in cfg},
    )  # fmt: skip
    splitk.reduce_partials(part, y, bias=bias, chained=chain)
