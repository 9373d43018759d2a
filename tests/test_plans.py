"""Eager decode plans (aoq/plans.py): a recording becomes a plan only when the call was
launches and fresh buffers; a replay substitutes the input and new buffers into the
recorded launches; on a GPU every config's replay gives the normal path's bits, under
traces, CUDA graphs and new input alignments."""

import ctypes
import types

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import aoq
from aoq import dispatch, plans
from aoq.testing.cases import inference_configs


class _Driver:
    """Stands in for Triton's driver on CPU: device 0, stream 7."""

    active = types.SimpleNamespace(get_current_device=lambda: 0, get_current_stream=lambda d: 7)


def _at(ptr, n):
    """The n float32 at a CPU address, as a tensor over that memory."""
    return torch.frombuffer((ctypes.c_float * n).from_address(ptr), dtype=torch.float32)


class _Bound(plans._launch._Bound):
    """A bound launch whose 'kernel' writes 2 * x + w into y (args: x, w, y, n; each a tensor
    or, as a plan passes them, an address)."""

    def __init__(self):
        self.function, self.metadata, self.tail, self.grid = "fn", "meta", ("TAIL",), None
        self.direct, self.calls = None, []

    def run(self, g0, g1, g2, stream, function, metadata, m, enter, exit_, x, w, y, n, *tail):
        self.calls.append(((g0, g1, g2), stream, tail, [type(a) for a in (x, w, y)]))
        x, w, y = (_at(a, n) if isinstance(a, int) else a.reshape(-1) for a in (x, w, y))
        y.copy_(2 * x + w)


@pytest.fixture
def fake_driver(monkeypatch):
    monkeypatch.setattr(plans._launch, "driver", _Driver)


def _weight(w):
    return types.SimpleNamespace(tensors=lambda: {"qdata": w})


def _record(x, weight, bias, body):
    """Record ``body(launches)`` as plans.run would; returns (result, launches, watch)."""
    with plans._launch.recording() as launches, plans._Watch() as watch:
        y = body(launches)
    return y, launches, watch


def _one_launch(x, w, bound):
    def body(launches):  # the device work of a real launch is no aten op: not run here
        y = torch.empty(x.shape)
        launches.append((bound, (2, 1, 1), (x, w, y, x.numel())))
        return y

    return body


def test_a_plan_replays_its_launches_on_new_inputs_and_buffers(fake_driver):
    x, w, bound = torch.randn(1, 8), torch.randn(1, 8), _Bound()
    y, launches, watch = _record(x, _weight(w), None, _one_launch(x, w, bound))
    plan = plans._build(x, _weight(w), None, y, watch, launches, ("sel",), 3)
    assert isinstance(plan, plans.Plan) and plan.buffers == [((1, 8), (8, 1), torch.float32)]
    x2 = torch.randn(1, 8)
    y2 = plan(x2)
    assert y2 is not y and torch.equal(y2, 2 * x2 + w)  # the input and a new buffer
    assert bound.calls[-1] == ((2, 1, 1), 7, ("TAIL",), [int, int, int])  # as addresses


def test_intermediate_buffers_live_in_one_workspace(fake_driver):
    x, w, bound = torch.randn(1, 8), torch.randn(1, 8), _Bound()

    def body(launches):  # t1 = 2x + w, t2 = 2 t1 + w, y = 2 t2 + w
        t1, t2, y = torch.empty(1, 8), torch.empty(1, 8), torch.empty(1, 8)
        for a, b in ((x, t1), (t1, t2), (t2, y)):
            launches.append((bound, (1, 1, 1), (a, w, b, 8)))
        return y

    y, launches, watch = _record(x, _weight(w), None, body)
    plan = plans._build(x, _weight(w), None, y, watch, launches, ("sel",), 3)
    assert plan.out == 3 and plan.offsets[:2] == [0, 256] and plan.workspace == 512
    x2 = torch.randn(1, 8)
    assert torch.equal(plan(x2), 2 * (2 * (2 * x2 + w) + w) + w)


