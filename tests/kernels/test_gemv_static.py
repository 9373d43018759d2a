"""kernels/gemv_static.py: its rule (which GPUs, which calls) everywhere; the kernel and the
decode path that routes to it under TRITON_INTERPRET=1 (``make kernels-interpret``), against
the float64 product of the same codes and aoq.formats' reference."""

from types import SimpleNamespace

import pytest
import torch
from aoq.kernels import gemv_static as gs
from aoq.kernels import weight_only as wo
from aoq.kernels._common import INTERPRET, WeightFormat

from aoq.formats import affine, float8
from aoq.testing.metrics import max_rel_error

interpret = pytest.mark.skipif(not INTERPRET, reason="needs TRITON_INTERPRET=1 before import")
gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")

# memory clock (kHz) and bus width (bits) as torch 2.11 reported them on the lent H100 and
# H200 (the A100: its data sheet)
H100 = SimpleNamespace(major=9, minor=0, memory_clock_rate=2_619_000, memory_bus_width=5120)
H200 = SimpleNamespace(major=9, minor=0, memory_clock_rate=3_201_000, memory_bus_width=6016)
A100 = SimpleNamespace(major=8, minor=0, memory_clock_rate=1_593_000, memory_bus_width=5120)
UNREPORTED = SimpleNamespace(major=9, minor=0)


def test_dram_bandwidth_from_the_device_properties():
    assert gs.dram_bandwidth(H100) == pytest.approx(3.35e12, rel=1e-3)
    assert gs.dram_bandwidth(H200) == pytest.approx(4.81e12, rel=1e-3)
    assert gs.dram_bandwidth(UNREPORTED) is None


@pytest.mark.parametrize(
    "props, fast",
    [(H100, True), (H200, False), (A100, False), (UNREPORTED, False)],
    ids=["h100", "h200", "a100", "unreported"],
)
def test_only_sm90_under_the_bandwidth_bar_is_fast(monkeypatch, props, fast):
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: props)
    gs._fast_on.cache_clear()
    try:
        assert gs._fast_on(0) is fast
    finally:
        gs._fast_on.cache_clear()


def test_the_whole_row_in_one_step_only_at_the_measured_k():
    assert gs.static_tile(4096) == {"BLOCK_N": 2, "BLOCK_K": 4096, "num_warps": 4}
    assert gs.static_tile(8192) == {"BLOCK_N": 2, "BLOCK_K": 8192, "num_warps": 8}
    for k in (1024, 6144, 14336):
        assert gs.static_tile(k) == gs.STATIC_TILE


def test_cpu_tensors_are_never_served():
    x = torch.randn(1, 256)
    assert not gs.serves(x, torch.zeros(8, 256, dtype=torch.int8), 1, WeightFormat.INT8)


@pytest.mark.parametrize(
    "m, k, groups, wfmt, served",
    [
        (1, 4096, 1, WeightFormat.INT8, True),
        (1, 4096, 1, WeightFormat.FP8, True),
        (2, 4096, 1, WeightFormat.INT8, False),
        (1, 4096, 32, WeightFormat.INT8, False),
        (1, 4096, 32, WeightFormat.UINT4, False),
        (1, gs.MAX_K + 512, 1, WeightFormat.INT8, False),
    ],
)
def test_serves_one_row_of_per_channel_byte_codes(monkeypatch, m, k, groups, wfmt, served):
    monkeypatch.setattr(gs, "fast_on", lambda device: True)
    x = torch.empty(m, k)
    assert gs.serves(x, torch.empty(8, k, dtype=torch.int8), groups, wfmt) is served
    assert not gs.serves(torch.empty(1, 2 * k)[:, ::2], torch.empty(8, k, dtype=torch.int8), 1,
                         WeightFormat.INT8)  # fmt: skip


def _codes(n: int, k: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    w = torch.randn(n, k)
    q8, s8 = affine.quantize_int8_symmetric(w, None)
    q8[0, :4] = torch.tensor([-128, 127, 0, -1], dtype=torch.int8)  # the code range's ends
    return [(q8, s8), float8.quantize_fp8(w, float8.Granularity.ROW)]


def _check_float_product(n: int, k: int, bias: bool, device: str = "cpu") -> None:
    x = torch.randn(1, k).to(torch.bfloat16)
    b = torch.randn(n) if bias else None
    for q, s in _codes(n, k):
        x, q, s, b = (t.to(device) if t is not None else None for t in (x, q, s, b))
        y = torch.empty(1, n, dtype=torch.float32, device=device)
        gs.gemv_static(x, q, s, b, y)
        want = (x.double() @ q.double().t()) * s.double().reshape(1, -1)
        # float32 sums of K terms: off by a few float32 ulps of the sum of the terms' sizes
        size = (x.double().abs() @ q.double().abs().t()) * s.double().reshape(1, -1)
        if b is not None:
            want += b.double()
            size += b.double().abs()
        err = ((y.double() - want).abs() / size.clamp_min(1e-30)).max().item()
        assert err < 2e-6, (q.dtype, err)


@interpret
@pytest.mark.parametrize("n, k", [(8, 256), (7, 200), (5, 1300), (5, 4096)], ids=str)
@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
def test_static_gemv_is_the_float_product(n, k, bias):
    """Rows past N (7, 5 against 2-row programs), a partial last K step (200, 1300 against
    512-code steps) and a whole row in one step (4096) included."""
    _check_float_product(n, k, bias)


@gpu
@pytest.mark.parametrize("n, k", [(4096, 4096), (1001, 4100)], ids=str)
def test_static_gemv_on_the_gpu(n, k):
    """The same on a GPU, whatever its rule says (fp8 there: the hardware's conversion)."""
    _check_float_product(n, k, True, "cuda")


@interpret
def test_static_gemv_of_no_rows_and_of_short_rows():
    y = torch.empty(1, 0)
    assert gs.gemv_static(torch.randn(1, 64), torch.zeros(0, 64, dtype=torch.int8),
                          torch.ones(0), None, y) is y  # fmt: skip
    _check_float_product(3, 16, True)  # one masked step of 512 codes


@interpret
def test_static_gemv_refuses_mismatched_shapes():
    q = torch.zeros(8, 256, dtype=torch.int8)
    with pytest.raises(ValueError, match="one row"):
        gs.gemv_static(torch.randn(2, 256), q, torch.ones(8), None, torch.empty(2, 8))


@interpret
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
def test_decode_routes_to_the_static_gemv_where_it_is_fast(monkeypatch, dtype):
    """weight_only's decode takes the static GEMV where fast_on says so (a GPU's rule, forced
    here) and gives the reference's result within the float path's rule."""
    calls = []
    real = gs.gemv_static
    monkeypatch.setattr(gs, "fast_on", lambda device: True)
    monkeypatch.setattr(gs, "gemv_static", lambda *a, **k: calls.append(1) or real(*a, **k))
    x = torch.randn(1, 640).to(dtype)
    bias = torch.randn(24).to(dtype)
    for q, s in _codes(24, 640):
        want = wo.weight_only_mm(x, q, s, None, bias, 0)
        got = wo.weight_only_mm_triton(x, q, s, None, bias, 0)
        assert got.dtype == dtype and max_rel_error(want.float(), got.float()) < 1e-2
    assert len(calls) == 2
