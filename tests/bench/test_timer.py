"""bench/timer.py: the Timer's modes and errors, host timings and paired host timings."""

import time

import pytest
from bench_fakes import FakeBenchmark

from bench import timer as tm
from bench import timing
from bench.timer import Timer
from bench.timing import HostClock, Rotation


def test_host_time_is_per_call_of_a_batch():
    t = tm.host_time(lambda: time.sleep(0.001), batch=3, reps=4, clock=HostClock())
    assert len(t.samples_us) == 4
    assert all(900 < s < 50_000 for s in t.samples_us)
    assert t.extra == {"reps": 4, "batch": 3}


def test_host_time_pair_alternates_batches_and_takes_the_median_difference():
    order: list[str] = []
    fn = lambda: (order.append("a"), time.sleep(0.002))  # noqa: E731
    base = lambda: (order.append("b"), time.sleep(0.001))  # noqa: E731
    t, tb = tm.host_time_pair(fn, base, batch=2, reps=3, clock=HostClock())
    # a warm-up pass of each, then the reps in turns (timing.turns)
    assert "".join(order) == "aabb" + "aabbbbaaaabb"
    assert len(t.samples_us) == len(tb.samples_us) == 3
    assert t.extra == tb.extra == {"reps": 3, "batch": 2}
    over = tm.paired_over(t, tb)
    assert over == sorted(a - b for a, b in zip(t.samples_us, tb.samples_us, strict=True))[1]
    assert 200 < over < 50_000  # ~1 ms a call more


def test_timer_modes_and_cpu_path():
    assert Timer(True, False).modes == ("graph", "eager")
    cpu = Timer(False, True, FakeBenchmark)
    assert cpu.modes == ("wall",)
    got = cpu.time(Rotation([lambda: None, lambda: None]))
    assert list(got) == ["wall"] and len(got["wall"].samples_us) == timing.QUICK_REPS
    # a mode that raises is that mode's result (its error row), not the end of the test
    (err,) = Timer(False, True).time(Rotation([lambda: None])).values()
    assert isinstance(err, RuntimeError) and "pytest-benchmark" in str(err)
    assert tm.failed({"wall": err, "graph": got["wall"]}) == [err]


def test_timer_pairs_only_on_a_gpu():
    cpu = Timer(False, True, FakeBenchmark)
    with pytest.raises(RuntimeError, match="GPU"):
        cpu.time_pair(Rotation([lambda: None]), Rotation([lambda: None]))
    with pytest.raises(RuntimeError, match="GPU"):
        cpu.host_pair(lambda: None, lambda: None)
    assert issubclass(tm.EventlessSync, HostClock)


def test_a_paired_mode_that_fails_is_both_sides_error(monkeypatch):
    """A capture that fails costs that mode on both sides, not the other mode."""

    def device_times(rots, graph, *a):
        if graph:
            raise RuntimeError("operation not permitted when stream is capturing")
        return [timing.Timed([1.0], {"paired": True}) for _ in rots]

    monkeypatch.setattr(timing, "device_times", device_times)
    monkeypatch.setattr(tm, "settle", lambda: None)
    got, base = Timer(True, True).time_pair(Rotation([lambda: None]), Rotation([lambda: None]))
    assert isinstance(got["graph"], RuntimeError) and got["graph"] is base["graph"]
    assert got["eager"].extra == base["eager"].extra == {"paired": True}
