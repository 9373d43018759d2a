import subprocess
import sys

import pytest
import torch
from torch import nn

import aoq
from aoq import dispatch


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(64, 128)
        self.down = nn.Linear(128, 64)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


def test_trace_records_module_config_kernel_backend():
    model = nn.Sequential(Block(), Block())
    aoq.quantize_(model, aoq.Int8DynamicActivationInt8WeightConfig())
    with aoq.trace_kernels() as trace:
        model(torch.randn(3, 64))
    assert [r.module for r in trace.records] == ["0.up", "0.down", "1.up", "1.down"]
    r = trace.records[0]
    assert (r.config, r.kernel, r.backend, r.fallback, r.reason) == (
        "w8a8",
        "aten._int_mm",
        "cpu",
        False,
        None,
    )
    assert r.shape == (3, 64, 128) and r.dtype == "float32"
    assert trace.fallbacks == []


def test_functional_call_and_nesting_outside_trace_records_nothing():
    lin = aoq.quantize_(nn.Linear(64, 32), aoq.Int8WeightOnlyConfig())
    lin(torch.randn(2, 64))  # no trace active: nothing recorded anywhere
    with aoq.trace_kernels() as trace:
        torch.nn.functional.linear(torch.randn(2, 64), lin.weight)
    assert trace.records[0].module == "<functional>"


def test_fallback_is_recorded_with_reason():
    lin = aoq.quantize_(nn.Linear(64, 40), aoq.Int4WeightOnlyConfig(group_size=32))
    with aoq.trace_kernels() as trace:
        lin(torch.randn(2, 64))
    r = trace.records[0]
    assert r.fallback and r.kernel == "reference.int4_weight_only"
    assert "N=40 is not a multiple of 16" in r.reason


def test_strict_turns_fallback_into_error():
    lin = aoq.quantize_(nn.Linear(64, 40), aoq.Int4WeightOnlyConfig(group_size=32))
    with aoq.strict(), pytest.raises(aoq.FallbackError, match="N=40 is not a multiple of 16"):
        lin(torch.randn(2, 64))
    lin(torch.randn(2, 64))  # outside strict it runs
    ok = aoq.quantize_(nn.Linear(64, 48), aoq.Int4WeightOnlyConfig(group_size=32))
    with aoq.strict():
        ok(torch.randn(2, 64))  # intended kernel: no error


def test_strict_env_var_in_fresh_process():
    code = (
        "import torch, aoq\n"
        "lin = aoq.quantize_(torch.nn.Linear(64, 40), aoq.Int4WeightOnlyConfig(group_size=32))\n"
        "try:\n    lin(torch.randn(2, 64))\n"
        "except aoq.FallbackError as e:\n    print('raised', e)\n"
    )
    env = {"AOQ_STRICT": "1", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert "raised" in out.stdout, out.stderr


def test_every_scheme_has_a_reference_and_the_table_prints():
    for scheme in dispatch.Scheme:
        assert dispatch.reference_name(scheme) in dispatch._IMPLS
    for names in dispatch.TABLE.values():
        for name in names:
            assert name in dispatch._IMPLS, name
    text = dispatch.describe()
    assert "int4_weight_only" in text and "aten._weight_int4pack_mm_for_cpu" in text


def test_m0_input_runs_and_records():
    lin = aoq.quantize_(nn.Linear(64, 32), aoq.Int8DynamicActivationInt8WeightConfig())
    with aoq.trace_kernels() as trace:
        y = lin(torch.randn(0, 64))
    assert y.shape == (0, 32) and trace.records[0].shape == (0, 64, 32)


def test_misaligned_weight_falls_back_instead_of_crashing():
    lin = aoq.quantize_(nn.Linear(128, 48), aoq.Int8WeightOnlyConfig())
    buf = torch.empty(48 * 128 + 40, dtype=torch.int8)
    view = buf[40:].view(48, 128)  # what safetensors hands back: an offset into one buffer
    view.copy_(lin.weight.qdata)
    lin.weight = nn.Parameter(lin.weight.replace(qdata=view), requires_grad=False)
    with aoq.trace_kernels() as trace:
        lin(torch.randn(2, 128))
    assert trace.records[0].fallback and "aligned" in trace.records[0].reason
