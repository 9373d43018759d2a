"""bench/timing.py: rotation, sizing and statistics, with the host clock standing in for
device events (the CUDA paths differ only in the clock and the graph capture)."""

import time

import pytest

from bench import timing
from bench.timing import HostClock, Rotation, Timer


def test_copies_overflow_the_cache_within_bounds():
    mib = 1 << 20
    assert timing.copies_for(8 * mib, 50 * mib) == 25  # 4 x 50 MiB / 8 MiB, rounded up
    assert timing.copies_for(1, 50 * mib) == 32  # tiny operands: capped
    assert timing.copies_for(1 << 30, 50 * mib) == 2  # huge: still two (no back-to-back reuse)
    assert timing.copies_for(0, 50 * mib, most=8) == 8


def test_fit_reps_respects_the_cap_and_a_floor():
    assert timing.fit_reps(0.001, 40, cap_s=1.0) == 40
    assert timing.fit_reps(0.1, 40, cap_s=1.0) == 10
    assert timing.fit_reps(10.0, 40, cap_s=1.0) == timing.LEAST_REPS
    assert timing.fit_reps(10.0, 3, cap_s=1.0) == 3  # never more than asked
    assert timing.fit_reps(0.0, 7, cap_s=1.0) == 7


def test_rotation_cycles_through_every_copy():
    seen = []
    rot = Rotation([lambda i=i: seen.append(i) for i in range(3)])
    for _ in range(7):
        rot.next()
    assert seen == [0, 1, 2, 0, 1, 2, 0]
    rot.all()
    assert seen[-3:] == [0, 1, 2]  # a pass runs each copy once
    with pytest.raises(ValueError):
        Rotation([])


class FakeClock:
    """Each repetition 'takes' 100 µs per call it runs."""

    def __init__(self):
        self.syncs = 0

    def sync(self):
        self.syncs += 1

    def times_us(self, run, reps):
        out = []
        for _ in range(reps):
            before = calls[0]
            run()
            out.append(100.0 * (calls[0] - before))
        return out


calls = [0]


def _count():
    calls[0] += 1


@pytest.mark.parametrize("graph", [False, True])
def test_device_time_warms_up_and_reports_per_call(graph):
    calls[0] = 0
    captured = []

    def capture(rot):
        captured.append(len(rot))
        rot.all()  # what a capture does: run the pass once more
        return rot.all

    rot = Rotation([_count] * 4)
    clock = FakeClock()
    t = timing.device_time(rot, graph, reps=12, cap_s=10.0, clock=clock, capture=capture)
    assert t.samples_us == [100.0] * 12  # one pass of 4 calls = 400 µs -> 100 µs per call
    assert t.extra == {"reps": 12, "copies": 4}
    assert captured == ([4] if graph else [])
    # warm-up pass, (capture pass), sizing pass, then the timed ones
    assert calls[0] == 4 * (1 + graph + 1 + 12)
    assert clock.syncs == 1


def test_device_time_raises_the_clocks_after_an_idle_gap(monkeypatch):
    """The first timing, one after WARM_GAP_S without timings, and one whose warm-up pass
    took that long (a compile) warm the GPU first; back-to-back timings do not."""
    warmed = []
    slow = [0.0]

    def rot_call():
        time.sleep(slow[0])

    def timed():
        timing.device_time(Rotation([rot_call]), False, reps=5, clock=FakeClock(),
                           warm=lambda: warmed.append(1))  # fmt: skip
        return len(warmed)

    monkeypatch.setattr(timing, "WARM_GAP_S", 0.25)
    monkeypatch.setattr(timing, "_busy", [None])
    assert timed() == 1  # the first of the process
    assert timed() == 1  # right after another
    time.sleep(0.3)
    assert timed() == 2  # after a gap
    slow[0] = 0.05  # warm-up pass, sizing pass, 5 timed (0.35 s): only the warm-up pass counts
    assert timed() == 2
    slow[0] = 0.3
    assert timed() == 3  # a warm-up pass (a compile) longer than the gap


def test_device_time_shrinks_reps_to_the_cap():
    calls[0] = 0
    t = timing.device_time(Rotation([_count]), False, reps=40, cap_s=0.0005, clock=FakeClock())
    assert t.extra["reps"] == timing.LEAST_REPS  # 100 µs a pass, 500 µs of cap -> 5


def test_host_time_is_per_call_of_a_batch():
    t = timing.host_time(lambda: time.sleep(0.001), batch=3, reps=4, clock=HostClock())
    assert len(t.samples_us) == 4
    assert all(900 < s < 50_000 for s in t.samples_us)
    assert t.extra == {"reps": 4, "batch": 3}


def test_host_time_pair_alternates_batches_and_takes_the_median_difference():
    order: list[str] = []
    fn = lambda: (order.append("a"), time.sleep(0.002))  # noqa: E731
    base = lambda: (order.append("b"), time.sleep(0.001))  # noqa: E731
    t, tb = timing.host_time_pair(fn, base, batch=2, reps=3, clock=HostClock())
    assert order == ["a", "a", "b", "b"] * 4  # a warm-up pass of each, then the reps
    assert len(t.samples_us) == len(tb.samples_us) == 3
    assert t.extra == tb.extra == {"reps": 3, "batch": 2}
    over = timing.paired_over(t, tb)
    assert over == sorted(a - b for a, b in zip(t.samples_us, tb.samples_us, strict=True))[1]
    assert 200 < over < 50_000  # ~1 ms a call more


class FakeBenchmark:
    """pytest-benchmark's pedantic(): rounds x iterations calls, raw seconds per round."""

    def __init__(self):
        self.kwargs = None

    def pedantic(self, fn, rounds, iterations, warmup_rounds):
        self.kwargs = {"rounds": rounds, "iterations": iterations, "warmup": warmup_rounds}
        data = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            for _ in range(iterations):
                fn()
            data.append(time.perf_counter() - t0)
        stats = type(
            "S",
            (),
            {
                "data": data,
                "min": min(data),
                "max": max(data),
                "mean": 0.0,
                "stddev": 0.0,
                "median": 0.0,
                "iqr": 0.0,
            },
        )
        self.stats = type("M", (), {"stats": stats})


def test_fixture_time_keeps_every_sample_per_call():
    bm = FakeBenchmark()
    t = timing.fixture_time(bm, lambda: time.sleep(0.0005), reps=6, cap_s=10.0, iterations=2)
    assert bm.kwargs == {"rounds": 6, "iterations": 2, "warmup": 0}
    assert len(t.samples_us) == 6 and all(400 < s < 50_000 for s in t.samples_us)
    assert t.extra["benchmark"]["rounds"] == 6 and t.extra["benchmark"]["iterations"] == 2


def test_timer_modes_and_cpu_path():
    assert Timer(True, False).modes == ("graph", "eager")
    cpu = Timer(False, True, FakeBenchmark)
    assert cpu.modes == ("wall",)
    got = cpu.time(Rotation([lambda: None, lambda: None]))
    assert list(got) == ["wall"] and len(got["wall"].samples_us) == timing.QUICK_REPS
    # a mode that raises is that mode's result (its error row), not the end of the test
    (err,) = Timer(False, True).time(Rotation([lambda: None])).values()
    assert isinstance(err, RuntimeError) and "pytest-benchmark" in str(err)
    assert timing.failed({"wall": err, "graph": got["wall"]}) == [err]


def test_cuda_paths_exist():
    """No GPU here: the CUDA functions are at least importable and named as used."""
    assert callable(timing.cuda_graph) and callable(timing.EventClock().times_us)
    assert issubclass(timing.EventlessSync, HostClock)
