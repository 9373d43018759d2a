import pytest
import torch

from aoq.formats.float8 import Granularity, dequantize_fp8, fp8_max, quantize_fp8


@pytest.mark.parametrize("fp8", [torch.float8_e4m3fn, torch.float8_e4m3fnuz])
@pytest.mark.parametrize("gran", list(Granularity))
def test_scale_maps_amax_to_max_and_saturates(fp8, gran):
    x = torch.randn(16, 64) * 10
    q, s = quantize_fp8(x, gran, fp8)
    assert q.dtype == fp8 and s.dtype == torch.float32
    assert s.shape == ((16, 1) if gran is Granularity.ROW else (1,))
    assert q.to(torch.float32).abs().max() == fp8_max(fp8)
    rel = (dequantize_fp8(q, s) - x).abs() / x.abs().clamp(min=1e-3)
    assert rel[x.abs() > s * 2**-6 * 8].max() <= 2**-4 + 1e-6  # 3 mantissa bits, RNE


def test_cast_is_round_to_nearest_even():
    # e4m3 has 3 mantissa bits: between 1 and 2 the step is 1/8; 1 + 1/16 ties to 1
    q, s = quantize_fp8(torch.tensor([[448.0, 1.0625 * 448 / 448]]), Granularity.ROW)
    assert s.item() == 1.0
    assert q.to(torch.float32).tolist() == [[448.0, 1.0]]


def test_nan_propagates_and_empty_ok():
    q, _ = quantize_fp8(torch.tensor([[1.0, float("nan")]]), Granularity.ROW)
    assert torch.isnan(q.to(torch.float32)[0, 1])
    q, s = quantize_fp8(torch.empty(0, 8), Granularity.ROW)
    assert q.shape == (0, 8) and s.shape == (0, 1)


def test_rejects_non_fp8_dtype():
    with pytest.raises(ValueError, match="not a float8 dtype"):
        fp8_max(torch.int8)
