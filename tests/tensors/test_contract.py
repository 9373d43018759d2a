"""The contract every aoq tensor keeps: flatten round trip, detach/clone/copy_/moves, its
device's layout, state_dict, torch.compile parity, clear errors for unsupported ops,
validation of layouts."""

import pytest
import torch
from torch import nn

import aoq
from aoq.tensors import AoqTensor, Int32Bias, QuantizedWeight
from aoq.testing.cases import config_ids, inference_configs
from aoq.testing.metrics import bit_equal

CONFIGS = inference_configs()


def _lin(config, dtype=torch.float32):
    return aoq.quantize_(nn.Linear(128, 64).to(dtype), config)


def _same(a: AoqTensor, b: AoqTensor):
    assert type(a) is type(b) and a.shape == b.shape and a.dtype == b.dtype
    assert a.attrs() == b.attrs()
    ta, tb = a.tensors(), b.tensors()
    assert ta.keys() == tb.keys()
    for k in ta:
        assert bit_equal(ta[k], tb[k]), k


@pytest.mark.parametrize("config", CONFIGS, ids=config_ids(CONFIGS))
def test_flatten_round_trip(config):
    w = _lin(config).weight
    names, ctx = w.__tensor_flatten__()
    inner = {n: getattr(w, n) for n in names}
    _same(type(w).__tensor_unflatten__(inner, ctx, w.shape, w.stride()), w)


@pytest.mark.parametrize("config", CONFIGS, ids=config_ids(CONFIGS))
def test_detach_clone_copy_and_dtype_moves(config):
    lin = _lin(config)
    w = lin.weight
    scale_dtype = w.scale.dtype
    _same(w.detach(), w)
    c = w.clone()
    _same(c, w)
    assert all(c.tensors()[k].data_ptr() != v.data_ptr() for k, v in w.tensors().items())
    other = _lin(config).weight
    other.copy_(w)
    _same(other, w)
    half = lin.to(torch.bfloat16)
    assert half.weight.dtype == torch.bfloat16 and isinstance(half.weight, QuantizedWeight)
    assert half.weight.scale.dtype == scale_dtype  # scales never change dtype
    assert half(torch.randn(2, 128, dtype=torch.bfloat16)).dtype == torch.bfloat16


@pytest.mark.parametrize("config", CONFIGS, ids=config_ids(CONFIGS))
def test_a_tensor_quantized_here_is_in_its_device_layout(config):
    w = _lin(config).weight
    assert w.for_device() is w
    assert w.relayout(**{n: getattr(w, n) for n in w.layout_attrs}) is w
    assert set(w.layout_attrs) <= set(w.attr_fields)
    if not w.layout_attrs:
        with pytest.raises(NotImplementedError, match=f"{type(w).__name__} has no layout"):
            w.relayout(packing="tiled")


@pytest.mark.parametrize("config", CONFIGS, ids=config_ids(CONFIGS))
def test_state_dict_keys_unchanged(config):
    lin = nn.Linear(128, 64)
    keys = list(lin.state_dict())
    aoq.quantize_(lin, config)
    assert list(lin.state_dict()) == keys


@pytest.mark.parametrize("config", CONFIGS, ids=config_ids(CONFIGS))
def test_compile_parity(config):
    torch._dynamo.reset()
    lin = _lin(config, torch.bfloat16)
    x = torch.randn(4, 128, dtype=torch.bfloat16)
    eager = lin(x)
    compiled = torch.compile(lin, fullgraph=True)(x)
    # the same quantized math; inductor may fuse the float epilogue differently
    torch.testing.assert_close(compiled, eager, rtol=2e-2, atol=2e-2)


def test_unsupported_ops_raise_clearly():
    w = _lin(aoq.Int8WeightOnlyConfig()).weight
    with pytest.raises(NotImplementedError, match="does not support.*dequantize"):
        w + 1
    with pytest.raises(NotImplementedError, match="does not support"):
        torch.matmul(torch.randn(2, 128), w.t())
    with pytest.raises(TypeError, match="cannot cast"):
        w.to(torch.int8)


def test_validate_rejects_bad_layouts():
    w = _lin(aoq.Int4WeightOnlyConfig(group_size=32)).weight
    with pytest.raises(ValueError, match="qdata"):
        w.replace(qdata=torch.zeros(64, 10, dtype=torch.uint8))
    with pytest.raises(ValueError, match="zero_point"):
        w.replace(zero_point=None)
    with pytest.raises(ValueError, match="act_scale"):
        w.replace(act_scale=torch.tensor(1.0))
    b = Int32Bias((4,), torch.float32, int_data=torch.zeros(4), scale=torch.ones(4))
    with pytest.raises(ValueError, match="int_data"):
        b.validate()


def test_repr_names_fields_and_config():
    text = repr(_lin(aoq.Int4WeightOnlyConfig(group_size=32)).weight)
    assert "Int4Tensor" in text and "qdata=(64, 64):uint8" in text and "int4wo-g32" in text
