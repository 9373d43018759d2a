"""reports/data.py: the matrix column of a run (its label) and the baseline it is compared
with."""

import dataclasses

import pytest

from reports.data import Run, gpu_model, previous
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
