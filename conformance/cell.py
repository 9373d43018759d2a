"""The in-process checks of one shape case, run inside a worker process.

For ``int4wo-g128/bf16/cpu/M7-K256-N200``: build ``nn.Linear(256, 200, bias=True)`` in bf16 on
the backend's device, quantize it, run it once under ``aoq.trace_kernels()`` and check

- pack: its quantized tensors equal, bit for bit, those the aoq.formats reference makes from
  the same float weights on the CPU (with the interpreter switched off);
- output: within the profile tolerance of a float64 evaluation of the same quantized math
  (max(rel_factor x plain torch's error in this dtype, rel_min)); a strided input gives the
  same bits as its contiguous copy;
- sqnr: SQNR vs the float layer above the profile floor;
- kernel: the first kernel the dispatch table lists for this platform, M and dtype ran, with
  no fallback (its metrics name the Triton config each autotuned kernel launched with);
- compile: torch.compile(fullgraph=True) output within the profile tolerance of eager.

It then saves the checkpoint (both routes) for the fresh-process checks (``fresh.py``).
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn

import aoq
from aoq import dispatch
from aoq.backends import platform_of
from aoq.tensors import AoqTensor
from aoq.testing.matrix import Case, Shape
from aoq.testing.metrics import bit_equal, max_rel_error, sqnr
from aoq.testing.oracle import float64_linear, float_torch_error
from conformance.checks import (
    CheckResult,
    device_for,
    error,
    launches,
    skipped,
    state_digests,
    verdict,
    weight_and_bias,
)


def seed_of(case_id: str) -> int:
    """A fixed seed per case: reruns and resumed runs see the same weights and inputs."""
    return zlib.crc32(case_id.encode())


def make_input(shape: Shape, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    if shape.strided:
        x = torch.randn(shape.k, shape.m, dtype=dtype, device=device).t()
        assert not x.is_contiguous()
        return x.reshape(*shape.lead, shape.k)
    return torch.randn(*shape.lead, shape.k, dtype=dtype, device=device)


@contextlib.contextmanager
def reference_platform() -> Iterator[None]:
    """Inside, CPU tensors map to the cpu backend even in an interpreter worker, so the
    reference quantization runs the aoq.formats math."""
    old = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "0"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = old


def _guard(check: str, fn: Callable[[], CheckResult]) -> CheckResult:
    try:
        return fn()
    except Exception as e:  # a check that raises is red (error) and the others still run
        return error(check, e)


def _parts(module: nn.Module) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    for name, t in module.state_dict().items():
        if isinstance(t, AoqTensor):
            out.update({f"{name}:{f}": v for f, v in t.canonical_tensors().items()})
        else:
            out[name] = t
    return out


def check_pack(q: nn.Module, float_lin: nn.Module, case: Case) -> CheckResult:
    with reference_platform():
        ref = aoq.quantize_(copy.deepcopy(float_lin).cpu(), case.config)
    mine, theirs = _parts(q), _parts(ref)
    if mine.keys() != theirs.keys():
        return verdict("pack", False, f"fields {sorted(mine)} != reference {sorted(theirs)}")
    bad = [k for k in mine if not bit_equal(mine[k], theirs[k])]
    nbytes = sum(t.numel() * t.element_size() for t in mine.values())
    return verdict(
        "pack", not bad, f"not bit-exact vs the reference: {bad}", fields=len(mine), bytes=nbytes
    )


def check_kernel(
    q: nn.Module, x: torch.Tensor, trace: dispatch.Trace, configs: dict[str, str]
) -> CheckResult:
    if not trace.records:
        return verdict("kernel", False, "no quantized matmul was recorded")
    rec = trace.records[0]
    weight = weight_and_bias(q)[0]
    variant = getattr(weight, "dispatch_variant", None)
    names = dispatch.candidates(
        weight.scheme, platform_of(x.device), rec.shape[0], x.dtype, variant
    )
    expected = names[0] if names else None
    why = rec.reason or f"{rec.kernel} ran, {expected} expected"
    if expected is None:
        why = f"no kernel listed for {weight.scheme.value} on {platform_of(x.device)}: {why}"
    ok = rec.kernel == expected and not rec.fallback
    result = verdict("kernel", ok, f"fallback to {rec.kernel}: {why}", expected=expected)
    result.kernel = rec.kernel
    result.metrics["fallback"] = rec.fallback
    if configs:
        result.metrics["configs"] = configs
    return result


def check_output(
    q: nn.Module, x: torch.Tensor, y: torch.Tensor, shape: Shape, tol: dict[str, Any]
) -> CheckResult:
    want = (*x.shape[:-1], shape.n)
    if tuple(y.shape) != want or y.dtype != x.dtype:
        got = f"{tuple(y.shape)} {y.dtype}"
        return verdict("output", False, f"output is {got}, expected {want} {x.dtype}")
    if shape.m == 0:
        return verdict("output", True, "", numel=0)
    if shape.strided and not bit_equal(q(x.contiguous()), y):
        return verdict("output", False, "a non-contiguous input gives other bits than its copy")
    w, b = weight_and_bias(q)
    err = max_rel_error(float64_linear(x, w, b), y)
    torch_err = float_torch_error(x, w, b)
    budget = max(tol["rel_factor"] * torch_err, tol["rel_min"])
    return verdict(
        "output",
        err <= budget,
        f"relative error {err:.3g} > budget {budget:.3g} vs the float64 oracle",
        rel_err=err,
        budget=budget,
        torch_err=torch_err,
    )


def check_sqnr(y_float: torch.Tensor, y: torch.Tensor, tol: dict[str, Any]) -> CheckResult:
    if y.numel() == 0:
        return skipped("sqnr", "M=0: empty output")
    db = sqnr(y_float, y)
    return verdict("sqnr", db >= tol["floor"], f"{db:.1f} dB < floor {tol['floor']} dB", db=db)


def check_compile(
    q: nn.Module, x: torch.Tensor, y: torch.Tensor, tol: dict[str, Any]
) -> CheckResult:
    torch._dynamo.reset()  # a fresh cache per case: no recompile limit, no stale guards
    start = time.monotonic()
    with torch.no_grad():
        yc = torch.compile(q, fullgraph=True)(x)
    seconds = round(time.monotonic() - start, 2)
    if yc.shape != y.shape or yc.dtype != y.dtype:
        return verdict("compile", False, f"compiled output {tuple(yc.shape)} {yc.dtype}")
    err = max_rel_error(y, yc) if y.numel() else 0.0
    return verdict(
        "compile",
        err <= tol["rel_max"],
        f"compiled vs eager relative error {err:.3g} > {tol['rel_max']}",
        rel_err=err,
        seconds=seconds,
    )


def run_shape_case(
    case: Case, tol: dict[str, dict[str, Any]], skip: dict[str, str], out_dir: Path
) -> tuple[list[CheckResult], dict[str, Any] | None]:
    """The in-process checks, and the spec of what the fresh process must check (None when
    the case stopped early)."""
    shape = case.shape
    assert shape is not None
    device, dtype = device_for(case.backend), case.torch_dtype
    torch.manual_seed(seed_of(case.id))
    float_lin = nn.Linear(shape.k, shape.n, bias=True, device=device, dtype=dtype)
    x = make_input(shape, dtype, device)
    with torch.no_grad():
        y_float = float_lin(x)
    try:
        q = aoq.quantize_(copy.deepcopy(float_lin), case.config)
    except ValueError as e:  # the config cannot take this shape: a skip that says why
        return [skipped("cell", f"{case.config.id} cannot take {shape.name}: {e}")], None
    with torch.no_grad(), aoq.trace_kernels() as trace, launches() as configs:
        y = q(x)
    runs: dict[str, Callable[[], CheckResult]] = {
        "pack": lambda: check_pack(q, float_lin, case),
        "kernel": lambda: check_kernel(q, x, trace, configs),
        "output": lambda: check_output(q, x, y, shape, tol["output"]),
        "sqnr": lambda: check_sqnr(y_float, y, tol["sqnr"]),
        "compile": lambda: check_compile(q, x, y, tol["compile"]),
    }
    results = [skipped(c, skip[c]) if c in skip else _guard(c, fn) for c, fn in runs.items()]
    ran = {"kernel": trace.records[0].kernel if trace.records else None, "configs": configs}
    spec = save_checkpoint(case, q, x, y, out_dir, tol["output"], ran)
    return results, spec


def save_checkpoint(
    case: Case,
    q: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    out_dir: Path,
    output_tol: dict[str, Any],
    ran: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Both checkpoint routes plus input, output and digests, for ``conformance.fresh``;
    ``ran``: the kernel and Triton configs that computed ``y`` (for a mismatch's reason)."""
    assert case.shape is not None
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.save(q.state_dict(), out_dir / "sd.pt")
    aoq.save_pretrained(q, out_dir / "pretrained")
    torch.save({"x": x.detach().contiguous(), "y": y.detach()}, out_dir / "io.pt")
    spec = {
        "case_id": case.id,
        "k": case.shape.k,
        "n": case.shape.n,
        "dtype": case.dtype,
        "backend": case.backend,
        "digests": state_digests(q.state_dict()),
        "output_tol": output_tol,
        "ran": ran,
        "threads": torch.get_num_threads(),
        "inject": case.inject,
    }
    (out_dir / "spec.json").write_text(json.dumps(spec))
    return spec
