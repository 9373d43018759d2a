"""Split-K for the decode kernels: how far to split K, and the deterministic reduction.

Why: at decode (M <= 16) a linear is one pass over the weights, its speed the weight bytes
in flight per SM. Tiling N alone gives N / BLOCK_N programs (256 for N = 8192 at BLOCK_N =
32: two per SM of an H100/H200), too few loads to cover DRAM latency. SPLIT_K ranges of K
multiply the programs; each writes a float32 partial [M, N], a tiny kernel sums them.

Why not atomics: ``atomic_add`` of float partials makes the bits depend on arrival order (two
runs, or a save/load round trip, would differ); the reduction adds them in split order.
The split itself is chosen by :func:`split_k` from the shape and the device's SM count, never
by timing, for the same reason (a timing autotuner picks different reduction orders in
different processes).

The reduction's epilogue applies the main kernel's: channel scale, row scale, bias, cast.

Eager calls fuse the reduction into the main kernel (:func:`finish`): each program stores its
partial, takes a ticket from a per-column-tile counter (an atomic add after a barrier), and
the program that draws the last ticket sums the partials in the same split order (the same
bits as the separate kernel) and resets the counter to zero. One launch instead of two: a
launch costs ~4 us of host time, more than the whole reduction kernel's device time. The
counters live per (device, stream) (:func:`counters`): kernels on one stream run one after
the other, so each finds its counters at zero, and every kernel leaves them at zero. Under
CUDA-graph capture (a graph may be replayed on any stream, or on two at once), past
FUSED_MAX_M rows and with ``AOQ_FUSED_SPLITK=0`` the separate reduction kernel runs instead.

Where the GPU has programmatic dependent launch (sm90 and later, _common.pdl) that reduction
kernel is chained to the split kernel (:attr:`Plan.chain`): the split kernel lets its
dependents launch as it starts (:func:`trigger`), and the reduction kernel, launched with
PDL, waits (``griddepcontrol.wait``) for the split kernel's grid to finish and its partials
to be visible before it reads anything. Its launch and placement then overlap the split
kernel's tail instead of following it: 0.3-1.2 us of 18-30 at decode on an H100 (bench/NOTES.md,
session 22), the same bits. ``AOQ_SPLITK_PDL=0`` launches it plainly.
"""

from __future__ import annotations

import functools
import os
from typing import NamedTuple

import torch
import triton
import triton.language as tl
from aoq.kernels._common import pdl
from aoq.kernels._launch import launch
from torch.utils._python_dispatch import _disable_current_modes
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait
from triton.runtime import driver

from aoq.backends import Backend

PROGRAMS_PER_SM = 8
"""Enough resident programs (4 warps each) to keep ~32 KB of weight loads in flight per SM."""
MIN_K_PER_SPLIT = 512
"""A split shorter than this spends more on its partial and prologue than it saves."""
FUSED = os.environ.get("AOQ_FUSED_SPLITK", "1") != "0"
"""Off: every split launch is followed by the reduction kernel (A/B runs, bisecting)."""
FUSED_MAX_M = int(os.environ.get("AOQ_FUSED_MAX_M", "8"))
"""Eager calls fuse the reduction up to this many rows (graph replays never do): a column
tile's last program sums all of its rows alone. H200, int8wo / fp8wo at 4096^2 (session 47):
at 1, 2, 4 rows the fused launch took 5.2-6.7 us a call against two launches' 7.9-16.4
(bench.host_profile --m); at 16-128 rows two launches took 3-33 us less in 17 of 18 eager
weight-only bench cells (runs d445eb / 23d2f6; int8wo 4096^2 M 128 56.0 -> 22.7 us).
``AOQ_FUSED_MAX_M`` sets it (A/B runs)."""
CHAIN = os.environ.get("AOQ_SPLITK_PDL", "1") != "0"
"""Off: the reduction kernel is launched plainly, never chained (A/B runs, bisecting)."""
MIN_COUNTERS = 4096
"""Counters allocated per stream at least (16 KB): N / BLOCK_N column tiles of one launch."""

