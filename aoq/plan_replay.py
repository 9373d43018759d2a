"""An eager plan's replay (aoq/plans.py records it): the :class:`Plan` and the workspace all
plans replayed on a stream share (:func:`shared_workspace`, each plan's buffer offsets in it
laid out once by :func:`layout`); aoq/plans.py says why."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

import torch

from aoq import plan_steps

try:
    from aoq.kernels import _launch, splitk
except ImportError:  # no triton: nothing to plan
    _launch = None  # type: ignore[assignment]
    splitk = None  # type: ignore[assignment]

SHARE_WORKSPACE = os.environ.get("AOQ_SHARED_WORKSPACE", "1") != "0"
"""Off: every replay allocates its own workspace (bench/host_profile.py times both)."""
WORKSPACE_ALIGN = 256

_SHARED: dict[tuple[int, int], torch.Tensor] = {}
"""(device index, stream) -> the workspace eager replays on that stream share."""
_SHARED_LOCK = threading.Lock()


def shared_workspace(current: int, stream: int, size: int, device: torch.device) -> torch.Tensor:
    """The stream's shared workspace, grown to ``size`` bytes if needed (the old one is
    freed to torch's allocator, stream-ordered: queued kernels finish first)."""
    key = (current, stream)
    ws = _SHARED.get(key)
    if ws is None or ws.numel() < size:
        ws = _SHARED[key] = torch.empty(size, dtype=torch.uint8, device=device)
    return ws


def release_workspaces() -> None:
    """Free the workspaces eager replays share (the next replay on a stream allocates anew)."""
    with _SHARED_LOCK:
        _SHARED.clear()


