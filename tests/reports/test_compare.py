"""``python -m reports compare``: exit 1 on a real slowdown or a missing row, 0 on a noise-only
rerun (over several seeds), 2 on usage errors with a message that says what to do."""

import csv
import random
import subprocess
import sys
from pathlib import Path

import pytest
from test_regress import CASE, DECODE, PREFILL, bench, conformance_case, info, jitter, write_run

from reports.compare import main

REPO = Path(__file__).resolve().parents[2]


def _compare(tmp_path, *args: str) -> int:
    store = str(tmp_path / "none.sqlite")  # not there: the runs directory only
    return main([*args, "--runs-dir", str(tmp_path), "--store", store])


def _pair(tmp_path, slowdown: float, seed: int = 0, n_rows: int = 20):
    rng = random.Random(seed)
    rows = {f"int8wo/bf16/cuda/M{m}-K4096-N4096/aoq/graph": 4.0 * m for m in range(1, n_rows + 1)}
    base = bench(
        tmp_path, "20261121T020000Z-bench-cuda-aaaaaa", {r: jitter(rng, v) for r, v in rows.items()}
    )
    first = next(iter(rows))
    new_rows = {r: jitter(rng, v * (1 + slowdown if r == first else 1)) for r, v in rows.items()}
    new = bench(tmp_path, "20261122T020000Z-bench-cuda-bbbbbb", new_rows)
    return base, new, first


def test_a_30_percent_slowdown_fails(tmp_path, capsys):
    _, _, row = _pair(tmp_path, 0.30)
    assert _compare(tmp_path, "aaaaaa", "bbbbbb") == 1
    out = capsys.readouterr().out
    [line] = [s.split() for s in out.splitlines() if row in s]
    assert line[:3] == ["regression", "speed", "cuda-sm90"]
    assert 0.25 < float(line[8].rstrip("%")) / 100 < 0.35  # the change column
    assert "1 regression, 19 ok" in out and out.rstrip().endswith("FAIL (1 gating)")
    assert _statuses(out).count("ok") == 0  # ok rows only with --all


def _statuses(out: str) -> list[str]:
    return [line.split()[0] for line in out.splitlines()[1:-1]]


@pytest.mark.parametrize("seed", range(8))
def test_a_noise_only_rerun_passes(tmp_path, capsys, seed):
    _pair(tmp_path, 0.0, seed)
    assert _compare(tmp_path, "aaaaaa", "bbbbbb") == 0
    assert capsys.readouterr().out.rstrip().endswith("OK")


def test_run_files_by_path_all_and_csv(tmp_path, capsys):
    base, new, row = _pair(tmp_path, 0.30)
    files = [str(tmp_path / f"{r.info.run_id}.jsonl") for r in (base, new)]
    out_csv = tmp_path / "out" / "findings.csv"
    assert main([*files, "--all", "--csv", str(out_csv), "--store", str(tmp_path / "x")]) == 1
    assert _statuses(capsys.readouterr().out).count("ok") == 19  # --all shows them
    rows = list(csv.DictReader(out_csv.open()))
    assert len(rows) == 20 and rows[0]["row"] == row
    assert (rows[0]["status"], rows[0]["gating"], rows[-1]["gating"]) == (
        "regression",
        "True",
        "False",
    )


def test_a_missing_row_fails(tmp_path, capsys):
    rng = random.Random(1)
    bench(tmp_path, "base-run", {DECODE: jitter(rng, 10.0), PREFILL: jitter(rng, 500.0)})
    bench(tmp_path, "new-run", {DECODE: jitter(rng, 10.0)})
    assert _compare(tmp_path, "base-run", "new-run") == 1
    assert "missing" in capsys.readouterr().out


def test_accuracy_runs_compare_too(tmp_path, capsys):
    base = conformance_case("c1", sqnr=("pass", {"db": 30.0}))
    write_run(tmp_path, info("c1", "conformance", backend="cpu"), base)
    new = conformance_case("c2", sqnr=("pass", {"db": 28.0}))
    write_run(tmp_path, info("c2", "conformance", backend="cpu"), new)
    assert _compare(tmp_path, "c1", "c2") == 1
    assert f"{CASE}:sqnr" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope", "new-run"], "no run 'nope'"),
        (["run", "new-run"], "matches 4 runs"),
        (["base-run", "conf-run"], "bench run and conf-run a conformance run"),
        (["base-run", "cpu-run"], "ran on cuda-sm90 and cpu-run on cpu"),
        (["base-run", "new-run", "--alpha", "1.5"], "--alpha"),
    ],
)
def test_usage_errors_exit_2(tmp_path, capsys, args, message):
    bench(tmp_path, "base-run", {DECODE: [1.0]})
    bench(tmp_path, "new-run", {DECODE: [1.0]})
    bench(tmp_path, "cpu-run", {DECODE: [1.0]}, backend="cpu")
    write_run(tmp_path, info("conf-run", "conformance"), [])
    assert _compare(tmp_path, *args) == 2
    assert message in capsys.readouterr().err
    if "--alpha" not in args and "matches" not in message and "no run" not in message:
        assert _compare(tmp_path, *args, "--force") in (0, 1)  # forced: compared anyway


def test_thresholds_without_a_reason_exit_2(tmp_path, capsys):
    bench(tmp_path, "base-run", {DECODE: [1.0]})
    bad = tmp_path / "t.toml"
    bad.write_text('[[override]]\nrows = "*"\nthreshold = 0.5\n')
    assert _compare(tmp_path, "base-run", "base-run", "--thresholds", str(bad)) == 2
    assert "no reason" in capsys.readouterr().err


def test_python_m_reports_compare(tmp_path):
    """The dispatch in reports/__main__.py, in a fresh process."""
    _pair(tmp_path, 0.30, n_rows=2)
    cmd = [
        sys.executable,
        "-m",
        "reports",
        "compare",
        "aaaaaa",
        "bbbbbb",
        "--runs-dir",
        str(tmp_path),
    ]
    cmd += ["--store", str(tmp_path / "none.sqlite")]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert "regression" in done.stdout
