"""reports/data.py: the matrix column of a run (its label) and the baseline it is compared
with."""

import dataclasses

import pytest

from aoq.testing.records import Record
from reports.data import Run, gpu_model, latest, previous, scope
from tests.reports.site_runs import HOSTILE, run_info


@pytest.mark.parametrize(
    "device, model",
    [
        ("NVIDIA H100 80GB HBM3", "H100"),
        ("NVIDIA H200", "H200"),
        ("NVIDIA A100-SXM4-80GB", "A100"),
        ("AMD Instinct MI300X", "MI300X"),
        ("cuda", None),
        (f"device {HOSTILE}", None),
    ],
)
def test_gpu_model(device, model):
    assert gpu_model(device) == model


def _run(run_id: str, kind: str, device: str, started: str) -> Run:
    info = run_info(run_id, kind, "cuda", started, "sm90")
    return Run(dataclasses.replace(info, device=device), [])


def test_speed_runs_compare_within_one_gpu_model():
    """An H100 and an H200 are both sm90: one conformance column (the same tolerances), two
    speed columns, and an H100 bench run's baseline is the last H100 run, never an H200's."""
    runs = {
        r.info.run_id: r
        for r in (
            _run("h200-a", "bench", "NVIDIA H200", "2026-01-01"),
            _run("h100-a", "bench", "NVIDIA H100 80GB HBM3", "2026-01-02"),
            _run("h200-b", "bench", "NVIDIA H200", "2026-01-03"),
            _run("h100-b", "bench", "NVIDIA H100 80GB HBM3", "2026-01-04"),
            _run("c200", "conformance", "NVIDIA H200", "2026-01-05"),
            _run("c100", "conformance", "NVIDIA H100 80GB HBM3", "2026-01-06"),
        )
    }
    assert runs["h100-a"].label == "cuda-sm90-H100" and runs["h200-a"].label == "cuda-sm90-H200"
    assert runs["c100"].label == runs["c200"].label == "cuda-sm90"
    assert previous(runs, runs["h100-a"]) is None
    assert previous(runs, runs["h100-b"]) is runs["h100-a"]
    assert previous(runs, runs["h200-b"]) is runs["h200-a"]
    assert previous(runs, runs["c100"]) is runs["c200"]


def _rec(run_id: str, case_id: str, status: str) -> Record:
    return Record(run_id, case_id, "cell", status, config=case_id.split("/")[0], dtype="bf16")


def _conf(run_id: str, started: str, cases: dict[str, str], **extra) -> Run:
    info = run_info(run_id, "conformance", "cuda", started, "sm90", **extra)
    return Run(info, [_rec(run_id, c, s) for c, s in cases.items()])


def test_scope_reads_only_globs_and_shards():
    def info(**extra):
        return run_info("r", "bench", "cuda", "2026-01-01", "sm90", **extra)

    assert scope(info()) == []
    assert scope(info(only=["mx*"], argv=["--only", "mx*", "--time-limit", "9"])) == ["mx*"]
    argv = ["bench", "--only", "mx-int8/*", "--only=int4*", "--out", "x"]
    assert scope(info(argv=argv)) == ["mx-int8/*", "int4*"]
    assert scope(info(shard="2/4")) == ["shard 2/4"]


def test_partial_runs_lay_over_the_newest_run_of_everything():
    """A re-run of a few configs (--only) updates those cells and keeps the rest of the
    matrix; a newer run of everything starts again; a wanted run stands alone; quick runs
    never mix with full ones; the baseline of a run is the run of everything before it."""
    old = _conf("old", "2026-01-01", {"a/x": "pass", "b/x": "fail"})
    full = _conf("full", "2026-01-02", {"a/x": "pass", "b/x": "fail", "c/x": "pass"})
    full.records.append(dataclasses.replace(full.records[1], check="output"))  # b/x's other check
    part = _conf("part", "2026-01-03", {"b/x": "pass"}, only=["b*"])
    runs = {r.info.run_id: r for r in (old, full, part)}
    (shown,) = latest(runs, "conformance")
    assert shown.info.run_id == "full"
    by_case = {r.case_id: (r.status, r.run_id) for r in shown.records}
    assert by_case == {"a/x": ("pass", "full"), "b/x": ("pass", "part"), "c/x": ("pass", "full")}
    assert len(shown.records) == 3  # none of b/x's checks from the older run stays
    assert [o["run_id"] for o in shown.info.extra["overlaid"]] == ["part"]
    assert shown.info.extra["overlaid"][0]["scope"] == ["b*"]
    assert runs["full"].info.extra.get("overlaid") is None  # the stored run is untouched
    assert previous(runs, shown) is old
    (alone,) = latest(runs, "conformance", wanted=["part"])
    assert alone is part
    runs["quick"] = _conf("quick", "2026-01-04", {"b/q": "pass"}, only=["b*"], quick=True)
    (shown,) = latest(runs, "conformance")  # other shapes: the newest run, as before, alone
    assert shown is runs["quick"] and previous(runs, shown) is full
    runs["newer"] = _conf("newer", "2026-01-05", {"a/x": "fail"})
    (shown,) = latest(runs, "conformance")
    assert shown is runs["newer"]
