"""ci/nightly.py and ci/history.sh: the nightly's own logic, on files and local git repos (no
engine, no GitHub): exit-status policy, staging, missing data, baselines, the gate, history."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ci import nightly

REPO = Path(__file__).resolve().parents[2]


def _run_file(folder: Path, kind: str, backend: str, started: str, records=1, arch=None) -> Path:
    run_id = f"{started.replace(':', '')}-{kind}-{backend}-000000"
    head = {"type": "run", "run_id": run_id, "kind": kind, "backend": backend}
    head |= {"arch": arch or backend, "started": started}
    rows = [json.dumps(head)] + [json.dumps({"type": "record", "case_id": "c"})] * records
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{run_id}.jsonl"
    path.write_text("\n".join(rows) + "\n")
    return path


def _night(folder: Path, started: str, backends=("cpu", "cuda", "rocm")) -> None:
    for backend in backends:
        for kind in nightly.EXPECTED_KINDS:
            _run_file(folder, kind, backend, started)


@pytest.mark.parametrize(("code", "expected"), [(0, 0), (1, 0), (2, 2), (124, 124)])
def test_suite_counts_red_cases_as_results_and_broken_runs_as_failures(code, expected, capsys):
    assert nightly.suite([sys.executable, "-c", f"raise SystemExit({code})"]) == expected
    assert ("::error::" in capsys.readouterr().out) == (expected != 0)


def test_stage_copies_only_the_run_files_git_does_not_track(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    runs = repo / "reports" / "runs"
    committed = _run_file(runs, "conformance", "cpu", "2026-01-01T00:00:00")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "add", "."], check=True)
    monkeypatch.chdir(repo)
    assert nightly.stage(Path("reports/runs"), tmp_path / "out") == 1  # nothing new: no data
    new = _run_file(runs, "bench", "cpu", "2026-01-02T00:00:00")
    assert nightly.stage(Path("reports/runs"), tmp_path / "out") == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [new.name]
    assert committed.name != new.name


def test_missing_names_each_backend_and_kind_without_records(tmp_path):
    _run_file(tmp_path, "conformance", "cpu", "t1")
    _run_file(tmp_path, "bench", "cpu", "t1")
    _run_file(tmp_path, "conformance", "cuda", "t1", records=0)  # a header only: no data
    lines = nightly.missing(nightly.read_runs(tmp_path), ["cpu", "cuda"])
    assert lines == [
        "missing data: no conformance run with records from cuda",
        "missing data: no bench run with records from cuda",
    ]


def test_baseline_is_the_newest_earlier_run_of_the_same_kind_backend_and_arch(tmp_path):
    old = _run_file(tmp_path / "h", "bench", "cuda", "2026-01-01", arch="sm90")
    last = _run_file(tmp_path / "h", "bench", "cuda", "2026-01-02", arch="sm90")
    _run_file(tmp_path / "h", "bench", "cuda", "2026-01-03", arch="sm90a")  # other GPU
    _run_file(tmp_path / "h", "conformance", "cuda", "2026-01-03", arch="sm90")  # other kind
    new = nightly.read_run(_run_file(tmp_path / "n", "bench", "cuda", "2026-01-04", arch="sm90"))
    history = nightly.read_runs(tmp_path / "h")
    assert new is not None and old.exists()
    found = nightly.baseline(new, history)
    assert found is not None and found.path == last


@pytest.mark.parametrize("compare_exit", [0, 1])
def test_gate_compares_each_run_with_the_last_nightly(tmp_path, monkeypatch, compare_exit):
    _night(tmp_path / "history", "2026-01-01T02:00:00")
    _night(tmp_path / "new", "2026-01-02T02:00:00")
    calls = []

    def fake_compare(base, new):
        calls.append((base.started, new.started, base.key == new.key))
        return [sys.executable, "-c", f"raise SystemExit({compare_exit})"]

    monkeypatch.setattr(nightly, "compare_command", fake_compare)
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    code = nightly.gate(tmp_path / "new", tmp_path / "history", ["cpu", "cuda", "rocm"])
    assert code == compare_exit
    assert calls == [("2026-01-01T02:00:00", "2026-01-02T02:00:00", True)] * 6
    assert ("FAILED" in summary.read_text()) == bool(compare_exit)


def test_gate_fails_on_a_missing_backend_even_on_the_first_night(tmp_path, capsys):
    _night(tmp_path / "new", "2026-01-02T02:00:00", backends=("cpu", "cuda"))
    assert nightly.gate(tmp_path / "new", tmp_path / "none", ["cpu", "cuda", "rocm"]) == 1
    out = capsys.readouterr().out
    assert "no conformance run with records from rocm" in out
    assert "no earlier nightly run of bench/cuda/cuda" in out


def test_merge_adds_new_files_and_keeps_existing_ones(tmp_path):
    kept = _run_file(tmp_path / "history", "bench", "cpu", "t1")
    kept.write_text(kept.read_text() + "\n")
    _run_file(tmp_path / "new", "bench", "cpu", "t1")
    _run_file(tmp_path / "new", "bench", "cpu", "t2")
    nightly.merge(tmp_path / "new", tmp_path / "history")
    assert len(list((tmp_path / "history").iterdir())) == 2 and kept.read_text().endswith("\n\n")


def _git(*args: str, cwd: Path) -> str:
    ident = ["-c", "user.name=t", "-c", "user.email=t@t"]
    return subprocess.run(
        ["git", *ident, *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


def test_history_branch_is_started_then_appended_to(tmp_path):
    origin, work = tmp_path / "origin.git", tmp_path / "work"
    _git("init", "-q", "--bare", str(origin), cwd=tmp_path)
    _git("init", "-q", "-b", "main", str(work), cwd=tmp_path)
    (work / "f").write_text("code\n")
    _git("add", "f", cwd=work)
    _git("commit", "-q", "-m", "code", cwd=work)
    _git("remote", "add", "origin", str(origin), cwd=work)
    _git("push", "-q", "origin", "main", cwd=work)
    script = str(REPO / "ci" / "history.sh")
    for night, name in enumerate(["a.jsonl", "b.jsonl"]):
        hist = tmp_path / f"h{night}"
        subprocess.run([script, "open", str(hist)], cwd=work, check=True)
        assert not (hist / "f").exists()  # the history holds runs only, never main's files
        (hist / "runs" / name).write_text("{}\n")
        subprocess.run([script, "push", str(hist)], cwd=work, check=True)
    files = _git("ls-tree", "-r", "--name-only", "nightly-history", cwd=origin).split()
    assert files == ["runs/a.jsonl", "runs/b.jsonl"]
    assert len(_git("log", "--oneline", "nightly-history", cwd=origin).splitlines()) == 2
