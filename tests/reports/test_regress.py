"""reports.regress: the Mann-Whitney test against scipy's numbers, speed rows that regress
only when both the threshold and the test say so (and a noise-only rerun that never gates),
accuracy drift and status changes, missing rows and backends, step detection, thresholds.

The run builders here are shared with test_compare.py."""

import dataclasses
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from aoq.testing.benchrows import BenchCase, latency_record, parse_case
from aoq.testing.records import JsonlWriter, Record, RunInfo, read_jsonl
from reports import regress
from reports.data import Run
from reports.regress import (
    Point,
    ThresholdError,
    Thresholds,
    compare_runs,
    detect_steps,
    history,
    load_thresholds,
    mann_whitney_greater,
    missing_data,
)

REPO = Path(__file__).resolve().parents[2]
DECODE = "int4wo-g128/bf16/cuda/M1-K4096-N4096/aoq/graph"
PREFILL = "int4wo-g128/bf16/cuda/M4096-K4096-N4096/aoq/graph"
DAY1, DAY2 = "2026-11-21T02:00:00+00:00", "2026-11-22T02:00:00+00:00"


# --- builders (also used by test_compare.py) ------------------------------------------------


def info(run_id: str, kind: str = "bench", started: str = DAY1, backend: str = "cuda") -> RunInfo:
    arch = "sm90" if backend == "cuda" else "cpu"
    extra = {"argv": ["bench/linear_speed.py"]} if kind == "bench" else {}
    return RunInfo(
        run_id, kind, started, "a" * 40, "host", backend, "dev", arch, "2.11", None, extra
    )


def write_run(directory: Path, run: RunInfo, records: list[Record]) -> Run:
    """Through the real file format: JsonlWriter, then read back."""
    with JsonlWriter(run, directory) as w:
        w.write_many(records)
    return Run(*read_jsonl(directory / f"{run.run_id}.jsonl"))


def jitter(rng: random.Random, center: float, n: int = 30, spread: float = 0.03) -> list[float]:
    """n timings around ``center`` with relative sd ``spread``."""
    return [center * (1 + rng.gauss(0, spread)) for _ in range(n)]


def case(case_id: str) -> BenchCase:
    parsed = parse_case(case_id)
    assert parsed is not None, case_id
    return parsed


def bench(directory: Path, run_id: str, rows: dict[str, list[float]], **kw) -> Run:
    records = [latency_record(run_id, case(cid), s) for cid, s in rows.items()]
    return write_run(directory, info(run_id, **kw), records)


# --- Mann-Whitney U --------------------------------------------------------------------------
# Expected p-values from scipy 1.17.1 (a throwaway venv; scipy is no dependency of aoq):
# stats.mannwhitneyu(x, y, alternative="greater", method="exact" | "asymptotic"), and for
# small samples with ties, stats.permutation_test on U with n_resamples=np.inf (exact).


def test_mwu_exact_matches_scipy():
    x, y = [3.1, 4.5, 5.2, 6.0, 7.7], [1.2, 2.3, 3.0, 4.0, 5.0]
    assert mann_whitney_greater(x, y) == pytest.approx(0.027777777777777776, abs=1e-15)
    x, y = [0.9, 1.7], [0.1, 0.5, 0.8, 1.1, 1.3, 1.6, 2.0, 2.4, 2.5]
    assert mann_whitney_greater(x, y) == pytest.approx(0.5454545454545455, abs=1e-15)


def test_mwu_exact_with_ties_matches_scipy_permutation():
    x, y = [2, 3, 3, 4, 5, 5], [1, 2, 2, 3, 4]
    assert mann_whitney_greater(x, y) == pytest.approx(0.08008658008658008, abs=1e-15)


def test_mwu_normal_matches_scipy():
    x = [10.2, 11.5, 9.8, 12.1, 10.9, 11.8, 10.4, 12.6, 11.1, 10.7, 12.3, 11.3]
    y = [9.9, 10.1, 9.5, 10.6, 9.2, 10.8, 9.7, 10.3, 11.0, 9.4, 10.0, 9.6, 10.5, 9.1, 11.4]
    assert mann_whitney_greater(x, y) == pytest.approx(0.0011453970798940287, rel=1e-12)


