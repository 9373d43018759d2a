"""aoq/tensors/triton_linear_rows.py: ``triton.w4a8.rows``, W4A8 at 65-128 rows on
kernels/wt_rows.py's W4A8 tile, multiplies what ``cublas.w4a8.dequant_mm`` does (act_qdq's
activations, weight_dequant's weights) with float32 sums, eagerly and under torch.compile.

Runs under TRITON_INTERPRET=1 on CPU tensors (make kernels-interpret) and on an sm90 GPU."""

import pytest
import torch
from aoq.kernels import act_qdq, weight_dequant, wt_rows
from aoq.kernels._common import INTERPRET
from torch import nn

import aoq
from aoq import dispatch

GPU = torch.cuda.is_available() and not INTERPRET and wt_rows._sm90(-1)
runs = pytest.mark.skipif(
    not (INTERPRET or GPU), reason="needs TRITON_INTERPRET=1 before import, or an sm90 GPU"
)
DEV = "cuda" if GPU else "cpu"


def _dequant_mm_weights(x: torch.Tensor, w: aoq.tensors.Int4Tensor) -> torch.Tensor:
    """The weights as weight_dequant makes them for the BLAS path (zero points of 8)."""
    eight = torch.full(w.scale.shape, 8, dtype=torch.uint8, device=DEV)
    return weight_dequant.dequantize_weight_triton(w.qdata, w.scale, eight, x.shape[1], x.dtype)


@runs
@pytest.mark.parametrize("act_mapping", ["symmetric", "asymmetric"])
def test_the_entry_multiplies_what_dequant_mm_does(act_mapping, monkeypatch):
    """``triton.w4a8.rows`` on a quantized Linear at 96 rows: act_qdq's activations and
    weight_dequant's weights (the BLAS path's operands), float32 sums; its check refuses
    64 rows and says why."""
    torch.manual_seed(1)
    monkeypatch.setattr(wt_rows, "ENABLED", True)
    cfg = aoq.Int8DynamicActivationInt4WeightConfig(act_mapping=act_mapping)
    lin = aoq.quantize_(nn.Linear(256, 128, device=DEV, dtype=torch.bfloat16), cfg)
    w, b = lin.weight, lin.bias
    impl = dispatch._IMPLS["triton.w4a8.rows"]
    x = torch.randn(96, 256, device=DEV, dtype=torch.bfloat16)
    assert impl.check(x, w, b) is None
    why = impl.check(x[:64], w, b)
    assert why is not None and "65-128 rows" in why
    with torch.no_grad():
        y = impl.fn(x, w, b)
    mode = 1 if act_mapping == "asymmetric" else 0
    xd = act_qdq.qdq_int8_act_triton(x, mode, None)
    wd = _dequant_mm_weights(xd, w)
    want = xd.double() @ wd.double().T + b.double()
    assert ((y.double() - want).abs() <= 2 * 2.0**-7 * want.abs() + 1e-3).all()


@runs
def test_the_entry_compiles(monkeypatch):
    """torch.compile (aot_eager) of a W4A8 Linear whose table names ``triton.w4a8.rows``:
    its check on fake tensors (which have no data pointer: the H200 matrix's compile cases
    failed so, run df9543), then the torch.library ops (act_qdq's, aoq::w4a8_rows_mm) and
    their fake implementations; the compiled call gives the eager call's values within
    float32 order."""
    torch.manual_seed(2)
    monkeypatch.setattr(wt_rows, "ENABLED", True)
    monkeypatch.setattr(dispatch, "candidates", lambda *a, **k: ("triton.w4a8.rows",))
    lin = aoq.quantize_(nn.Linear(256, 128, device=DEV, dtype=torch.bfloat16),
                        aoq.Int8DynamicActivationInt4WeightConfig())  # fmt: skip
    x = torch.randn(100, 256, device=DEV, dtype=torch.bfloat16)
    with torch.no_grad(), aoq.trace_kernels() as trace:
        want = lin(x)
    assert [(r.kernel, r.fallback) for r in trace.records] == [("triton.w4a8.rows", False)]
    with torch.no_grad(), dispatch.strict():  # (a refused check would raise: no fallback)
        got = torch.compile(lin, backend="aot_eager", fullgraph=True)(x)
    assert torch.allclose(got.float(), want.float(), rtol=2**-7, atol=1e-2)
