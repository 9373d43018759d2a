"""Kernel table, selection and strict mode (provenance records: aoq/provenance.py).

``TABLE`` names, for each (scheme, backend[, arch]), the kernels that may serve a quantized
linear, most preferred first; on GPUs the row also depends on M (``BY_M``) and, where a
kernel's numerics depend on it, on the activation dtype (``DTYPE_BY_M``). Each name maps to an
implementation registered with ``@kernel(name)`` together with a precondition check. The
first kernel whose precondition holds runs; if that is not the first of the list, or no listed
kernel can run and the scheme's reference does, the call is a *fallback*: recorded with the
reasons, and an error under ``aoq.strict()`` / ``AOQ_STRICT=1``.
``print(aoq.dispatch.describe())`` shows the table, which lives in aoq/dispatch_table.py
(re-exported here); this module registers the kernels, selects and runs them.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from aoq import plans, provenance
from aoq.backends import Backend, Platform, platform_of  # noqa: F401 (Backend: dispatch's API)
from aoq.dispatch_table import (  # noqa: F401 (dispatch's API: the table lives there)
    ARCH_BY_M,
    ARCH_TABLE,
    ARCH_VARIANT_BY_M,
    ARCH_VARIANT_DTYPE_BY_M,
    BY_M,
    DECODE_MAX_M,
    DECODE_ROWS_MAX_M,
    DTYPE_BY_M,
    M_ANY,
    MX_NARROW_ROWS_MAX_M,
    MX_ROWS_MAX_M,
    PREFILL_TRITON_MAX_M,
    TABLE,
    VARIANT_BY_M,
    W4A8_ROWS_MAX_M,
    Bands,
    Scheme,
    band_edges,
    candidates,
    describe,
    reference_name,
)
from aoq.provenance import KernelRecord, Trace, trace_kernels  # noqa: F401 (dispatch's API)


class FallbackError(RuntimeError):
    """A quantized matmul would not run its intended kernel (raised under strict mode)."""


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
