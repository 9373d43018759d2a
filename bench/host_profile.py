"""Where aoq's eager host time per quantized linear goes, layer by layer.

    python -m bench.host_profile [--configs int4wo-g128,w8a8] [--k 1024] [--m 1] [--profile]

For each config: Linear(K, K) at M=1 (``--m`` rows) in bf16 on the GPU (kernels shorter than
their launches, so the host never waits), timed as batches of back-to-back calls with the
device synchronised outside the batches; min and median µs per call over the batches.
Layers, outermost first:

    F.linear     the user's call: a replay of its recorded plan (aoq/plans.py) where it has one
    ... no plan  the same with plans off: subclass __torch_function__, dispatch, the kernel
                 entry, its launchers and launches
    .linear      QuantizedWeight.linear (shape checks, dispatch.run_linear), no plan
    select       dispatch.select alone (platform, candidates, each kernel's check)
    kernel fn    the selected kernel entry alone (launchers and their launches)

and two references: bf16 F.linear, and one launch of an empty Triton kernel (the floor of any
Triton path). ``--profile`` adds cProfile's top functions for the F.linear loop.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from torch import nn

import aoq
from aoq import dispatch, plans
from aoq.testing.cases import inference_configs
from bench.timer import EventlessSync, host_time
from bench.timing import warm_gpu

BATCH = 200
REPS = 15


@triton.jit
def _empty_kernel(a, b, c, d, n, BLOCK: tl.constexpr):
    pass


def per_call_us(fn: Callable[[], Any], batch: int = BATCH, reps: int = REPS) -> tuple[float, float]:
    """(min, median) host µs per call over ``reps`` batches of ``batch`` calls: the bench's
    own host-overhead timing (bench/timing.py), the device synchronised outside the batches."""
    warm_gpu()
    samples = host_time(fn, batch, reps, EventlessSync()).samples_us
    return min(samples), statistics.median(samples)


def _layer(config: Any, k: int) -> Any:
    layer = nn.Linear(k, k, bias=False, device="cuda", dtype=torch.bfloat16)
    aoq.quantize_(layer, config)
    return layer.weight


def profile_config(config: Any, k: int, m: int = 1) -> tuple[dict[str, tuple[float, float]], str]:
    """Per layer (min, median) µs, and what aoq/plans.py holds for the call."""
    w = _layer(config, k)
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    impl, *_ = dispatch.select(w.scheme, x, w, None)
    with torch.no_grad():
        out = {"F.linear": per_call_us(lambda: F.linear(x, w))}
        state = "; ".join(plans.explain(w).values()) or "no plan"
        enabled, plans.ENABLED = plans.ENABLED, False
        try:
            plans.forget(w)
            out["F.linear, no plan"] = per_call_us(lambda: F.linear(x, w))
            out[".linear, no plan"] = per_call_us(lambda: w.linear(x, None))
        finally:
            plans.ENABLED = enabled
        out.update(_replay_layers(w, x))
        out["select"] = per_call_us(lambda: dispatch.select(w.scheme, x, w, None))
        out[f"kernel fn ({impl.name})"] = per_call_us(lambda: impl.fn(x, w, None))
    return out, state


def _replay_layers(w: Any, x: torch.Tensor) -> dict[str, tuple[float, float]]:
    """The planned call's inner layers: run_linear, the plan's lookup, its replay, and the
    replay's launches alone (into a result allocated once)."""
    generation = len(dispatch._IMPLS)
    F.linear(x, w)  # plans were forgotten above: seen once, then recorded
    F.linear(x, w)
    plan = plans.lookup(w, x, None, generation)
    if plan is None:
        return {}
    y = plan(x)
    stream = plans._launch.driver.active.get_current_stream(plan.current)
    base = plans._shared_workspace(plan, stream).data_ptr() if plan.workspace else 0
    out = 0 if plan.blas is not None else y.data_ptr()  # a BLAS step's plan: launches alone
    return {
        "run_linear": per_call_us(lambda: dispatch.run_linear(w, x, None)),
        "plans.lookup": per_call_us(lambda: plans.lookup(w, x, None, generation)),
        "plan(x)": per_call_us(lambda: plan(x)),
        "plan's launches": per_call_us(lambda: plan._launch(x, out, base, stream)),
    }


def references(k: int, m: int = 1) -> dict[str, tuple[float, float]]:
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(k, k, device="cuda", dtype=torch.bfloat16)
    y = torch.empty(m, k, device="cuda", dtype=torch.bfloat16)
    return {
        "bf16 F.linear": per_call_us(lambda: F.linear(x, w)),
        "torch.empty": per_call_us(lambda: torch.empty((1, k), device="cuda")),
        "torch.empty_strided": per_call_us(
            lambda: torch.empty_strided((1, k), (k, 1), dtype=torch.bfloat16, device="cuda")
        ),
        "empty triton launch": per_call_us(lambda: _empty_kernel[(8,)](x, w, y, x, k, BLOCK=64)),
    }


def cprofile(config: Any, k: int, m: int = 1, calls: int = 2000) -> str:
    w = _layer(config, k)
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        F.linear(x, w)
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(calls):
            F.linear(x, w)
        prof.disable()
    torch.cuda.synchronize()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(25)
    return out.getvalue()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", default="", help="comma-separated config ids (default: all)")
    ap.add_argument("--k", type=int, default=1024)
    ap.add_argument("--m", type=int, default=1, help="rows of x")
    ap.add_argument("--profile", action="store_true", help="cProfile the F.linear loop")
    args = ap.parse_args(argv)
    wanted = [c for c in args.configs.split(",") if c]
    configs = [c for c in inference_configs() if not wanted or c.id in wanted]
    for name, (lo, mid) in references(args.k, args.m).items():
        print(f"{name:<40} min {lo:7.1f} us  median {mid:7.1f} us")
    for config in configs:
        layers, state = profile_config(config, args.k, args.m)
        print(f"\n{config.id} ({state})")
        for name, (lo, mid) in layers.items():
            print(f"  {name:<38} min {lo:7.1f} us  median {mid:7.1f} us")
        if args.profile:
            print(cprofile(config, args.k, args.m))


if __name__ == "__main__":
    main()