def test_replays_on_a_stream_share_one_workspace(fake_driver):
    x, w, bound = torch.randn(1, 8), torch.randn(1, 8), _Bound()

    def chain(n):  # n - 1 intermediate buffers, then the result
        def body(launches):
            bufs = [torch.empty(1, 8) for _ in range(n)]
            for a, b in zip([x, *bufs[:-1]], bufs, strict=True):
                launches.append((bound, (1, 1, 1), (a, w, b, 8)))
            return bufs[-1]

        y, launches, watch = _record(x, _weight(w), None, body)
        return plans._build(x, _weight(w), None, y, watch, launches, ("sel",), 3)

    plans.release_workspaces()
    small, large = chain(2), chain(4)
    assert (small.workspace, large.workspace) == (256, 768)
    x2 = torch.randn(1, 8)
    assert torch.equal(small(x2), 2 * (2 * x2 + w) + w)
    assert [t.numel() for t in plans._SHARED.values()] == [256]  # (device 0, stream 7)
    want = x2
    for _ in range(4):
        want = 2 * want + w
    assert torch.equal(large(x2), want)  # grown for the larger plan, then kept
    assert torch.equal(small(x2), 2 * (2 * x2 + w) + w)
    assert [t.numel() for t in plans._SHARED.values()] == [768]
    plans.release_workspaces()
    assert not plans._SHARED


def test_a_plan_sees_the_weight_storage_move(fake_driver):
    x, w, bound = torch.randn(1, 8), torch.randn(1, 8), _Bound()
    y, launches, watch = _record(x, _weight(w), None, _one_launch(x, w, bound))
    plan = plans._build(x, _weight(w), None, y, watch, launches, ("sel",), 3)
    assert not plan.moved()
    w.copy_(torch.randn(1, 8))  # new values, same storage: the plan holds
    assert not plan.moved() and torch.equal(plan(x), 2 * x + w)
    w.data = torch.randn(1, 8)  # the same object over another storage
    assert plan.moved()


def test_split_counters_are_the_replaying_streams(fake_driver, monkeypatch):
    """A launch given its stream's split-K counters (kernels/splitk.py) replays with the
    counters of the stream it replays on, looked up per replay."""
    monkeypatch.setattr(plans.splitk, "_COUNTERS", {})
    x, w, bound = torch.randn(1, 8), torch.randn(1, 8), _Bound()
    cnt = plans.splitk.counters_at(x.device, x.device.index, 7, 16)

    def body(launches):
        y = torch.empty(x.shape)
        launches.append((bound, (2, 1, 1), (x, w, y, x.numel(), cnt)))
        return y

    y, launches, watch = _record(x, _weight(w), None, body)
    plan = plans._build(x, _weight(w), None, y, watch, launches, ("sel",), 3)
    assert isinstance(plan, plans.Plan) and plan.counters == cnt.numel()
    assert torch.equal(plan(x), 2 * x + w)
    assert bound.calls[-1][2] == (cnt.data_ptr(), "TAIL")
    other = types.SimpleNamespace(get_current_device=lambda: 0, get_current_stream=lambda d: 9)
    monkeypatch.setattr(_Driver, "active", other)
    plan(x)
    theirs = plans.splitk._COUNTERS[("cpu", None, 9)]
    assert bound.calls[-1][2] == (theirs.data_ptr(), "TAIL") and theirs is not cnt


