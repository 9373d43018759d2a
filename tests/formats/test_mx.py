"""aoq.formats.mx: element tables, bit helpers, the scale rules' edges, RNE ties, saturation,
NaN/Inf blocks, axes, dtypes and errors. The bit-for-bit check against an independent numpy
oracle lives in test_mx_oracle.py."""

from __future__ import annotations

import math

import pytest
import torch

from aoq.formats.mx import (
    MXElem,
    ScaleRounding,
    decode_elem,
    e8m0_to_float32,
    encode_elem,
    exp2i,
    floor_log2,
    mx_dequantize,
    mx_quantize,
    mx_shared_exp,
    pack_mx_codes,
    round_to_elem,
    unpack_mx_codes,
)

FLOAT_SUBBYTE = [MXElem.FP6_E2M3, MXElem.FP6_E3M2, MXElem.FP4_E2M1]
FLOOR, RCEIL = ScaleRounding.FLOOR, ScaleRounding.RCEIL


def f32(values: list[float]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32)


def scale_byte(x: torch.Tensor, elem: MXElem, rule: ScaleRounding = FLOOR) -> int:
    """Scale byte of a single block x [32]."""
    return int(mx_quantize(x.reshape(1, -1), elem, x.numel(), scale_rounding=rule)[1])


# --- element formats ---------------------------------------------------------------------------


@pytest.mark.parametrize("elem", list(MXElem))
def test_elem_table_agrees_with_the_definition(elem: MXElem) -> None:
    s = elem.spec
    if elem is MXElem.INT8:
        values = torch.arange(-127, 128, dtype=torch.int8)
    elif elem.codes_dtype == torch.uint8:
        values = torch.arange(2**s.bits, dtype=torch.uint8)
    else:
        values = torch.arange(256, dtype=torch.uint8).view(elem.codes_dtype)
    v = decode_elem(values, elem)
    v = v[torch.isfinite(v)]
    pos = v[v > 0]
    assert float(v.max()) == s.max_normal == -float(v.min())
    assert float(pos.min()) == s.min_subnormal
    assert elem.spec.emax == math.floor(math.log2(s.max_normal))
    if elem is not MXElem.INT8:
        assert s.min_normal == 2.0 ** (1 - s.bias)
        assert s.min_subnormal == 2.0 ** (1 - s.bias - s.mbits)
        assert s.bits == 1 + s.ebits + s.mbits
    if elem.codes_dtype.is_floating_point:
        assert torch.finfo(elem.codes_dtype).max == s.max_normal


@pytest.mark.parametrize("elem", FLOAT_SUBBYTE)
def test_every_subbyte_code_round_trips(elem: MXElem) -> None:
    codes = torch.arange(2**elem.spec.bits, dtype=torch.uint8)
    assert torch.equal(encode_elem(decode_elem(codes, elem), elem), codes)


def test_fp4_bit_patterns_are_sign_exponent_mantissa() -> None:
    codes = torch.tensor([0b0000, 0b0001, 0b0010, 0b0011, 0b0110, 0b0111, 0b1111, 0b1000])
    want = [0.0, 0.5, 1.0, 1.5, 4.0, 6.0, -6.0, -0.0]
    got = decode_elem(codes.to(torch.uint8), MXElem.FP4_E2M1)
    assert got.tolist() == want and torch.signbit(got[-1])
    e3m2 = decode_elem(
        torch.tensor([0b011111, 0b000001, 0b100100], dtype=torch.uint8), MXElem.FP6_E3M2
    )
    assert e3m2.tolist() == [28.0, 0.0625, -0.25]


