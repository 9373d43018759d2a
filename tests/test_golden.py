"""Checkpoints written by an earlier aoq must keep loading to the same numbers."""

import pytest
import torch
from golden.make_golden import ROOT, float_bias, tiny_model
from torch import nn

import aoq
from aoq.serialization import FORMAT_VERSION
from aoq.testing.cases import config_ids, inference_configs
from aoq.testing.metrics import bit_equal, max_rel_error
from aoq.testing.oracle import float64_linear, float_torch_error

CONFIGS = inference_configs()


def _meta_model() -> nn.Module:
    with torch.device("meta"):
        return tiny_model()


def _check(model: nn.Module, expected: dict) -> None:
    lin = model[0]
    assert bit_equal(lin.weight.dequantize(torch.float32), expected["weight"])
    assert bit_equal(float_bias(lin.bias), expected["bias"])
    x = expected["x"]
    y = model(x)
    budget = max(2 * float_torch_error(x, lin.weight, lin.bias), 1e-6)
    assert max_rel_error(float64_linear(x, lin.weight, lin.bias), y) <= budget
    assert max_rel_error(expected["y"], y) <= 2 * budget


def test_every_config_has_a_golden():
    assert ROOT.name == f"v{FORMAT_VERSION}"
    missing = [c.id for c in CONFIGS if not (ROOT / c.id).is_dir()]
    assert not missing, f"no golden for {missing}: run tests/golden/make_golden.py"


@pytest.mark.parametrize("config", CONFIGS, ids=config_ids(CONFIGS))
def test_golden_loads_through_both_routes(config):
    root = ROOT / config.id
    expected = torch.load(root / "expected.pt", weights_only=True)
    m = _meta_model()
    m.load_state_dict(torch.load(root / "state_dict.pt", weights_only=True), assign=True)
    _check(m, expected)
    _check(aoq.load_pretrained(_meta_model(), root / "pretrained"), expected)
