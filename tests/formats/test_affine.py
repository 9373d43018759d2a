import pytest
import torch

from aoq.formats import affine
from aoq.formats.packing import pack_uint4, unpack_uint4


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32, torch.float64])
def test_scales_are_float32_for_every_input_dtype(dtype):
    x = torch.randn(8, 64, dtype=dtype)
    assert affine.quantize_int8_symmetric(x)[1].dtype == torch.float32
    assert affine.quantize_uint4_asymmetric(x, 32)[1].dtype == torch.float32
    assert affine.quantize_int4_symmetric(x, 32)[1].dtype == torch.float32
    assert affine.quantize_per_token_int8(x)[1].dtype == torch.float32
    assert affine.quantize_per_token_int8_asymmetric(x)[1].dtype == torch.float32


def test_int8_symmetric_hand_example():
    x = torch.tensor([[1.0, -0.5, 0.25, 127.0 / 254]])
    q, s = affine.quantize_int8_symmetric(x)
    assert torch.equal(s, torch.tensor([[1.0]]) / 127)  # float32 division, like the kernels
    # 0.5 * 127 = 63.5 -> 64 (ties to even), 0.25 * 127 = 31.75 -> 32, 63.5 -> 64
    assert q.tolist() == [[127, -64, 32, 64]]


def test_round_half_to_even():
    # s = 127 / 127 = 1: codes are round(x) with ties to even
    x = torch.tensor([[127.0, 0.5, 1.5, 2.5, -0.5, -1.5]])
    q, _ = affine.quantize_int8_symmetric(x)
    assert q.tolist() == [[127, 0, 2, 2, 0, -2]]


def test_zero_group_is_finite_and_zero():
    x = torch.zeros(2, 64)
    q, s = affine.quantize_int8_symmetric(x, 32)
    assert torch.all(q == 0) and torch.all(s == affine.TINY)
    q4, s4, z4 = affine.quantize_uint4_asymmetric(x, 32)
    assert torch.all(affine.dequantize_uint4_asymmetric(q4, s4, z4) == 0)


def test_uint4_asymmetric_represents_zero_and_extremes():
    x = torch.randn(16, 128)
    x[:, 5] = 0.0
    q, s, z = affine.quantize_uint4_asymmetric(x, 64)
    assert q.max() <= 15 and q.min() >= 0 and z.max() <= 15
    w = affine.dequantize_uint4_asymmetric(q, s, z)
    assert torch.all(w[:, 5] == 0)
    err = (w - x).abs().reshape(16, 2, 64).amax(-1)
    assert torch.all(err <= s * 0.5 + 1e-6)


def test_int4_symmetric_range_and_error_bound():
    x = torch.randn(8, 64)
    q, s = affine.quantize_int4_symmetric(x, 32)
    assert q.min() >= -8 and q.max() <= 7
    w = affine.dequantize_symmetric(q, s)
    err = (w - x).abs().reshape(8, 2, 32).amax(-1)
    assert torch.all(err <= s * 0.5 + 1e-6)


def test_per_token_asymmetric_round_trip():
    x = torch.rand(4, 100) * 3 + 1  # all positive: asymmetric uses the whole range
    q, s, z = affine.quantize_per_token_int8_asymmetric(x)
    w = (q.to(torch.float32) - z.unsqueeze(-1)) * s.unsqueeze(-1)
    assert torch.all((w - x).abs() <= s.unsqueeze(-1) * 0.5 + 1e-6)


def test_group_size_error_names_value_and_fix():
    with pytest.raises(ValueError, match=r"K=100 is not divisible by group_size=32.*pad K"):
        affine.quantize_int8_symmetric(torch.randn(4, 100), 32)


def test_static_and_bias_int32():
    x = torch.tensor([[0.1, -0.2, 10.0]])
    q = affine.quantize_static_int8(x, torch.tensor(0.01))
    assert q.tolist() == [[10, -20, 127]]
    b = affine.quantize_bias_int32(torch.tensor([1.0, -2.0]), torch.tensor([0.5, 0.25]))
    assert b.dtype == torch.int32 and b.tolist() == [2, -8]
    with pytest.raises(ValueError, match="int32"):
        affine.quantize_bias_int32(torch.tensor([1e10]), torch.tensor([1e-3]))


def test_uint4_packing_low_nibble_first():
    codes = torch.tensor([[1, 2, 15, 0]], dtype=torch.uint8)
    packed = pack_uint4(codes)
    assert packed.tolist() == [[0x21, 0x0F]]
    assert torch.equal(unpack_uint4(packed), codes)
