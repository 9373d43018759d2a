"""Split-K for the decode kernels: how far to split K, and the deterministic reduction.

Why: at decode (M <= 16) a linear is one pass over the weights, so its speed is the number of
weight bytes in flight per multiprocessor. Tiling N alone gives N / BLOCK_N programs: 256 for
N = 8192 at BLOCK_N = 32, two per SM of an H100/H200 (132 SMs), far too few loads in flight to
cover DRAM latency. Splitting K into SPLIT_K ranges multiplies the programs by SPLIT_K; each
writes a float32 partial [M, N] and a second, tiny kernel sums the partials.

Why not atomics: ``atomic_add`` of float partials makes the result depend on arrival order, so
two runs (or a save/load round trip in a fresh process) would differ in the last bits. The
reduction kernel adds partials in split order 0, 1, ..., SPLIT_K-1: the same bits every run.
The split itself is chosen by :func:`split_k` from the shape and the device's SM count, never
by timing, for the same reason (a timing autotuner picks different reduction orders in
different processes).

The reduction's epilogue applies what the main kernel would have: a per-output-channel scale,
a per-row activation scale, the bias, the cast to the output dtype.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import torch
import triton
import triton.language as tl
from aoq.kernels._launch import launch

from aoq.backends import Backend

PROGRAMS_PER_SM = 8
"""Enough resident programs (4 warps each) to keep ~32 KB of weight loads in flight per SM."""
MIN_K_PER_SPLIT = 512
"""A split shorter than this spends more on its partial and prologue than it saves."""


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
) -> int:
    """How many K ranges: enough that ``n_programs * split`` fills every SM ``per_sm``
    times (GEMVs, light programs, want more than MMA tiles), each range at least
    MIN_K_PER_SPLIT long and a multiple of ``k_align`` (a BLOCK_K, or a quantization group
    for kernels that flush per group). A power of two; 1 under the interpreter (it runs
    programs one by one; tests force a split through the launchers' ``split``)."""
    if backend is Backend.INTERPRET:
        return 1
    sms = sm_count(device.index if device.index is not None else torch.cuda.current_device())
    want = max(1, (per_sm * sms) // max(n_programs, 1))
    split = 1
    while split * 2 <= min(want, max_split) and k // (split * 2) >= max(MIN_K_PER_SPLIT, k_align):
        split *= 2
    return split


class Plan(NamedTuple):
    """How a decode launch splits K: ``split`` ranges of ``k_split`` (a multiple of the
    alignment), and where the partials go (``partials`` is ``y`` itself when split == 1)."""

    split: int
    k_split: int
    partials: torch.Tensor


def plan(
    y: torch.Tensor,
    backend: Backend,
    n_programs: int,
    k: int,
    k_align: int,
    forced: int | None = None,
    per_sm: int = PROGRAMS_PER_SM,
    part_dtype: torch.dtype = torch.float32,
) -> Plan:
    """The split for an [M, N] output ``y`` (``forced``: a test's choice), its range length,
    and a [split, M, N] partials buffer when split > 1."""
    split, k_split = _ranges(backend, y.device, n_programs, k, k_align, forced, per_sm)
    m, n = y.shape
    part = torch.empty((split, m, n), dtype=part_dtype, device=y.device) if split > 1 else y
    return Plan(split, k_split, part)


@functools.lru_cache(maxsize=4096)
def _ranges(
    backend: Backend,
    device: torch.device,
    n_programs: int,
    k: int,
    k_align: int,
    forced: int | None,
    per_sm: int,
) -> tuple[int, int]:
    """(split, k_split), from the shape alone: computed once per shape (host time per call)."""
    split = forced or split_k(backend, device, n_programs, k, k_align, per_sm)
    k_split = k_per_split(k, split, k_align)
    return triton.cdiv(k, k_split), k_split


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
def _reduce_kernel(
    part_ptr, bi_ptr, cs_ptr, rs_ptr, b_ptr, y_ptr, M, N, stride_ym,
    SPLIT_K: tl.constexpr, HAS_BIAS_INT: tl.constexpr, COL_SCALE: tl.constexpr,
    ROW_SCALE: tl.constexpr, STATIC_ROW: tl.constexpr, HAS_BIAS: tl.constexpr,
    BLOCK_N: tl.constexpr, STATIC_COL: tl.constexpr = False,
):  # fmt: skip
    """y[m, n] = float(Σ_s part[s, m, n] + bi[n]) · cs[n] · rs[m] + b[n], summed in split
    order; int32 partials (exact integer accumulators) are summed as integers."""
    m = tl.program_id(1)
    offs_n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    nmask = offs_n < N
    row = m.to(tl.int64) * N + offs_n
    acc = tl.load(part_ptr + row, mask=nmask, other=0)
    for s in tl.static_range(1, SPLIT_K):
        acc += tl.load(part_ptr + s * M * N + row, mask=nmask, other=0)
    if HAS_BIAS_INT:
        acc += tl.load(bi_ptr + offs_n, mask=nmask, other=0)
    acc = acc.to(tl.float32)
    if COL_SCALE and STATIC_COL:
        acc = acc * tl.load(cs_ptr)
    elif COL_SCALE:
        acc = acc * tl.load(cs_ptr + offs_n, mask=nmask, other=0.0)
    if ROW_SCALE:
        acc = acc * tl.load(rs_ptr if STATIC_ROW else rs_ptr + m)
    if HAS_BIAS:
        acc = acc + tl.load(b_ptr + offs_n, mask=nmask, other=0.0).to(tl.float32)
    y = y_ptr + m.to(tl.int64) * stride_ym + offs_n
    tl.store(y, acc.to(y_ptr.dtype.element_ty), mask=nmask)


def reduce_partials(
    partials: torch.Tensor,
    y: torch.Tensor,
    col_scale: torch.Tensor | None = None,
    row_scale: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    bias_int: torch.Tensor | None = None,
) -> torch.Tensor:
    """Sum ``partials`` [SPLIT_K, M, N] (float32, or int32 accumulators plus ``bias_int``
    [N]) into ``y`` [M, N] in split order, then scale by ``col_scale`` [N] or [] and
    ``row_scale`` [M] or [] and add ``bias`` [N]."""
    split, m, n = partials.shape

    def opt(t: torch.Tensor | None) -> torch.Tensor:
        return t if t is not None else partials

    static = row_scale is not None and row_scale.dim() == 0
    block_n = 512
    launch(_reduce_kernel, (triton.cdiv(n, block_n), m),
        partials, opt(bias_int), opt(col_scale), opt(row_scale), opt(bias), y, m, n, y.stride(0),
        SPLIT_K=split, HAS_BIAS_INT=bias_int is not None, COL_SCALE=col_scale is not None,
        ROW_SCALE=row_scale is not None, STATIC_ROW=static, HAS_BIAS=bias is not None,
        BLOCK_N=block_n, STATIC_COL=col_scale is not None and col_scale.dim() == 0, num_warps=4,
    )  # fmt: skip
    return y