def test_mwu_normal_with_ties_matches_scipy():
    x = [3, 4, 4, 5, 5, 5, 6, 6, 7, 3, 4, 5, 6, 8]
    y = [2, 3, 3, 4, 4, 4, 5, 5, 2, 3, 4, 5, 6, 3, 4, 2, 5, 4]
    assert mann_whitney_greater(x, y) == pytest.approx(0.007937712629463313, rel=1e-12)
    assert mann_whitney_greater(y, x) == pytest.approx(0.9928703984957595, rel=1e-12)


def test_mwu_edges():
    assert mann_whitney_greater([1.0] * 20, [1.0] * 20) == 1.0  # all tied: no evidence
    assert regress.smallest_p(3, 3) == pytest.approx(1 / 20)  # C(6, 3) orderings
    with pytest.raises(ValueError, match="both samples"):
        mann_whitney_greater([], [1.0])


def test_mwu_false_positive_rate_is_alpha():
    """Same distribution, 30 samples each: p < 0.01 about 1 % of the time, no more."""
    rng = random.Random(0)
    hits = sum(mann_whitney_greater(jitter(rng, 100), jitter(rng, 100)) < 0.01 for _ in range(1000))
    assert hits <= 20


# --- speed -----------------------------------------------------------------------------------


def _one(findings, row):
    [f] = [f for f in findings if f.row == row]
    return f


def test_30_percent_slower_is_a_regression(tmp_path):
    rng = random.Random(1)
    base = bench(tmp_path, "base", {DECODE: jitter(rng, 10.0), PREFILL: jitter(rng, 500.0)})
    new = bench(tmp_path, "new", {DECODE: jitter(rng, 13.0), PREFILL: jitter(rng, 500.0)})
    found = compare_runs(base, new, Thresholds())
    f = _one(found, DECODE)
    assert (f.kind, f.status, f.gating, f.backend) == ("speed", "regression", True, "cuda-sm90")
    assert f.change == pytest.approx(0.3, abs=0.03) and f.p_value < 1e-9
    assert _one(found, PREFILL).status == "ok"
    assert found[0] is f  # worst first


def test_faster_is_an_improvement(tmp_path):
    rng = random.Random(2)
    base = bench(tmp_path, "base", {DECODE: jitter(rng, 10.0)})
    new = bench(tmp_path, "new", {DECODE: jitter(rng, 7.0)})
    f = _one(compare_runs(base, new, Thresholds()), DECODE)
    assert (f.status, f.gating) == ("improvement", False) and f.change < -0.25


@pytest.mark.parametrize("seed", range(20))
def test_noise_only_rerun_never_gates(tmp_path, seed):
    """Same code, new random draws (30 samples, 3 % jitter) over 40 rows: no gating finding
    at alpha=0.01 with a 5 % threshold."""
    rng = random.Random(seed)
    rows = {f"int8wo/bf16/cuda/M{m}-K4096-N4096/aoq/graph": 5.0 * m for m in range(1, 41)}
    base = bench(tmp_path, "base", {r: jitter(rng, v) for r, v in rows.items()})
    new = bench(tmp_path, "new", {r: jitter(rng, v) for r, v in rows.items()})
    found = compare_runs(base, new, Thresholds())
    assert len(found) == 40 and not [f for f in found if f.gating]


def test_a_tiny_but_significant_shift_is_ok(tmp_path):
    """2 % slower over 500 samples is significant, and below the threshold: no alarm."""
    rng = random.Random(9)
    base = bench(tmp_path, "base", {DECODE: jitter(rng, 10.0, n=500, spread=0.01)})
    new = bench(tmp_path, "new", {DECODE: jitter(rng, 10.2, n=500, spread=0.01)})
    f = _one(compare_runs(base, new, Thresholds()), DECODE)
    assert f.status == "ok" and f.p_value < 1e-6


