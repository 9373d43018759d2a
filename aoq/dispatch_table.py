"""The kernel table: for each (scheme, backend[, arch]) the kernels that may serve a quantized
linear, most preferred first (``TABLE``, ``ARCH_TABLE``), on GPUs by bands of M (``BY_M``) and,
where the right kernel depends on them, by activation dtype (``DTYPE_BY_M``), weight variant
(``VARIANT_BY_M``) or arch (``ARCH_BY_M``); :func:`candidates` reads it for one call and
:func:`describe` prints it. aoq/dispatch.py registers the kernels behind the names, selects
and runs them, and re-exports this module's names (its API)."""

from __future__ import annotations

import enum

import torch

from aoq.backends import Backend, Platform


class Scheme(enum.Enum):
    """The math a quantized linear performs (one per inference config family)."""

    INT8_WEIGHT_ONLY = "int8_weight_only"
    """int8 symmetric weights, float activations."""
    INT8_INT8 = "int8_int8"
    """W8A8: int8 per-token activations (dynamic or static) x int8 per-channel weights."""
    INT4_WEIGHT_ONLY = "int4_weight_only"
    """uint4 asymmetric groupwise weights, float activations."""
    INT8_INT4 = "int8_int4"
    """W4A8: int8 per-token activations x int4 symmetric groupwise weights."""
    FP8_WEIGHT_ONLY = "fp8_weight_only"
    """float8 e4m3 per-channel weights, float activations."""
    FP8_FP8 = "fp8_fp8"
    """float8 activations (per row or tensor) x float8 weights."""
    MX_WEIGHT_ONLY = "mx_weight_only"
    """MX (OCP v1.0) weights, E8M0 scale per block along K; float activations."""
    MX_MX = "mx_mx"
    """MX activations (run-time blocks along K) x MX weights, same element format."""
    NVFP4_WEIGHT_ONLY = "nvfp4_weight_only"
    """NVFP4 weights (fp4, e4m3 scale per 16, float32 tensor scale); float activations."""
    NVFP4_NVFP4 = "nvfp4_nvfp4"
    """NVFP4 activations (run-time scales) x NVFP4 weights."""


# Preference lists. The scheme's reference (``reference.<scheme>``) is always the last resort.
TABLE: dict[tuple[Scheme, Backend], tuple[str, ...]] = {
    (Scheme.INT8_WEIGHT_ONLY, Backend.CPU): ("aten._weight_int8pack_mm",),
    (Scheme.INT8_INT8, Backend.CPU): ("aten._int_mm",),
    (Scheme.INT4_WEIGHT_ONLY, Backend.CPU): ("aten._weight_int4pack_mm_for_cpu",),
    (Scheme.INT8_INT4, Backend.CPU): ("cpu.w4a8_dequant_mm",),
    (Scheme.FP8_WEIGHT_ONLY, Backend.CPU): ("cpu.fp8_weight_only_mm",),
    (Scheme.FP8_FP8, Backend.CPU): ("aten._scaled_mm",),
}
# MX and NVFP4 have no GEMM on the GPUs we can verify (sm100 has block-scaled MMA, untested
# here), so their intended kernel is the emulated one on every backend: not a fallback.
_EMULATED = {
    Scheme.MX_WEIGHT_ONLY: ("emulated.mx_dequant_mm",),
    Scheme.MX_MX: ("emulated.mx_qdq_mm",),
    Scheme.NVFP4_WEIGHT_ONLY: ("emulated.nvfp4_dequant_mm",),
    Scheme.NVFP4_NVFP4: ("emulated.nvfp4_qdq_mm",),
}
TABLE.update({(s, b): names for s, names in _EMULATED.items() for b in Backend})
# Arch-specific rows override the backend row: {(scheme, backend, arch): names}.
ARCH_TABLE: dict[tuple[Scheme, Backend, str], tuple[str, ...]] = {}

