"""The workspace that eager plans (aoq/plans.py) share per device and stream: a plan's
buffer offsets in it (:func:`layout`, once when recorded) and the stream's one workspace,
grown to the largest plan's size (:func:`shared_workspace`); aoq/plans.py says why."""

from __future__ import annotations

import os
import threading
from typing import Any

import torch

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
