"""The test-only AOQ_TEST_SLOWDOWN knob (aoq/dispatch.py): a matching kernel runs `factor`
times, so a deliberately slowed kernel is flagged as a regression by `reports compare` (the
end-to-end test sets the variable for a whole `python -m bench` process)."""

import csv
import os
import subprocess
import sys

import pytest
from bench_runs import REPO, run_bench

from aoq import dispatch


def _calls(knob: str) -> int:
    """How many times the chosen kernel runs for one linear under ``knob`` (the env value,
    passed directly: the environment is read once, when aoq is imported)."""
    calls = []
    impl = dispatch.KernelImpl("aten._weight_int8pack_mm", lambda *a: calls.append(a), None)
    dispatch._run_kernel(impl, "x", "w", None, dispatch.parse_slowdown(knob))
    return len(calls)


def test_knob_repeats_matching_kernels_only():
    assert _calls("") == 1  # unset: the default
    assert _calls("aten._weight_int8pack*=3") == 3
    assert _calls("triton.*=5, aten._weight_int8pack_mm=2.4") == 2  # first match, rounded
    assert _calls("aten._int_mm=4") == 1
    assert _calls("aten._weight_int8pack_mm=0") == 1  # at least once


def test_knob_rejects_a_malformed_value():
    with pytest.raises(ValueError, match="AOQ_TEST_SLOWDOWN"):
        _calls("aten._weight_int8pack_mm")


def test_knob_is_off_unless_set():
    knob = os.environ.get("AOQ_TEST_SLOWDOWN", "")
    assert dispatch._run_kernel.__defaults__ == (dispatch.parse_slowdown(knob),)


def test_a_slowed_kernel_is_a_regression_for_reports_compare(quick, tmp_path):
    """The quick run is the baseline; the same rows again with the kernel run 10 times."""
    _, base_dir, _, _, _ = quick
    env = {**os.environ, "AOQ_TEST_SLOWDOWN": "aten._weight_int8pack_mm=10"}
    slow = run_bench(tmp_path, "--only", "int8wo/*", "--store", "", "--budget-s", "0", env=env)
    assert slow.returncode == 0, slow.stdout[-2000:] + slow.stderr[-2000:]
    (a,) = base_dir.glob("*.jsonl")
    (b,) = tmp_path.glob("*.jsonl")
    found = tmp_path / "findings.csv"
    proc = subprocess.run(
        [sys.executable, "-m", "reports", "compare", str(a), str(b), "--csv", str(found)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr  # a gating finding
    rows = {r["row"]: r for r in csv.DictReader(found.open())}
    for shape in ("M1-K256-N256", "M32-K256-N256"):
        row = rows[f"int8wo/bf16/cpu/{shape}/aoq/wall"]
        assert row["status"] == "regression", row
        assert float(row["change"]) > 1.0  # ten calls for one: well over 2x slower
