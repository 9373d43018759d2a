"""What every check shares: its result type, digests of checkpoint tensors, devices.

A check returns a ``CheckResult``; the runner turns it into a ``Record`` (adding the run, the
case and the tolerance with its source), so worker processes never touch the results store.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import traceback
from typing import Any

import torch

from aoq.tensors import AoqTensor, QuantizedWeight

ALL_CHECKS = (
    "pack",
    "output",
    "sqnr",
    "kernel",
    "compile",
    "save_load",
    "pretrained",
    "prequant_bias",
    "cross_device",
    "model_cosine",
    "model_kernel",
)
"""Every check a case can carry, in report order. ``cell`` is the case's summary record."""
FRESH_CHECKS = ("save_load", "pretrained", "prequant_bias", "cross_device")
"""Checks done by a fresh process that loads what a worker saved."""


@dataclasses.dataclass
class CheckResult:
    check: str
    status: str
    metrics: dict[str, Any] = dataclasses.field(default_factory=dict)
    reason: str | None = None
    kernel: str | None = None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def verdict(check: str, ok: bool, why: str, **metrics: Any) -> CheckResult:
    """pass, or fail with ``why``."""
    return CheckResult(check, "pass" if ok else "fail", metrics, None if ok else why)


def error(check: str, exc: BaseException) -> CheckResult:
    """An unexpected exception: the check is red as ``error``, with where it was raised."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {os.path.basename(frames[-1].filename)}:{frames[-1].lineno}" if frames else ""
    return CheckResult(check, "error", reason=f"{type(exc).__name__}: {exc}{where}")


def skipped(check: str, reason: str) -> CheckResult:
    return CheckResult(check, "skip", reason=reason)


def weight_and_bias(m: torch.nn.Module) -> tuple[QuantizedWeight, torch.Tensor | None]:
    """A quantized linear's weight and bias, typed (the weight must be quantized)."""
    w, b = m.weight, m.bias
    if not isinstance(w, QuantizedWeight):
        raise TypeError(f"{type(m).__name__}.weight is {type(w).__name__}, not quantized")
    return w, b if isinstance(b, torch.Tensor) else None


def device_for(backend: str) -> torch.device:
    """cpu and interpret run on CPU tensors; cuda and rocm on the worker's one visible GPU."""
    if backend in ("cuda", "rocm"):
        return torch.device("cuda", 0)
    return torch.device("cpu")


def tensor_digest(t: torch.Tensor) -> str:
    """sha256 of dtype, shape and bytes (on the CPU): equal digests mean bit-identical."""
    c = t.detach().contiguous().cpu()
    h = hashlib.sha256(f"{c.dtype}{tuple(c.shape)}".encode())
    if c.numel():
        h.update(c.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:20]


def state_digests(state: dict[str, torch.Tensor]) -> dict[str, str]:
    """Per stored tensor: every inner field of an aoq tensor (``weight:qdata``) and each plain
    tensor, plus each aoq tensor's class, nominal dtype and attrs."""
    out: dict[str, str] = {}
    for key, t in state.items():
        if isinstance(t, AoqTensor):
            for field, inner in t.tensors().items():
                out[f"{key}:{field}"] = tensor_digest(inner)
            attrs = {k: getattr(v, "value", v) for k, v in t.attrs().items()}
            out[f"{key}:meta"] = repr((type(t).__name__, str(t.dtype), sorted(attrs.items())))
        else:
            out[key] = tensor_digest(t)
    return out


def digest_diff(expected: dict[str, str], got: dict[str, str]) -> str | None:
    """None when equal, else which entries differ."""
    if expected == got:
        return None
    missing = sorted(set(expected) - set(got))
    extra = sorted(set(got) - set(expected))
    changed = sorted(k for k in set(expected) & set(got) if expected[k] != got[k])
    parts = [
        f"{n}: {v[:4]}"
        for n, v in (("changed", changed), ("missing", missing), ("unexpected", extra))
        if v
    ]
    return "tensors differ from the saved ones (" + "; ".join(parts) + ")"
