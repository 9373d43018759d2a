"""What each worker process sees, and the pytest entry: one test per cell, xdist workers
writing shards of ONE run that the controller merges."""

import subprocess
import sys
from pathlib import Path

from aoq.testing.records import read_jsonl
from conformance.session import worker_env

REPO = Path(__file__).resolve().parents[2]


def test_worker_environment_per_backend(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    cpu = worker_env("cpu", 0, 1, ())
    assert "TRITON_INTERPRET" not in cpu and cpu["OMP_NUM_THREADS"] == "1"
    assert cpu["HF_HUB_OFFLINE"] == "1" and cpu["AOQ_CONFORM_BACKEND"] == "cpu"
    assert worker_env("interpret", 0, 2, ())["TRITON_INTERPRET"] == "1"
    cuda = worker_env("cuda", 1, 4, ("3", "5"))
    assert cuda["CUDA_VISIBLE_DEVICES"] == "5" and "TRITON_INTERPRET" not in cuda
    assert worker_env("cuda", 2, 4, ("3", "5"))["CUDA_VISIBLE_DEVICES"] == "3"
    rocm = worker_env("rocm", 0, 4, ("1",))
    assert rocm["HIP_VISIBLE_DEVICES"] == "1" and "CUDA_VISIBLE_DEVICES" not in rocm


def test_pytest_entry_with_xdist_merges_one_run(tmp_path):
    runs = tmp_path / "runs"
    cmd = [sys.executable, "-m", "pytest", "conformance", "-q", "-p", "no:cacheprovider",
           "-n", "2", "--aoq-backend", "cpu", "--aoq-run-id", "PX",
           "--aoq-only", "int8wo/fp32/cpu/M1-*", "--aoq-only", "w8a8/fp32/cpu/M1-*",
           "--aoq-store", str(tmp_path / "r.sqlite"), "--aoq-runs-dir", str(runs)]  # fmt: skip
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert [p.name for p in runs.iterdir()] == ["PX.jsonl"]
    run, records = read_jsonl(runs / "PX.jsonl")
    cells = sorted(r.case_id for r in records if r.check == "cell")
    assert cells == ["int8wo/fp32/cpu/M1-K256-N256", "w8a8/fp32/cpu/M1-K256-N256"]
    assert 1 <= len(run.extra["shards"]) <= 2  # an xdist worker given no test writes no shard