# Rows chosen by M (the rows of the activation), for the GPU and interpreter backends:
# ((max_m, names), ...) ascending, the first band with M <= max_m serves. Decode (small M,
# memory bound: GEMV / narrow tiles), prefill (Triton tiles, dequantize in the main loop) and,
# for weight-only formats at large M, dequantize-then-BLAS. An ARCH_TABLE row overrides these.
M_ANY = 1 << 62
Bands = tuple[tuple[int, tuple[str, ...]], ...]
BY_M: dict[tuple[Scheme, Backend], Bands] = {}
# Bands for one activation dtype, where the right kernel depends on it: {(scheme, backend,
# dtype): bands}. They replace the BY_M, variant and arch rows for that dtype; an ARCH_TABLE
# row still wins.
DTYPE_BY_M: dict[tuple[Scheme, Backend, torch.dtype], Bands] = {}
# Bands for one weight variant (a weight's ``dispatch_variant``, e.g. MX fp6 codes, fp8 with
# per-tensor activation scales), where the right kernel depends on how its codes or scales
# are stored: {(scheme, backend, variant): bands}. They come after the dtype rows (a dtype
# row names what x's dtype needs whatever the weight) and before the arch rows (an
# ARCH_TABLE row still wins).
VARIANT_BY_M: dict[tuple[Scheme, Backend, str], Bands] = {}
# Bands for one weight variant on one arch: {(scheme, backend, arch, variant): bands}, before
# the variant's own row (e.g. sm90's MX fp6 weights, whose decode tiles stop at 64 rows where
# the other MX elements' run to 128).
ARCH_VARIANT_BY_M: dict[tuple[Scheme, Backend, str, str], Bands] = {}
# ... and at one activation dtype: {(scheme, backend, arch, variant, dtype): bands}, before
# the variant's arch row (sm90's MX int8 with fp16 x: its 128-row tile takes bf16 x only).
ARCH_VARIANT_DTYPE_BY_M: dict[tuple[Scheme, Backend, str, str, torch.dtype], Bands] = {}
# Bands for one arch, where the right kernel depends on it: {(scheme, backend, arch): bands}.
# They come after the dtype and variant rows (an ARCH_TABLE row still wins).
ARCH_BY_M: dict[tuple[Scheme, Backend, str], Bands] = {}
DECODE_MAX_M = 16
DECODE_ROWS_MAX_M = {
    Scheme.INT4_WEIGHT_ONLY: 128,
    Scheme.INT8_WEIGHT_ONLY: 256,
    Scheme.FP8_WEIGHT_ONLY: 256,
}
"""Weight-only on sm90: the decode kernel up to this many rows (kernels/decode_mma_tiles
.ROWS_TILE's largest padding), where it takes them."""
MX_ROWS_MAX_M = 128
"""MX fp4, e4m3, e5m2 and int8 (bf16 x) and NVFP4 on sm90: the decode kernel up to this many
rows (kernels/decode_mma_tiles.ROWS_TILE; from 65 rows kernels/wt_rows_mx.py, NVFP4's only
tile past 64), where it takes them; the emulated path past it."""
MX_NARROW_ROWS_MAX_M = 64
"""MX int8 with fp16 x on sm90: the same, to 64 rows (at 128 the emulated path was the faster,
bench/NOTES.md session 51; MX int8 with bf16 x takes WIDE steps to 128 since session 53, MX
fp6 kernels/wt_rows_fp6.py since session 55)."""
W4A8_ROWS_MAX_M = 64
"""W4A8 on sm90: the decode kernel up to this many rows, where it takes them."""
W4A8_WT_ROWS_MAX_M = 128
"""W4A8 on sm90: kernels/wt_rows.py's tile past W4A8_ROWS_MAX_M up to this many rows."""
PREFILL_TRITON_MAX_M = 256
FP8_TRITON_MAX_M = 64
"""fp8 W8A8 on sm90: the Triton kernel (K split at 17-64 rows) before cuBLAS up to here."""
FP8_NARROW_MAX_M = 128
"""fp8 W8A8 with row scales and N <= FP8_NARROW_N (the "row-narrow" variant; off with
``AOQ_FP8_NARROW=0``) on sm90: the Triton kernel up to here. H200, band_sweep, µs at 80 /
128 rows (session 57): 14336 x 4096 Triton 31.9 / 34.0 against torch._scaled_mm's row-wise
GEMM 40.4 / 41.2 (bf16 36.3 / 38.1), 4096^2 14.4 / 15.6 against 16.2 / 16.5; at N 8192 and
14336 torch._scaled_mm stays the faster (28.3 / 28.5 against 33.6 / 36.0 at 8192^2), and
past 128 rows at N 4096. On by default since the full cuda matrix 9e9cc3 (session 58)."""
FP8_NARROW_N = 4096


