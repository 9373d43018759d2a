"""kernels/wt_rows.py's W4A8 tile (WFMT 2): the weights ((q - 8) · s in float32, rounded once
to x's dtype) and the dequantized activations that ``cublas.w4a8.dequant_mm`` multiplies, the
product checked against float64 sums of them (its entry ``triton.w4a8.rows``:
tests/tensors/test_triton_linear_rows.py).

Runs under TRITON_INTERPRET=1 on CPU tensors (make kernels-interpret) and on an sm90 GPU."""

import pytest
import torch
from _pairwise import pairwise
from aoq.kernels import weight_dequant, wt_rows, wt_rows_w4a8
from aoq.kernels._common import INTERPRET

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
    pairwise([32, 64, 128, 256], {"bf16": torch.bfloat16, "fp16": torch.float16}, [65, 100, 128],
             [1, 2], [False, True]),
)  # fmt: skip
def test_the_dequant_mm_operands_summed_in_float32(group, dtype, m, split, bias):
    """65 rows: x by masked loads; 100 and 128 through its descriptor."""
    torch.manual_seed(0)
    n, k = 128, 512
    codes, s = _w4a8(n, k, group)
    xd = torch.randn(m, k, device=DEV).to(dtype)
    b = torch.randn(n, device=DEV).to(dtype) if bias else None
    y = wt_rows_w4a8.w4a8_rows(xd, codes, s, b, split)
    wd = _dequant_mm_operands(xd, codes, s)
    want = xd.double() @ wd.double().T + (b.double() if bias else 0)
    ulp = 2.0**-7 if dtype == torch.bfloat16 else 2.0**-10
    assert y.dtype == dtype and y.shape == (m, n)
    assert ((y.double() - want).abs() <= 2 * ulp * want.abs() + 1e-3).all()
    # the CPU op: the same weights by aoq.formats, the same float32 product
    ref = wt_rows_w4a8.w4a8_rows_mm(xd.cpu(), codes.cpu(), s.cpu(), None if b is None else b.cpu())
    assert torch.allclose(y.cpu().float(), ref.float(), rtol=2 * ulp, atol=1e-3)


@runs
@pytest.mark.parametrize("group", [32, 128])
def test_half_steps_the_dequant_mm_operands(group, monkeypatch):
    """TILE's ``step`` 64 (a probe): two groups of 32 a step, or half a group of 128."""
    monkeypatch.setattr(wt_rows, "TILE", {2: {"step": 64, "per_sm": 4}})
    torch.manual_seed(1)
    n, k, m = 128, 512, 100
    codes, s = _w4a8(n, k, group)
    xd = torch.randn(m, k, device=DEV).to(torch.bfloat16)
    y = wt_rows_w4a8.w4a8_rows(xd, codes, s, None, 2)
    want = xd.double() @ _dequant_mm_operands(xd, codes, s).double().T
    assert ((y.double() - want).abs() <= 2 * 2.0**-7 * want.abs() + 1e-3).all()


def test_serves_w4a8():
    x = torch.empty(100, 256, dtype=torch.bfloat16)
    codes, s = torch.empty(128, 128, dtype=torch.uint8), torch.empty(128, 8)
    ok = INTERPRET and wt_rows.ENABLED  # CPU tensors: only the interpreter runs them
    assert wt_rows_w4a8.serves_w4a8(x, codes, s) is ok
    assert wt_rows_w4a8.serves_w4a8(x[:65], codes, s) is ok
    assert not wt_rows_w4a8.serves_w4a8(x[:64], codes, s)  # decode_mma's rows
    assert not wt_rows_w4a8.serves_w4a8(torch.empty(129, 256, dtype=torch.bfloat16), codes, s)
    assert not wt_rows_w4a8.serves_w4a8(x.float(), codes, s)
    assert wt_rows_w4a8.serves_w4a8(x, codes, torch.empty(128, 1)) is ok  # groups of 256
    x384, codes384 = torch.empty(100, 384, dtype=torch.bfloat16), torch.empty(128, 192)
    assert not wt_rows_w4a8.serves_w4a8(x384, codes384.byte(), torch.empty(128, 4))  # groups of 96
    assert not wt_rows_w4a8.serves_w4a8(x, codes, s.double())
    assert not wt_rows_w4a8.serves_w4a8(x, codes[:96], s[:96])  # N a multiple of BLOCK_N
    assert not wt_rows_w4a8.serves_w4a8(x, codes.t().contiguous().t(), s)
    off = torch.empty(128 * 128 + 8, dtype=torch.uint8)[8:].view(128, 128)
    assert not wt_rows_w4a8.serves_w4a8(x, off, s)  # 8 bytes into its storage (TMA: 16)


@pytest.mark.skipif(not GPU, reason="needs an sm90 GPU")
@pytest.mark.parametrize("m", [80, 100, 128])
def test_repeated_calls_give_one_value_at_a_full_wave(m):
    """4096^2 with K split 4 (two programs an SM; 80 rows: the wide tile, one an SM): six calls
    of one input, the same bits each time and near the reference. With x through its
    descriptor the 64-row tile's 3-stage loop raced there on an H200 (runs of eight columns
    wrong, moving from call to call: conformance 9e9cc3, bench/NOTES.md sessions 58-59), which
    the small shapes above never showed."""
    torch.manual_seed(0)
    n = k = 4096
    codes, s = _w4a8(n, k, 32)
    xd = torch.randn(m, k, device=DEV).to(torch.bfloat16)
    ys = [wt_rows_w4a8.w4a8_rows(xd, codes, s, None, 4) for _ in range(6)]
    assert all(torch.equal(y, ys[0]) for y in ys[1:])
    want = wt_rows_w4a8.w4a8_rows_mm(xd.cpu(), codes.cpu(), s.cpu(), None).float()
    err = (ys[0].float().cpu() - want).norm() / want.norm()
    assert err < 1e-3, float(err)
