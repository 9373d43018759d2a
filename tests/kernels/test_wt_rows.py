"""kernels/wt_rows.py: weight-only int8 / e4m3 at 65-128 rows with the weights as the MMA's
register operand, x and the codes through device-made tensor descriptors.

The serving rules run anywhere; the kernel runs under TRITON_INTERPRET=1 (``make
kernels-interpret``) and on an sm90 GPU: against the float64 product of the dequantized
weights, split or not, with and without a bias, and through weight_only_mm's decode entry
(the path the dispatch takes)."""

import pytest
import torch
from _pairwise import pairwise
from aoq.kernels import splitk, wt_rows
from aoq.kernels import weight_only as wo
from aoq.kernels._common import INTERPRET, Strategy, WeightFormat

from aoq.backends import Backend
from aoq.formats import affine, float8

GPU = torch.cuda.is_available() and not INTERPRET and wt_rows._sm90(-1)
runs = pytest.mark.skipif(
    not (INTERPRET or GPU), reason="needs TRITON_INTERPRET=1 before import, or an sm90 GPU"
)
DEV = "cuda" if GPU else "cpu"


@pytest.fixture
def enabled(monkeypatch):
    monkeypatch.setattr(wt_rows, "ENABLED", True)


def _weight(fmt: str, n: int, k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(codes, scale [N, 1] float32, dequantized float64 weight) on DEV."""
    w = torch.randn(n, k, device=DEV)
    if fmt == "int8":
        q, s = affine.quantize_int8_symmetric(w, None)
    else:
        q, s = float8.quantize_fp8(w, float8.Granularity.ROW)
    s = s.reshape(-1, 1).float()
    return q, s, q.double() * s.double()


def _x(m: int, k: int, dtype: torch.dtype) -> torch.Tensor:
    return torch.randn(m, k, device=DEV).to(dtype)


def test_serves_its_rows_formats_and_shapes(enabled):
    x, q = torch.empty(100, 256, dtype=torch.bfloat16), torch.empty(128, 256, dtype=torch.int8)
    ok = INTERPRET  # CPU tensors: only the interpreter runs kernels on them
    assert wt_rows.serves(x, q, 1, WeightFormat.INT8) is ok
    assert wt_rows.serves(x.half(), q, 1, WeightFormat.FP8) is ok
    assert wt_rows.serves(x[:65], q, 1, WeightFormat.INT8) is ok
    assert not wt_rows.serves(x[:64], q, 1, WeightFormat.INT8)  # decode_mma's rows
    assert not wt_rows.serves(torch.empty(129, 256, dtype=torch.bfloat16), q, 1,
                              WeightFormat.INT8)  # fmt: skip
    assert not wt_rows.serves(x.float(), q, 1, WeightFormat.INT8)
    assert not wt_rows.serves(x, q, 2, WeightFormat.INT8)  # per channel only
    assert not wt_rows.serves(x, q, 1, WeightFormat.UINT4)
    assert not wt_rows.serves(x, q[:96], 1, WeightFormat.INT8)  # N a multiple of BLOCK_N
    assert not wt_rows.serves(x[:, :192], q[:, :192], 1, WeightFormat.INT8)  # K of BLOCK_K
    assert not wt_rows.serves(torch.empty(256, 100, dtype=torch.bfloat16).t(), q, 1,
                              WeightFormat.INT8)  # fmt: skip
    flat = torch.empty(100 * 256 + 8, dtype=torch.bfloat16)
    assert wt_rows.serves(flat[8:].view(100, 256), q, 1, WeightFormat.INT8) is ok  # 16 bytes in
    assert not wt_rows.serves(flat[1:-7].view(100, 256), q, 1, WeightFormat.INT8)  # TMA: 2 bytes


def test_off_by_default(monkeypatch):
    monkeypatch.setattr(wt_rows, "ENABLED", False)
    x, q = torch.empty(100, 256, dtype=torch.bfloat16), torch.empty(128, 256, dtype=torch.int8)
    assert not wt_rows.serves(x, q, 1, WeightFormat.INT8)


def test_split_fills_two_programs_an_sm(monkeypatch):
    """splitk.plan at PER_SM: 8192^2 in 2, N 14336 unsplit, N 4096 in 4 (132 SMs)."""
    monkeypatch.setattr(splitk, "sm_count", lambda index: 132)
    dev = torch.device("cuda", 0)
    for n, k, want in ((8192, 8192, 2), (14336, 4096, 1), (4096, 14336, 4)):
        got = splitk.split_k(Backend.CUDA, dev, n // wt_rows.BLOCK_N, k, wt_rows.BLOCK_K,
                             per_sm=wt_rows.PER_SM)  # fmt: skip
        assert got == want, (n, k)


@runs
@pytest.mark.parametrize(
    ("fmt", "dtype", "m", "split", "bias"),
    pairwise(["int8", "fp8"], {"bf16": torch.bfloat16, "fp16": torch.float16}, [65, 100, 128],
             [1, 2, 3], [False, True]),
)  # fmt: skip
def test_matches_the_float64_product(fmt, dtype, m, split, bias):
    torch.manual_seed(0)
    n, k = 128, 384
    q, s, deq = _weight(fmt, n, k)
    x = _x(m, k, dtype)
    b = torch.randn(n, device=DEV).to(dtype) if bias else None
    y = torch.empty(m, n, dtype=dtype, device=DEV)
    wt_rows.wt_rows(x, q, s, b, y, split)
    want = x.double() @ deq.T + (b.double() if bias else 0)
    # float32 sums, then one rounding to x's dtype: within two of its ulps of the product
    ulp = 2.0**-7 if dtype == torch.bfloat16 else 2.0**-10
    assert ((y.double() - want).abs() <= 2 * ulp * want.abs() + 1e-3).all()


@runs
@pytest.mark.parametrize("fmt", ["int8", "fp8"])
def test_splits_agree_and_rows_past_m_stay_out(fmt):
    """Split or not the same sums up to float32 order; only M rows of y are written."""
    torch.manual_seed(1)
    q, s, _ = _weight(fmt, 128, 512)
    x = _x(70, 512, torch.bfloat16)
    ys = []
    for split in (1, 4):
        y = torch.full((72, 128), 7.0, dtype=torch.bfloat16, device=DEV)
        wt_rows.wt_rows(x, q, s, None, y[:70], split)
        assert (y[70:] == 7.0).all()
        ys.append(y[:70].float())
    assert torch.allclose(ys[0], ys[1], rtol=2**-7, atol=1e-3)


@runs
def test_the_decode_entry_takes_it(enabled, monkeypatch):
    """weight_only_mm's decode strategy hands 65-128 rows to wt_rows when it serves."""
    torch.manual_seed(2)
    q, s, deq = _weight("int8", 128, 256)
    x = _x(96, 256, torch.bfloat16)
    calls = []
    real = wt_rows.wt_rows
    monkeypatch.setattr(wt_rows, "wt_rows", lambda *a: calls.append(1) or real(*a))
    y = wo.weight_only_mm_triton(x, q, s, None, None, int(Strategy.DECODE))
    assert calls == [1]
    want = x.double() @ deq.T
    assert ((y.double() - want).abs() <= 2 * 2.0**-7 * want.abs() + 1e-3).all()
