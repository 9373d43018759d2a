"""The GPU code path of the bench tests, run on CPU: CUDA events replaced by the host clock and
graph capture by a plain pass (monkeypatched), so that everything else a GPU run does -- both
modes per row, baselines reused, the peer compared, error rows for a mode that fails, rows
written -- is exercised without a GPU."""

import pytest
import torch
import torch.nn.functional as F

from aoq.testing.benchrows import parse_case
from bench import baselines as bl
from bench import cases, timing
from bench import test_kernels as tk
from bench import test_linear as tl
from bench import test_training as tt
from bench.session import BenchSession, Options
from bench.timer import Timer
from bench.timing import HostClock


@pytest.fixture
def gpu_like(monkeypatch, tmp_path):
    monkeypatch.setattr(timing, "EventClock", HostClock)
    monkeypatch.setattr(timing, "cuda_graph", lambda rot: rot.all)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    opts = Options(backend="cpu", quick=True, out=tmp_path, store=tmp_path / "s.sqlite")
    session = BenchSession(opts)
    session.open()
    # ceilings no CPU reaches: floors far below any time, so no row is "at the roofline"
    # already (which would skip the compiled peer) however the measured ceilings came out
    session.ceilings = {k: 1e6 for k in session.ceilings}
    # a stand-in peer: "torchao" whose weight is the plain tensor, compile = eager
    session.torchao = "stand-in"
    monkeypatch.setattr(bl, "torchao_weight", lambda w, cid: w.clone())
    monkeypatch.setattr(bl, "compiled_linear", lambda: F.linear)
    monkeypatch.setattr(bl, "compile_skip", lambda cell, quick: None)
    yield session, Timer(True, True)
    session.close()


def _rows(bench, prefix):
    return {r.case_id: r for r in bench.records if r.case_id.startswith(prefix)}


def test_linear_cell_gets_both_modes_speedups_and_peer(gpu_like):
    bench, timer = gpu_like
    run = [c for c in cases.linear_cases("cpu", quick=True) if c.shape.m == 1]
    base = run[0]
    int8wo = [c for c in run if c.config_id == "int8wo"]
    tl.test_baseline(base, bench, timer)
    for cell in int8wo:  # torchao, torchao-compile, aoq in run order
        getattr(tl, "test_aoq" if cell.side == "aoq" else "test_peer")(cell, bench, timer)
    rows = _rows(bench, "int8wo/bf16/cpu/M1-K256-N256/")
    for side in ("aoq", "bf16", "torchao", "torchao-compile"):
        for mode in ("graph", "eager"):
            row = rows[f"int8wo/bf16/cpu/M1-K256-N256/{side}/{mode}"]
            assert row.status == "pass" and len(row.metrics["samples_us"]) >= 5, row
    aoq = rows["int8wo/bf16/cpu/M1-K256-N256/aoq/graph"]
    assert aoq.kernel == "aten._weight_int8pack_mm" and aoq.metrics["fallback"] is False
    assert aoq.metrics["peer"] in ("torchao", "torchao-compile")
    assert {"speedup_vs_bf16", "speedup_vs_peer", "roofline"} <= set(aoq.metrics)
    assert "x" in bench.notes[int8wo[-1].id] and "peer" in bench.notes[int8wo[-1].id]


def test_a_mode_that_fails_is_an_error_row_and_fails_the_aoq_test(gpu_like, monkeypatch):
    bench, timer = gpu_like
    run = cases.linear_cases("cpu", quick=True)
    cell = next(c for c in run if c.side == "aoq" and c.config_id == "w8a8")

    def no_capture(rot):
        raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setattr(timing, "cuda_graph", no_capture)
    with pytest.raises(RuntimeError, match="capturing"):
        tl.test_aoq(cell, bench, timer)
    rows = _rows(bench, "w8a8/bf16/cpu/M1-K256-N256/")
    assert rows["w8a8/bf16/cpu/M1-K256-N256/aoq/graph"].status == "error"
    assert "capturing" in rows["w8a8/bf16/cpu/M1-K256-N256/aoq/graph"].reason
    assert rows["w8a8/bf16/cpu/M1-K256-N256/aoq/eager"].status == "pass"
    # timed in turns with aoq's, the bf16 side's graph was lost with it; its eager ran
    lost = rows["w8a8/bf16/cpu/M1-K256-N256/bf16/graph"]
    assert lost.status == "skip" and lost.reason.startswith("timed in turns with aoq's")
    assert rows["w8a8/bf16/cpu/M1-K256-N256/bf16/eager"].status == "pass"


def test_kernels_training_and_host_on_the_gpu_path(gpu_like):
    bench, timer = gpu_like
    kernel = cases.kernel_cases("cpu", quick=True)[0]
    tk.test_kernel(kernel, bench, timer)
    for t in cases.training_cases("cpu", quick=True):
        tt.test_training(t, bench, timer)
    for h in cases.host_cases("cpu", quick=True)[:2]:
        tl.test_host_overhead(h, bench, timer)
    modes = {parse_case(r.case_id).mode for r in bench.records if parse_case(r.case_id)}
    assert modes == {"graph", "eager"}
    train = [r for r in bench.records if r.case_id.startswith("mxtrain")]
    assert {parse_case(r.case_id).mode for r in train} == {"eager"}  # never captured
    assert "speedup_vs_bf16" in train[-1].metrics
    host = [r for r in bench.records if r.check == "host_overhead"]
    assert len(host) == 2 and "over_bf16_us" in host[-1].metrics


def test_a_gpu_cell_is_timed_in_turns_with_bf16(gpu_like):
    """On a GPU the cell's bf16 rows are the samples taken in turns with its own (not the
    shape's baseline), and its ratio is against them."""
    bench, timer = gpu_like
    run = [c for c in cases.linear_cases("cpu", quick=True) if c.shape.m == 1]
    tl.test_baseline(run[0], bench, timer)
    cell = next(c for c in run if c.side == "aoq" and c.config_id == "int8wo")
    tl.test_aoq(cell, bench, timer)
    rows = _rows(bench, "int8wo/bf16/cpu/M1-K256-N256/")
    for mode in ("graph", "eager"):
        aoq, bf16 = (rows[f"int8wo/bf16/cpu/M1-K256-N256/{s}/{mode}"] for s in ("aoq", "bf16"))
        assert aoq.metrics["paired"] is True and bf16.metrics["paired"] is True
        assert aoq.metrics["reps"] == bf16.metrics["reps"]
        base = bench.baselines[cell.group][mode].samples_us
        assert bf16.metrics["samples_us"] != base
        want = bf16.metrics["p50_us"] / aoq.metrics["p50_us"]
        assert aoq.metrics["speedup_vs_bf16"] == pytest.approx(want)
