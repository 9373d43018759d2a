"""Why eager cells at K = N = 4096 read 24-107 µs a call late in run 06528f, where their
graph replays read 7-17 (bench/NOTES.md session 47).

``python -m bench.eager_probe [--m 16] [--k 4096] [--n 4096] [--config int8wo]
[--collector-on]``: one process times bf16 ``F.linear``'s eager pass (bench.timing, the
bench's own rotation of copies) and its host µs a call, in stages: fresh; after an attempt to
capture torchao's calls of the same config as a CUDA graph, then after their eager pass (what
bench/test_linear runs before aoq's cell); after 0.5 s of matmuls; after ``gc.collect()``;
after ``gc.freeze()``. Each stage prints p50 / min µs and the collector's counts, so a slow
stage names what it follows. The bench samples with Python's garbage collector off
(``timing.collector_off``, since session 47); ``--collector-on`` leaves it on, as before.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import statistics
import time

import torch

from bench import baselines as bl
from bench import timing
from bench.timing import NotCapturable, Rotation, cuda_graph, device_time, warm_gpu


def _host_us(rot: Rotation, reps: int = 20) -> float:
    """Median host µs a call over ``reps`` passes (the GPU drained before each pass)."""
    out = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        rot.all()
        out.append((time.perf_counter() - t0) * 1e6 / len(rot))
    torch.cuda.synchronize()
    return statistics.median(out)


def _stage(name: str, rot: Rotation) -> None:
    t = device_time(rot, graph=False, reps=30, cap_s=1.0)
    s = sorted(t.samples_us)
    print(
        f"{name:<34} eager p50 {statistics.median(s):7.1f} min {s[0]:7.1f} µs | "
        f"host {_host_us(rot):6.1f} µs a call | gc counts {gc.get_count()} "
        f"tracked {len(gc.get_objects())}",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=int, default=16)
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--copies", type=int, default=15)
    ap.add_argument("--config", default="int8wo")
    ap.add_argument("--collector-on", action="store_true", help="sample with gc enabled")
    a = ap.parse_args()
    if a.collector_on:
        timing.collector_off = contextlib.nullcontext  # type: ignore[assignment]  # read per call
    dev = torch.device("cuda")
    torch.manual_seed(0)
    ws = [torch.randn(a.n, a.k, device=dev, dtype=torch.bfloat16) for _ in range(a.copies)]
    xs = [torch.randn(a.m, a.k, device=dev, dtype=torch.bfloat16) for _ in range(a.copies)]
    dense = bl.linear_rotation(ws, xs)
    warm_gpu(0.5)
    print(torch.cuda.get_device_name(), f"M {a.m} K {a.k} N {a.n}, {a.copies} copies", flush=True)
    _stage("bf16, fresh process", dense)
    _stage("bf16 again", dense)
    try:
        peer = bl.linear_rotation([bl.torchao_weight(w, a.config) for w in ws], xs)
        try:  # what the bench does first: a graph, refused where a call synchronizes
            cuda_graph(peer)()
            print(f"torchao {a.config}: captured")
        except NotCapturable as e:
            print(f"torchao {a.config}: {e}")
        _stage(f"bf16 after torchao {a.config}'s capture", dense)
        _stage(f"torchao {a.config} eager", peer)
        _stage(f"bf16 after torchao {a.config}", dense)
        warm_gpu(0.5)
        _stage("bf16 after 0.5 s of matmuls", dense)
    except Exception as e:  # noqa: BLE001 - a probe reports and goes on
        print(f"torchao {a.config}: {type(e).__name__}: {e}")
    gc.collect()
    _stage("bf16 after gc.collect()", dense)
    gc.freeze()
    _stage("bf16 after gc.freeze()", dense)


if __name__ == "__main__":
    main()
