"""A checkpoint whose output differs in a fresh process says which kernel and which autotuned
Triton config ran in each process (the H200's int4wo fp32 M=1 mismatch said only "not
bit-identical")."""

import json
import os
import subprocess
import sys
from pathlib import Path

import torch
from interpreter_env import skip_if_numpy_too_new
from torch import nn

import aoq
import conformance.fresh as fresh
from conformance.checks import launches, mismatch_reason, state_digests

REPO = Path(__file__).resolve().parents[2]


def _saved(tmp_path: Path, ran: dict) -> tuple[dict, dict]:
    torch.manual_seed(0)
    q = aoq.quantize_(nn.Linear(64, 32), aoq.Int8WeightOnlyConfig())
    x = torch.randn(3, 64)
    with torch.no_grad():
        y = q(x)
    torch.save(q.state_dict(), tmp_path / "sd.pt")
    spec = {"k": 64, "n": 32, "dtype": "fp32", "backend": "cpu", "ran": ran}
    spec["digests"] = state_digests(q.state_dict())
    return spec, {"x": x, "y": y}


def test_same_output_passes_and_names_the_kernel(tmp_path):
    spec, io = _saved(tmp_path, {"kernel": "aten._weight_int8pack_mm", "configs": {}})
    r = fresh.save_load(tmp_path, spec, io)
    assert r.status == "pass" and r.kernel == "aten._weight_int8pack_mm"


def test_a_mismatch_names_both_processes_kernels_and_configs(tmp_path):
    cfg = {"weight_only._weight_only_mm_kernel[cuda]": "BLOCK_M: 1, SPLIT_K: 4, num_warps: 4"}
    spec, io = _saved(tmp_path, {"kernel": "triton.int8wo.decode", "configs": cfg})
    io["y"] = io["y"].clone()
    io["y"].view(-1)[0] = torch.nextafter(io["y"].view(-1)[0], torch.tensor(1e9))  # one ulp
    r = fresh.save_load(tmp_path, spec, io)
    assert r.status == "fail" and r.kernel == "aten._weight_int8pack_mm"
    assert "output is not bit-identical to the saved one (relative difference" in r.reason
    assert "another kernel ran here" in r.reason
    assert "the saving process ran triton.int8wo.decode (weight_only." in r.reason
    assert "SPLIT_K: 4" in r.reason and "this one aten._weight_int8pack_mm" in r.reason
    assert r.metrics["saved"]["configs"] == cfg and r.metrics["rel_diff"] > 0


def test_mismatch_reasons_tell_kernel_config_and_determinism_apart():
    a = {"k[cuda]": "BLOCK_M: 1, SPLIT_K: 4"}
    b = {"k[cuda]": "BLOCK_M: 1, SPLIT_K: 8"}
    saved = {"kernel": "triton.int4wo.decode", "configs": a}
    other = mismatch_reason(saved, "triton.int4wo.decode", b)
    assert other.startswith("same kernel, another autotuned config of k[cuda]")
    assert "SPLIT_K: 4" in other and "SPLIT_K: 8" in other
    same = mismatch_reason(saved, "triton.int4wo.decode", a)
    assert same.startswith("same kernel and config: the kernel is not deterministic")
    assert mismatch_reason(None, "x", {}) == "this process ran x (no autotuned launch)"


def test_launches_records_the_triton_config_of_each_autotuned_kernel():
    """Under the interpreter the fp8 kernel is autotuned (one config) past 256 rows (up to
    them kernels/mid_rows.py picks its tile by rule): launches() names it."""
    code = (
        "import json, torch, aoq\n"
        "from conformance.checks import launches\n"
        "lin = aoq.quantize_(torch.nn.Linear(64, 32), "
        "aoq.Float8DynamicActivationFloat8WeightConfig())\n"
        "with torch.no_grad(), aoq.trace_kernels() as t, launches() as got:\n"
        "    lin(torch.randn(300, 64))\n"
        "with launches() as none:\n"
        "    pass\n"
        "print(json.dumps([t.records[0].kernel, got, none, t.records[0].reason]))\n"
    )
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO
    )
    assert out.returncode == 0, out.stderr
    kernel, got, none, reason = json.loads(out.stdout.splitlines()[-1])
    skip_if_numpy_too_new(reason)  # the GPU image's numpy 2.5
    assert kernel == "triton.fp8.prefill", reason
    (name,) = got
    assert name.startswith("fp8_mm._fp8_mm_kernel[interpret,prefill]") and "BLOCK_M" in got[name]
    assert none == {}


def test_launches_without_triton_kernels_is_empty():
    with launches() as got:
        aoq.quantize_(nn.Linear(64, 32), aoq.Int8WeightOnlyConfig())(torch.randn(2, 64))
    assert got == {}


def test_the_checker_computes_with_the_saving_process_thread_count():
    """A CPU matmul's summation order depends on its thread count, and checkers get a
    different share of the cores than workers: the output is computed with the saver's."""
    seen = []

    class Probe(nn.Linear):
        def forward(self, x):
            seen.append(torch.get_num_threads())
            return super().forward(x)

    m = Probe(8, 4)
    x = torch.randn(2, 8)
    with torch.no_grad():
        io = {"x": x, "y": m(x)}
    before = torch.get_num_threads()
    saver = 1 if before > 1 else 2
    spec = {"digests": state_digests(m.state_dict()), "threads": saver}
    assert fresh._same("save_load", m, spec, io).status == "pass"
    assert seen[-1] == saver and torch.get_num_threads() == before