def _gpu_rows() -> None:
    wo = {
        Scheme.INT8_WEIGHT_ONLY: "int8wo",
        Scheme.INT4_WEIGHT_ONLY: "int4wo",
        Scheme.FP8_WEIGHT_ONLY: "fp8wo",
    }
    for scheme, fam in wo.items():
        for backend, blas in ((Backend.CUDA, "cublas"), (Backend.ROCM, "hipblaslt")):
            BY_M[(scheme, backend)] = (
                (DECODE_MAX_M, (f"triton.{fam}.decode",)),
                (PREFILL_TRITON_MAX_M, (f"triton.{fam}.prefill",)),
                (M_ANY, (f"{blas}.{fam}.dequant_mm",)),
            )
        # sm90, 17-128 rows (int4) or 17-256 (int8, e4m3): the decode kernel (kernels/
        # decode_mma_tiles.ROWS_TILE; on an H200 1.2-9.8x the prefill kernel's speed at 17-64
        # rows, 0.99-4.0x at 65-256: its [BLOCK_M, BLOCK_N] tiles over all of K leave most SMs
        # idle), the prefill kernel a recorded fallback where it refuses; int4 past 128 rows
        # dequantize + cuBLAS (1.3-2.5x the prefill kernel, which the decode kernel at 256 rows
        # was not: bench/NOTES.md, session 45)
        cuda = BY_M[(scheme, Backend.CUDA)]
        ARCH_BY_M[(scheme, Backend.CUDA, "sm90")] = (
            cuda[0],
            (DECODE_ROWS_MAX_M[scheme], (f"triton.{fam}.decode", f"triton.{fam}.prefill")),
            cuda[-1],
        )
        # ...not for float32 x, which it never takes past 16 rows
        DTYPE_BY_M[(scheme, Backend.CUDA, torch.float32)] = cuda
    for backend, blas in ((Backend.CUDA, "cublas"), (Backend.ROCM, "hipblaslt")):
        BY_M[(Scheme.INT8_INT8, backend)] = (
            (DECODE_MAX_M, ("triton.w8a8.decode",)),
            (M_ANY, ("triton.w8a8.prefill",)),
        )
        # W4A8 past the Triton band: dequantize both operands, BLAS matmul (5x faster at
        # M=2048 on an H200 than the group-flushing int8 kernel, run bbd8a5)
        BY_M[(Scheme.INT8_INT4, backend)] = (
            (DECODE_MAX_M, ("triton.w4a8.decode",)),
            (PREFILL_TRITON_MAX_M, ("triton.w4a8.prefill",)),
            (M_ANY, (f"{blas}.w4a8.dequant_mm",)),
        )
        # sm90: the decode kernel (decode_mma at 32 / 64 rows: decode_mma_tiles.ROWS_TILE) to
        # 64 rows, 3.0-9.6x the prefill kernel's speed at 17-32 rows on an H200 and 1.7-6.2x
        # at 64 (asymmetric x included); at 65-128 the same dequantized operands as the
        # BLAS path with the weights made in registers (kernels/wt_rows.py, session 50); past
        # that dequantize + cuBLAS, 1.3-2.7x the prefill kernel at 65-256 rows (bench/NOTES.md,
        # session 45)
        if backend is Backend.CUDA:
            ARCH_BY_M[(Scheme.INT8_INT4, backend, "sm90")] = (
                (DECODE_MAX_M, ("triton.w4a8.decode",)),
                (W4A8_ROWS_MAX_M, ("triton.w4a8.decode", "triton.w4a8.prefill")),
                (W4A8_WT_ROWS_MAX_M, ("triton.w4a8.rows", f"{blas}.w4a8.dequant_mm")),
                (M_ANY, (f"{blas}.w4a8.dequant_mm",)),
            )
        # ...but not for float32 activations: their BLAS matmul runs at the float32 rate
        # (51 TFLOP/s on an H200), 3x slower than the int8 kernel (run 191da5: 1.6 vs 0.53 ms
        # at M=2048, K=N=4096, flagged by `reports compare` against bbd8a5)
        DTYPE_BY_M[(Scheme.INT8_INT4, backend, torch.float32)] = (
            (DECODE_MAX_M, ("triton.w4a8.decode",)),
            (M_ANY, ("triton.w4a8.prefill",)),
        )
    for backend, blas in ((Backend.CUDA, "cublas"), (Backend.ROCM, "hipblaslt")):
        BY_M[(Scheme.FP8_FP8, backend)] = (
            # decode: the Triton kernel beat torch._scaled_mm on an H200 (row scales, M=1:
            # 27 vs 46 us at 8192x8192, reports/runs); prefill: cuBLAS wins
            (DECODE_MAX_M, ("triton.fp8.decode",)),
            (M_ANY, (f"{blas}.fp8.scaled_mm", "triton.fp8.prefill")),
        )
        # sm90, 17-64 rows of bf16 / fp16 x with row scales: the Triton kernel with K split
        # (kernels/mid_rows.py), cuBLAS behind it; on an H200 1.31-1.46x bf16 where
        # torch._scaled_mm's row-wise GEMM read 0.74-1.32x (bench/NOTES.md, session 46);
        # cuBLAS past 64 rows (2 shapes of 3 at 128). Per-tensor scales (the "tensor" variant)
        # keep cuBLAS first: its tensor-wise GEMM took 9-19 % less time in 8 of 9 cells
        if backend is Backend.CUDA:
            ARCH_BY_M[(Scheme.FP8_FP8, backend, "sm90")] = (
                (DECODE_MAX_M, ("triton.fp8.decode",)),
                (FP8_TRITON_MAX_M, ("triton.fp8.prefill", f"{blas}.fp8.scaled_mm")),
                (M_ANY, (f"{blas}.fp8.scaled_mm", "triton.fp8.prefill")),
            )
            ARCH_VARIANT_BY_M[(Scheme.FP8_FP8, backend, "sm90", "row-narrow")] = (
                (DECODE_MAX_M, ("triton.fp8.decode",)),
                (FP8_NARROW_MAX_M, ("triton.fp8.prefill", f"{blas}.fp8.scaled_mm")),
                (M_ANY, (f"{blas}.fp8.scaled_mm", "triton.fp8.prefill")),
            )
        VARIANT_BY_M[(Scheme.FP8_FP8, backend, "tensor")] = BY_M[(Scheme.FP8_FP8, backend)]
        # float32 activations want a float32 output that is a float32 sum. cuBLASLt's and
        # hipBLASLt's fp8 GEMMs accumulate ~1e-4 off one (~100x the output budget; H200 run
        # 98e5df: fp8-row fp32 M>16), so for float32 the Triton kernel, which widens e4m3
        # exactly to bf16 operands and sums in float32, is the intended kernel at every M.
        DTYPE_BY_M[(Scheme.FP8_FP8, backend, torch.float32)] = (
            (DECODE_MAX_M, ("triton.fp8.decode",)),
            (M_ANY, ("triton.fp8.prefill",)),
        )
    # the interpreter runs the Triton kernels only (no BLAS on CPU tensors)
    for scheme, fam in (*wo.items(), (Scheme.INT8_INT8, "w8a8"), (Scheme.INT8_INT4, "w4a8")):
        BY_M[(scheme, Backend.INTERPRET)] = (
            (DECODE_MAX_M, (f"triton.{fam}.decode",)),
            (M_ANY, (f"triton.{fam}.prefill",)),
        )
    BY_M[(Scheme.FP8_FP8, Backend.INTERPRET)] = (
        (DECODE_MAX_M, ("triton.fp8.decode",)),
        (M_ANY, ("triton.fp8.prefill",)),
    )
    # MX / NVFP4 weights at decode: dequantized tile by tile inside the kernel (the emulated
    # path's weights, read packed instead of as a dequantized copy), the emulated path where
    # the decode kernel refuses a call (a recorded fallback: its reason says why); float32
    # activations and larger M run the emulated path (dequantize, then the BLAS matmul)
    mx_decode = (
        (Scheme.MX_WEIGHT_ONLY, "triton.mxwo.decode", "emulated.mx_dequant_mm"),
        (Scheme.MX_MX, "triton.mx.decode", "emulated.mx_qdq_mm"),
        (Scheme.NVFP4_WEIGHT_ONLY, "triton.nvfp4wo.decode", "emulated.nvfp4_dequant_mm"),
        (Scheme.NVFP4_NVFP4, "triton.nvfp4.decode", "emulated.nvfp4_qdq_mm"),
    )
    for scheme, decode, emulated in mx_decode:
        for backend in (Backend.CUDA, Backend.ROCM, Backend.INTERPRET):
            BY_M[(scheme, backend)] = ((DECODE_MAX_M, (decode, emulated)), (M_ANY, (emulated,)))
            DTYPE_BY_M[(scheme, backend, torch.float32)] = ((M_ANY, (emulated,)),)
        # sm90, 17-128 rows of bf16 / fp16 x (MX int8 with fp16 x: 17-64): the decode
        # kernel's wider tiles (decode_mma_tiles.ROWS_TILE, kernels/wt_rows_mx.py, MX fp6
        # past 64 kernels/wt_rows_fp6.py), 1.1-3.9x the emulated path, which had run at
        # 0.21-0.43x bf16 there (H200, bench/NOTES.md sessions 51-55)
        ARCH_BY_M[(scheme, Backend.CUDA, "sm90")] = (
            (MX_ROWS_MAX_M, (decode, emulated)),
            (M_ANY, (emulated,)),
        )
        if scheme in (Scheme.MX_WEIGHT_ONLY, Scheme.MX_MX):
            narrow = ((MX_NARROW_ROWS_MAX_M, (decode, emulated)), (M_ANY, (emulated,)))
            int8_fp16 = (scheme, Backend.CUDA, "sm90", "int8", torch.float16)
            ARCH_VARIANT_DTYPE_BY_M[int8_fp16] = narrow  # (decode_mma_tiles.BF16_ONLY_ROWS)
    # ...fp6 codes (four in three bytes) decode only on CUDA's bf16-pair kernel (decode_mma.py,
    # WFMT 6 and 7, session 31; the decode entry refuses them anywhere else): the generic
    # decode kernel's fp6 tile cost more than the emulated path's whole dequantize-and-GEMV
    # (H200, 8192 x 8192, M 1: 290 vs 164 us, session 10), so ROCm and the interpreter keep
    # the emulated path at every M
    for scheme, _decode, emulated in mx_decode[:2]:
        for backend in (Backend.ROCM, Backend.INTERPRET):
            VARIANT_BY_M[(scheme, backend, "fp6")] = ((M_ANY, (emulated,)),)
    # sm80 has no float8 instructions (no fp8 MMA, no fp8 conversions in Triton; see
    # `python -m aoq.kernels.targets`): float8 runs the reference there, recorded as such.
    ARCH_TABLE[(Scheme.FP8_FP8, Backend.CUDA, "sm80")] = ()
    ARCH_TABLE[(Scheme.FP8_WEIGHT_ONLY, Backend.CUDA, "sm80")] = ()


