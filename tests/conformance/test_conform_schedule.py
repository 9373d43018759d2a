"""Scheduling: process counts per machine, the ETA, and a run cut by its time limit that
``--resume`` (directly, or through conformance/gpu_run.sh carrying its JSONL to a new
machine) finishes with nothing lost or run twice."""

import io
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

from aoq.testing import matrix
from aoq.testing.records import read_jsonl
from conformance.__main__ import default_jobs
from conformance.progress import Progress
from conformance.session import process_threads, slow_first, worker_env

REPO = Path(__file__).resolve().parents[2]
ONLY = ["int8wo/fp32/cpu/M1-*", "w8a8/fp32/cpu/M1-*", "fp8wo/bf16/cpu/M7-*"]


def test_process_counts_for_a_gpu_machine_and_a_small_cpu_one():
    assert default_jobs("cuda", cores=16, gpus=1) == 8  # + 4 checkers: 12 processes, 1 GPU
    assert default_jobs("cuda", cores=128, gpus=8) == 64
    assert default_jobs("rocm", cores=2, gpus=1) == 1
    assert default_jobs("cpu", cores=2, gpus=0) == 2
    assert default_jobs("cpu", cores=64, gpus=0) == 8
    assert process_threads(16, 8, 4) == {"case": 1, "fresh": 2}
    assert process_threads(2, 2, 1) == {"case": 1, "fresh": 1}
    assert process_threads(64, 8, 4) == {"case": 5, "fresh": 6}


def test_checkers_choose_their_own_kernels(monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_AUTOTUNING", "1")
    assert worker_env("cuda", 0, 1, ("0",))["TRITON_CACHE_AUTOTUNING"] == "1"
    fresh = worker_env("cuda", 9, 2, ("0",), role="fresh")
    assert "TRITON_CACHE_AUTOTUNING" not in fresh  # a fresh process autotunes for itself
    assert fresh["CUDA_VISIBLE_DEVICES"] == "0" and fresh["OMP_NUM_THREADS"] == "2"


def test_llm_sized_shapes_go_first_then_the_matrix_order():
    cases = matrix.cases("cuda", only=["int8wo/*"])
    ordered = sorted(cases, key=slow_first)
    large = len(matrix.GPU_SHAPES) * 3  # every large shape x 3 dtypes
    assert large == 15  # M 1, 64, 100, 120, 256
    assert [c.shape.kind for c in ordered[:large]] == ["large"] * large
    assert ordered[large:] == [c for c in cases if c.shape is None or c.shape.kind != "large"]


def test_progress_shows_the_runner_eta():
    out = io.StringIO()
    p = Progress(10, "cuda", out=out, every=0, eta=lambda: 125.0)
    p.update("a/b/cuda/M1", "pass", None)
    assert "1/10 pass 1" in out.getvalue() and "ETA ~2m05s" in out.getvalue()
    out = io.StringIO()
    Progress(10, "cpu", out=out, every=0, eta=lambda: None).update("x", "pass", None)
    assert "ETA ~" in out.getvalue()  # no estimate yet: the pace of finished cases


def _conform(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "conformance", "--store", str(tmp_path / "r.sqlite"),
           "--runs-dir", str(tmp_path / "runs"), "--no-report", *args]  # fmt: skip
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)


def _only(patterns: list[str]) -> list[str]:
    return [a for p in patterns for a in ("--only", p)]


def test_time_limit_leaves_cases_and_resume_finishes_them(tmp_path):
    expected = {c.id for c in matrix.cases("cpu", only=ONLY)}
    out = _conform(tmp_path, "--backend", "cpu", "--time-limit", "0.1", *_only(ONLY))
    assert out.returncode == 3, out.stdout + out.stderr
    assert f"INCOMPLETE: the time limit left {len(expected)} of {len(expected)} cases" in out.stdout
    (path,) = (tmp_path / "runs").glob("*.jsonl")
    run_id = path.name.removesuffix(".jsonl")
    assert f"--resume {run_id}" in out.stdout and read_jsonl(path)[1] == []
    out = _conform(tmp_path, "--resume", run_id, "--jobs", "2")
    assert out.returncode == 0, out.stdout + out.stderr
    assert re.search(r"timing: \d+s wall on \d worker\(s\) \+ \d checker\(s\)", out.stderr)
    _, records = read_jsonl(path)
    keys = Counter((r.case_id, r.check) for r in records)
    assert max(keys.values()) == 1
    assert {r.case_id for r in records if r.check == "cell"} == expected
    cell = next(r for r in records if r.check == "cell" and r.case_id.endswith("M1-K256-N256"))
    assert cell.metrics["seconds"] > 0 and cell.metrics["fresh_seconds"] > 0
    assert cell.metrics["latency"] >= cell.metrics["seconds"]


def test_gpu_run_script_cut_then_resumed_on_another_machine(tmp_path):
    """The documented procedure, with the cpu backend standing in for cuda: a first call cut by
    its time limit, its JSONL carried into the next call's tree, ``gpu_run.sh RUN_ID``."""
    env = {**os.environ, "AOQ_BACKEND": "cpu", "AOQ_NO_INSTALL": "1", "AOQ_PYTHON": sys.executable}
    script = str(REPO / "conformance/gpu_run.sh")
    first, second, carry = tmp_path / "out1", tmp_path / "out2", tmp_path / "carry"
    cut = subprocess.run(
        [script, *_only(ONLY)],
        env={**env, "OUT": str(first), "AOQ_TIME_LIMIT": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert cut.returncode == 3, cut.stdout + cut.stderr
    (jsonl,) = first.glob("*.jsonl")
    assert "INCOMPLETE" in (first / "conform.log").read_text()
    carry.mkdir()
    shutil.copy(jsonl, carry)
    run_id = jsonl.name.removesuffix(".jsonl")
    done = subprocess.run(
        [script, run_id],
        env={**env, "OUT": str(second), "AOQ_CARRY": str(carry)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    _, records = read_jsonl(second / jsonl.name)
    assert {r.case_id for r in records if r.check == "cell"} == {
        c.id for c in matrix.cases("cpu", only=ONLY)
    }
    assert (second / "results.sqlite").exists() and "all cases green" in done.stdout
    missing = subprocess.run(
        [script, "nope"], env={**env, "OUT": str(second)}, capture_output=True, text=True
    )
    assert missing.returncode == 2 and "reports/runs/nope.jsonl not found" in missing.stderr


def test_each_run_call_gets_its_workers_back(tmp_path):
    """The pytest entry runs one cell per call: a worker that the end of a call turned into a
    checker is a worker again for the next call (else nothing would take its cases)."""
    import time

    from conformance.session import Options, Session

    opts = Options(
        backend="cpu",
        only=("int8wo/fp32/cpu/M1-*", "w8a8/fp32/cpu/M1-*"),
        jobs=1,
        store=tmp_path / "r.sqlite",
        runs_dir=tmp_path / "runs",
        deadline=time.monotonic() + 240,
    )
    session = Session(opts)
    try:
        session.start()
        first, second = session.cases[:1], session.cases[1:]
        session.run_cases(first, quiet=True)
        runner = session.runner
        runner._replace(runner.procs[0], "fresh")  # what the end of a call does while checks wait
        assert runner.counts() == {"case": 0, "fresh": 2}
        session.run_cases(second, quiet=True)
        assert session.left == [] and runner.counts() == {"case": 1, "fresh": 1}
        done = {r.case_id for r in session.records if r.check == "cell"}
        assert done == {c.id for c in session.cases}
    finally:
        session.close()
