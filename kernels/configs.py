"""Autotuning configs, one function per backend.

Block shapes are the matmul tile (BLOCK_M x BLOCK_N outputs, BLOCK_K of the reduction per
step; for int4 BLOCK_K counts codes, not bytes). Decode configs keep BLOCK_N small so that
N / BLOCK_N programs fill every multiprocessor while each streams long, 16-byte-wide rows of
weights; prefill configs are square tiles for the matrix units.

ROCm gets HIP-specific knobs: ``waves_per_eu`` (occupancy hint), ``matrix_instr_nonkdim``
(16x16 or 32x32 MFMA), ``kpack`` (gfx942 only; gfx950 ignores it) and num_stages=2 (the AMD
stream pipeliner's sweet spot). The interpreter gets one small config: it runs every program
in Python, and autotuning there would only multiply CI time.
"""

from __future__ import annotations

from typing import Any

import triton
import triton.testing
from aoq.kernels._common import Strategy

from aoq.backends import Backend


def _cfg(bm: int, bn: int, bk: int, warps: int, stages: int, **extra: int) -> triton.Config:
    return triton.Config(
        {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, **extra},
        num_warps=warps,
        num_stages=stages,
    )


def cuda_configs(strategy: Strategy, gemv: bool, int_dot: bool) -> list[triton.Config]:
    """NVIDIA (sm80..sm100). ``gemv``: M == 1 FMA path; ``int_dot``: int8 operands (K tiles
    of at least 32 for the int8 MMA)."""
    if strategy is Strategy.DECODE and gemv:
        return [
            _cfg(1, bn, bk, w, s)
            for bn, bk, w, s in (
                (16, 256, 4, 3),
                (16, 512, 4, 2),
                (32, 256, 4, 3),
                (8, 512, 4, 3),
                (32, 512, 8, 2),
                (16, 1024, 8, 2),
                (64, 128, 4, 4),
            )
        ]
    if strategy is Strategy.DECODE:
        return [
            _cfg(16, bn, bk, w, s)
            for bn, bk, w, s in (
                (32, 256, 4, 3),
                (64, 128, 4, 4),
                (32, 128, 4, 4),
                (16, 256, 4, 3),
                (64, 256, 4, 3),
                (128, 128, 4, 3),
                (16, 512, 4, 2),
            )
        ]
    bk = 128 if int_dot else 64
    return [
        _cfg(bm, bn, k, w, s)
        for bm, bn, k, w, s in (
            (128, 128, bk, 8, 3),
            (128, 256, bk, 8, 3),
            (64, 128, bk, 4, 4),
            (128, 64, bk, 4, 4),
            (64, 256, bk, 8, 3),
            (128, 128, 2 * bk, 8, 3),
        )
    ]


def rocm_configs(strategy: Strategy, gemv: bool, int_dot: bool) -> list[triton.Config]:
    """AMD CDNA (gfx90a, gfx942, gfx950): 64-wide wavefronts, so half the warps of CUDA for
    the same threads, and the HIP compile options as config kwargs."""
    hip = {"waves_per_eu": 0, "matrix_instr_nonkdim": 16, "kpack": 1}
    if strategy is Strategy.DECODE and gemv:
        return [
            _cfg(1, bn, bk, w, 2, **{**hip, "waves_per_eu": wpe})
            for bn, bk, w, wpe in (
                (16, 256, 2, 0),
                (16, 512, 4, 2),
                (32, 256, 4, 2),
                (8, 512, 2, 0),
            )
        ]
    if strategy is Strategy.DECODE:
        return [
            _cfg(16, bn, bk, w, 2, **hip)
            for bn, bk, w in ((32, 256, 4), (64, 128, 4), (16, 256, 2), (64, 256, 4))
        ]
    bk = 128 if int_dot else 64
    return [
        _cfg(bm, bn, bk, w, 2, **{**hip, "waves_per_eu": wpe, "kpack": kp})
        for bm, bn, w, wpe, kp in (
            (128, 128, 8, 2, 2),
            (256, 128, 8, 2, 2),
            (128, 64, 4, 0, 1),
            (64, 128, 4, 0, 1),
        )
    ]


