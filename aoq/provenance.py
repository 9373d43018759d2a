"""Kernel provenance: which kernel served each quantized matmul, recorded inside
``aoq.trace_kernels()`` (re-exported by aoq.dispatch, which records each call)."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from aoq.backends import Platform


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


def record(
    config: str,
    x: torch.Tensor,
    weight: Any,
    kernel: str,
    fallback: bool,
    reason: str | None,
    platform: Platform,
) -> None:
    """Append one call to the active trace, if any (aoq.dispatch calls this once per matmul)."""
    trace = _TRACE.get()
    if trace is not None:
        m, k = x.shape
        trace.records.append(
            KernelRecord(
                module=trace.current_module(),
                config=config,
                kernel=kernel,
                backend=platform.backend.value,
                arch=platform.arch,
                fallback=fallback,
                reason=reason,
                shape=(m, k, weight.shape[0]),
                dtype=str(x.dtype).removeprefix("torch."),
            )
        )
