"""MX training ends where float training ends (fixed seed, same data, same steps): MXFP8 within
2% of the float run's final loss, MXFP6 within 5%. The full curves go to a training run JSONL
(``bench/mx_training.py --convergence`` writes the committed one under reports/runs/)."""

from __future__ import annotations

import torch

import aoq
from aoq.testing.convergence import ToyTask, train_toy, write_curves
from aoq.testing.records import read_jsonl

RUNS = {
    "float": (None, None),
    "mxfp8": (aoq.MXTrainingConfig("fp8_e4m3"), 0.02),
    "mxfp6": (aoq.MXTrainingConfig("fp6_e2m3"), 0.05),
}


def test_mx_training_tracks_float(tmp_path):
    torch.set_num_threads(min(torch.get_num_threads(), 2))
    results = {name: train_toy(config, ToyTask()) for name, (config, _) in RUNS.items()}
    tolerances = {name: tol for name, (_, tol) in RUNS.items() if tol is not None}
    path = write_curves(results, "float", tolerances, tmp_path)
    run, records = read_jsonl(path)
    assert run.kind == "training" and [r.case_id for r in records] == [
        "toy-mlp/float",
        "toy-mlp/mxfp8",
        "toy-mlp/mxfp6",
    ]
    summary = {r.config: round(r.metrics["rel_vs_float"], 4) for r in records}
    assert all(r.status == "pass" for r in records), summary
    assert len(records[1].metrics["loss"]) == ToyTask().steps
