"""Prefill at 17-256 rows, where the output tiles leave multiprocessors idle: K split.

The prefill kernels tile the output into [BLOCK_M, BLOCK_N] tiles, each looping over all of
K. At a few dozen rows that is few programs: M 32 x N 4096 in 64 x 128 tiles is 32 programs
for an H200's 132 SMs, each walking K = 14336 alone (W8A8's prefill kernel read 0.66-0.73x
bf16 there, bench/NOTES.md session 44). Here the tile is chosen by rule (:func:`tile`: no
timing autotune, since a split's summation order must not depend on which config won a race
in this process) and K is split so that the programs fill one wave (splitk.split_k, exact).
Each program stores its partial (int32 accumulators or float32 sums) and
splitk.reduce_partials adds them in split order, then applies the epilogue (scales, biases,
the cast), chained to the split kernel by programmatic dependent launch where the GPU has it.

Where the tiles already fill a wave (no split), or past :data:`MAX_M` rows, :func:`run`
declines and the launcher keeps its autotuned kernel (fp8 keeps the rule's tile unsplit:
``rule_tile``). Tests force a split (``forced``): the interpreter never splits by itself
(splitk.split_k)."""

from __future__ import annotations

import os
from collections.abc import Callable

import torch
import triton
from aoq.kernels import splitk

from aoq.backends import Backend

MAX_M = 256
"""Rows up to which a prefill launch may split K (past them the tiles fill the GPU)."""

ENABLED = os.environ.get("AOQ_MID_SPLIT", "1") != "0"
"""Off: the prefill launchers never split K by themselves (A/B runs, bisecting)."""


def tile(backend: Backend, m: int, group_size: int = 0, bk: int = 128) -> tuple[dict, int]:
    """(config, programs an SM holds) for ``m`` rows: 64 x 128 tiles on 4 warps up to 64
    rows (two an SM), 128 x 128 on 8 warps above (one an SM); ``bk`` the K step (at most
    ``group_size`` for kernels that flush one group at a time). The interpreter: 32 x 32."""
    if backend is Backend.INTERPRET:
        bm, bn, warps, stages, per_sm = 32, 32, 4, 1, 1
        bk = 64 if bk >= 64 else bk
    elif m <= 64:
        bm, bn, warps, stages, per_sm = 64, 128, 4, 4, 2
    else:
        bm, bn, warps, stages, per_sm = 128, 128, 8, 3, 1
    if backend is Backend.ROCM:
        stages = 2
    if group_size:
        bk = min(bk, group_size)
    cfg = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=warps, num_stages=stages)
    return cfg, per_sm


def split(
    backend: Backend, device: torch.device, m: int, n: int, k: int, group_size: int, bk: int = 128
) -> int:
    """The split :func:`run` takes for ``m`` x ``n`` outputs over ``k``: the most K ranges
    that keep :func:`tile`'s programs in one wave (splitk.split_k, exact), each a multiple of
    the K step and of ``group_size``; 1 where the tiles fill a wave by themselves."""
    return _rule(backend, device, m, n, k, group_size, bk)[0]


def _rule(
    backend: Backend, device: torch.device, m: int, n: int, k: int, group_size: int, bk: int
) -> tuple[int, dict, int]:
    """(:func:`split`, :func:`tile`'s config, a K range's alignment)."""
    cfg, per_sm = tile(backend, m, group_size, bk)
    n_tiles = triton.cdiv(n, cfg["BLOCK_N"]) * triton.cdiv(m, cfg["BLOCK_M"])
    align = max(cfg["BLOCK_K"], group_size)
    return splitk.split_k(backend, device, n_tiles, k, align, per_sm, exact=True), cfg, align


Launch = Callable[[tuple[int, int, int], splitk.Plan, dict], None]


def run(
    y: torch.Tensor,
    backend: Backend,
    k: int,
    group_size: int,
    forced: int | None,
    launch: Launch,
    part_dtype: torch.dtype = torch.float32,
    bk: int = 128,
    rule_tile: bool = False,
    **epilogue: torch.Tensor | None,
) -> bool:
    """Split K for ``y`` [M, N] at :func:`tile`'s tile (``forced``: a test's split) and call
    ``launch(grid, plan, cfg)`` (the kernel with SPLIT_K = plan.split, K_SPLIT =
    plan.k_split, TRIGGER = plan.chain, its partials in plan.partials, TAIL 0, and cfg's
    tile), then reduce with ``epilogue`` (splitk.reduce_partials' col_scale, row_scale, bias,
    bias_int). False, launching nothing: no split is due (the launcher's own kernel runs).
    ``rule_tile``: at 17-256 rows launch the rule's tile even where no split is due, for
    kernels whose bits depend on the tile (fp8's imprecise accumulation interval is its K
    step: an autotuned tile, picked by timing, would give other bits in another process)."""
    m, n = y.shape
    if forced is None and (not ENABLED or m <= 16 or m > MAX_M):
        return False
    want, cfg, align = _rule(backend, y.device, m, n, k, group_size, bk)
    want = forced or want
    if want == 1 and not rule_tile:
        return False
    p = splitk.plan(y, backend, 0, k, align, want, part_dtype=part_dtype, fused=False)
    if p.split == 1 and not rule_tile:  # (K shorter than two ranges)
        return False
    grid = (triton.cdiv(n, cfg["BLOCK_N"]), triton.cdiv(m, cfg["BLOCK_M"]), p.split)
    launch(grid, p, cfg)
    p.finish(y, **epilogue)
    return True
