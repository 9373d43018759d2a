"""Eager decode plans (up to MAX_M rows): a linear's launches, recorded once per shape, replayed.

An eager decode step is host bound. On an H200 host a bf16 ``F.linear`` at M=1 costs ~9 µs
of Python and launch time, an int4 weight-only linear through dispatch, the kernel entry, the
launcher and two Triton launches ~55 µs, while the GPU needs a few µs for a 1024 x 1024 layer
(bench/host_profile.py). A plan is what one call did on the device: its launches through
``kernels/_launch.launch`` (compiled kernel, grid, arguments) and the buffers they wrote.
Replaying it costs one allocation (the result: an allocation is ~2.5 µs of host time, and
W8A8 wrote five buffers) and one C launch per kernel. Every other buffer the call allocated
lives in one workspace per device and stream, shared by every plan and kept between calls
(:func:`release_workspaces` frees them): the launches of one replay are queued together
under a lock, and the stream runs them in order, so no two replays on a stream overlap in
it. The split-K counters of a fused reduction (kernels/splitk.py) are the current stream's
too, looked up per replay. Under CUDA-graph capture no plan is recorded or replayed: the
normal path runs (capture happens once, and a graph may be replayed on any stream, so its
split kernels reduce in a separate kernel). A launch takes every tensor argument as its
address: Triton's launcher, given a tensor, calls its ``data_ptr`` and then the driver
(``cuPointerGetAttribute``) to check that the address is a device one, per tensor and
launch. A plan's tensors were checked when it was recorded (the same weight, bias and
device; buffers it allocates itself), and each replay first checks that the weight's and
bias's tensors still have the addresses it recorded (``.data`` assignment keeps the object
and moves the storage): if not, the key is recorded again.

Keys, per weight: (M, dtype, device, the input's 16-byte alignment, the bias object), for
eager calls (never under torch.compile) with M <= MAX_M. The first call of a key runs the
normal path (it may compile or autotune); the second runs it again while recording; later
calls replay. A recording becomes a plan only if the call was nothing but launches through
``launch``, fresh ``torch.empty`` buffers and views (a squeeze, a dtype view: a view's address
is a fixed offset into its base's, so a view of a buffer, of the input or of the weight's own
tensors is replayed as that offset), and the stream's split-K counters. Anything else
refuses it, and that key keeps
the normal path for good (``explain(weight)`` says why): another aten op (a fill, a copy, a
reference path; a BLAS product only as the call's last step, making its result:
aoq/plan_steps.py), a launch Triton had to make itself (interpreter, launch
hooks, hooked kernels), a launch argument that is neither the input, a fresh buffer nor one
of the weight's or the bias's own tensors or the weight's derived layouts (or a view of one:
int4's group-major scales go to decode_mma transposed), a result that is not a fresh
buffer. So a plan
replays exactly what the normal path would run, on the current stream, with its own fresh
result every call.

No plans when the selection is a fallback (strict mode must see it every call), when
``AOQ_TEST_SLOWDOWN`` is set, or with ``AOQ_PLANS=0`` (read at import). A weight's plans are
dropped when one of its inner tensors or attrs, or its derived layouts, is assigned
(AoqTensor.__setattr__; ``copy_`` resets the derived layouts, so it drops them too), and
unused once the kernel table gains a kernel.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from aoq import plan_steps
from aoq.plan_replay import (  # noqa: F401 (_SHARED, _shared_workspace: tests, bench)
    _SHARED,
    Plan,
    _shared_workspace,
    release_workspaces,
)
from aoq.plan_replay import layout as _workspace

try:
    from aoq.kernels import _launch, splitk
except ImportError:  # no triton: nothing to plan
    _launch = None  # type: ignore[assignment]
    splitk = None  # type: ignore[assignment]

MAX_M = 256
"""Decode and batched decode: the 17-256 rows of decode_mma's row tiles and mid_rows' split
tiles were host bound eagerly too (H200 run 51c36c, M 64, 8192^2: int8wo 151 us eager, 34 as
a graph replay). Past that the host time is a small part of the call."""
MAX_PLANS = 128
"""Keys kept per weight (dtypes x M x bias objects); a full cache is cleared."""
ENABLED = os.environ.get("AOQ_PLANS", "1") != "0" and _launch is not None and _launch.ENABLED
_ALLOCATIONS = (torch.ops.aten.empty.memory_format, torch.ops.aten.empty_strided.default)
_SEEN = "seen once"


def _capturing(device: torch.device) -> bool:
    return device.type == "cuda" and bool(torch._C._cuda_isCurrentStreamCapturing())


class _Watch(TorchDispatchMode):
    """Keeps the tensors fresh allocations return and the views the call made (of anything:
    :func:`_build` decides what their bases may be); notes any other aten op."""

    def __init__(self) -> None:
        super().__init__()
        self.fresh: dict[int, torch.Tensor] = {}
        self.views: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # id: (view, base)
        self.other: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        recording = _launch._RECORDING.get() if _launch is not None else None
        if func in _ALLOCATIONS:
            self.fresh[id(out)] = out
        elif func in plan_steps.REPLAYABLE and recording is not None:  # in the launches' order
            recording.append(plan_steps.AtenCall(func, args, dict(kwargs or {}), out))
        elif func.is_view and isinstance(out, torch.Tensor) and isinstance(args[0], torch.Tensor):
            self.views[id(out)] = (out, args[0])  # (factories return a detached alias too)
        else:
            self.other.append(str(func))
        return out

    def root(self, t: torch.Tensor) -> tuple[torch.Tensor, int]:
        """The tensor ``t`` is a view of (through any chain of views the call made), and
        ``t``'s byte offset into it: a fixed offset, since a view shares its base's storage."""
        base = t
        while id(base) in self.views:
            base = self.views[id(base)][1]
        return base, t.data_ptr() - base.data_ptr()


def _own_tensors(weight: Any, bias: Any) -> set[int]:
    """The weight's inner tensors and its derived layouts already built (setting
    ``_derived`` drops the weight's plans: AoqTensor.__setattr__), the bias's."""
    own = {id(t) for t in weight.tensors().values()}
    own.update(id(t) for t in (getattr(weight, "_derived", None) or {}).values())
    if isinstance(bias, torch.Tensor):
        own.add(id(bias))
        tensors = getattr(bias, "tensors", None)
        own.update(id(t) for t in (tensors().values() if callable(tensors) else ()))
    return own


def _build(
    x: torch.Tensor,
    weight: Any,
    bias: Any,
    y: Any,
    watch: _Watch,
    launches: list,
    selection: tuple[Any, ...],
    generation: int,
) -> Plan | str:
    """A plan from one recorded call, or why not."""
    if any(launch is None for launch in launches):
        return "a launch went through Triton itself (interpreter, launch hook or hooked kernel)"
    if watch.other:
        return f"the call ran aten ops besides allocations: {sorted(set(watch.other))[:4]}"
    own = _own_tensors(weight, bias)
    slot: dict[int, int] = {id(x): 0}
    buffers: list[tuple[Any, ...]] = []

    def index(t: torch.Tensor) -> int | None:
        if id(t) not in slot and id(t) in watch.fresh:
            slot[id(t)] = len(buffers) + 1
            buffers.append((tuple(t.shape), t.stride(), t.dtype))
        return slot.get(id(t))

    steps, keep, counters = [], {}, 0
    blas: plan_steps.Step | None = None

    def blas_arg(a: torch.Tensor) -> Any:
        base, offset = watch.root(a)
        idx = index(base)
        if idx is not None:
            return plan_steps.Ref(idx, offset, a) if idx or a.dtype == x.dtype else "x retyped"
        if id(base) in own:
            keep[id(base)] = (base, base.data_ptr())
            return a
        return "an argument that is not the input, a fresh buffer or the weight's"

    for i, item in enumerate(launches):
        if type(item) is plan_steps.AtenCall:
            if i != len(launches) - 1:
                return f"{item.func} is not the call's last step"
            step = plan_steps.build(item, y, blas_arg)
            if isinstance(step, str):
                return step
            blas = step
            continue
        bound, grid, args = item
        template, slots = list(args), []
        for pos, a in enumerate(args):
            if not isinstance(a, torch.Tensor):
                continue
            base, offset = watch.root(a)
            idx = index(base)
            if idx is not None:
                template[pos] = None
                slots.append((pos, idx, offset))
            elif id(base) in own:
                template[pos] = a.data_ptr()
                keep[id(base)] = (base, base.data_ptr())
            elif splitk.is_counters(base):
                template[pos] = None
                slots.append((pos, -1, offset))
                counters = max(counters, base.numel())
            else:
                return f"launch argument {pos} is not the input, a fresh buffer or the weight's"
        steps.append((bound, grid, tuple(template), tuple(slots)))
    if blas is not None:
        if _workspace(buffers, 0)[1] > plan_steps.MAX_WORKSPACE:
            return f"its buffers before {blas.func} exceed plan_steps.MAX_WORKSPACE"
        keep_ = tuple(keep.values())
        return Plan(buffers, steps, 0, x.device, selection, bias, generation, keep_, counters, blas)
    if not isinstance(y, torch.Tensor):
        return "the result is not a fresh buffer"
    base, offset = watch.root(y)
    out = index(base)
    if out is None or out == 0:
        return "the result is not a fresh buffer"
    if offset or (tuple(y.shape), y.stride()) != buffers[out - 1][:2]:
        return "the result is a reshaped view of a fresh buffer"
    keep_ = tuple(keep.values())
    return Plan(buffers, steps, out, x.device, selection, bias, generation, keep_, counters)


def _key(x: torch.Tensor, bias: Any) -> tuple[Any, ...]:
    return (x.shape[0], x.dtype, x.get_device(), x.data_ptr() & 15 == 0, id(bias))


def lookup(weight: Any, x: torch.Tensor, bias: Any, generation: int) -> Plan | None:
    """The plan for this call, if one was recorded and still holds: the same kernel table
    (``generation``), bias object and current device, and no launch hook installed."""
    plans = weight.__dict__.get("_plans")
    if not plans or x.shape[0] > MAX_M:
        return None
    key = _key(x, bias)
    plan = plans.get(key)
    if type(plan) is not Plan or plan.bias is not bias or plan.generation != generation:
        return None
    if _launch._hooks_installed() or plan.device_now() != plan.current:
        return None
    if _capturing(plan.device):
        return None
    if plan.moved():  # record this key again
        del plans[key]
        return None
    return plan


def run(
    weight: Any,
    x: torch.Tensor,
    bias: Any,
    selection: tuple[Any, ...],
    generation: int,
    call: Callable[[], torch.Tensor],
) -> torch.Tensor:
    """``call()`` (the normal path of this call); the second time a key is seen, recorded."""
    if not ENABLED or x.shape[0] > MAX_M or x.device.type != "cuda" or _capturing(x.device):
        return call()
    plans = weight.__dict__.setdefault("_plans", {})
    key = _key(x, bias)
    state = plans.get(key)
    if state is None:
        if len(plans) >= MAX_PLANS:
            plans.clear()
        plans[key] = _SEEN
        return call()
    if state is not _SEEN:  # a refusal (or a plan that went stale): the normal path
        return call()
    with _launch.recording() as launches, _Watch() as watch:
        y = call()
    plans[key] = _build(x, weight, bias, y, watch, launches, selection, generation)
    return y


def explain(weight: Any) -> dict[tuple[Any, ...], str]:
    """Per key: 'plan (N launches)', 'seen once', or why the key keeps the normal path."""
    out = {}
    for key, state in weight.__dict__.get("_plans", {}).items():
        if type(state) is Plan:
            then = f", then {state.blas.func}" if state.blas is not None else ""
            state = f"plan ({len(state.launches)} launches{then})"
        out[key] = state
    return out


def forget(weight: Any) -> None:
    """Drop a weight's plans (its tensors were replaced)."""
    weight.__dict__.pop("_plans", None)