_gpu_rows()


def band_edges(scheme: Scheme) -> list[int]:
    """Every band's last M in any of ``scheme``'s band rows (every backend, arch, dtype and
    variant), ascending: where a kernel may take over (bench/band_sweep.py times both sides)."""
    rows = [b for (s, *_), b in (*BY_M.items(), *DTYPE_BY_M.items(), *VARIANT_BY_M.items(),
                                 *ARCH_BY_M.items(), *ARCH_VARIANT_BY_M.items(),
                                 *ARCH_VARIANT_DTYPE_BY_M.items())
            if s is scheme]  # fmt: skip
    return sorted({max_m for bands in rows for max_m, _ in bands if max_m != M_ANY})


def reference_name(scheme: Scheme) -> str:
    return f"reference.{scheme.value}"


def candidates(
    scheme: Scheme,
    platform: Platform,
    m: int = 1,
    dtype: torch.dtype | None = None,
    variant: str | None = None,
) -> tuple[str, ...]:
    """Kernels for ``scheme`` on ``platform`` at M rows of ``dtype`` activations and a
    weight of ``variant``: the arch row, else the M band of the dtype's row, of the
    variant's row on this arch at this dtype, of the variant's row on this arch, of the
    variant's row, of the arch's bands, of the scheme's row, else the backend row.
    ``dtype=None`` asks for the row every dtype without a row of its own gets."""
    arch_row = ARCH_TABLE.get((scheme, platform.backend, platform.arch))
    if arch_row is not None:
        return arch_row
    bands = DTYPE_BY_M.get((scheme, platform.backend, dtype)) if dtype is not None else None
    if bands is None and variant and dtype is not None:
        key = (scheme, platform.backend, platform.arch, variant, dtype)
        bands = ARCH_VARIANT_DTYPE_BY_M.get(key)
    if bands is None and variant:
        bands = ARCH_VARIANT_BY_M.get((scheme, platform.backend, platform.arch, variant))
    if bands is None and variant:
        bands = VARIANT_BY_M.get((scheme, platform.backend, variant))
    if bands is None:
        bands = ARCH_BY_M.get((scheme, platform.backend, platform.arch))
    if bands is None:
        bands = BY_M.get((scheme, platform.backend))
    if bands is not None:
        return next(names for max_m, names in bands if m <= max_m)
    return TABLE.get((scheme, platform.backend), ())


