"""Kernel table, kernel provenance and strict mode.

``TABLE`` names, for each (scheme, backend[, arch]), the kernels that may serve a quantized
linear, most preferred first. Each name maps to an implementation registered with
``@kernel(name)`` together with a precondition check. The first kernel whose precondition
holds runs; if that is not the first of the list, or no listed kernel can run and the
scheme's reference does, the call is a *fallback*: recorded with the reasons, and an error
under ``aoq.strict()`` / ``AOQ_STRICT=1``. ``print(aoq.dispatch.describe())`` shows the table.
"""

from __future__ import annotations

import contextlib
import contextvars
import enum
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from aoq.backends import Backend, Platform, platform_of


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
# Arch-specific rows override the backend row: {(scheme, backend, arch): names}.
ARCH_TABLE: dict[tuple[Scheme, Backend, str], tuple[str, ...]] = {}

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


def candidates(scheme: Scheme, platform: Platform) -> tuple[str, ...]:
    arch_row = ARCH_TABLE.get((scheme, platform.backend, platform.arch))
    return arch_row if arch_row is not None else TABLE.get((scheme, platform.backend), ())


def describe() -> str:
    """The kernel table as text: scheme, backend[-arch], preferred kernels, last resort."""
    rows = [f"{'scheme':<18} {'backend':<14} kernels (preferred first) -> last resort"]
    keys = [(s, b.value, names) for (s, b), names in TABLE.items()]
    keys += [(s, f"{b.value}-{a}", names) for (s, b, a), names in ARCH_TABLE.items()]
    for scheme, where, names in sorted(keys, key=lambda r: (r[0].value, r[1])):
        rows.append(
            f"{scheme.value:<18} {where:<14} {', '.join(names)} -> {reference_name(scheme)}"
        )
    return "\n".join(rows)


# --- provenance ---------------------------------------------------------------------------


@dataclass(frozen=True)
class KernelRecord:
    """One quantized matmul as it ran."""

    module: str
    config: str
    kernel: str
    backend: str
    arch: str
    fallback: bool
    reason: str | None
    shape: tuple[int, int, int]
    """(M, K, N)"""
    dtype: str


@dataclass
class Trace:
    records: list[KernelRecord] = field(default_factory=list)
    _stack: list[torch.nn.Module] = field(default_factory=list)
    _names: dict[int, str] = field(default_factory=dict)

    def current_module(self) -> str:
        if not self._stack:
            return "<functional>"
        return self._names.get(id(self._stack[-1]), type(self._stack[-1]).__name__)

    @property
    def fallbacks(self) -> list[KernelRecord]:
        return [r for r in self.records if r.fallback]


_TRACE: contextvars.ContextVar[Trace | None] = contextvars.ContextVar("aoq_trace", default=None)
_STRICT: contextvars.ContextVar[bool] = contextvars.ContextVar("aoq_strict", default=False)


@contextlib.contextmanager
def trace_kernels() -> Iterator[Trace]:
    """Record every quantized matmul (module name, config, kernel, backend, fallback, reason).

    Module names are the fully qualified names under the outermost module called inside the
    context. Under torch.compile the kernel is chosen while tracing; only eager calls record.
    """
    trace = Trace()

    def pre(module: torch.nn.Module, _args: Any) -> None:
        if not trace._stack and id(module) not in trace._names:
            trace._names.update({id(m): n or type(m).__name__ for n, m in module.named_modules()})
        trace._stack.append(module)

    def post(module: torch.nn.Module, _args: Any, _out: Any) -> None:
        if trace._stack and trace._stack[-1] is module:
            trace._stack.pop()

    token = _TRACE.set(trace)
    h1 = torch.nn.modules.module.register_module_forward_pre_hook(pre)
    h2 = torch.nn.modules.module.register_module_forward_hook(post)
    try:
        yield trace
    finally:
        h1.remove()
        h2.remove()
        _TRACE.reset(token)


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
    names = candidates(scheme, platform)
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


def run_linear(
    scheme: Scheme, config: str, x: torch.Tensor, weight: Any, bias: Any
) -> torch.Tensor:
    """Run ``y = x @ weightᵀ + bias`` for 2-D x through the table, recording provenance."""
    impl, fallback, reason, platform = select(scheme, x, weight, bias)
    if fallback and strict_enabled():
        raise FallbackError(
            f"{config}: {scheme.value} on {platform} fell back to {impl.name} ({reason})"
        )
    if not torch.compiler.is_compiling():
        trace = _TRACE.get()
        if trace is not None:
            m, k = x.shape
            trace.records.append(
                KernelRecord(
                    module=trace.current_module(),
                    config=config,
                    kernel=impl.name,
                    backend=platform.backend.value,
                    arch=platform.arch,
                    fallback=fallback,
                    reason=reason,
                    shape=(m, k, weight.shape[0]),
                    dtype=str(x.dtype).removeprefix("torch."),
                )
            )
    return impl.fn(x, weight, bias)