@pytest.mark.parametrize(
    ("elem", "inputs", "want"),
    [
        # ties go to the even mantissa; between 0 and the min subnormal, to 0
        (MXElem.FP4_E2M1, [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -2.5], [0, 1, 1, 2, 2, 4, 4, -2]),
        (MXElem.FP6_E2M3, [0.0625, 0.1875, 1.0625, 1.1875, 7.25], [0, 0.25, 1, 1.25, 7]),
        (MXElem.FP6_E3M2, [0.03125, 0.09375, 1.125, 1.375, 26.0], [0, 0.125, 1, 1.5, 24]),
        (
            MXElem.FP8_E4M3,
            [1 + 1 / 16, 1 + 3 / 16, 2.0**-10, 3 * 2.0**-10, 400.0],
            [1, 1.25, 0, 2.0**-8, 384],
        ),
        (
            MXElem.FP8_E5M2,
            [1.125, 1.375, 2.0**-17, 3 * 2.0**-17, 53248.0],
            [1, 1.5, 0, 2.0**-15, 49152],
        ),
        (MXElem.INT8, [0.5 / 64, 1.5 / 64, 2.5 / 64, -0.5 / 64], [0, 2 / 64, 2 / 64, 0]),
    ],
)
def test_round_half_to_even(elem: MXElem, inputs: list[float], want: list[float]) -> None:
    assert round_to_elem(f32(inputs), elem).tolist() == want


@pytest.mark.parametrize("elem", list(MXElem))
def test_elements_saturate(elem: MXElem) -> None:
    m = elem.spec.max_normal
    v = f32([m * 1.01, m * 1000, float("inf"), -m * 1.01, -float("inf")])
    assert round_to_elem(v, elem).tolist() == [m, m, m, -m, -m]
    assert decode_elem(encode_elem(v, elem), elem).tolist() == [m, m, m, -m, -m]


def test_subbyte_encode_rejects_nan() -> None:
    with pytest.raises(ValueError, match="no NaN"):
        encode_elem(f32([float("nan")]), MXElem.FP4_E2M1)


# --- bit helpers -------------------------------------------------------------------------------


def test_exp2i_is_exact_over_the_whole_range() -> None:
    n = torch.arange(-149, 128, dtype=torch.int32)
    assert exp2i(n).tolist() == [2.0**k for k in range(-149, 128)]


def test_floor_log2_powers_of_two_neighbours_and_subnormals() -> None:
    k = torch.arange(-149, 128)
    p = exp2i(k)
    assert torch.equal(floor_log2(p), k.to(torch.int32))
    below = torch.nextafter(p[1:], torch.zeros(()))
    assert torch.equal(floor_log2(below), k[:-1].to(torch.int32))
    assert floor_log2(f32([3 * 2.0**-149, 2.0**-127 + 2.0**-149, 1.5, 3.4e38])).tolist() == [
        -148, -127, 0, 127,
    ]  # fmt: skip


def test_e8m0_to_float32() -> None:
    b = torch.arange(256, dtype=torch.uint8)
    v = e8m0_to_float32(b)
    assert math.isnan(v[255])
    assert v[:255].tolist() == [2.0 ** (i - 127) for i in range(255)]
    assert float(v[0]) == 2.0**-127 > 0  # a float32 subnormal
    as_e8m0 = e8m0_to_float32(b.view(torch.float8_e8m0fnu))
    assert torch.equal(as_e8m0[:255], v[:255]) and math.isnan(as_e8m0[255])


# --- the scale rules -----------------------------------------------------------------------------


@pytest.mark.parametrize("rule", list(ScaleRounding))
@pytest.mark.parametrize("elem", list(MXElem))
def test_zero_block(elem: MXElem, rule: ScaleRounding) -> None:
    x = torch.zeros(2, 32)
    codes, scale = mx_quantize(x, elem, scale_rounding=rule)
    assert scale.tolist() == [[0], [0]]  # shared_exp -127
    assert not codes.view(torch.uint8).any()
    assert not mx_dequantize(codes, scale, elem).any()


def test_floor_rule_on_powers_of_two_and_neighbours() -> None:
    for k in (-100, -3, 0, 1, 7, 100):
        for elem in MXElem:
            x = torch.zeros(32)
            x[5] = 2.0**k
            assert scale_byte(x, elem) == k - elem.spec.emax + 127
            x[5] = torch.nextafter(torch.tensor(2.0**k), torch.tensor(0.0))
            assert scale_byte(x, elem) == k - 1 - elem.spec.emax + 127
            x[5] = -(2.0**k) * 1.999
            assert scale_byte(x, elem) == k - elem.spec.emax + 127