def test_views_replay_as_offsets_into_their_bases(fake_driver):
    x, w, bound = torch.randn(1, 8), torch.randn(1, 8), _Bound()

    def body(launches):  # t[1] = 2x + w (w seen through a squeeze), y = 2 t[1] + w
        t, y = torch.empty(2, 8), torch.empty(1, 8)
        launches.append((bound, (1, 1, 1), (x, w.squeeze(0), t[1], 8)))
        launches.append((bound, (1, 1, 1), (t[1].unsqueeze(0), w, y, 8)))
        return y

    y, launches, watch = _record(x, _weight(w), None, body)
    plan = plans._build(x, _weight(w), None, y, watch, launches, ("sel",), 3)
    assert isinstance(plan, plans.Plan), plan
    assert plan.buffers[0] == ((2, 8), (8, 1), torch.float32)  # the base, not the view
    want = [((0, 0, 0), (2, 1, 32)), ((0, 1, 32), (2, 2, 0))]  # (position, buffer, bytes)
    assert [slots for *_, slots in plan.launches] == want
    x2 = torch.randn(1, 8)
    assert torch.equal(plan(x2), 2 * (2 * x2 + w) + w)
    w.data = torch.randn(1, 8)  # the squeezed view's base moved: the plan sees it
    assert plan.moved()


def test_a_result_with_other_strides_is_allocated_with_them(fake_driver):
    """A contiguous result is allocated like an expanded one-element tensor (empty_like);
    one with any other strides keeps its own (empty_strided), and replays fill it alike."""
    x, w, bound = torch.randn(1, 8), torch.randn(1, 8), _Bound()

    def body(launches):  # y: [1, 8] with a row stride of 16
        y = torch.empty_strided((1, 8), (16, 1))
        launches.append((bound, (1, 1, 1), (x, w, y, 8)))
        return y

    def plan(body):
        y, launches, watch = _record(x, _weight(w), None, body)
        return plans._build(x, _weight(w), None, y, watch, launches, ("sel",), 3)

    contiguous, strided = plan(_one_launch(x, w, bound)), plan(body)
    assert contiguous.like is not None and strided.like is None
    for replay, stride in ((contiguous, (8, 1)), (strided, (16, 1))):
        y = replay(x)
        assert y.stride() == stride and torch.equal(y, 2 * x + w)


def test_a_reshaped_result_is_refused(fake_driver):
    x, w, bound = torch.randn(1, 8), torch.randn(1, 8), _Bound()

    def body(launches):
        y = torch.empty(8)
        launches.append((bound, (1, 1, 1), (x, w, y, 8)))
        return y.view(1, 8)

    y, launches, watch = _record(x, _weight(w), None, body)
    reason = plans._build(x, _weight(w), None, y, watch, launches, ("sel",), 3)
    assert reason == "the result is a reshaped view of a fresh buffer"


@pytest.mark.parametrize(
    "why, body",
    [
        ("aten ops besides allocations", lambda x, w: lambda launches: torch.zeros(1, 8)),
        ("went through Triton itself", lambda x, w: lambda launches: launches.append(None)),
        ("result is not a fresh buffer", lambda x, w: lambda launches: x),
    ],
)
def test_recordings_that_are_not_pure_launches_are_refused(fake_driver, why, body):
    x, w = torch.randn(1, 8), torch.randn(1, 8)
    y, launches, watch = _record(x, _weight(w), None, body(x, w))
    reason = plans._build(x, _weight(w), None, y, watch, launches, ("sel",), 3)
    assert isinstance(reason, str) and why in reason


def test_a_launch_argument_from_elsewhere_is_refused(fake_driver):
    x, w, foreign = torch.randn(1, 8), torch.randn(1, 8), torch.randn(1, 8)
    y, launches, watch = _record(x, _weight(w), None, _one_launch(x, foreign, _Bound()))
    reason = plans._build(x, _weight(w), None, y, watch, launches, ("sel",), 3)
    assert "launch argument 1" in reason


