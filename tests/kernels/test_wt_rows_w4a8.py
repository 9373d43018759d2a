"""kernels/wt_rows.py's W4A8 tile (WFMT 2) and its entry ``triton.w4a8.rows``: the weights
((q - 8) · s in float32, rounded once to x's dtype) and the dequantized activations that
``cublas.w4a8.dequant_mm`` multiplies, the product checked against float64 sums of them.

Runs under TRITON_INTERPRET=1 on CPU tensors (make kernels-interpret) and on an sm90 GPU."""

import pytest
import torch
from _pairwise import pairwise
from aoq.kernels import act_qdq, weight_dequant, wt_rows
from aoq.kernels._common import INTERPRET
from torch import nn

import aoq
from aoq import dispatch
from aoq.formats import packing

GPU = torch.cuda.is_available() and not INTERPRET and wt_rows._sm90(-1)
runs = pytest.mark.skipif(
    not (INTERPRET or GPU), reason="needs TRITON_INTERPRET=1 before import, or an sm90 GPU"
)
DEV = "cuda" if GPU else "cpu"


def _w4a8(n: int, k: int, group: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(codes q + 8 packed two a byte [N, K / 2], float32 scales [N, G]) on DEV."""
    q = torch.randint(0, 16, (n, k), dtype=torch.uint8, device=DEV)
    s = torch.rand(n, k // group, device=DEV) * 0.1 + 1e-3
    return packing.pack_uint4(q), s


def _dequant_mm_operands(xd: torch.Tensor, codes: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """The weights as weight_dequant makes them for the BLAS path (zero points of 8)."""
    eight = torch.full(s.shape, 8, dtype=torch.uint8, device=DEV)
    return weight_dequant.dequantize_weight_triton(codes, s, eight, xd.shape[1], xd.dtype)


@runs
@pytest.mark.parametrize(
    ("group", "dtype", "m", "split", "bias"),
    pairwise([32, 64, 128], {"bf16": torch.bfloat16, "fp16": torch.float16}, [65, 100, 128],
             [1, 2], [False, True]),
)  # fmt: skip
def test_the_dequant_mm_operands_summed_in_float32(group, dtype, m, split, bias):
    """65 rows: x by masked loads; 100 and 128 through its descriptor."""
    torch.manual_seed(0)
    n, k = 128, 256
    codes, s = _w4a8(n, k, group)
    xd = torch.randn(m, k, device=DEV).to(dtype)
    b = torch.randn(n, device=DEV).to(dtype) if bias else None
    y = wt_rows.w4a8_rows(xd, codes, s, b, split)
    wd = _dequant_mm_operands(xd, codes, s)
    want = xd.double() @ wd.double().T + (b.double() if bias else 0)
    ulp = 2.0**-7 if dtype == torch.bfloat16 else 2.0**-10
    assert y.dtype == dtype and y.shape == (m, n)
    assert ((y.double() - want).abs() <= 2 * ulp * want.abs() + 1e-3).all()
    # the CPU op: the same weights by aoq.formats, the same float32 product
    ref = wt_rows.w4a8_rows_mm(xd.cpu(), codes.cpu(), s.cpu(), None if b is None else b.cpu())
    assert torch.allclose(y.cpu().float(), ref.float(), rtol=2 * ulp, atol=1e-3)


def test_serves_w4a8():
    x = torch.empty(100, 256, dtype=torch.bfloat16)
    codes, s = torch.empty(128, 128, dtype=torch.uint8), torch.empty(128, 8)
    ok = INTERPRET and wt_rows.ENABLED  # CPU tensors: only the interpreter runs them
    assert wt_rows.serves_w4a8(x, codes, s) is ok
    assert wt_rows.serves_w4a8(x[:65], codes, s) is ok
    assert not wt_rows.serves_w4a8(x[:64], codes, s)  # decode_mma's rows
    assert not wt_rows.serves_w4a8(torch.empty(129, 256, dtype=torch.bfloat16), codes, s)
    assert not wt_rows.serves_w4a8(x.float(), codes, s)
    assert not wt_rows.serves_w4a8(x, codes, torch.empty(128, 1))  # groups of 256
    assert not wt_rows.serves_w4a8(x, codes, s.double())
    assert not wt_rows.serves_w4a8(x, codes[:96], s[:96])  # N a multiple of BLOCK_N
    assert not wt_rows.serves_w4a8(x, codes.t().contiguous().t(), s)
    off = torch.empty(128 * 128 + 8, dtype=torch.uint8)[8:].view(128, 128)
    assert not wt_rows.serves_w4a8(x, off, s)  # 8 bytes into its storage (TMA: 16)


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
    wd = _dequant_mm_operands(xd, w.qdata, w.scale)
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