@pytest.mark.parametrize("elem", list(MXElem))
def test_rceil_rule_at_max_times_power_of_two(elem: MXElem) -> None:
    for k in (-20, 0, 5, 60):
        amax = torch.tensor(elem.spec.max_normal * 2.0**k)
        assert int(mx_shared_exp(amax, elem, RCEIL)) == k  # amax / max = 2^k exactly
        up = torch.nextafter(amax, torch.tensor(math.inf))
        assert int(mx_shared_exp(up, elem, RCEIL)) == k + 1
        assert int(mx_shared_exp(torch.tensor(2.0 ** (k + elem.spec.emax)), elem, RCEIL)) == k


def test_rceil_is_exact_where_a_float32_quotient_would_round() -> None:
    # amax / 448 is a float32 subnormal just above 2^-127 that rounds to 2^-127 in float32;
    # exactly, ceil(log2(amax / 448)) is -126.
    amax = torch.tensor(448 * 2.0**-127 + 2.0**-142)
    assert float(amax / 448) == 2.0**-127
    assert int(mx_shared_exp(amax, MXElem.FP8_E4M3, RCEIL)) == -126


@pytest.mark.parametrize("elem", list(MXElem))
def test_clamps_at_minus_127_and_127(elem: MXElem) -> None:
    tiny = f32([2.0**-149, 2.0**-130, 2.0**-126 * 1.5])
    for rule in ScaleRounding:
        assert mx_shared_exp(tiny, elem, rule).tolist()[:2] == [-127, -127]
    huge = torch.tensor(torch.finfo(torch.float32).max)
    assert int(mx_shared_exp(huge, elem, FLOOR)) == 127 - elem.spec.emax
    if elem is MXElem.INT8:  # 127 - 0 (+1 for RCEIL) -> clamped to 127, elements saturate
        assert int(mx_shared_exp(huge, elem, RCEIL)) == 127
        x = torch.full((32,), float(huge))
        codes, scale = mx_quantize(x, elem, scale_rounding=RCEIL)
        assert int(scale[0]) == 254 and codes.tolist() == [127] * 32


def test_subnormal_block_is_representable_at_the_smallest_scale() -> None:
    x = f32([2.0**-140, -(2.0**-130), 3 * 2.0**-140, 0.0] * 8)  # float32 subnormals
    codes, scale = mx_quantize(x, MXElem.FP8_E5M2)
    assert scale.tolist() == [0]
    assert torch.equal(mx_dequantize(codes, scale, MXElem.FP8_E5M2), x)


@pytest.mark.parametrize("elem", list(MXElem))
def test_floor_saturates_block_max_and_rceil_does_not(elem: MXElem) -> None:
    x = torch.linspace(-1, 1, 32) * 0.01
    x[3] = 2.0**elem.spec.emax * 1.999  # significand above max_elem's: FLOOR saturates it
    floor_out = mx_dequantize(*mx_quantize(x, elem), elem)
    assert float(floor_out[3]) == elem.spec.max_normal
    rceil_out = mx_dequantize(*mx_quantize(x, elem, scale_rounding="rceil"), elem)
    assert float(rceil_out[3]) == pytest.approx(float(x[3]), rel=2.0**-elem.spec.mbits)


@pytest.mark.parametrize("elem", list(MXElem))
def test_nan_and_inf_blocks(elem: MXElem) -> None:
    x = torch.randn(3, 96)
    x[0, 40] = float("nan")
    x[1, 70] = float("inf")
    x[2, 0] = -float("inf")
    codes, scale = mx_quantize(x, elem)
    assert scale[:, 0].tolist()[:2] != [255, 255] and scale[2, 0] == 255
    assert scale[0, 1] == 255 and scale[1, 2] == 255
    assert not (codes.view(torch.uint8)[0, 32:64].any() or codes.view(torch.uint8)[1, 64:].any())
    y = mx_dequantize(codes, scale, elem)
    nan = torch.zeros(3, 96, dtype=torch.bool)
    nan[0, 32:64] = nan[1, 64:] = nan[2, :32] = True
    assert torch.equal(y.isnan(), nan)


# --- layout, dtypes, errors ----------------------------------------------------------------


