import copy

import pytest
import torch
from torch import nn

import aoq
from aoq.tensors import ActQuant, Int32Bias
from aoq.testing.metrics import sqnr


def _model():
    return nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 128))


@pytest.mark.parametrize(
    "config",
    [aoq.Int8DynamicActivationInt8WeightConfig(), aoq.Int8DynamicActivationInt4WeightConfig()],
    ids=lambda c: c.id,
)
def test_calibrate_makes_static_with_int32_bias(config):
    batches = [torch.randn(8, 256) for _ in range(4)]
    model = aoq.quantize_(_model(), config)
    scales = aoq.calibrate(model, batches)
    assert set(scales) == {"0", "2"}
    first = model[0]
    assert first.weight.act is ActQuant.INT8_STATIC
    assert first.weight.act_scale.item() == pytest.approx(scales["0"])
    expected = max(b.abs().max().item() for b in batches) / 127
    assert scales["0"] == pytest.approx(expected, rel=1e-6)
    assert isinstance(first.bias, Int32Bias) and first.bias.int_data.dtype == torch.int32
    assert "static" in first.weight.config_id and "act_scale" in first.weight.config_json
    with aoq.trace_kernels() as trace:
        model(batches[0])
    assert all(not r.fallback for r in trace.records)


def test_static_output_close_to_dynamic_on_calibration_data():
    ref = _model()
    x = torch.randn(16, 256)
    static = copy.deepcopy(ref)
    aoq.quantize_(static, aoq.Int8DynamicActivationInt8WeightConfig())
    aoq.calibrate(static, [x])
    assert sqnr(ref(x), static(x)) > 30


def test_calibrate_errors():
    with pytest.raises(ValueError, match="no linear with dynamic"):
        aoq.calibrate(_model(), [torch.randn(2, 256)])
    m = aoq.quantize_(_model(), aoq.Int8DynamicActivationInt8WeightConfig())
    with pytest.raises(ValueError, match="no batches"):
        aoq.calibrate(m, [])
