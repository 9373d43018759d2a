"""bench/timing.py: rotation, sizing and statistics, with the host clock standing in for
device events (the CUDA paths differ only in the clock and the graph capture)."""

import gc
import time

import pytest
from bench_fakes import FakeBenchmark

from bench import timing
from bench.timing import HostClock, Rotation


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

    def turns_us(self, runs, reps):
        out = [[] for _ in runs]
        for j in timing.turns(len(runs), reps):
            out[j] += self.times_us(runs[j], 1)
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


@pytest.mark.parametrize("graph", [False, True])
def test_device_time_samples_with_the_collector_off(graph):
    """The timed passes run with Python's garbage collector off (a collection inside an
    eager pass stalls its launches); the warm-up pass with it on; the caller's setting comes
    back afterwards, even where a pass raises."""
    enabled = []

    def call():
        enabled.append(gc.isenabled())

    assert gc.isenabled()
    t = timing.device_time(Rotation([call]), graph, reps=6, cap_s=10.0, clock=FakeClock(),
                           capture=lambda rot: rot.all)  # fmt: skip
    assert len(t.samples_us) == 6
    assert enabled[0] is True  # the warm-up pass
    assert enabled[-7:] == [False] * 7  # the sizing pass and the 6 timed ones
    assert gc.isenabled()

    def boom():
        raise RuntimeError("a failing pass")

    with pytest.raises(RuntimeError), timing.collector_off():
        boom()
    assert gc.isenabled()
    gc.disable()
    try:
        with timing.collector_off():
            pass
        assert not gc.isenabled()  # off before, off after
    finally:
        gc.enable()


def test_collector_off_collects_first_unless_switched_off(monkeypatch):
    """COLLECT_FIRST (the default): a cycle made before the block is gone inside it; off
    (AOQ_BENCH_COLLECT_FIRST=0, A/B runs), the block leaves it for later."""
    import weakref

    class Node:
        pass

    for collect, freed in ((True, True), (False, False)):
        monkeypatch.setattr(timing, "COLLECT_FIRST", collect)
        a, b = Node(), Node()
        a.other, b.other = b, a  # a reference cycle only the collector frees
        ref = weakref.ref(a)
        del a, b
        with timing.collector_off():
            assert (ref() is None) is freed
        gc.collect()
        assert ref() is None


def test_device_time_shrinks_reps_to_the_cap():
    calls[0] = 0
    t = timing.device_time(Rotation([_count]), False, reps=40, cap_s=0.0005, clock=FakeClock())
    assert t.extra["reps"] == timing.LEAST_REPS  # 100 µs a pass, 500 µs of cap -> 5


def test_fixture_time_keeps_every_sample_per_call():
    bm = FakeBenchmark()
    t = timing.fixture_time(bm, lambda: time.sleep(0.0005), reps=6, cap_s=10.0, iterations=2)
    assert bm.kwargs == {"rounds": 6, "iterations": 2, "warmup": 0}
    assert len(t.samples_us) == 6 and all(400 < s < 50_000 for s in t.samples_us)
    assert t.extra["benchmark"]["rounds"] == 6 and t.extra["benchmark"]["iterations"] == 2


def test_cuda_paths_exist():
    """No GPU here: the CUDA functions are at least importable and named as used."""
    assert callable(timing.cuda_graph) and callable(timing.EventClock().times_us)


def test_turns_alternate_the_order_every_round():
    assert timing.turns(2, 4) == [0, 1, 1, 0, 0, 1, 1, 0]
    assert timing.turns(3, 2) == [0, 1, 2, 2, 1, 0]
    assert timing.turns(1, 3) == [0, 0, 0]


def test_host_clock_turns_keep_each_runs_samples_apart():
    order = []
    a = lambda: (order.append("a"), time.sleep(0.002))  # noqa: E731
    b = lambda: order.append("b")  # noqa: E731
    ta, tb = HostClock().turns_us([a, b], 3)
    assert order == ["a", "b", "b", "a", "a", "b"]
    assert len(ta) == len(tb) == 3 and min(ta) > max(tb)


@pytest.mark.parametrize("graph", [False, True])
def test_device_times_take_turns_and_report_each_rotation(graph):
    """Both rotations warm up and are captured before any timing; their timed passes
    alternate (one warm-up, one sizing and the reps, as device_time), each per call of its
    own copies, and both carry ``paired``."""
    log = []
    a, b = (Rotation([lambda k=k: log.append(k)] * n) for k, n in (("a", 2), ("b", 4)))
    captured = []

    def capture(rot):
        captured.append(len(rot))
        return rot.all

    class Clock(FakeClock):
        def times_us(self, run, reps):
            out = []
            for _ in range(reps):
                before = len(log)
                run()
                out.append(100.0 * (len(log) - before))
            return out

    ta, tb = timing.device_times([a, b], graph, reps=4, cap_s=10.0, clock=Clock(),
                                 capture=capture, warm=lambda: None)  # fmt: skip
    assert captured == ([2, 4] if graph else [])
    passes = "".join(log).replace("aa", "A").replace("bbbb", "B")
    assert passes == "AB" + "AB" + "ABBAABBA"  # warm-up, sizing, 4 reps in turns
    assert ta.samples_us == tb.samples_us == [100.0] * 4
    assert ta.extra == {"reps": 4, "copies": 2, "paired": True}
    assert tb.extra == {"reps": 4, "copies": 4, "paired": True}
    (one,) = timing.device_times([a], graph, reps=2, clock=Clock(), capture=capture)
    assert "paired" not in one.extra
