"""A run killed with SIGKILL mid-way is finished by ``--resume`` with no case lost or
duplicated (in the store and in the JSONL); shards of one run merge into one file."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from aoq.testing import matrix
from aoq.testing.records import read_jsonl

REPO = Path(__file__).resolve().parents[2]
ONLY = ["int8wo/fp32/cpu/M*", "w8a8/fp32/cpu/M*", "fp8wo/fp32/cpu/M*"]


def _cmd(tmp_path: Path, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "conformance",
        "--store",
        str(tmp_path / "r.sqlite"),
        "--runs-dir",
        str(tmp_path / "runs"),
        "--no-report",
        *args,
    ]


def _summaries(path: Path) -> list[str]:
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    return [json.loads(x)["case_id"] for x in lines[:-1] if '"check": "cell"' in x]


def test_kill_9_then_resume_loses_and_duplicates_nothing(tmp_path):
    only = [a for p in ONLY for a in ("--only", p)]
    expected = {c.id for c in matrix.cases("cpu", quick=True, only=ONLY)}
    proc = subprocess.Popen(
        _cmd(tmp_path, "--backend", "cpu", "--quick", "--jobs", "2", *only),
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    deadline = time.monotonic() + 180
    path = None
    while time.monotonic() < deadline:
        files = list((tmp_path / "runs").glob("*.jsonl"))
        if files and len(_summaries(files[0])) >= 3:
            path = files[0]
            break
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)  # the runner and everything it started
    proc.wait()
    assert path is not None, "the run never wrote three cases"
    before = set(_summaries(path))
    assert 3 <= len(before) < len(expected)
    with path.open("a") as f:
        f.write('{"type": "record", "case_id": "torn')  # as if killed mid-line
    run_id = path.name.removesuffix(".jsonl")
    out = subprocess.run(
        _cmd(tmp_path, "--resume", run_id), cwd=REPO, capture_output=True, text=True, timeout=240
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"resuming {run_id}: {len(expected)} cases" in out.stderr
    run, records = read_jsonl(path)
    assert run.run_id == run_id and run.extra["quick"] is True
    keys = Counter((r.case_id, r.check) for r in records)
    assert max(keys.values()) == 1, [k for k, n in keys.items() if n > 1]
    assert {r.case_id for r in records if r.check == "cell"} == expected
    db = sqlite3.connect(tmp_path / "r.sqlite")
    rows = db.execute('SELECT case_id, "check" FROM records WHERE run_id = ?', (run_id,)).fetchall()
    assert sorted(rows) == sorted(keys)
    # the resumed part ran only what was missing: the earlier cases keep their first records
    first_time = {r.case_id: r.time for r in records if r.check == "cell"}
    assert all(first_time[c] for c in before)


def test_shards_of_one_run_merge_into_one(tmp_path):
    only = ["--only", "int8wo/fp32/cpu/M1-*", "--only", "w8a8/fp32/cpu/M1-*"]
    for i in (1, 2):
        out = subprocess.run(
            _cmd(
                tmp_path,
                "--backend",
                "cpu",
                "--shard",
                f"{i}/2",
                "--run-id",
                "R1",
                "--jobs",
                "1",
                *only,
            ),
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert out.returncode == 0, out.stderr
    runs = tmp_path / "runs"
    assert sorted(p.name for p in runs.iterdir()) == ["R1.shard-1of2.jsonl", "R1.shard-2of2.jsonl"]
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "conformance",
            "merge",
            "R1",
            "--runs-dir",
            str(runs),
            "--store",
            str(tmp_path / "r.sqlite"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    run, records = read_jsonl(runs / "R1.jsonl")
    assert [p.name for p in runs.iterdir()] == ["R1.jsonl"]
    assert {r.case_id for r in records if r.check == "cell"} == {
        "int8wo/fp32/cpu/M1-K256-N256",
        "w8a8/fp32/cpu/M1-K256-N256",
    }
    assert [s["shard"] for s in run.extra["shards"]] == [1, 2]


def test_merge_refuses_a_missing_shard(tmp_path):
    from conformance.merge import MergeError, merge

    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "R2.shard-2of3.jsonl").write_text("")
    with pytest.raises(MergeError, match="shards \\[1, 3\\] of 3 are missing"):
        merge(runs, "R2", None)
