"""fp8_mm.scaled_mm (torch._scaled_mm) on the CPU: both of its routes for row-wise scales
give the reference's product, and the probe of the row-wise output dtypes is cached."""

import pytest
import torch
from aoq.kernels import fp8_mm

from aoq.formats import float8
from aoq.formats import linear as ref
from aoq.testing.metrics import max_rel_error


@pytest.mark.parametrize("out_dtype", [torch.float16, torch.bfloat16, torch.float32], ids=str)
def test_scaled_mm_routes_agree_with_the_reference(monkeypatch, out_dtype):
    """Row-wise scales into the output dtype (where this torch takes it) and unit scales into
    float32 with the scales applied after: each within the output dtype's rounding."""
    torch.manual_seed(0)
    x, w, bias = torch.randn(32, 64), torch.randn(48, 64), torch.randn(48)
    wq, ws = float8.quantize_fp8(w, float8.Granularity.ROW)
    xq, xs = float8.quantize_fp8(x, float8.Granularity.ROW)
    want = ref.fp8_act_linear(xq, xs, wq, ws, torch.float64, bias=bias)
    budget = {torch.float16: 2e-3, torch.bfloat16: 1e-2, torch.float32: 1e-5}[out_dtype]
    key = ("cpu", None, out_dtype, wq.dtype)
    direct = out_dtype != torch.float32 and fp8_mm.rowwise_output(xq.device, out_dtype, wq.dtype)
    for known in {direct, False}:
        if out_dtype != torch.bfloat16:
            monkeypatch.setitem(fp8_mm._ROWWISE_OUTPUT, key, known)
        got = fp8_mm.scaled_mm(xq, xs, wq, ws, bias, out_dtype)
        assert got.dtype == out_dtype
        assert max_rel_error(want, got) <= budget, (known, max_rel_error(want, got))


def test_rowwise_output_is_probed_once(monkeypatch):
    """bf16 needs no probe; another dtype is probed on the first call, then read from the
    cache (a later call costs no product)."""
    monkeypatch.setattr(fp8_mm, "_ROWWISE_OUTPUT", {})
    calls = []
    real = torch._scaled_mm

    def counting(*args, **kwargs):
        calls.append(kwargs.get("out_dtype"))
        return real(*args, **kwargs)

    monkeypatch.setattr(torch, "_scaled_mm", counting)
    cpu = torch.device("cpu")
    assert fp8_mm.rowwise_output(cpu, torch.bfloat16, torch.float8_e4m3fn)
    assert calls == []
    first = fp8_mm.rowwise_output(cpu, torch.float16, torch.float8_e4m3fn)
    again = fp8_mm.rowwise_output(cpu, torch.float16, torch.float8_e4m3fn)
    assert first == again and calls == [torch.float16]
