"""The CPU fp8 kernel's precondition: an unvectorized torch._scaled_mm (torch 2.11's oneDNN
path on some CPUs) is a recorded fallback to the reference, not a kernel that hangs a run."""

import pytest
import torch

import aoq
from aoq.tensors import float8 as f8


def test_slow_cpu_scaled_mm_is_a_recorded_fallback(monkeypatch):
    monkeypatch.setattr(f8, "_best_ms", lambda fn, reps=2: 900.0)
    f8._cpu_scaled_mm_slow.cache_clear()
    try:
        lin = aoq.quantize_(
            torch.nn.Linear(64, 32), aoq.Float8DynamicActivationFloat8WeightConfig("tensor")
        )
        with aoq.trace_kernels() as trace:
            lin(torch.randn(4, 64))
        rec = trace.records[0]
        assert rec.fallback and rec.kernel.startswith("reference.")
        assert "unvectorized" in rec.reason
    finally:
        f8._cpu_scaled_mm_slow.cache_clear()


def test_fast_cpu_scaled_mm_serves():
    f8._cpu_scaled_mm_slow.cache_clear()
    slow = f8._cpu_scaled_mm_slow()
    if slow is not None:
        pytest.skip(f"no fast path on this CPU (the slow case is tested above): {slow}")
    lin = aoq.quantize_(
        torch.nn.Linear(64, 32), aoq.Float8DynamicActivationFloat8WeightConfig("tensor")
    )
    with aoq.trace_kernels() as trace:
        lin(torch.randn(4, 64))
    assert trace.records[0].kernel == "aten._scaled_mm"