@pytest.mark.parametrize("elem", list(MXElem))
def test_axis_agrees_with_transpose(elem: MXElem) -> None:
    x = torch.randn(64, 3, 8) * 10
    codes0, scale0 = mx_quantize(x, elem, 32, axis=0)
    codes_t, scale_t = mx_quantize(x.movedim(0, -1), elem, 32, axis=-1)
    assert codes0.shape == x.shape and scale0.shape == (2, 3, 8)
    assert torch.equal(codes0.view(torch.uint8), codes_t.movedim(-1, 0).view(torch.uint8))
    assert torch.equal(scale0, scale_t.movedim(-1, 0))
    y0 = mx_dequantize(codes0, scale0, elem, 32, axis=0)
    assert torch.equal(y0, mx_dequantize(codes_t, scale_t, elem, 32).movedim(-1, 0))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32, torch.float64])
@pytest.mark.parametrize("elem", [MXElem.FP8_E4M3, MXElem.FP4_E2M1, MXElem.INT8])
def test_input_dtypes_quantize_their_float32_value(elem: MXElem, dtype: torch.dtype) -> None:
    x = (torch.randn(4, 64, dtype=torch.float64) * 3).to(dtype)
    codes, scale = mx_quantize(x, elem)
    ref_codes, ref_scale = mx_quantize(x.to(torch.float32), elem)
    assert torch.equal(codes.view(torch.uint8), ref_codes.view(torch.uint8))
    assert torch.equal(scale, ref_scale) and scale.dtype == torch.uint8
    y = mx_dequantize(codes, scale, elem, dtype=dtype)
    assert y.dtype == dtype
    assert torch.equal(y, mx_dequantize(ref_codes, ref_scale, elem).to(dtype))


@pytest.mark.parametrize("elem", list(MXElem))
def test_pack_round_trip_and_sizes(elem: MXElem) -> None:
    codes, _ = mx_quantize(torch.randn(2, 64), elem)
    packed = pack_mx_codes(codes, elem)
    assert packed.dtype == torch.uint8 and packed.shape == (2, 64 * elem.spec.bits // 8)
    restored = unpack_mx_codes(packed, elem)
    assert restored.dtype == codes.dtype
    assert torch.equal(restored.view(torch.uint8), codes.view(torch.uint8))


def test_strings_at_the_edge_and_empty_input() -> None:
    codes, scale = mx_quantize(torch.zeros(0, 64), "fp6_e3m2", scale_rounding="rceil")
    assert codes.shape == (0, 64) and scale.shape == (0, 2)
    with pytest.raises(ValueError, match="fp8_e4m3, fp8_e5m2"):
        mx_quantize(torch.zeros(32), "fp5")
    with pytest.raises(ValueError, match="floor, rceil"):
        mx_quantize(torch.zeros(32), "fp4_e2m1", scale_rounding="round")


def test_bad_shapes_and_block_sizes_raise_clear_errors() -> None:
    x = torch.zeros(4, 48)
    with pytest.raises(
        ValueError, match=r"size 48 along axis -1 is not divisible by block_size=32.*64"
    ):
        mx_quantize(x, MXElem.FP8_E4M3)
    with pytest.raises(ValueError, match="size 4 along axis 0"):
        mx_quantize(x, MXElem.FP8_E4M3, block_size=16, axis=0)
    for bad in (0, -32):
        with pytest.raises(ValueError, match="must be a positive int"):
            mx_quantize(x, MXElem.FP8_E4M3, block_size=bad)
    with pytest.raises(ValueError, match="axis=2 is out of range"):
        mx_quantize(x, MXElem.FP8_E4M3, block_size=16, axis=2)
    with pytest.raises(ValueError, match="0-dim"):
        mx_quantize(torch.tensor(1.0), MXElem.FP8_E4M3)


def test_dequantize_checks_its_inputs() -> None:
    codes, scale = mx_quantize(torch.randn(2, 64), MXElem.FP4_E2M1)
    with pytest.raises(TypeError, match="must be torch.float8_e4m3fn"):
        mx_dequantize(codes, scale, MXElem.FP8_E4M3)
    with pytest.raises(ValueError, match=r"expected \[2, 2\]"):
        mx_dequantize(codes, scale[:, :1], MXElem.FP4_E2M1)
    with pytest.raises(ValueError, match="codes must be < 16"):
        mx_dequantize(codes | 0x10, scale, MXElem.FP4_E2M1)
    with pytest.raises(TypeError, match="uint8 or float8_e8m0fnu"):
        mx_dequantize(codes, scale.float(), MXElem.FP4_E2M1)