def test_committed_cpu_conformance_runs_compare_clean():
    """The two cpu runs in reports/runs: fixes between them, nothing lost or worse."""
    runs = REPO / "reports" / "runs"
    paths = [p for i in ("2909de", "a37097") for p in runs.glob(f"*conformance-cpu-{i}.jsonl")]
    if len(paths) != 2:
        pytest.skip("committed runs not present")
    base, new = (Run(*read_jsonl(p)) for p in paths)
    found = compare_runs(base, new, load_thresholds(REPO / "bench" / "thresholds.toml"))
    assert not [f for f in found if f.gating]
    assert {f.status for f in found} == {"improvement", "new", "ok"}


def test_slower_but_not_significant_is_noise(tmp_path):
    base = bench(tmp_path, "base", {DECODE: [100, 90, 115, 104, 96]})
    new = bench(tmp_path, "new", {DECODE: [108, 92, 120, 99, 112]})
    f = _one(compare_runs(base, new, Thresholds()), DECODE)
    assert f.status == "noise" and f.change == pytest.approx(0.08) and f.p_value > 0.01


def test_too_few_samples_or_none_is_unconfirmed(tmp_path):
    base = bench(tmp_path, "base", {DECODE: [10.0, 10.1, 10.2]})
    new = bench(tmp_path, "new", {DECODE: [13.0, 13.1, 13.2]})
    f = _one(compare_runs(base, new, Thresholds()), DECODE)
    assert f.status == "unconfirmed" and not f.gating and "cannot reach" in f.reason
    # a legacy row: p50 and no samples
    legacy = Record("old", DECODE, "latency", "pass", metrics={"p50": 10.0})
    old = write_run(tmp_path, info("old"), [legacy])
    f = _one(compare_runs(old, new, Thresholds()), DECODE)
    assert (f.status, f.base, f.p_value) == ("unconfirmed", 10.0, None)


def test_a_row_timed_in_turns_in_one_run_only_is_unconfirmed(tmp_path):
    """Timed in turns with bf16 in one run and alone in the other (a change of the bench's
    method: both sides run slower at sustained power), a slower p50 gates nothing."""
    rng = random.Random(5)
    base = bench(tmp_path, "base", {PREFILL: jitter(rng, 500.0)})
    paired = [latency_record("new", case(PREFILL), jitter(rng, 560.0), paired=True)]
    new = write_run(tmp_path, info("new"), paired)
    f = _one(compare_runs(base, new, Thresholds()), PREFILL)
    assert f.status == "unconfirmed" and not f.gating and "only the new run" in f.reason
    assert f.change == pytest.approx(0.12, abs=0.03)
    # both paired: compared as ever
    both = [latency_record("again", case(PREFILL), jitter(rng, 620.0), paired=True)]
    again = write_run(tmp_path, info("again"), both)
    assert _one(compare_runs(new, again, Thresholds()), PREFILL).status == "regression"


def test_threshold_override_applies_to_matching_rows(tmp_path):
    rng = random.Random(3)
    base = bench(tmp_path, "base", {DECODE: jitter(rng, 10.0), PREFILL: jitter(rng, 500.0)})
    new = bench(tmp_path, "new", {DECODE: jitter(rng, 13.0), PREFILL: jitter(rng, 650.0)})
    loose = Thresholds(overrides=(regress.Override("*/M1-*", 0.5, "launch noise"),))
    found = compare_runs(base, new, loose)
    f = _one(found, DECODE)
    assert (f.status, f.threshold) == ("ok", 0.5) and "*/M1-*" in f.reason
    assert _one(found, PREFILL).status == "regression"


def test_missing_and_new_rows(tmp_path):
    rng = random.Random(4)
    other = "fp8-row/bf16/cuda/M1-K4096-N4096/aoq/graph"
    base = bench(tmp_path, "base", {DECODE: jitter(rng, 10.0), PREFILL: jitter(rng, 500.0)})
    errored = latency_record("new", case(PREFILL), [1.0], status="error", reason="OOM")
    errored = dataclasses.replace(errored, metrics={})
    new_records = [latency_record("new", case(other), jitter(rng, 9.0)), errored]
    new = write_run(tmp_path, info("new"), new_records)
    found = compare_runs(base, new, Thresholds())
    gone, failed, fresh = _one(found, DECODE), _one(found, PREFILL), _one(found, other)
    assert (gone.kind, gone.status, gone.gating) == ("missing", "missing", True)
    assert failed.status == "missing" and "error: OOM" in failed.reason
    assert (fresh.status, fresh.gating) == ("new", False)


