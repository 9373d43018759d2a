"""bench/timeline.py's summary of a graph's kernels from profiler events (CPU: hand-made
events; the capture itself needs a GPU and runs in ``python -m bench.decode_rows --timeline``)."""

import pytest

from bench import timeline


def _ev(name: str, ts: float, dur: float) -> dict:
    return {"cat": "kernel", "name": name, "ts": ts, "dur": dur}


def test_durations_gaps_and_span_per_call():
    # two replays of one call: an activation kernel, then a decode placed 0.5 us before it
    # ended (PDL); the first replay is skipped
    events = [
        _ev("_act_quant_kernel", 0.0, 2.0), _ev("_w4a8_mma_kernel", 1.5, 18.0),
        _ev("_act_quant_kernel", 20.0, 2.5), _ev("_w4a8_mma_kernel", 22.0, 17.0),
        _ev("_act_quant_kernel", 40.0, 2.1), _ev("_w4a8_mma_kernel", 41.6, 17.4),
    ]  # fmt: skip
    got = timeline.summarize(events, skip=2, calls=2)
    assert got["span_us"] == pytest.approx((59.0 - 20.0) / 2)
    assert got["durations_us"] == {"act_quant": pytest.approx(2.3), "w4a8_mma": pytest.approx(17.2)}
    gaps = got["gaps_us"]
    assert gaps["act_quant->w4a8_mma"] == pytest.approx(-0.5)
    # the gap from the skipped replay's last kernel counts: it precedes a kept one
    assert gaps["w4a8_mma->act_quant"] == pytest.approx(0.75)  # median of 0.5 and 1.0
    assert "no kernels" in timeline.describe(timeline.summarize([], 0, 1))
    assert "act_quant->w4a8_mma -0.50" in timeline.describe(got)


def test_only_kernel_events_count_in_start_order():
    trace = {"traceEvents": [_ev("b", 5.0, 1.0), {"cat": "cuda_runtime", "name": "x", "ts": 0},
                             _ev("a", 1.0, 1.0)]}  # fmt: skip
    assert [e["name"] for e in timeline._kernels(trace)] == ["a", "b"]
