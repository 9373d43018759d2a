"""Stream-K for decode_mma's int4 tile: a wave's programs share the (column tile, K step)
work equally, a program's range crossing at most one column tile's end.

Why: split-K gives every program of a launch the same K range of one column tile, so the
programs a wave holds (``per_sm`` x SMs) are filled only where the column tiles times a
split land near that count. int4 at K 8192, N 28672 (a 70B-class MLP) has 448 column tiles of
64 steps: split 1 fills 448 of an H100's or H200's 792 slots (57 %; split 2 would need a
second wave). Here the T = tiles x steps steps are cut into P = slots contiguous ranges of
T / P steps (36.2 there): program p takes steps [p T / P, (p + 1) T / P) of the tiles laid
end to end, so it sums a part of one tile or the end of one and the start of the next, and
stores each part's float32 partial. Timed (bench/NOTES.md, session 38): 3 % faster at M 1 on
an H100, 10 % on an H200; where split-K already fills 85 % or more (every goal shape) it
gained nothing, and at M 16 its extra partials cost more (:data:`MIN_FILL`).

Partials: tile t's parts are the programs p_first(t) .. p_last(t) in order, part j of them
stored at slot j of a [PARTS, M, N] buffer (PARTS: the most parts any tile has), so that
splitk.reduce_partials sums them in program order, as it sums a split's: the same bits every
run. A tile with fewer parts has its unused slots zeroed by its last program, the one that
sums the tile's last step. The reduction is always the separate kernel (chained under PDL):
the fused one's counters count a fixed split.

The partition depends on the shape, BLOCK_K and P only (not on ROWS, the layout or the
orientation), so those keep one another's bits here as under split-K."""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl
from aoq.kernels import _common, splitk
from aoq.kernels._common import int4_rows
from aoq.kernels._launch import launch
from aoq.kernels.decode_mma_steps import _group_steps
from triton.language.extra.cuda import gdc_wait

from aoq.backends import Backend

MIN_FILL = 0.7
"""Stream-K serves a launch whose split-K would fill less than this share of the wave. H100,
int4 decode alone on tiled codes (``python -m bench.decode_rows --formats int4 --shapes ...``,
session 38), split-K against stream-K, µs: 8192 x 28672 (57 % filled) 50.3-50.9 against
48.9-49.0 at M 1 and 55.8-56.5 against 55.2 at M 16 (on row-major codes 75 against 67 and
79.5 against 73); 4096 x 14336 (85 %) and 4096 x 11008 (87 %) within 0.1 either way (row-major
codes at M 16: 19.2-19.7 against 20.7-21.3 and 15.5 against 17.8, the partials' cost). End to
end (bench 264c57, stream-K from 85 % at M 1) int4 at 4096 x 14336 M 1 took 15.9 µs against
15.2 in cf62f7. H200: 8192 x 28672 46.5-47.0 against 41.6-42.7 at M 1, 54.7-54.8 against
52.5-53.5 at M 16. So the line is drawn between 57 and 85 %."""


