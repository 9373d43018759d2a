"""What every check shares: its result type, digests of checkpoint tensors, devices.

A check returns a ``CheckResult``; the runner turns it into a ``Record`` (adding the run, the
case and the tolerance with its source), so worker processes never touch the results store.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import hashlib
import os
import sys
import traceback
from collections.abc import Iterator
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
    """Per stored tensor: every inner field of an aoq tensor in its canonical layout
    (``weight:qdata``) and each plain tensor, plus each aoq tensor's class, nominal dtype and
    attrs (``weight:meta``) with its layout attrs apart (``weight:layout``): a checkpoint
    loaded on another device takes that device's layout of the same values."""
    out: dict[str, str] = {}
    for key, t in state.items():
        if isinstance(t, AoqTensor):
            for field, inner in t.canonical_tensors().items():
                out[f"{key}:{field}"] = tensor_digest(inner)
            attrs = {k: getattr(v, "value", v) for k, v in t.attrs().items()}
            layout = {k: attrs.pop(k) for k in t.layout_attrs}
            out[f"{key}:meta"] = repr((type(t).__name__, str(t.dtype), sorted(attrs.items())))
            out[f"{key}:layout"] = repr(sorted(layout.items()))
        else:
            out[key] = tensor_digest(t)
    return out


def without_layout(digests: dict[str, str]) -> dict[str, str]:
    """:func:`state_digests` less the layout entries: what a load on another device keeps."""
    return {k: v for k, v in digests.items() if not k.endswith(":layout")}


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


# --- which kernel and Triton config produced an output --------------------------------------


def _autotuners() -> dict[str, Any]:
    """Every Triton autotuner aoq.kernels holds (module globals, or the values of a module's
    dict of them, e.g. ``fp8_mm._TUNED``), named ``<module>.<kernel>[<key>]``."""
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:
        return {}
    found: dict[str, Any] = {}
    for mod_name, mod in list(sys.modules.items()):
        if not mod_name.startswith("aoq.kernels.") or mod is None:
            continue
        short = mod_name.rsplit(".", 1)[-1]
        for var, value in list(vars(mod).items()):
            items = value.items() if isinstance(value, dict) else [(None, value)]
            for key, obj in items:
                if isinstance(obj, Autotuner):
                    fn = getattr(obj.base_fn, "__name__", var)
                    tag = "" if key is None else f"[{_plain(key)}]"
                    found[f"{short}.{fn}{tag}"] = obj
    return found


def _plain(key: Any) -> str:
    """An autotuner cache key as text, enums by name: ``(Backend.CUDA, Strategy.PREFILL)`` ->
    ``cuda,prefill``."""
    parts = key if isinstance(key, tuple) else (key,)
    return ",".join(p.name.lower() if isinstance(p, enum.Enum) else str(p) for p in parts)


@contextlib.contextmanager
def launches() -> Iterator[dict[str, str]]:
    """The Triton config of every autotuned aoq kernel launched inside the block (filled in
    when it exits): ``{"weight_only._weight_only_mm_kernel[cuda]": "BLOCK_M: 16, ...,
    num_warps: 4, ..."}``. A timing-based autotune may pick another config in another process;
    when two processes disagree on an output, this says whether that is why. Kernels whose
    tiles are chosen by rule (no autotuner) do not appear."""
    for t in _autotuners().values():
        t.best_config = None  # set again by every launch (triton.runtime.autotuner.run)
    got: dict[str, str] = {}
    try:
        yield got
    finally:  # kernels build their autotuners at first use: look again, inside included
        for name, t in _autotuners().items():
            cfg = getattr(t, "best_config", None)
            if cfg is not None:
                got[name] = str(cfg)


def ran_text(kernel: str | None, configs: dict[str, str]) -> str:
    """``triton.int4wo.decode (weight_only._weight_only_mm_kernel[cuda]: BLOCK_M: 1, ...)``."""
    tuned = "; ".join(f"{k}: {v}" for k, v in sorted(configs.items()))
    return f"{kernel or '?'} ({tuned or 'no autotuned launch'})"


def mismatch_reason(
    saved: dict[str, Any] | None, kernel: str | None, configs: dict[str, str]
) -> str:
    """Why an output differs from the one the saving process computed, as far as provenance
    tells: another kernel, the same kernel with another autotuned config, or neither."""
    if not saved:
        return f"this process ran {ran_text(kernel, configs)}"
    s_kernel, s_configs = saved.get("kernel"), saved.get("configs") or {}
    if s_kernel != kernel:
        cause = "another kernel ran here"
    elif s_configs != configs:
        diff = sorted(
            k for k in set(s_configs) | set(configs) if s_configs.get(k) != configs.get(k)
        )
        cause = (
            f"same kernel, another autotuned config of {', '.join(diff)}: the config is picked "
            "by timing in each process, and it changes the reduction order"
        )
    else:
        cause = "same kernel and config: the kernel is not deterministic across processes"
    return (
        f"{cause}; the saving process ran {ran_text(s_kernel, s_configs)}, "
        f"this one {ran_text(kernel, configs)}"
    )