# --- accuracy --------------------------------------------------------------------------------

CASE = "int8wo/bf16/cpu/M7-K256-N256"


def conformance_case(run_id: str, case_id: str = CASE, cell: str = "pass", **checks: Any) -> list:
    """check=(status, metrics) records and the cell summary closing the case."""
    out = [Record(run_id, case_id, c, s, metrics=m) for c, (s, m) in checks.items()]
    return out + [Record(run_id, case_id, "cell", cell, reason=None if cell == "pass" else "x")]


def _accuracy(tmp_path, base_checks: dict, new_checks: dict, cell: str = "pass"):
    base = write_run(tmp_path, info("b", "conformance"), conformance_case("b", **base_checks))
    new_records = conformance_case("n", cell=cell, **new_checks)
    new = write_run(tmp_path, info("n", "conformance"), new_records)
    return compare_runs(base, new, Thresholds())


@pytest.mark.parametrize(
    ("check", "before", "after", "status"),
    [
        ("sqnr", {"db": 30.0}, {"db": 29.2}, "regression"),  # 0.8 dB lost > 0.5
        ("sqnr", {"db": 30.0}, {"db": 29.8}, "ok"),
        ("sqnr", {"db": 30.0}, {"db": 31.0}, "improvement"),
        ("sqnr", {"db": float("inf")}, {"db": float("inf")}, "ok"),  # exact, still exact
        ("sqnr", {"db": float("inf")}, {"db": 60.0}, "regression"),
        ("sqnr", {"db": 30.0}, {"db": float("nan")}, "regression"),
        (
            "output",
            {"rel_err": 1e-3, "budget": 4e-3},
            {"rel_err": 1.8e-3, "budget": 4e-3},
            "regression",
        ),
        ("output", {"rel_err": 1e-3, "budget": 4e-3}, {"rel_err": 1.2e-3, "budget": 4e-3}, "ok"),
        ("model_cosine", {"mean": 0.9978}, {"mean": 0.9950}, "regression"),
        ("model_cosine", {"mean": 0.9978}, {"mean": 0.9975}, "ok"),
    ],
)
def test_metric_drift_while_still_passing(tmp_path, check, before, after, status):
    found = _accuracy(tmp_path, {check: ("pass", before)}, {check: ("pass", after)})
    f = _one(found, f"{CASE}:{check}")
    assert (f.kind, f.status) == ("accuracy", status)
    assert [g.row for g in found if g.gating] == ([f.row] if status == "regression" else [])


def test_pass_to_fail_regresses_and_fail_to_pass_improves(tmp_path):
    found = _accuracy(
        tmp_path,
        {"kernel": ("pass", {}), "output": ("fail", {})},
        {"kernel": ("fail", {}), "output": ("pass", {})},
        cell="fail",
    )
    assert _one(found, f"{CASE}:kernel").status == "regression"
    assert _one(found, f"{CASE}:output").status == "improvement"
    assert not [f for f in found if f.row.endswith(":cell")]  # the checks said it


def test_a_crash_is_one_finding_not_one_per_lost_check(tmp_path):
    checks: dict[str, Any] = {c: ("pass", {}) for c in ("pack", "kernel", "output", "save_load")}
    found = _accuracy(tmp_path, checks, {}, cell="crash")
    assert [(f.row, f.status) for f in found] == [(f"{CASE}:cell", "regression")]


def test_a_case_gone_is_one_missing_finding(tmp_path):
    checks: dict[str, Any] = {c: ("pass", {}) for c in ("pack", "kernel")}
    base = write_run(tmp_path, info("b", "conformance"), conformance_case("b", **checks))
    new = write_run(tmp_path, info("n", "conformance"), [])
    assert [(f.row, f.status) for f in compare_runs(base, new, Thresholds())] == [(CASE, "missing")]


# --- missing data ----------------------------------------------------------------------------