def layout(buffers: list[tuple[Any, ...]], out: int) -> tuple[list[int], int]:
    """Byte offsets of buffers 1.. in one workspace (buffer ``out``'s is unused: the result
    is allocated on its own), each 256-byte aligned (the kernels were bound on fresh, aligned
    buffers), and the workspace's size."""
    offsets, total = [], 0
    for i, (shape, stride, dtype) in enumerate(buffers, 1):
        offsets.append(total)
        if i != out and 0 not in shape:
            span = 1 + sum((n - 1) * st for n, st in zip(shape, stride, strict=True))
            total += -(-span * dtype.itemsize // WORKSPACE_ALIGN) * WORKSPACE_ALIGN
    return offsets, total


class Plan:
    """A recorded call: ``buffers`` (shape, stride, dtype) to allocate, then ``launches`` of
    (bound kernel, grid, argument template, ((position, buffer index, byte offset), ...): an
    argument may be a view into a buffer); buffer 0 is the input, ``out`` the index of the
    result; the templates hold the weight's and bias's tensors (or views of them) as
    addresses, ``keep`` the tensors viewed with their addresses (:meth:`moved`).
    ``selection``: (kernel name, fallback, reason, platform) for provenance records;
    ``current``: the device the kernels were bound on; ``bias``: the bias object (held, so the
    id in the key stays its own); ``generation``: the kernel table's size when recorded;
    ``counters``: how many split-K counters the launches use (buffer index -1: the replaying
    stream's), 0 for none.

    A replay is host time only, so it is prepared once: ``calls`` holds each launch as the
    launcher's whole positional argument list (``_launch._Bound.frame``) with the stream and
    the addresses left to fill, each address as (position, which base, byte offset): the
    input, the workspace (the buffer's offset in it added in), the result or the counters."""

    __slots__ = ("buffers", "launches", "out", "device", "current", "selection", "bias",
                 "generation", "keep", "offsets", "workspace", "counters", "calls", "result",
                 "device_now", "like", "blas")  # fmt: skip

    def __init__(
        self,
        buffers: list[tuple[Any, ...]],
        launches: list[tuple[Any, ...]],
        out: int,
        device: torch.device,
        selection: tuple[Any, ...],
        bias: Any,
        generation: int,
        keep: tuple[tuple[torch.Tensor, int], ...],
        counters: int = 0,
        blas: plan_steps.Step | None = None,
    ) -> None:
        self.buffers = buffers
        self.launches = launches
        self.out = out
        self.device = device
        self.current = _launch.driver.active.get_current_device()
        self.device_now = _device_getter()
        self.selection = selection
        self.bias = bias
        self.generation = generation
        self.keep = keep
        self.offsets, self.workspace = layout(buffers, out)
        self.counters = counters
        self.blas = blas  # out 0: the result is this last step's output
        self.result = buffers[out - 1] if out else None
        self.like = _result_like(self.result, device) if self.result is not None else None
        self.calls = [self._frame(*launch) for launch in launches]

    def _frame(self, bound: Any, grid: Any, template: Any, slots: Any) -> tuple[Any, ...]:
        fn, argv, at = bound.frame(grid, template)
        fill = []
        for pos, idx, offset in slots:
            if idx == 0:
                fill.append((at + pos, _INPUT, offset))
            elif idx == self.out:
                fill.append((at + pos, _RESULT, offset))
            elif idx == -1:
                fill.append((at + pos, _COUNTERS, offset))
            else:
                fill.append((at + pos, _WORKSPACE, self.offsets[idx - 1] + offset))
        return fn, argv, tuple(fill)

    def moved(self) -> bool:
        """A kept tensor's storage is no longer at the recorded address."""
        for t, ptr in self.keep:  # noqa: SIM110 (a loop, not any() over a generator: host time)
            if t.data_ptr() != ptr:
                return True
        return False

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        y = None  # with a BLAS step the result is its output
        if self.blas is None and self.like is not None:
            y = torch.empty_like(self.like)
        elif self.blas is None:
            shape, stride, dtype = self.result  # type: ignore[misc]  # (a result buffer here)
            y = torch.empty_strided(shape, stride, dtype=dtype, device=self.device)
        stream = _launch.driver.active.get_current_stream(self.current)
        if not self.workspace:
            return self._run(x, y, None, stream)
        if not SHARE_WORKSPACE:  # ws: alive until the launches are queued (then stream-ordered)
            ws = torch.empty(self.workspace, dtype=torch.uint8, device=self.device)
            return self._run(x, y, ws, stream)
        with _SHARED_LOCK:
            return self._run(x, y, _shared_workspace(self, stream), stream)

    def _run(self, x: torch.Tensor, y: torch.Tensor | None, ws: torch.Tensor | None,
             stream: int) -> torch.Tensor:  # fmt: skip
        """The launches into ``y`` and ``ws``, then the BLAS step where there is one
        (aoq/plan_steps.py), whose output is the result."""
        base = ws.data_ptr() if ws is not None else 0
        self._launch(x, y.data_ptr() if y is not None else 0, base, stream)
        if self.blas is not None:
            return self.blas(x, ws, self.offsets)
        return y  # type: ignore[return-value]  # (a result buffer without a BLAS step)

    def _launch(self, x: torch.Tensor, y: int, base: int, stream: int) -> None:
        counters = 0
        if self.counters:
            counters = splitk.counters_at(self.device, self.device.index, stream,
                                          self.counters).data_ptr()  # fmt: skip
        bases = (x.data_ptr(), base, y, counters)
        for fn, template, fill in self.calls:
            argv = template.copy()  # a list of its own: replays may run on several threads
            argv[3] = stream
            for pos, which, offset in fill:
                argv[pos] = bases[which] + offset
            fn(*argv)


_INPUT, _WORKSPACE, _RESULT, _COUNTERS = range(4)
"""Which base address a replayed launch argument is an offset from (Plan.calls)."""


def _result_like(result: tuple[Any, ...], device: torch.device) -> torch.Tensor | None:
    """A one-element tensor expanded to the result's shape, where ``torch.empty_like`` of it
    is a fresh result with the recorded strides (contiguous: an expanded tensor is not dense,
    so empty_like lays it out contiguously); None where it is not. empty_like takes the
    shape, dtype and device from the tensor in C++: less host time than empty_strided
    parsing them from Python per replay."""
    shape, stride, dtype = result
    like = torch.empty(1, dtype=dtype, device=device).expand(shape)
    probe = torch.empty_like(like)
    return like if probe.stride() == tuple(stride) and probe.shape == like.shape else None


def _device_getter() -> Callable[[], int]:
    """The driver's current-device query; on CUDA torch's own getter, without the lazy-init
    check ``torch.cuda.current_device`` repeats (a plan exists: CUDA is initialised)."""
    get = _launch.driver.active.get_current_device
    return torch._C._cuda_getDevice if get is torch.cuda.current_device else get


def _shared_workspace(plan: Plan, stream: int) -> torch.Tensor:
    return shared_workspace(plan.current, stream, plan.workspace, plan.device)
