"""An eager plan's BLAS step: the one aten matrix product a recorded call may end with.

aoq/plans.py replays a call's Triton launches as addresses. fp8 W8A8 past its Triton rows
(torch._scaled_mm after the activation kernel), and the dequantize-then-BLAS paths, end in
an aten product instead, which refused the whole recording: on an H200 host such an eager
call at 128 rows of 4096^2 took 110-170 µs (fp8-row: dispatch, the kernel entry, the
activation launcher, then torch._scaled_mm), where a plan's launches take ~20 (session 57).

A plan may now hold one such product, last, when its output is the call's result:

    launches (addresses, as before)  ->  aten op (tensors)  ->  result (the op's own output)

The op is called with tensors, not addresses, so each tensor argument is kept as a
:class:`Ref`: which base it views (the input, or a buffer in the plan's workspace) and its
byte offset, shape and strides; the weight's and bias's own tensors (and views of them) are
passed as the recorded objects, their storage checked by the plan (Plan.moved). A replay
makes each Ref a view of its base (``torch.as_strided``). The op runs on the current stream
after the launches, under the plan's workspace lock, so it reads what they wrote.
"""

from __future__ import annotations

from typing import Any

import torch

REPLAYABLE = frozenset(
    {torch.ops.aten._scaled_mm.default, torch.ops.aten.mm.default, torch.ops.aten.addmm.default}
)
"""The aten products a plan may end with (the ops the BLAS paths run last)."""
MAX_WORKSPACE = 32 << 20
"""Bytes of buffers a plan with a BLAS step may keep in the stream's shared workspace, which
holds them for good: a dequantize-then-BLAS path's bf16 weight (117 MB at 14336 x 4096)
stays on the normal path, whose buffers go back to torch's allocator after each call."""


class AtenCall:
    """One replayable aten op as the recording saw it (an entry of the launch list)."""

    __slots__ = ("func", "args", "kwargs", "out")

    def __init__(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any):
        self.func, self.args, self.kwargs, self.out = func, args, kwargs, out


class Ref:
    """A tensor argument as a view of a base: buffer ``idx`` (0 the input, >= 1 a workspace
    buffer) at ``offset`` bytes, with the recorded shape, strides and dtype."""

    __slots__ = ("idx", "offset", "shape", "stride", "dtype")

    def __init__(self, idx: int, offset: int, t: torch.Tensor):
        self.idx, self.offset = idx, offset
        self.shape, self.stride, self.dtype = tuple(t.shape), t.stride(), t.dtype


class Step:
    """A recorded AtenCall made replayable: ``template`` its positional then keyword
    arguments, each tensor a :class:`Ref` or one of the weight's own tensors."""

    __slots__ = ("func", "template", "names")

    def __init__(self, func: Any, template: list[Any], names: tuple[str, ...]):
        self.func, self.template, self.names = func, template, names

    def __call__(self, x: torch.Tensor, ws: torch.Tensor | None, offsets: list[int]) -> Any:
        """The op on this replay's input ``x`` and workspace ``ws`` (its buffers at byte
        ``offsets``). The views are made per replay (a few µs each), not kept: kept, they
        would hold a workspace that the stream's shared one has since replaced."""
        vals = [
            (_view(v, ws, offsets) if v.idx else _view(v, x, None)) if type(v) is Ref else v
            for v in self.template
        ]
        n = len(vals) - len(self.names)
        return self.func(*vals[:n], **dict(zip(self.names, vals[n:], strict=True)))


def _view(ref: Ref, base: torch.Tensor | None, offsets: list[int] | None) -> torch.Tensor:
    if base is None:
        raise RuntimeError("a plan's BLAS step reads a workspace buffer, but none was made")
    at = ref.offset + (offsets[ref.idx - 1] if offsets is not None else 0)
    size = ref.dtype.itemsize
    flat = base.view(ref.dtype) if base.dtype != ref.dtype else base
    return torch.as_strided(flat, ref.shape, ref.stride, flat.storage_offset() + at // size)


def build(call: AtenCall, y: Any, arg: Any) -> Step | str:
    """``call`` as a Step, or why not: its output must be the call's result ``y``; ``arg(t)``
    maps a tensor argument to a Ref, the tensor itself (the weight's), or a reason string."""
    if call.out is not y:
        return f"{call.func} does not make the call's result"
    names = tuple(call.kwargs)
    template = []
    for v in (*call.args, *call.kwargs.values()):
        if isinstance(v, torch.Tensor):
            v = arg(v)
            if isinstance(v, str):
                return f"{call.func}: {v}"
        elif isinstance(v, (list, tuple)) and any(isinstance(e, torch.Tensor) for e in v):
            return f"{call.func} takes a list of tensors"
        template.append(v)
    return Step(call.func, template, names)