def test_missing_rows_and_backends(tmp_path):
    rng = random.Random(5)
    rows = {DECODE: jitter(rng, 10.0), PREFILL: jitter(rng, 500.0)}
    cpu1 = write_run(tmp_path, info("cpu1", "conformance", DAY1, "cpu"), conformance_case("cpu1"))
    cuda1 = bench(tmp_path, "cuda1", rows, started=DAY1)
    rocm1 = bench(tmp_path, "rocm1", rows, started=DAY1, backend="rocm")
    cpu2 = write_run(tmp_path, info("cpu2", "conformance", DAY2, "cpu"), [])
    slower = [v * 1.3 for v in rows[DECODE]]  # a regression: compare's business, not missing
    cuda2 = bench(tmp_path, "cuda2", {DECODE: slower}, started=DAY2)
    found = missing_data([cpu1, cuda1, rocm1, cpu2, cuda2])  # "now": each series' newest
    assert all(f.gating and f.kind == "missing" for f in found)
    assert {(f.backend, f.row) for f in found} == {
        ("rocm", "bench run"),  # a day behind the newest bench run: stopped reporting
        ("cuda-sm90", PREFILL),
        ("cpu", CASE),
    }
    tonight = {"cpu2": cpu2}  # only the cpu job reported tonight
    found = missing_data([cpu1, cuda1, rocm1], latest=tonight)
    assert {(f.backend, f.row) for f in found} == {
        ("rocm", "bench run"),
        ("cuda-sm90", "bench run"),
        ("cpu", CASE),
    }
    [rocm] = [f for f in found if f.backend == "rocm"]
    assert rocm.reason == "no bench run from rocm since 2026-11-21T02:00:00+00:00 (rocm1)"


def test_bench_scripts_are_separate_series_and_retired_ones_are_quiet(tmp_path):
    rng = random.Random(6)
    rows = {DECODE: jitter(rng, 10.0), PREFILL: jitter(rng, 500.0)}
    lin1 = bench(tmp_path, "lin1", rows, started="2026-11-21T01:00:00+00:00")
    lin2 = bench(tmp_path, "lin2", {DECODE: rows[DECODE]}, started=DAY1)  # lost PREFILL
    step = info("step", started="2026-11-21T03:00:00+00:00")
    step = dataclasses.replace(step, extra={"argv": ["bench/mx_training.py", "--gpu"]})
    timed = Record("step", "mlp/M8192/fwd+bwd/bf16", "step_time", "pass", metrics={"p50_us": 7e3})
    step_run = write_run(tmp_path, step, [timed])
    assert [regress.suite(r) for r in (lin1, step_run)] == ["linear_speed.py", "mx_training.py"]
    # the step run is no baseline for the linear rows, nor a linear run for the step's
    assert [f.row for f in missing_data([lin1, lin2, step_run])] == [PREFILL]
    # a day later `python -m bench` replaces both scripts: their series are history now
    later = dataclasses.replace(info("new", started=DAY2), extra={"argv": ["--quick"]})
    new = write_run(tmp_path, later, [latency_record("new", case(DECODE), rows[DECODE])])
    assert regress.suite(new) == "--quick"  # a selection is a series of its own
    assert missing_data([lin1, lin2, step_run, new]) == []
    full = dataclasses.replace(
        info("full", started=DAY2), extra={"argv": ["bench", "--backend", "cuda"]}
    )
    subset = dataclasses.replace(
        info("subset", started=DAY2), extra={"argv": ["bench", "--only", "int8wo/*"]}
    )
    assert regress.suite(write_run(tmp_path, full, [])) == ""
    assert regress.suite(write_run(tmp_path, subset, [])) == "--only=int8wo/*"


# --- history and steps -----------------------------------------------------------------------


def _points(values: Sequence[float]) -> list[Point]:
    return [Point(f"r{i}", f"2026-11-{i + 1:02d}", "sha", v, []) for i, v in enumerate(values)]