def interpret_configs(strategy: Strategy, gemv: bool, int_dot: bool) -> list[triton.Config]:
    """One small config: few programs, few Python-level loop steps."""
    if strategy is Strategy.DECODE:
        return [_cfg(1 if gemv else 16, 32, 64, 4, 1)]
    return [_cfg(32, 32, 64 if int_dot else 32, 4, 1)]


def mm_configs(
    backend: Backend, strategy: Strategy, gemv: bool, int_dot: bool = False
) -> list[triton.Config]:
    """The autotuning space of a matmul kernel on ``backend``."""
    if backend is Backend.CUDA:
        return cuda_configs(strategy, gemv, int_dot)
    if backend is Backend.ROCM:
        return rocm_configs(strategy, gemv, int_dot)
    if backend is Backend.INTERPRET:
        return interpret_configs(strategy, gemv, int_dot)
    raise ValueError(f"no Triton configs for backend {backend.value}; expected cuda/rocm/interpret")


def decode_tile(backend: Backend, m: int, int4: bool, group_size: int) -> dict[str, int]:
    """The decode kernels' tile (BLOCK_M/N/K, warps, stages) for M <= 16, chosen by rule
    rather than by timing: a split-K reduction order must not depend on which config won a
    race in this process. M == 1: a GEMV tile of 2-4 KB of weights per loop step (int8/fp8
    BLOCK_N=16 x 256 bytes; int4 32 rows x 128 codes, one quantization group per step so its
    scale is a column); 2..16 rows: one 16-row MMA tile. K tiles never straddle a group.
    Measured on an H200 with bench/decode_sweep.py (tile x split grid, CUDA graphs).
    The interpreter gets small tiles (it runs programs one by one in Python)."""
    cap = group_size if group_size and group_size & (group_size - 1) == 0 else 1 << 30
    if backend is Backend.INTERPRET:
        bm, bn, bk, warps, stages = (1 if m == 1 else 16), 32, 64, 4, 1
    elif m == 1:
        bm, bn, bk = 1, (32 if int4 else 16), (128 if int4 else 256)
        warps, stages = 4, 1
    else:
        bm, bn, bk, warps, stages = 16, 64, 128, 4, (2 if backend is Backend.ROCM else 3)
    return {
        "BLOCK_M": bm,
        "BLOCK_N": bn,
        "BLOCK_K": max(16, min(bk, cap)),
        "num_warps": warps,
        "num_stages": stages,
    }


def fit_group(configs: list[triton.Config], group_size: int | None) -> list[triton.Config]:
    """Configs whose K tile never straddles a quantization group: BLOCK_K is capped at
    ``group_size`` (kernels that scale one group's accumulator at a time need BLOCK_K to
    divide it; both are powers of two). Duplicates after the cap are dropped."""
    if not group_size:
        return configs
    fitted: dict[tuple, triton.Config] = {}
    for c in configs:
        kw = {**c.kwargs, "BLOCK_K": min(c.kwargs["BLOCK_K"], group_size)}
        key = (tuple(sorted(kw.items())), c.num_warps, c.num_stages)
        fitted.setdefault(key, triton.Config(kw, num_warps=c.num_warps, num_stages=c.num_stages))
    return list(fitted.values())


def autotune(fn: Any, configs: list[triton.Config], key: list[str]) -> Any:
    """triton.autotune with a short benchmark per config (5 ms warm-up, 25 ms of repeats):
    enough to rank tiles whose times differ by more than their noise, and it keeps the first
    call of each new shape from stalling a server for seconds."""

    def bench(kernel_call: Any, quantiles: Any) -> Any:
        return triton.testing.do_bench(kernel_call, warmup=5, rep=25, quantiles=quantiles)

    return triton.autotune(configs=configs, key=key, do_bench=bench)(fn)
