"""The quantize/cast kernels on their own: activation quantization (``aoq::quantize_int8_act``,
``aoq::quantize_fp8_act``) and the MX casts (``aoq::mx_cast``, ``aoq::mx_qdq``), bf16 input,
over rotating inputs. They are memory bound: ``roofline`` is (bytes read + written / copy
bandwidth) / p50, i.e. the fraction of the device copy's bandwidth they reach."""

from __future__ import annotations

import functools

import pytest
import torch

from bench import baselines as bl
from bench.cases import KERNELS, Kernel
from bench.rows import compare, missing_records, timed_records
from bench.session import BenchSession
from bench.summary import note
from bench.timer import Timer, failed
from bench.timing import Rotation


def test_kernel(kernel: Kernel, bench: BenchSession, timer: Timer) -> None:
    modes = timer.modes
    if reason := bench.over_budget():
        bench.write(missing_records(bench.run_id, kernel.case, modes, "skip", reason))
        pytest.skip(reason)
    op, fn, _ = KERNELS[kernel.name]
    if ".dim0." in kernel.name and kernel.m % 32:
        reason = f"a dim-0 MX cast needs M a multiple of the block (32), got M={kernel.m}"
        bench.write(missing_records(bench.run_id, kernel.case, modes, "skip", reason))
        pytest.skip(reason)
    n = timer.copies(kernel.nbytes, bench.device)
    xs = [
        torch.randn(kernel.m, kernel.k, device=bench.device, dtype=torch.bfloat16) for _ in range(n)
    ]
    timed = timer.time(Rotation([functools.partial(fn, x) for x in xs]))
    floor = bl.floor_us(bench.ceilings, (), kernel.nbytes, 0)
    rows = timed_records(
        bench.run_id,
        kernel.case,
        timed,
        op,
        lambda mode, p: compare(p, floor=floor),
        bytes=kernel.nbytes,
    )
    bench.write(rows)
    bench.notes[kernel.id] = note(bl.rates(timed), floor=floor)
    if errors := failed(timed):
        raise errors[0]
