"""The MX training step: forward + backward (and a fused AdamW step) of a K -> H -> K MLP
(GELU, no bias, bf16), plain bf16 against MX training (``aoq.MXTrainingConfig``: six casts,
emulated GEMMs). Eager only: capturing autograd and the optimizer in a CUDA graph needs static
gradients and a capturable optimizer, which is not how anyone trains with it. No rotation: a
step moves gigabytes, far past any cache."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch import nn

import aoq
from bench import baselines as bl
from bench.cases import Training
from bench.rows import compare, missing_records, timed_records
from bench.session import BenchSession
from bench.summary import note
from bench.timer import Timer, failed
from bench.timing import Rotation


def _step(t: Training, device: torch.device) -> Callable[[], None]:
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(t.k, t.h, bias=False), nn.GELU(), nn.Linear(t.h, t.k, bias=False)
    ).to(device, torch.bfloat16)
    if t.side == "aoq":
        aoq.quantize_(model, t.config)
    x = torch.randn(t.m, t.k, device=device, dtype=torch.bfloat16)
    g = torch.randn(t.m, t.k, device=device, dtype=torch.bfloat16)
    fused = device.type == "cuda"
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6, fused=fused) if t.adamw else None

    def step() -> None:
        model.zero_grad(set_to_none=True)
        model(x).backward(g)
        if opt is not None:
            opt.step()

    return step


def test_training(training: Training, bench: BenchSession, timer: Timer) -> None:
    modes = timer.modes[-1:]  # eager on GPUs, wall on CPUs
    if reason := bench.over_budget():
        bench.write(missing_records(bench.run_id, training.case, modes, "skip", reason))
        pytest.skip(reason)
    timed = timer.time(Rotation([_step(training, bench.device)]), modes)
    key = ("train", training.name)
    if training.side == "bf16":
        bench.baselines[key] = timed
    base = bench.baselines.get(key)
    bf16 = bl.rates(base) if isinstance(base, dict) and training.side == "aoq" else {}
    kernel = "emulated (aoq::mx_qdq + bf16 GEMMs)" if training.side == "aoq" else "aten"
    rows = timed_records(
        bench.run_id, training.case, timed, kernel, lambda mode, p: compare(p, bf16=bf16.get(mode))
    )
    bench.write(rows)
    bench.notes[training.id] = note(bl.rates(timed), bf16)
    if errors := failed(timed):
        raise errors[0]
