import dataclasses

import pytest
import torch
from torch import nn

import aoq
from aoq.configs import config_from_dict
from aoq.tensors import Int32Bias, QuantizedWeight
from aoq.testing.cases import MODEL_DTYPES, config_ids, inference_configs
from aoq.testing.metrics import max_rel_error, sqnr
from aoq.testing.oracle import float64_linear, float_torch_error

CONFIGS = inference_configs()
DTYPES = list(MODEL_DTYPES)

INPUT_SHAPES = {"2d": (7, 256), "3d": (2, 5, 256), "M1": (1, 256), "M0": (0, 256)}


def _quantized(config, dtype, bias=True, k=256, n=64):
    m = nn.Linear(k, n, bias=bias).to(dtype)
    return m, aoq.quantize_(nn.Sequential(m), config)[0]


@pytest.mark.parametrize("config", CONFIGS, ids=config_ids(CONFIGS))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("shape", list(INPUT_SHAPES))
def test_output_matches_float64_oracle(config, dtype, bias, shape):
    _, q = _quantized(config, dtype, bias)
    x = torch.randn(INPUT_SHAPES[shape], dtype=dtype)
    y = q(x)
    assert y.dtype == dtype and y.shape == (*x.shape[:-1], 64)
    if not x.numel():
        return
    expect = float64_linear(x, q.weight, q.bias)
    # no worse than ~2x the error plain torch makes in this dtype (and at least fp32 rounding)
    budget = max(2 * float_torch_error(x, q.weight, q.bias), 1e-6)
    assert max_rel_error(expect, y) <= budget


@pytest.mark.parametrize("config", CONFIGS, ids=config_ids(CONFIGS))
def test_non_contiguous_input(config):
    _, q = _quantized(config, torch.float32)
    x = torch.randn(256, 6).t()  # [6, 256], non-contiguous
    assert not x.is_contiguous()
    torch.testing.assert_close(q(x), q(x.contiguous()), rtol=0, atol=0)


# Floors from the core issue: Linear(1024, 1024, bias), default init, randn inputs.
SQNR_FLOORS = {
    "int8wo": 44,
    "w8a8": 38,
    "int4wo-g128": 23,
    "w4a8-g32": 21,
    "fp8wo": 30,
    "fp8-row": 27,
}


@pytest.mark.parametrize("config", CONFIGS[:6], ids=config_ids(CONFIGS[:6]))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_sqnr_floor(config, dtype):
    m = nn.Linear(1024, 1024).to(dtype)
    x = torch.randn(16, 1024, dtype=dtype)
    expect = m(x)
    aoq.quantize_(m, config)
    assert sqnr(expect, m(x)) >= SQNR_FLOORS[config.id]


@pytest.mark.parametrize("config", CONFIGS, ids=config_ids(CONFIGS))
def test_float64_model_keeps_float32_scales_and_intended_kernel(config):
    """A peer's W4A8 silently fell back to a slow path because float64 activations produced
    float64 scales. Here every scale is float32 and the int-activation kernels still run:
    float64 adds no fallback the same config lacks in float32 (a machine can make float32
    fall back too, e.g. an unvectorized CPU fp8 GEMM), except the weight-only CPU ops that
    take no float64."""
    _, q = _quantized(config, torch.float64)
    for name, t in q.weight.tensors().items():
        if "scale" in name:  # float32, or the block-scale dtype a format defines (MX, NVFP4)
            assert t.dtype in (torch.float32, torch.float8_e8m0fnu, torch.float8_e4m3fn), name
    with aoq.trace_kernels() as trace:
        y = q(torch.randn(3, 256, dtype=torch.float64))
    assert y.dtype == torch.float64
    rec = trace.records[0]
    _, q32 = _quantized(config, torch.float32)
    with aoq.trace_kernels() as trace32:
        q32(torch.randn(3, 256))
    rec32 = trace32.records[0]
    if rec.fallback and not rec32.fallback:
        assert config.id in ("int8wo", "int4wo-g128") and "float64" in rec.reason
    if rec32.fallback:  # the same fallback for the same reason, not a float64 one
        assert rec.fallback and rec.kernel == rec32.kernel and "float64" not in rec.reason


def test_static_bias_is_int32_in_units_of_act_times_weight_scale():
    config = aoq.Int8DynamicActivationInt8WeightConfig(act_scale=0.05)
    m, q = _quantized(config, torch.float32)
    assert isinstance(q.bias, Int32Bias) and q.bias.int_data.dtype == torch.int32
    torch.testing.assert_close(q.bias.scale, 0.05 * q.weight.scale[:, 0])
    assert q.bias.shape == (64,) and q.bias.dtype == torch.float32


def test_filter_fn_and_nested_modules():
    model = nn.Sequential(nn.Linear(32, 32), nn.Sequential(nn.ReLU(), nn.Linear(32, 16)))
    aoq.quantize_(model, aoq.Int8WeightOnlyConfig(), filter_fn=lambda m, fqn: fqn == "1.1")
    assert not isinstance(model[0].weight, QuantizedWeight)
    assert isinstance(model[1][1].weight, QuantizedWeight)
    aoq.quantize_(model, aoq.Int4WeightOnlyConfig(group_size=32))  # skips the quantized one
    assert model[0].weight.config_id == "int4wo-g32" and model[1][1].weight.config_id == "int8wo"


def test_clear_errors():
    with pytest.raises(ValueError, match="K=100 is not divisible by group_size=128"):
        aoq.quantize_(nn.Linear(100, 16), aoq.Int4WeightOnlyConfig())
    with pytest.raises(ValueError, match="act_scale"):
        aoq.Int8DynamicActivationInt8WeightConfig(act_scale=-1.0)
    with pytest.raises(ValueError, match="act_mapping"):
        aoq.Int8DynamicActivationInt4WeightConfig(act_mapping="affine")
    with pytest.raises(ValueError, match="symmetric"):
        aoq.Int8DynamicActivationInt4WeightConfig(act_mapping="asymmetric", act_scale=0.1)
    with pytest.raises(ValueError, match="granularity"):
        aoq.Float8DynamicActivationFloat8WeightConfig(granularity="block")
    with pytest.raises(ValueError, match="group_size"):
        aoq.Int4WeightOnlyConfig(group_size=33)
    with pytest.raises(ValueError, match="meta device"):
        aoq.quantize_(nn.Linear(32, 32, device="meta"), aoq.Int8WeightOnlyConfig())
    with pytest.raises(TypeError, match="no handler"):
        aoq.quantize_(nn.Linear(32, 32), object())  # type: ignore[arg-type]
    m = aoq.quantize_(nn.Linear(32, 32), aoq.Int8WeightOnlyConfig())
    with pytest.raises(ValueError, match="already quantized"):
        aoq.quantize_(m, aoq.Int8WeightOnlyConfig(), filter_fn=lambda m, f: True)
    with pytest.raises(ValueError, match="expects 32"):
        m(torch.randn(2, 31))


@pytest.mark.parametrize("config", CONFIGS, ids=config_ids(CONFIGS))
def test_config_dict_round_trip(config):
    assert config_from_dict(config.to_dict()) == config


def test_config_versions_and_names_are_checked():
    d = aoq.Int4WeightOnlyConfig().to_dict()
    with pytest.raises(ValueError, match="version 2 is not supported"):
        config_from_dict({**d, "version": 2})
    with pytest.raises(ValueError, match="unknown aoq config"):
        config_from_dict({**d, "name": "Int3Config"})


def test_configs_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        aoq.Int4WeightOnlyConfig().group_size = 64  # type: ignore[misc]