@triton.jit
def _first_part(t, S, P, T):
    """The first program whose range holds tile ``t``'s first step (step t S): the largest p
    with p T // P <= t S, i.e. ceil((t S + 1) P / T) - 1."""
    return (((t * S + 1).to(tl.int64) * P + T - 1) // T - 1).to(tl.int32)


@triton.jit
def _decode_mma_sk_kernel(
    x_ptr, w_ptr, s_ptr, z_ptr, p_ptr, M, N, K, stride_sn, stride_sg, stride_xm, stride_wn, P,
    WFMT: tl.constexpr, GROUP_SIZE: tl.constexpr, GROUPS: tl.constexpr, PARTS: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, ASM: tl.constexpr, UPCAST: tl.constexpr,
    WT: tl.constexpr = False, PREF: tl.constexpr = False, ROWS: tl.constexpr = 16,
    LOOP_STAGES: tl.constexpr = 0, ZW: tl.constexpr = False, TILED: tl.constexpr = False,
    PDL: tl.constexpr = False, TRIGGER: tl.constexpr = False, TILE_B: tl.constexpr = 64,
    TILE_R: tl.constexpr = 64,
):  # fmt: skip
    """Program p: steps [p T / P, (p + 1) T / P) of the T = cdiv(N, BLOCK_N) x K / BLOCK_K
    (column tile, K step) pairs, tile-major; each tile's part a float32 partial [ROWS,
    BLOCK_N] at its slot (module docstring). The loop is decode_mma's (_group_steps): int4
    (WFMT 1) only, so far."""
    tl.static_assert(WFMT == 1, "stream-K: int4 (UINT4) weights")
    splitk.trigger(TRIGGER)
    pid = tl.program_id(0)
    S = K // BLOCK_K
    T = tl.cdiv(N, BLOCK_N) * S  # steps: int32 (the products below in int64)
    start = (pid.to(tl.int64) * T // P).to(tl.int32)
    end = ((pid + 1).to(tl.int64) * T // P).to(tl.int32)
    offs_m = tl.arange(0, ROWS)
    mmask = offs_m < M
    xrows = x_ptr + offs_m.to(tl.int64)[:, None] * stride_xm
    xz = tl.zeros((ROWS, 1), tl.int32)
    if PDL:
        gdc_wait()
    for seg in tl.static_range(2):  # a range ends inside its first tile or the next (T / P <= S)
        t = start // S + seg
        lo = tl.maximum(start, t * S)
        hi = tl.minimum(end, t * S + S)
        if lo < hi:
            offs_n = t * BLOCK_N + tl.arange(0, BLOCK_N)
            nmask = offs_n < N
            wrows = (
                w_ptr
                + int4_rows(offs_n, stride_wn, K, TILED, TILE_B, TILE_R)[:, None]
                + tl.arange(0, GROUP_SIZE // 2)[None, :]
            )
            srow = offs_n.to(tl.int64) * stride_sn
            acc = tl.zeros((ROWS, BLOCK_N), dtype=tl.float32)
            acc_t = tl.zeros((BLOCK_N, ROWS), dtype=tl.float32)
            k_lo = ((lo - t * S) * BLOCK_K).to(tl.int32)
            k_hi = ((hi - t * S) * BLOCK_K).to(tl.int32)
            acc, acc_t = _group_steps(
                acc, acc_t, xrows, wrows, s_ptr, z_ptr, srow, nmask, mmask, xz, xrows, k_lo,
                k_hi, stride_sg, WFMT, GROUP_SIZE, GROUPS, False, False, BLOCK_K, ASM, UPCAST,
                WT, PREF, False, False, LOOP_STAGES, ZW, TILED, False, TILE_B, TILE_R,
            )  # fmt: skip
            if WT:
                acc = tl.trans(acc_t)
            j = (pid - _first_part(t, S, P, T)).to(tl.int64)
            rows = offs_m.to(tl.int64)[:, None] * N + offs_n[None, :]
            keep = mmask[:, None] & nmask[None, :]
            tl.store(p_ptr + j * M * N + rows, acc, mask=keep)
            if hi == t * S + S:  # the tile's last part: zero the slots no program fills
                for jj in range(j + 1, PARTS):
                    tl.store(p_ptr + jj * M * N + rows, tl.zeros_like(acc), mask=keep)


@functools.lru_cache(maxsize=1024)
def parts(n_tiles: int, steps: int, programs: int) -> int:
    """The most programs any column tile's steps are shared by (the slots of the partials),
    counted from the ranges themselves (the kernel's :func:`_first_part` is their closed
    form; tests check one against the other)."""
    t_steps = n_tiles * steps
    count = [0] * n_tiles
    for p in range(programs):
        lo, hi = p * t_steps // programs, (p + 1) * t_steps // programs
        if hi > lo:
            for t in range(lo // steps, (hi - 1) // steps + 1):
                count[t] += 1
    return max(count)


def programs(n_tiles: int, steps: int, split: int, slots: int, min_steps: int) -> int | None:
    """Stream-K's program count for a launch whose split-K runs ``n_tiles`` x ``split``
    programs of a wave of ``slots``: the wave itself, each program at least ``min_steps``
    steps (splitk.MIN_K_PER_SPLIT) and at most a tile's ``steps``, or None where split-K
    already fills :data:`MIN_FILL` of the wave or stream-K would run no more programs."""
    if n_tiles * split >= MIN_FILL * slots:
        return None
    p = min(slots, n_tiles * steps // max(min_steps, 1))
    if p <= n_tiles * split or triton.cdiv(n_tiles * steps, p) > steps:
        return None
    return p


@functools.lru_cache(maxsize=1024)
def wave_programs(
    sk: int | bool,
    backend: Backend,
    device: torch.device,
    n_tiles: int,
    k: int,
    bk: int,
    per_sm: int,
    exact: bool,
) -> int | None:
    """A launch's stream-K programs: ``sk`` itself where a test or probe forces a count (an
    int, not True), :func:`programs` for a TILE's ``SK`` on CUDA (the wave's slots from the
    SM count; the split it would replace as splitk.split_k picks it), else None. Cached:
    decode_mma's host time per call."""
    if sk is not True:
        return int(sk) or None
    if backend is not Backend.CUDA:
        return None
    split = splitk.split_k(backend, device, n_tiles, k, bk, per_sm, exact=exact)
    index = device.index if device.index is not None else torch.cuda.current_device()
    slots = per_sm * splitk.sm_count(index)
    min_steps = splitk.MIN_K_PER_SPLIT // bk
    return programs(n_tiles, k // bk, split, slots, min_steps)


def partials(n_parts: int, m: int, n: int, device: torch.device) -> torch.Tensor:
    """The [PARTS, M, N] float32 slots, uninitialised: the kernel writes every one (tests
    fill them with NaN to prove it)."""
    return torch.empty((n_parts, m, n), dtype=torch.float32, device=device)


SK_KEYS = ("WT", "PREF", "ROWS", "LOOP_STAGES", "ZW", "TILED", "TILE_B", "TILE_R",
           "num_warps", "num_stages", "maxnreg")  # fmt: skip
"""decode_mma's tile keys the stream-K kernel takes (KINT and the split's keys do not apply)."""


def decode_mma_sk(
    x: torch.Tensor,
    qdata: torch.Tensor,
    scale: torch.Tensor,
    zero: torch.Tensor,
    bias: torch.Tensor | None,
    y: torch.Tensor,
    n_programs: int,
    cfg: dict,
    gs: int,
    bn: int,
    bk: int,
    asm: bool,
    pdl: bool,
) -> None:
    """int4 (UINT4) y = x W^T (+ bias) on ``n_programs`` stream-K programs, then the
    reduction kernel over the partials' slots (chained where the GPU has PDL). ``cfg``:
    decode_mma's resolved tile (:data:`SK_KEYS` of it apply)."""
    m, k = x.shape
    n = qdata.shape[0]
    n_parts = parts(triton.cdiv(n, bn), k // bk, n_programs)
    part = partials(n_parts, m, n, y.device)
    chain = splitk.CHAIN and _common.pdl(y.device)
    launch(_decode_mma_sk_kernel, (n_programs,),
        x, qdata, scale, zero, part, m, n, k, scale.stride(0), scale.stride(1), x.stride(0),
        qdata.stride(0), n_programs,
        WFMT=1, GROUP_SIZE=gs, GROUPS=bk // gs, PARTS=n_parts, BLOCK_N=bn, BLOCK_K=bk, ASM=asm,
        UPCAST=_common.INTERPRET, PDL=pdl, launch_pdl=pdl, TRIGGER=chain,
        **{key: cfg[key] for key in SK_KEYS if key in cfg},
    )  # fmt: skip
    splitk.reduce_partials(part, y, bias=bias, chained=chain)
