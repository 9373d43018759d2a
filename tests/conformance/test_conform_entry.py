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


def test_platform_features_report_a_slow_cpu_fp8_gemm(monkeypatch):
    """The worker reports ``slow-fp8-gemm`` with the probe's reason where aoq's CPU fp8 probe
    finds torch's _scaled_mm unvectorized, and nothing where it is fast or off the CPU."""
    from aoq.tensors import float8 as f8
    from conformance.worker import platform_features

    monkeypatch.setattr(f8, "_cpu_scaled_mm_slow", lambda: "unvectorized here (900 ms)")
    assert platform_features("cpu") == {"slow-fp8-gemm": "unvectorized here (900 ms)"}
    assert platform_features("interpret") == {}
    monkeypatch.setattr(f8, "_cpu_scaled_mm_slow", lambda: None)
    assert platform_features("cpu") == {}


def test_a_slow_fp8_host_reads_its_feature_profile_end_to_end(tmp_path):
    """A whole run on a host whose CPU fp8 GEMM is slow (the probe's time set by the test-only
    AOQ_TEST_CPU_FP8_MS): the run records the feature, reads cpu+slow-fp8-gemm.toml, and the
    fp8 W8A8 case is green with its kernel check an xfail (a recorded fallback), its output
    still checked; the same case on a fast host passes its kernel check."""
    import os

    def conform(ms: str, name: str):
        runs = tmp_path / name
        cmd = [sys.executable, "-m", "conformance", "--backend", "cpu", "--no-report",
               "--store", str(tmp_path / f"{name}.sqlite"), "--runs-dir", str(runs),
               "--jobs", "1", "--only", "fp8-row/fp32/cpu/M1-K256-N256"]  # fmt: skip
        env = {**os.environ, "AOQ_TEST_CPU_FP8_MS": ms}
        out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
        assert out.returncode == 0, out.stdout + out.stderr
        (path,) = runs.glob("*.jsonl")
        run, records = read_jsonl(path)
        return out, run, {r.check: r for r in records}

    out, run, checks = conform("900", "slow")
    assert "AOQ_TEST_CPU_FP8_MS" in run.extra["features"]["slow-fp8-gemm"]
    assert "platform feature slow-fp8-gemm" in out.stderr
    assert checks["kernel"].status == "xfail" and checks["output"].status == "pass"
    assert checks["cell"].status == "xfail"
    _, run, checks = conform("1", "fast")
    assert run.extra["features"] == {} and checks["kernel"].status == "pass"