_DTYPE_NAMES = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}


def describe() -> str:
    """The kernel table as text: scheme, backend[-arch], preferred kernels, last resort."""
    rows = [f"{'scheme':<18} {'backend':<16} kernels (preferred first) -> last resort"]
    keys = [(s, b.value, names) for (s, b), names in TABLE.items()]
    keys += [(s, f"{b.value}-{a}", names) for (s, b, a), names in ARCH_TABLE.items()]
    banded = [((s, b, ""), bands) for (s, b), bands in BY_M.items()]
    banded += [
        ((s, b, _DTYPE_NAMES.get(d, str(d))), bands) for (s, b, d), bands in DTYPE_BY_M.items()
    ]
    banded += [((s, b, v), bands) for (s, b, v), bands in VARIANT_BY_M.items()]
    banded += [((s, b, a), bands) for (s, b, a), bands in ARCH_BY_M.items()]
    banded += [((s, b, f"{a} {v}"), bands) for (s, b, a, v), bands in ARCH_VARIANT_BY_M.items()]
    banded += [
        ((s, b, f"{a} {v} {_DTYPE_NAMES.get(d, str(d))}"), bands)
        for (s, b, a, v, d), bands in ARCH_VARIANT_DTYPE_BY_M.items()
    ]
    for (s, b, dtype), bands in banded:
        lo = 0
        for max_m, names in bands:
            span = f"M>{lo}" if max_m == M_ANY else f"M{lo + 1}-{max_m}"
            keys.append((s, " ".join(p for p in (b.value, dtype, span) if p), names))
            lo = max_m
    for scheme, where, names in sorted(keys, key=lambda r: (r[0].value, r[1])):
        rows.append(
            f"{scheme.value:<18} {where:<16} {', '.join(names)} -> {reference_name(scheme)}"
        )
    return "\n".join(rows)