# TAIL bits: what the epilogue applies after the sum (one constexpr for the kernels)
FUSE = 1
BIAS_INT = 2
COL_SCALE = 4
ROW_SCALE = 8
STATIC_ROW = 16
BIAS = 32
STATIC_COL = 64
_BIAS_INT, _COL_SCALE, _ROW_SCALE = (
    tl.constexpr(BIAS_INT),
    tl.constexpr(COL_SCALE),
    tl.constexpr(ROW_SCALE),
)
_STATIC_ROW, _BIAS, _STATIC_COL = (
    tl.constexpr(STATIC_ROW),
    tl.constexpr(BIAS),
    tl.constexpr(STATIC_COL),
)


@functools.cache
def sm_count(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def split_k(
    backend: Backend,
    device: torch.device,
    n_programs: int,
    k: int,
    k_align: int,
    per_sm: int = PROGRAMS_PER_SM,
    max_split: int = 32,
    exact: bool = False,
) -> int:
    """How many K ranges: enough that ``n_programs * split`` fills every SM ``per_sm``
    times (GEMVs, light programs, want more than MMA tiles), each range at least
    MIN_K_PER_SPLIT long and a multiple of ``k_align`` (a BLOCK_K, or a quantization group
    for kernels that flush per group). A power of two, or with ``exact`` (``per_sm`` then
    the programs an SM holds at once) the most that fit in one wave; 1 under the interpreter
    (it runs programs one by one; tests force a split through the launchers' ``split``)."""
    if backend is Backend.INTERPRET:
        return 1
    sms = sm_count(device.index if device.index is not None else torch.cuda.current_device())
    want = max(1, (per_sm * sms) // max(n_programs, 1))
    if exact:
        return max(1, min(want, max_split, k // max(MIN_K_PER_SPLIT, k_align)))
    split = 1
    while split * 2 <= min(want, max_split) and k // (split * 2) >= max(MIN_K_PER_SPLIT, k_align):
        split *= 2
    return split


class Plan(NamedTuple):
    """How a decode launch splits K: ``split`` ranges of ``k_split`` (a multiple of the
    alignment), where the partials go (``partials`` is ``y`` itself when split == 1), and
    the zeroed ``counters`` of a fused reduction (None: the reduction kernel runs). ``chain``:
    the reduction kernel runs chained to the split kernel (module docstring): the split
    kernel's TRIGGER constexpr."""

    split: int
    k_split: int
    partials: torch.Tensor
    counters: torch.Tensor | None
    chain: bool = False

    def counter_arg(self) -> torch.Tensor:
        """The kernel's counters argument (any tensor when the reduction is not fused)."""
        return self.counters if self.counters is not None else self.partials

    def tail(self, epilogue: int) -> int:
        """The kernel's TAIL constexpr: ``epilogue`` (:func:`epilogue_bits`) with FUSE when
        the last program of each column tile reduces, else 0."""
        return epilogue | FUSE if self.counters is not None else 0

    def finish(
        self,
        y: torch.Tensor,
        col_scale: torch.Tensor | None = None,
        row_scale: torch.Tensor | None = None,
        bias: torch.Tensor | None = None,
        bias_int: torch.Tensor | None = None,
    ) -> None:
        """After the launch: the reduction kernel, if the split was not fused."""
        if self.split > 1 and self.counters is None:
            reduce_partials(self.partials, y, col_scale, row_scale, bias, bias_int, self.chain)


def plan(
    y: torch.Tensor,
    backend: Backend,
    n_programs: int,
    k: int,
    k_align: int,
    forced: int | None = None,
    per_sm: int = PROGRAMS_PER_SM,
    part_dtype: torch.dtype = torch.float32,
    exact: bool = False,
    fused: bool = True,
) -> Plan:
    """The split for an [M, N] output ``y`` (``forced``: a test's choice; ``per_sm`` and
    ``exact``: :func:`split_k`), its range length, a [split, M, N] partials buffer when
    split > 1, and counters for ``n_programs`` column tiles when the reduction is fused
    (``fused`` False: never, for kernels whose column tiles do not hold every row; nor past
    FUSED_MAX_M rows)."""
    split, k_split = _ranges(backend, y.device, n_programs, k, k_align, forced, per_sm, exact)
    m, n = y.shape
    if split == 1:
        return Plan(1, k_split, y, None)
    part = torch.empty((split, m, n), dtype=part_dtype, device=y.device)
    cnt = counters(y.device, n_programs) if fused and m <= FUSED_MAX_M else None
    return Plan(split, k_split, part, cnt, CHAIN and cnt is None and pdl(y.device))


def epilogue_bits(
    col_scale: torch.Tensor | None = None,
    row_scale: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    bias_int: torch.Tensor | None = None,
) -> int:
    """The TAIL bits of an epilogue: a column scale [N] or [] (STATIC_COL), a row scale
    [M] or [] (STATIC_ROW), a float bias [N], an int32 bias [N] added to int32 partials."""
    bits = 0
    if col_scale is not None:
        bits |= COL_SCALE | (STATIC_COL if col_scale.dim() == 0 else 0)
    if row_scale is not None:
        bits |= ROW_SCALE | (STATIC_ROW if row_scale.dim() == 0 else 0)
    if bias is not None:
        bits |= BIAS
    if bias_int is not None:
        bits |= BIAS_INT
    return bits


_COUNTERS: dict[tuple[str, int, int], torch.Tensor] = {}
"""(device type, device index, stream) -> that stream's zeroed counters."""


def counters(device: torch.device, n: int) -> torch.Tensor | None:
    """At least ``n`` zeroed int32 counters for the current stream of ``device``, or None
    (no fusion: turned off, or a CUDA graph is being captured)."""
    if not FUSED:
        return None
    if device.type != "cuda":  # the interpreter: programs run one by one
        return counters_at(device, -1, 0, n)
    if torch.cuda.is_current_stream_capturing():
        return None
    index = device.index if device.index is not None else torch.cuda.current_device()
    return counters_at(device, index, driver.active.get_current_stream(index), n)


def counters_at(device: torch.device, index: int, stream: int, n: int) -> torch.Tensor:
    """The counters of ``stream``, grown to ``n`` if needed (the old ones are freed to torch's
    allocator, stream-ordered: kernels queued on them finish first)."""
    key = (device.type, index, stream)
    t = _COUNTERS.get(key)
    if t is None or t.numel() < n:
        with _disable_current_modes():  # not part of a call plans.py records
            t = torch.zeros(max(n, MIN_COUNTERS), dtype=torch.int32, device=device)
        _COUNTERS[key] = t
    return t


def is_counters(t: torch.Tensor) -> bool:
    return any(t is c for c in _COUNTERS.values())


@functools.lru_cache(maxsize=4096)
def _ranges(
    backend: Backend,
    device: torch.device,
    n_programs: int,
    k: int,
    k_align: int,
    forced: int | None,
    per_sm: int,
    exact: bool,
) -> tuple[int, int]:
    """(split, k_split), from the shape alone: computed once per shape (host time per call)."""
    split = forced or split_k(backend, device, n_programs, k, k_align, per_sm, exact=exact)
    k_split = k_per_split(k, split, k_align)
    return triton.cdiv(k, k_split), k_split


def splits(
    backend: Backend, device: torch.device, n_programs: int, k: int, k_align: int, per_sm: int
) -> int:
    """The split :func:`plan` takes for this shape when no test forces one (cached)."""
    return _ranges(backend, device, n_programs, k, k_align, None, per_sm, False)[0]


def k_step(k: int, align: int, want: int) -> int:
    """A decode loop's K step: the largest power-of-two multiple of ``align`` (a quantization
    group, or 16) up to ``want`` that divides K (no step runs past K: only N is masked)."""
    step = align
    while step * 2 <= want and k % (step * 2) == 0:
        step *= 2
    return step


def k_per_split(k: int, split: int, k_align: int) -> int:
    """The length of each K range: K / split rounded up to a multiple of ``k_align``."""
    return triton.cdiv(triton.cdiv(k, split), k_align) * k_align


@triton.jit
def trigger(TRIGGER: tl.constexpr):
    """A split kernel's first statement: with TRIGGER (its plan's ``chain``), let the reduction
    kernel launched after it with programmatic dependent launch start now."""
    if TRIGGER:
        gdc_launch_dependents()


@triton.jit
def k_range(pid_k, K, K_SPLIT, SPLIT_K: tl.constexpr, NONEMPTY: tl.constexpr = False):
    """(k_lo, k_hi): program ``pid_k``'s K range; all of K when SPLIT_K == 1 (prefill keeps
    the plain 0..K loop). NONEMPTY (callers refuse K == 0): it holds a step, as :func:`plan`'s
    do: no zero-trip path, with which ptxas serialized wt_rows' wgmma (C7515; NOTES s. 56)."""
    k_lo = 0
    k_hi = K
    if SPLIT_K > 1:
        k_lo = pid_k * K_SPLIT
        k_hi = tl.minimum(K, k_lo + K_SPLIT)
    if NONEMPTY:
        tl.assume(k_lo < k_hi)
    return k_lo, k_hi


@triton.jit
def first_step(w_cols, k_lo, K, nmask, BLOCK_K: tl.constexpr):
    """A K range's first [BLOCK_K, BLOCK_N] weights through the K-major column pointers
    ``w_cols`` [1, BLOCK_N] (masked past K and N), with the step's offs_k and kmask: what a
    decode kernel launched with PDL loads before its wait (AHEAD)."""
    offs_k = k_lo + tl.arange(0, BLOCK_K)
    kmask = offs_k < K
    wt = tl.load(w_cols + offs_k[:, None], mask=kmask[:, None] & nmask[None, :], other=0.0)
    return wt, offs_k, kmask


@triton.jit
def _reduce_row(
    part_ptr, bi_ptr, cs_ptr, rs_ptr, b_ptr, y_ptr, m, M, N, stride_ym, offs_n,
    SPLIT_K: tl.constexpr, TAIL: tl.constexpr, CACHE: tl.constexpr,
):  # fmt: skip
    """y[m, n] = float(Σ_s part[s, m, n] + bi[n]) · cs[n] · rs[m] + b[n] for the columns
    ``offs_n``, summed in split order; int32 partials (exact integer accumulators) are
    summed as integers. ``CACHE``: the partials' load cache modifier."""
    nmask = offs_n < N
    row = offs_n.to(tl.int64) + m * N  # (m < M <= 256 rows: int32 offsets hold)
    acc = tl.load(part_ptr + row, mask=nmask, other=0, cache_modifier=CACHE)
    for s in tl.static_range(1, SPLIT_K):
        acc += tl.load(part_ptr + s * M * N + row, mask=nmask, other=0, cache_modifier=CACHE)
    if _BIAS_INT & TAIL:
        acc += tl.load(bi_ptr + offs_n, mask=nmask, other=0)
    acc = acc.to(tl.float32)
    if _COL_SCALE & TAIL and _STATIC_COL & TAIL:
        acc = acc * tl.load(cs_ptr)
    elif _COL_SCALE & TAIL:
        acc = acc * tl.load(cs_ptr + offs_n, mask=nmask, other=0.0)
    if _ROW_SCALE & TAIL:
        acc = acc * tl.load(rs_ptr if _STATIC_ROW & TAIL else rs_ptr + m)
    if _BIAS & TAIL:
        acc = acc + tl.load(b_ptr + offs_n, mask=nmask, other=0.0).to(tl.float32)
    y = y_ptr + m * stride_ym + offs_n.to(tl.int64)
    tl.store(y, acc.to(y_ptr.dtype.element_ty), mask=nmask)


@triton.jit
def _reduce_kernel(
    part_ptr, bi_ptr, cs_ptr, rs_ptr, b_ptr, y_ptr, M, N, stride_ym,
    SPLIT_K: tl.constexpr, TAIL: tl.constexpr, BLOCK_N: tl.constexpr, PDL: tl.constexpr = False,
):  # fmt: skip
    """Program (n, m): row m of y over BLOCK_N columns (:func:`_reduce_row`). PDL: launched
    with programmatic dependent launch; waits for the split kernel before reading."""
    if PDL:
        gdc_wait()
    offs_n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    _reduce_row(part_ptr, bi_ptr, cs_ptr, rs_ptr, b_ptr, y_ptr, tl.program_id(1), M, N,
                stride_ym, offs_n, SPLIT_K, TAIL, "")  # fmt: skip


@triton.jit(noinline=True)
def finish(
    part_ptr, cnt_ptr, bi_ptr, cs_ptr, rs_ptr, b_ptr, y_ptr, M, N, stride_ym,
    SPLIT_K: tl.constexpr, TAIL: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    """The fused reduction, called by every program (n, ., s) of a split kernel after it
    stored its partial: the last of column tile n's SPLIT_K programs to arrive writes rows
    0..M-1 of y over the tile's BLOCK_N columns and resets the tile's counter.

    The barrier orders the program's partial stores before its ticket (an acq_rel atomic at
    GPU scope: a release of every store the barrier ordered before it, and for the last
    program an acquire of the other programs' stores); the partials are then read from L2
    (``.cg``), never from an SM's L1. Not inlined: inlined, it kept one more value alive
    across the caller's main loop and ptxas spilled it (4-12 bytes on four NVIDIA targets)."""
    pid_n = tl.program_id(0)
    tl.debug_barrier()
    ticket = tl.atomic_add(cnt_ptr + pid_n, 1, sem="acq_rel", scope="gpu")
    if ticket == SPLIT_K - 1:
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        for m in range(0, M):
            _reduce_row(part_ptr, bi_ptr, cs_ptr, rs_ptr, b_ptr, y_ptr, m, M, N, stride_ym,
                        offs_n, SPLIT_K, TAIL, ".cg")  # fmt: skip
        tl.atomic_xchg(cnt_ptr + pid_n, 0, sem="relaxed", scope="gpu")


def reduce_partials(
    partials: torch.Tensor,
    y: torch.Tensor,
    col_scale: torch.Tensor | None = None,
    row_scale: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    bias_int: torch.Tensor | None = None,
    chained: bool = False,
) -> torch.Tensor:
    """Sum ``partials`` [SPLIT_K, M, N] (float32, or int32 accumulators plus ``bias_int``
    [N]) into ``y`` [M, N] in split order, then scale by ``col_scale`` [N] or [] and
    ``row_scale`` [M] or [] and add ``bias`` [N]. ``chained``: launched with programmatic
    dependent launch after a split kernel that triggered it (:attr:`Plan.chain`)."""
    split, m, n = partials.shape

    def opt(t: torch.Tensor | None) -> torch.Tensor:
        return t if t is not None else partials

    block_n = 512
    launch(_reduce_kernel, (triton.cdiv(n, block_n), m),
        partials, opt(bias_int), opt(col_scale), opt(row_scale), opt(bias), y, m, n, y.stride(0),
        SPLIT_K=split, TAIL=epilogue_bits(col_scale, row_scale, bias, bias_int), BLOCK_N=block_n,
        PDL=chained, launch_pdl=chained, num_warps=4,
    )  # fmt: skip
    return y
