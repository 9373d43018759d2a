"""Fresh-process checkpoint checks, run by the runner's *checker* processes
(``python -m conformance.worker fresh ...``): by hand, ``python -m conformance.fresh DIR ...``.

A process that had done nothing but ``import aoq`` before its first checkpoint loads what
worker processes saved (one directory per case, see ``cell.save_checkpoint``) and checks, per
case:

- save_load: ``torch.load(weights_only=True)`` + ``load_state_dict(assign=True)`` into a model
  built on the meta device;
- pretrained: ``aoq.load_pretrained`` into a meta-device model;
- prequant_bias: ``aoq.load_pretrained`` of the prequantized checkpoint (bias included, int32
  for static activations) into a plain, materialized float model, as a user would;
- cross_device (GPU cases only): the same checkpoint loaded on the CPU.

Same device: every stored tensor and the output are bit-identical to what the worker saw; an
output that is not says which kernel and which autotuned Triton configs ran here and in the
saving process. The output is computed with the saving process's torch thread count: a CPU
matmul's summation order depends on how many threads split it, and checkers and workers
get different shares of the cores. Across devices: tensors bit-identical in their canonical
layout (a load takes the packing of its device), output within the output tolerance of the
float64 oracle. Each check's metrics carry its seconds.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn

import aoq
from aoq.testing.matrix import DTYPES
from aoq.testing.metrics import bit_equal, max_rel_error
from aoq.testing.oracle import float64_linear, float_torch_error
from conformance.checks import (
    CheckResult,
    device_for,
    digest_diff,
    launches,
    mismatch_reason,
    state_digests,
    verdict,
    weight_and_bias,
    without_layout,
)


def _meta_linear(spec: dict[str, Any]) -> nn.Linear:
    with torch.device("meta"):
        return nn.Linear(spec["k"], spec["n"], bias=True, dtype=DTYPES[spec["dtype"]])


@contextlib.contextmanager
def _threads(n: int | None) -> Iterator[None]:
    """torch's intra-op threads set to ``n`` (the saving process's count) for the block."""
    before = torch.get_num_threads()
    if n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _same(
    check: str, m: nn.Module, spec: dict[str, Any], io: dict[str, torch.Tensor]
) -> CheckResult:
    diff = digest_diff(spec["digests"], state_digests(m.state_dict()))
    if diff:
        return verdict(check, False, diff)
    threads = _threads(spec.get("threads"))
    with torch.no_grad(), threads, aoq.trace_kernels() as trace, launches() as configs:
        y = m(io["x"])
    kernel = trace.records[0].kernel if trace.records else None
    if bit_equal(y, io["y"]):
        result = verdict(check, True, "")
    else:
        delta = max_rel_error(io["y"], y) if y.shape == io["y"].shape else float("nan")
        why = mismatch_reason(spec.get("ran"), kernel, configs)
        result = verdict(
            check,
            False,
            f"output is not bit-identical to the saved one (relative difference {delta:.3g}): "
            + why,
            rel_diff=delta,
            configs=configs,
            saved=spec.get("ran"),
        )
    result.kernel = kernel
    return result


def save_load(d: Path, spec: dict[str, Any], io: dict[str, torch.Tensor]) -> CheckResult:
    m = _meta_linear(spec)
    m.load_state_dict(torch.load(d / "sd.pt", weights_only=True), assign=True)
    return _same("save_load", m, spec, io)


def pretrained(d: Path, spec: dict[str, Any], io: dict[str, torch.Tensor]) -> CheckResult:
    device = device_for(spec["backend"])
    m = aoq.load_pretrained(_meta_linear(spec), d / "pretrained", device=device)
    return _same("pretrained", m, spec, io)


def prequant_bias(d: Path, spec: dict[str, Any], io: dict[str, torch.Tensor]) -> CheckResult:
    device = device_for(spec["backend"])
    if not any(k == "bias" or k.startswith("bias:") for k in spec["digests"]):
        return verdict("prequant_bias", False, "the saved checkpoint has no bias")
    plain = nn.Linear(spec["k"], spec["n"], bias=True, dtype=DTYPES[spec["dtype"]], device=device)
    m = aoq.load_pretrained(plain, d / "pretrained", device=device)
    return _same("prequant_bias", m, spec, io)


def cross_device(d: Path, spec: dict[str, Any], io: dict[str, torch.Tensor]) -> CheckResult:
    m = _meta_linear(spec)
    m.load_state_dict(torch.load(d / "sd.pt", weights_only=True, map_location="cpu"), assign=True)
    diff = digest_diff(
        without_layout(spec["digests"]), without_layout(state_digests(m.state_dict()))
    )
    if diff:
        return verdict("cross_device", False, f"loaded on cpu: {diff}")
    x = io["x"].cpu()
    with torch.no_grad():
        y = m(x)
    if not x.numel():
        return verdict("cross_device", tuple(y.shape) == tuple(io["y"].shape), "output shape")
    tol = spec["output_tol"]
    w, b = weight_and_bias(m)
    err = max_rel_error(float64_linear(x, w, b), y)
    budget = max(tol["rel_factor"] * float_torch_error(x, w, b), tol["rel_min"])
    return verdict(
        "cross_device",
        err <= budget,
        f"on cpu: relative error {err:.3g} > budget {budget:.3g} vs the float64 oracle",
        rel_err=err,
        budget=budget,
        vs_device=max_rel_error(io["y"].cpu(), y),
    )


CHECKS: dict[str, Callable[[Path, dict[str, Any], dict[str, torch.Tensor]], CheckResult]] = {
    "save_load": save_load,
    "pretrained": pretrained,
    "prequant_bias": prequant_bias,
    "cross_device": cross_device,
}


def check_case(d: Path) -> dict[str, Any]:
    spec = json.loads((d / "spec.json").read_text())
    if spec.get("inject") == "fresh-abort":  # test-only: a checker that dies on this case
        os.abort()
    io = torch.load(d / "io.pt", weights_only=True)
    results = []
    for name, fn in CHECKS.items():
        if name == "cross_device" and spec["backend"] not in ("cuda", "rocm"):
            continue
        start = time.monotonic()
        try:
            result = fn(d, spec, io)
        except Exception as e:  # a checkpoint that does not load is a failed round trip
            result = verdict(name, False, f"{type(e).__name__}: {e}")
        result.metrics["seconds"] = round(time.monotonic() - start, 3)
        results.append(result)
    return {"case_id": spec["case_id"], "results": [r.to_json() for r in results]}


def main(argv: list[str]) -> int:
    """By hand: check the case directories given, one JSON line each on stdout."""
    for d in argv:
        print(json.dumps(check_case(Path(d))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