def test_derived_layouts_and_their_views_are_the_weights(fake_driver):
    """int4's group-major scales: a derived layout of the weight, passed transposed. A plan
    takes it as the weight's own (its address kept and checked), where anything else from
    elsewhere is refused (run 54c02e: int4 eager M = 1 went 24 -> 82 us, no plan)."""
    x, w, gm = torch.randn(1, 8), torch.randn(1, 8), torch.randn(8, 1)
    weight = types.SimpleNamespace(tensors=lambda: {"qdata": w}, _derived={"scale_gm": gm})

    def body(launches):
        y = torch.empty(1, 8)
        launches.append((_Bound(), (1, 1, 1), (x, gm.t(), y, 8)))
        return y

    y, launches, watch = _record(x, weight, None, body)
    plan = plans._build(x, weight, None, y, watch, launches, ("sel",), 3)
    assert isinstance(plan, plans.Plan), plan
    x2 = torch.randn(1, 8)
    assert torch.equal(plan(x2), 2 * x2 + gm.t())
    weight._derived = {}  # not built (or reset): from elsewhere
    reason = plans._build(x, weight, None, y, watch, launches, ("sel",), 3)
    assert "launch argument 1" in reason


def test_replacing_an_inner_tensor_drops_the_plans():
    lin = aoq.quantize_(nn.Linear(64, 32), aoq.Int8WeightOnlyConfig())
    w = lin.weight
    w.__dict__["_plans"] = {"key": "a recorded plan"}
    w.scale = w.scale.clone()
    assert plans.explain(w) == {}
    w.__dict__["_plans"] = {"key": "a recorded plan"}
    w.act = w.act  # an attr can choose another path
    assert plans.explain(w) == {}
    w.__dict__["_plans"] = {"key": "a recorded plan"}
    w._derived = None  # copy_ resets the derived layouts: a plan may hold the old ones
    assert plans.explain(w) == {}
    w.__dict__["_plans"] = {"key": "a recorded plan"}
    w.copy_(w.detach().clone())
    assert plans.explain(w) == {}


def test_cpu_calls_are_never_planned():
    lin = aoq.quantize_(nn.Linear(64, 32), aoq.Int8WeightOnlyConfig())
    x = torch.randn(1, 64)
    for _ in range(3):
        lin(x)
    assert plans.explain(lin.weight) == {}


# --- on a GPU -----------------------------------------------------------------------------

gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
DECODE = [
    "int8wo",
    "int4wo-g128",
    "fp8wo",
    "w8a8",
    "fp8-row",
    "fp8-tensor",
    "w4a8-g32",
    "w8a8-static",
    "mxwo-fp4_e2m1",
    "mxwo-fp8_e4m3",
    "mx-fp4_e2m1",
    "mx-int8",
    "nvfp4wo",
    "nvfp4",
    "mxwo-fp6_e3m2",
    "mx-fp6_e2m3",
]
CONFIGS = [c for c in inference_configs() if c.id in DECODE]


def _normal(w, x, bias):
    plans.forget(w)
    return F.linear(x, w, bias)


@gpu
@pytest.mark.parametrize("config", CONFIGS, ids=[c.id for c in CONFIGS])
@pytest.mark.parametrize("m", [1, 16, 64, 100, 200])
@pytest.mark.parametrize("bias", [False, True])
def test_replays_match_the_normal_path_bit_for_bit(config, m, bias):
    """Every decode call is planned; past 16 rows, every call a Triton kernel serves, and
    fp8 W8A8's torch._scaled_mm calls (the product last: aoq/plan_steps.py); another BLAS
    or emulated path is planned where its aten ops are launches and a last product, else
    refused (it keeps the normal path). Every replay gives the normal path's bits."""
    lin = nn.Linear(1024, 512, bias=bias, device="cuda", dtype=torch.bfloat16)
    aoq.quantize_(lin, config)
    w, b = lin.weight, lin.bias
    xs = [torch.randn(m, 1024, device="cuda", dtype=torch.bfloat16) for _ in range(4)]
    with torch.no_grad():
        got = [F.linear(x, w, b) for x in xs]  # normal, recorded, replay, replay
        states = list(plans.explain(w).values())
        want = [_normal(w, x, b) for x in xs]
    kernel = dispatch.select(w.scheme, xs[0], w, b)[0].name
    assert len(states) == 1, states
    if m <= 16 or kernel.startswith("triton."):
        assert states[0].startswith("plan ("), (kernel, states)
    elif kernel == "cublas.fp8.scaled_mm":  # its product last (aoq/plan_steps.py)
        assert states[0].endswith("then aten._scaled_mm.default)"), (kernel, states)
    else:  # a BLAS path: planned where it ends in its product, else refused
        assert states[0].startswith(("plan (", "the call ran aten ops")), (kernel, states)
    for g, e in zip(got, want, strict=True):
        assert torch.equal(g, e), states