def test_a_persistent_step_is_found_where_it_starts():
    rng = random.Random(7)
    values = [100 * (1 + rng.gauss(0, 0.01)) for _ in range(10)]
    values += [120 * (1 + rng.gauss(0, 0.01)) for _ in range(10)]
    [step] = detect_steps(_points(values))
    assert (step.index, step.run_id) == (10, "r10")
    assert step.change == pytest.approx(0.2, abs=0.03)
    assert step.before == pytest.approx(100, rel=0.02)
    [down] = detect_steps(_points([100] * 5 + [80] * 5))
    assert (down.index, down.change) == (5, pytest.approx(-0.2))


def test_a_blip_is_not_a_step():
    assert detect_steps(_points([100, 101, 99, 100, 150, 100, 101, 99])) == []
    assert detect_steps(_points([100, 101, 99, 100, 100, 150])) == []  # last point: not yet
    two = [100, 100, 100, 150, 150, 100, 100, 100]
    assert detect_steps(_points(two), min_run=3) == []
    assert [s.index for s in detect_steps(_points(two), min_run=2)] == [3, 5]  # up, then back


def test_history_is_time_ordered_and_feeds_steps(tmp_path):
    rng = random.Random(8)
    runs = [
        bench(
            tmp_path,
            f"r{i}",
            {DECODE: jitter(rng, 10.0 if i < 3 else 12.0)},
            started=f"2026-11-{i + 10}T02:00:00+00:00",
        )
        for i in range(6)
    ]
    series = history(reversed(runs), "bench")
    points = series[("cuda-sm90", DECODE)]
    assert [p.run_id for p in points] == [f"r{i}" for i in range(6)]
    assert len(points[0].samples) == 30
    [f] = regress.step_findings(series)
    assert (f.kind, f.status, f.row) == ("step", "regression", DECODE) and "r3" in f.reason
    conf = write_run(
        tmp_path, info("c", "conformance"), conformance_case("c", sqnr=("pass", {"db": 30.0}))
    )
    assert history([conf], "conformance") == {
        ("cuda-sm90", f"{CASE}:sqnr"): [Point("c", DAY1, "a" * 40, 30.0, [])]
    }
    with pytest.raises(ValueError, match="no history"):
        history(runs, "training")


# --- thresholds ------------------------------------------------------------------------------


def test_the_checked_in_thresholds_load_and_say_why():
    t = load_thresholds(REPO / "bench" / "thresholds.toml")
    assert (t.speed, t.alpha, t.sqnr_db) == (0.05, 0.01, 0.5)
    assert t.overrides and all(len(o.reason) > 40 for o in t.overrides)
    assert t.for_row("int8wo/bf16/cuda/M1-K8192-N8192/aoq/eager")[0] == 0.10
    assert t.for_row("int8wo/bf16/cuda/M16-K8192-N8192/aoq/eager")[0] == 0.10
    assert t.for_row("int8wo/bf16/cuda/M1-K8192-N8192/aoq/graph")[0] == 0.10
    assert t.for_row("int8wo/bf16/cuda/M4096-K8192-N8192/aoq/eager")[0] == 0.20
    assert t.for_row("int8wo/bf16/cuda/M256-K8192-N8192/aoq/graph") == (0.05, None)
    assert load_thresholds(None) == Thresholds()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[[override]]\nrows = "*"\nthreshold = 0.2\n', "no reason"),
        ('[[override]]\nrows = "*"\nthreshold = 0.2\nreason = "  "\n', "no reason"),
        ('[[override]]\nrows = "*"\nthreshold = -1\nreason = "r"\n', "positive"),
        ('[[override]]\nthreshold = 0.2\nreason = "r"\n', "rows ="),
        ('[[override]]\nrows = "*"\nthreshold = 0.2\nreason = "r"\nwhy = 1\n', "unknown"),
        ("[speed]\nalpha = 2\n", "between 0 and 1"),
        ("[speed]\nthreshhold = 0.1\n", "unknown"),
        ("[sped]\n", "unknown tables"),
        ("[speed\n", "not valid TOML"),
    ],
)
def test_bad_thresholds_files_are_clear_errors(tmp_path, text, message):
    path = tmp_path / "t.toml"
    path.write_text(text)
    with pytest.raises(ThresholdError, match=message) as e:
        load_thresholds(path)
    assert str(path) in str(e.value)
