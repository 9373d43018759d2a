"""Kernel table, selection and strict mode (provenance records: aoq/provenance.py).

``TABLE`` names, for each (scheme, backend[, arch]), the kernels that may serve a quantized
linear, most preferred first; on GPUs the row also depends on M (``BY_M``) and, where a
kernel's numerics depend on it, on the activation dtype (``DTYPE_BY_M``). Each name maps to an
implementation registered with ``@kernel(name)`` together with a precondition check. The
first kernel whose precondition holds runs; if that is not the first of the list, or no listed
kernel can run and the scheme's reference does, the call is a *fallback*: recorded with the
reasons, and an error under ``aoq.strict()`` / ``AOQ_STRICT=1``.
``print(aoq.dispatch.describe())`` shows the table.
"""

from __future__ import annotations

import contextlib
import contextvars
import enum
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from aoq import plans, provenance
from aoq.backends import Backend, Platform, platform_of
from aoq.provenance import KernelRecord, Trace, trace_kernels  # noqa: F401 (dispatch's API)


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


class FallbackError(RuntimeError):
    """A quantized matmul would not run its intended kernel (raised under strict mode)."""


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
# dtype): bands}. They replace the BY_M row for that dtype; an ARCH_TABLE row still wins.
DTYPE_BY_M: dict[tuple[Scheme, Backend, torch.dtype], Bands] = {}
# Bands for one weight variant (a weight's ``dispatch_variant``, e.g. MX fp6 codes), where
# the right kernel depends on how its codes are stored: {(scheme, backend, variant): bands}.
# They come before the dtype rows (an ARCH_TABLE row still wins).
VARIANT_BY_M: dict[tuple[Scheme, Backend, str], Bands] = {}
# Bands for one arch, where the right kernel depends on it: {(scheme, backend, arch): bands}.
# They come after the variant and dtype rows (an ARCH_TABLE row still wins).
ARCH_BY_M: dict[tuple[Scheme, Backend, str], Bands] = {}
DECODE_MAX_M = 16
DECODE_ROWS_MAX_M = 64
"""Weight-only on CUDA: the decode kernel up to this many rows where it takes them."""
PREFILL_TRITON_MAX_M = 256


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
        # sm90, 17-64 rows: the decode kernel (kernels/decode_mma_tiles.ROWS_TILE; 2.2-4.4x
        # the prefill kernel's speed on an H200, whose [BLOCK_M, BLOCK_N] tiles over all of K
        # leave most SMs idle there), the prefill kernel a recorded fallback where it refuses
        cuda = BY_M[(scheme, Backend.CUDA)]
        ARCH_BY_M[(scheme, Backend.CUDA, "sm90")] = (
            cuda[0],
            (DECODE_ROWS_MAX_M, (f"triton.{fam}.decode", f"triton.{fam}.prefill")),
            *cuda[1:],
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

Check = Callable[..., "str | None"]


@dataclass(frozen=True)
class KernelImpl:
    name: str
    fn: Callable[..., torch.Tensor]
    check: Check
    """(x2d, weight, bias) -> None when the kernel can serve the call, else the reason."""


_IMPLS: dict[str, KernelImpl] = {}


def _always(*_: Any) -> str | None:
    return None


def kernel(name: str, check: Check = _always) -> Callable[[Callable[..., torch.Tensor]], Any]:
    """Register ``fn(x2d, weight, bias) -> y2d`` under ``name`` with its precondition."""

    def register(fn: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
        if name in _IMPLS:
            raise ValueError(f"kernel {name!r} is registered twice")
        _IMPLS[name] = KernelImpl(name, fn, check)
        return fn

    return register


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
    weight of ``variant``: the arch row, else the M band of the variant's row, of the
    dtype's row, of the arch's bands, of the scheme's row, else the backend row.
    ``dtype=None`` asks for the row every dtype without a row of its own gets."""
    arch_row = ARCH_TABLE.get((scheme, platform.backend, platform.arch))
    if arch_row is not None:
        return arch_row
    bands = VARIANT_BY_M.get((scheme, platform.backend, variant)) if variant else None
    if bands is None and dtype is not None:
        bands = DTYPE_BY_M.get((scheme, platform.backend, dtype))
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


# --- strict mode ------------------------------------------------------------------------

_STRICT: contextvars.ContextVar[bool] = contextvars.ContextVar("aoq_strict", default=False)


@contextlib.contextmanager
def strict(enabled: bool = True) -> Iterator[None]:
    """Inside, any fallback raises FallbackError with its reason (AOQ_STRICT=1 does the same)."""
    token = _STRICT.set(enabled)
    try:
        yield
    finally:
        _STRICT.reset(token)


def strict_enabled() -> bool:
    return _STRICT.get() or os.environ.get("AOQ_STRICT", "") == "1"


# --- selection ----------------------------------------------------------------------------


def select(
    scheme: Scheme, x: torch.Tensor, weight: Any, bias: Any
) -> tuple[KernelImpl, bool, str | None, Platform]:
    """Pick the kernel for this call: (impl, fallback, reason, platform)."""
    platform = platform_of(x.device)
    variant = getattr(weight, "dispatch_variant", None)
    names = candidates(scheme, platform, x.shape[0], x.dtype, variant)
    reasons: list[str] = []
    for i, name in enumerate(names):
        impl = _IMPLS.get(name)
        if impl is None:
            reasons.append(f"{name}: not available in this build")
            continue
        why = impl.check(x, weight, bias)
        if why is None:
            fallback = i > 0
            return impl, fallback, ("; ".join(reasons) if fallback else None), platform
        reasons.append(f"{name}: {why}")
    if not names:
        reasons.append(f"no kernel for {scheme.value} on {platform} in the table")
    return _IMPLS[reference_name(scheme)], True, "; ".join(reasons), platform


def run_linear(weight: Any, x: torch.Tensor, bias: Any) -> torch.Tensor:
    """Run ``y = x @ weightᵀ + bias`` for 2-D x through the table, recording provenance.
    Eager decode calls replay their recorded launches where aoq/plans.py holds a plan (the
    weight's scheme and config are read only when none does: host time)."""
    compiling = torch.compiler.is_compiling()
    # plans replay real launches: not for the fake / functional tensors AOT autograd passes
    # (is_compiling() is False there), nor under the slowdown knob
    planned = not compiling and type(x) is torch.Tensor and not _SLOWDOWN
    if planned:
        plan = plans.lookup(weight, x, bias, len(_IMPLS))
        if plan is not None:
            provenance.record(weight.config_id, x, weight, *plan.selection)
            return plan(x)
    scheme, config = weight.scheme, weight.config_id
    impl, fallback, reason, platform = select(scheme, x, weight, bias)
    if fallback and strict_enabled():
        raise FallbackError(
            f"{config}: {scheme.value} on {platform} fell back to {impl.name} ({reason})"
        )
    if compiling:
        return _run_kernel(impl, x, weight, bias)
    provenance.record(config, x, weight, impl.name, fallback, reason, platform)
    if fallback or not planned:
        return _run_kernel(impl, x, weight, bias)
    selection = (impl.name, fallback, reason, platform)
    return plans.run(
        weight, x, bias, selection, len(_IMPLS), lambda: _run_kernel(impl, x, weight, bias)
    )


def parse_slowdown(value: str) -> tuple[tuple[str, int], ...]:
    """``"<kernel glob>=<factor>[,...]"`` -> ((glob, times), ...): times rounded, at least 1."""
    rules = []
    for rule in filter(None, (r.strip() for r in value.split(","))):
        glob, _, factor = rule.rpartition("=")
        try:
            times = max(1, round(float(factor)))
        except ValueError:
            raise ValueError(
                f"AOQ_TEST_SLOWDOWN={value!r}: {rule!r} is not '<kernel glob>=<factor>'"
            ) from None
        if glob.strip():
            rules.append((glob.strip(), times))
    return tuple(rules)


_SLOWDOWN = parse_slowdown(os.environ.get("AOQ_TEST_SLOWDOWN", ""))


def _run_kernel(
    impl: KernelImpl,
    x: torch.Tensor,
    weight: Any,
    bias: Any,
    _slowdown: tuple[tuple[str, int], ...] = _SLOWDOWN,
) -> torch.Tensor:
    """Run the chosen kernel.

    TEST-ONLY knob, never for production: ``AOQ_TEST_SLOWDOWN="<kernel glob>=<factor>[,...]"``
    (e.g. ``triton.int4wo.decode=3``; parsed once, when aoq is imported) runs a kernel whose
    name matches ``factor`` times (rounded, at least once), so its device time really grows,
    under CUDA graphs and torch.compile too. The bench tests use it to prove that a slowed
    kernel is flagged as a regression. Unset, it costs one truth test; set, one glob match
    per rule and call (no parsing per call: that host time showed up in eager rows).
    """
    if _slowdown:
        import fnmatch

        for glob, times in _slowdown:
            if fnmatch.fnmatchcase(impl.name, glob):
                for _ in range(times - 1):
                    impl.fn(x, weight, bias)
                break
    return impl.fn(x, weight, bias)