@gpu
def test_weight_only_decode_is_planned_and_traced():
    lin = aoq.quantize_(
        nn.Linear(1024, 1024, bias=False, device="cuda", dtype=torch.bfloat16),
        aoq.Int4WeightOnlyConfig(),
    )
    x = torch.randn(1, 1024, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad(), aoq.trace_kernels() as trace:
        for _ in range(3):
            lin(x)
    (state,) = plans.explain(lin.weight).values()
    assert state.startswith("plan (")
    assert [r.kernel for r in trace.records] == ["triton.int4wo.decode"] * 3
    assert plans.lookup(lin.weight, x, None, len(dispatch._IMPLS)) is not None


def _planned_int8_layer():
    """(weight, bias, x) of an int8 weight-only Linear(1024, 1024) with x's plan recorded."""
    lin = aoq.quantize_(
        nn.Linear(1024, 1024, device="cuda", dtype=torch.bfloat16), aoq.Int8WeightOnlyConfig()
    )
    w, b = lin.weight, lin.bias
    x = torch.randn(1, 1024, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        for _ in range(3):
            F.linear(x, w, b)
    return w, b, x


@gpu
def test_replays_capture_into_cuda_graphs_and_rekey_on_alignment():
    w, b, x = _planned_int8_layer()
    with torch.no_grad():
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            y = F.linear(x, w, b)
        x.copy_(torch.randn_like(x))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(y, _normal(w, x, b))
        buf = torch.randn(1025, device="cuda", dtype=torch.bfloat16)
        shifted = buf[1:].reshape(1, 1024)  # 2 bytes off the allocation: another key
        for _ in range(3):
            got = F.linear(shifted, w, b)
        assert len(plans.explain(w)) == 2
        assert torch.equal(got, _normal(w, shifted.clone(), b))


@gpu
def test_a_bias_moved_by_data_assignment_is_recorded_again():
    w, b, x = _planned_int8_layer()
    with torch.no_grad():
        assert list(plans.explain(w).values())[0].startswith("plan (")
        b.data = torch.randn_like(b)  # same Parameter object, new storage
        got = F.linear(x, w, b)  # the plan sees the move: the normal path, key seen anew
        assert list(plans.explain(w).values()) == [plans._SEEN]
        assert torch.equal(got, _normal(w, x, b))
        for _ in range(3):
            got = F.linear(x, w, b)
        assert list(plans.explain(w).values())[0].startswith("plan (")
        assert torch.equal(got, _normal(w, x, b))


@gpu
def test_replays_on_two_streams_keep_their_own_workspaces():
    config = aoq.Int8DynamicActivationInt8WeightConfig()
    lin = aoq.quantize_(
        nn.Linear(1024, 1024, bias=False, device="cuda", dtype=torch.bfloat16), config
    )
    w = lin.weight
    xs = [torch.randn(1, 1024, device="cuda", dtype=torch.bfloat16) for _ in range(16)]
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    with torch.no_grad():
        for _ in range(3):
            F.linear(xs[0], w)
        assert list(plans.explain(w).values())[0].startswith("plan (")
        got = []
        for s in streams:
            s.wait_stream(torch.cuda.current_stream())
        for i, x in enumerate(xs):
            with torch.cuda.stream(streams[i % 2]):
                got.append(F.linear(x, w))
        torch.cuda.synchronize()
        assert sum(key[1] in (s.cuda_stream for s in streams) for key in plans._SHARED) == 2
        for g, x in zip(got, xs, strict=True):
            assert torch.equal(g, _normal(w, x, None))
