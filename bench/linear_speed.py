"""Quantized-linear speed on one GPU, against bf16 F.linear and torchao, in one run.

``python bench/linear_speed.py --out DIR`` times, for K=N=8192 and K=4096,N=14336 at
M in {1, 16, 4096}: bf16 F.linear, every aoq config (through aoq's dispatch, and each
candidate strategy forced), and torchao's same config where it serves it (the faster of
eager and torch.compile). Each side is timed eagerly and as CUDA-graph replays, with device
events, median of many repetitions, rotating over enough weight/input copies to overflow L2.
Ceilings measured in the same run: device-copy bandwidth and dense bf16/fp8/int8 GEMM rates.
Also: aoq's eager host overhead per quantized linear, and the activation-quantization kernels
at 8192x8192 bf16 against copy bandwidth. Every number is a Record (kind "bench") in
``DIR/<run_id>.jsonl``; a short table is printed last.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

import aoq
from aoq import dispatch
from aoq.testing.records import JsonlWriter, Record, new_run

SHAPES = ((8192, 8192), (4096, 14336))
MS = (1, 16, 4096)
L2_ROTATE_BYTES = 512 << 20  # rotate through >= 512 MiB of weights: well past any L2
CONFIGS: dict[str, Callable[[], aoq.AOQConfig]] = {
    "int8wo": aoq.Int8WeightOnlyConfig,
    "w8a8": aoq.Int8DynamicActivationInt8WeightConfig,
    "int4wo-g128": aoq.Int4WeightOnlyConfig,
    "w4a8-g32": aoq.Int8DynamicActivationInt4WeightConfig,
    "fp8wo": aoq.Float8WeightOnlyConfig,
    "fp8-row": aoq.Float8DynamicActivationFloat8WeightConfig,
    "fp8-tensor": lambda: aoq.Float8DynamicActivationFloat8WeightConfig(granularity="tensor"),
}


def torchao_config(cid: str) -> Any:
    """torchao 0.18's config for the same scheme, or raise (the reason is recorded)."""
    from torchao.quantization import (
        Float8DynamicActivationFloat8WeightConfig,
        Float8WeightOnlyConfig,
        Int4WeightOnlyConfig,
        Int8DynamicActivationInt8WeightConfig,
        Int8WeightOnlyConfig,
        PerRow,
        PerTensor,
    )

    return {
        "int8wo": lambda: Int8WeightOnlyConfig(),
        "w8a8": lambda: Int8DynamicActivationInt8WeightConfig(),
        # PLAIN int4 needs fbgemm-gpu-genai; tile_packed_to_4d is tinygemm (in torch itself)
        "int4wo-g128": lambda: Int4WeightOnlyConfig(
            group_size=128, int4_packing_format="tile_packed_to_4d"
        ),
        "fp8wo": lambda: Float8WeightOnlyConfig(),
        "fp8-row": lambda: Float8DynamicActivationFloat8WeightConfig(granularity=PerRow()),
        "fp8-tensor": lambda: Float8DynamicActivationFloat8WeightConfig(granularity=PerTensor()),
    }[cid]()


# --- timing -----------------------------------------------------------------------------------


def _events(fn: Callable[[], Any], reps: int) -> list[float]:
    """Per-rep device time (µs) of fn(), each bracketed by events."""
    out = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) * 1e3)
    return out


def time_calls(calls: list[Callable[[], Any]], graph: bool, reps: int = 30) -> dict[str, float]:
    """Median (p20, p80) µs of ONE call, rotating through ``calls`` (distinct weights and
    inputs) so no call finds its operands in L2. ``graph``: replay a CUDA graph of the whole
    rotation (no launch gaps) instead of launching eagerly."""
    for c in calls:  # warm-up: autotuning, compilation, lazy init
        c()
    torch.cuda.synchronize()
    if graph:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for c in calls:
                c()
        torch.cuda.current_stream().wait_stream(stream)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for c in calls:
                c()
        g.replay()

        def run() -> None:
            g.replay()
    else:

        def run() -> None:
            for c in calls:
                c()

    run()
    samples = sorted(t / len(calls) for t in _events(run, reps))
    q = statistics.quantiles(samples, n=10)
    return {"p20": q[1], "p50": statistics.median(samples), "p80": q[7], "reps": reps}


def copies_for(nbytes: int) -> int:
    return max(2, min(64, -(-L2_ROTATE_BYTES // max(nbytes, 1))))


# --- the runner -------------------------------------------------------------------------------


class Bench:
    def __init__(self, out: str) -> None:
        dev = torch.device("cuda")
        self.run = new_run(
            "bench", "cuda", dev, dispatch.platform_of(dev).arch, command=" ".join(sys.argv)
        )
        self.writer = JsonlWriter(self.run, out)
        self.rows: list[tuple[str, str]] = []
        self.ceil: dict[str, float] = {}
        self.ao_compile = False

    def record(self, case: str, status: str = "pass", **kw: Any) -> None:
        self.writer.write(Record(self.run.run_id, case, kw.pop("check", "latency"), status, **kw))

    def ceilings(self) -> None:
        n = 1 << 28  # 512 MiB of bf16
        a = torch.empty(n, dtype=torch.bfloat16, device="cuda").normal_()
        b = torch.empty_like(a)
        t = time_calls([lambda: b.copy_(a)], graph=False, reps=20)["p50"]
        self.ceil["copy_GBps"] = 2 * a.numel() * 2 / t / 1e3
        s = 8192
        x = torch.randn(s, s, dtype=torch.bfloat16, device="cuda")
        y = torch.randn(s, s, dtype=torch.bfloat16, device="cuda")
        t = time_calls([lambda: x @ y], graph=False, reps=10)["p50"]
        self.ceil["bf16_TFLOPs"] = 2 * s**3 / t / 1e6
        xf, yf = x.to(torch.float8_e4m3fn), y.to(torch.float8_e4m3fn)
        one = torch.ones((), device="cuda")
        t = time_calls(
            [
                lambda: torch._scaled_mm(
                    xf, yf.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16
                )
            ],
            graph=False,
            reps=10,
        )["p50"]
        self.ceil["fp8_TFLOPs"] = 2 * s**3 / t / 1e6
        xi, yi = x.to(torch.int8), y.to(torch.int8)
        t = time_calls([lambda: torch._int_mm(xi, yi.t())], graph=False, reps=10)["p50"]
        self.ceil["int8_TOPs"] = 2 * s**3 / t / 1e6
        for k, v in self.ceil.items():
            self.record(f"ceiling/{k}", check="ceiling", metrics={"value": v})
        self.rows.append(("ceilings", ", ".join(f"{k}={v:.0f}" for k, v in self.ceil.items())))

    def floor_us(self, cid: str, m: int, k: int, n: int, wbytes: float) -> float:
        """Roofline floor: max(bytes / copy bandwidth, flops / the format's measured peak)."""
        peak = {
            "w8a8": "int8_TOPs",
            "w4a8-g32": "int8_TOPs",
            "fp8-row": "fp8_TFLOPs",
            "fp8-tensor": "fp8_TFLOPs",
        }.get(cid, "bf16_TFLOPs")
        nbytes = wbytes + m * k * 2 + m * n * 2
        return max(nbytes / self.ceil["copy_GBps"] / 1e3, 2 * m * n * k / self.ceil[peak] / 1e6)

    def linear_rows(self, k: int, n: int, m: int, configs: list[str], torchao: bool) -> None:
        shape = f"M{m}-K{k}-N{n}"
        base = nn.Linear(k, n, bias=False, dtype=torch.bfloat16, device="cuda")
        copies = copies_for(k * n * 2)
        xs = [torch.randn(m, k, dtype=torch.bfloat16, device="cuda") for _ in range(copies)]
        ws = [base.weight.detach().clone() for _ in range(copies)]
        ref = {}
        for mode in ("eager", "graph"):
            ref[mode] = time_calls(
                [lambda x=x, w=w: F.linear(x, w) for x, w in zip(xs, ws, strict=True)],
                mode == "graph",
            )
            self.record(
                f"bf16/{shape}/{mode}",
                config="bf16",
                dtype="bfloat16",
                shape=shape,
                kernel="aten.linear",
                metrics=ref[mode],
            )
        floor_bf16 = self.floor_us("bf16", m, k, n, k * n * 2)
        self.rows.append(
            (
                f"bf16 {shape}",
                f"graph {ref['graph']['p50']:.1f}us eager {ref['eager']['p50']:.1f}us "
                f"roof {floor_bf16 / ref['graph']['p50']:.0%}",
            )
        )
        for cid in configs:
            try:
                self.config_rows(cid, base, xs, shape, m, k, n, ref, torchao)
            except Exception as e:  # noqa: BLE001 - one failing config must not end the run
                traceback.print_exc()
                self.record(
                    f"{cid}/bf16/cuda/{shape}",
                    "error",
                    config=cid,
                    shape=shape,
                    reason=repr(e)[:500],
                )
            torch.cuda.empty_cache()

    def config_rows(
        self,
        cid: str,
        base: nn.Linear,
        xs: list,
        shape: str,
        m: int,
        k: int,
        n: int,
        ref: dict,
        torchao: bool,
    ) -> None:
        q0 = aoq.quantize_(copy.deepcopy(base), CONFIGS[cid]())
        wbytes = sum(t.numel() * t.element_size() for t in q0.weight.tensors().values())
        copies = min(len(xs), copies_for(wbytes))
        mods = [q0] + [
            aoq.quantize_(copy.deepcopy(base), CONFIGS[cid]()) for _ in range(copies - 1)
        ]
        with aoq.trace_kernels() as tr:
            mods[0](xs[0])
        chosen = tr.records[0].kernel
        floor = self.floor_us(cid, m, k, n, wbytes)
        names = list(
            dispatch.candidates(mods[0].weight.scheme, dispatch.platform_of(xs[0].device), m)
        )
        for band in dispatch.BY_M.get((mods[0].weight.scheme, dispatch.Backend.CUDA), ()):
            names += [nm for nm in band[1] if nm not in names]
        res: dict[str, dict[str, float]] = {}
        for name in names:
            impl = dispatch._IMPLS[name]
            if impl.check(xs[0], mods[0].weight, None) is not None:
                continue
            if m == 4096 and name.endswith(".decode"):
                continue  # decode tiles at M=4096 only measure how slow the wrong choice is
            for mode in ("eager", "graph"):
                calls = [
                    lambda mm=mm, x=x, f=impl.fn: f(x, mm.weight, None)
                    for mm, x in zip(mods, xs, strict=False)
                ]
                t = time_calls(calls, mode == "graph")
                res[f"{name}/{mode}"] = t
                metrics = {
                    **t,
                    "speedup_vs_bf16": ref[mode]["p50"] / t["p50"],
                    "roofline": floor / t["p50"],
                    "floor_us": floor,
                    "chosen": name == chosen,
                }
                self.record(
                    f"{cid}/bf16/cuda/{shape}/{name}/{mode}",
                    config=cid,
                    dtype="bfloat16",
                    shape=shape,
                    kernel=name,
                    metrics=metrics,
                )
        ao = self.torchao_rows(cid, base, xs[:copies], shape, m) if torchao else None
        g = res.get(f"{chosen}/graph")
        if g is None:
            return
        speedup = ref["graph"]["p50"] / g["p50"]
        line = f"{chosen} graph {g['p50']:.1f}us x{speedup:.2f} bf16 roof {floor / g['p50']:.0%}"
        if ao:
            line += f" | torchao {ao:.1f}us -> x{ao / g['p50']:.2f}"
            self.record(
                f"{cid}/bf16/cuda/{shape}/vs_torchao",
                config=cid,
                shape=shape,
                kernel=chosen,
                check="vs_peer",
                metrics={"aoq_us": g["p50"], "torchao_us": ao, "ratio": ao / g["p50"]},
            )
        others = [
            f"{k.split('/')[0].split('.', 1)[1]}={v['p50']:.1f}"
            for k, v in res.items()
            if k.endswith("/graph") and not k.startswith(chosen)
        ]
        self.rows.append(
            (f"{cid} {shape}", line + (f" (alt {', '.join(others)})" if others else ""))
        )

    def torchao_rows(self, cid: str, base: nn.Linear, xs: list, shape: str, m: int) -> float | None:
        """Best graph-replay µs of torchao (eager or compiled), or None where it does not serve."""
        try:
            import torchao.quantization as tq

            mods = []
            for _ in xs:
                mod = copy.deepcopy(base)
                tq.quantize_(mod, torchao_config(cid))
                mods.append(mod)
        except Exception as e:  # noqa: BLE001
            self.record(
                f"torchao/{cid}/{shape}", "skip", config=cid, shape=shape, reason=repr(e)[:400]
            )
            return None
        best = None
        compiled = torch.compile(
            lambda mod, x: mod(x), dynamic=False
        )  # one graph, modules as inputs
        for variant in ("eager", "compile") if self.ao_compile else ("eager",):
            try:
                f = (lambda mod, x: mod(x)) if variant == "eager" else compiled
                for mode in ("eager", "graph"):
                    t = time_calls(
                        [lambda mm=mm, x=x, f=f: f(mm, x) for mm, x in zip(mods, xs, strict=False)],
                        mode == "graph",
                    )
                    self.record(
                        f"torchao/{cid}/{shape}/{variant}/{mode}",
                        config=cid,
                        shape=shape,
                        kernel=f"torchao.{variant}",
                        metrics=t,
                    )
                    if mode == "graph":
                        best = t["p50"] if best is None else min(best, t["p50"])
            except Exception as e:  # noqa: BLE001
                self.record(
                    f"torchao/{cid}/{shape}/{variant}",
                    "error",
                    config=cid,
                    shape=shape,
                    reason=repr(e)[:400],
                )
        return best

    def host_overhead(self) -> None:
        """Eager host µs per quantized linear: wall time of many back-to-back calls on a layer
        whose kernels take far less than the host needs to launch them."""
        for cid in CONFIGS:
            lin = aoq.quantize_(
                nn.Linear(1024, 1024, bias=False, dtype=torch.bfloat16, device="cuda"),
                CONFIGS[cid](),
            )
            x = torch.randn(1, 1024, dtype=torch.bfloat16, device="cuda")
            for _ in range(20):
                lin(x)
            torch.cuda.synchronize()
            n = 300
            t0 = time.perf_counter()
            for _ in range(n):
                lin(x)
            host = (time.perf_counter() - t0) / n * 1e6
            torch.cuda.synchronize()
            self.record(
                f"host_overhead/{cid}", check="host_overhead", config=cid, metrics={"us": host}
            )
            self.rows.append((f"host {cid}", f"{host:.1f}us per call"))
        w = torch.randn(1024, 1024, dtype=torch.bfloat16, device="cuda")
        t0 = time.perf_counter()
        for _ in range(300):
            F.linear(x, w)
        self.rows.append(
            ("host bf16 F.linear", f"{(time.perf_counter() - t0) / 300 * 1e6:.1f}us per call")
        )

    def act_quant(self) -> None:
        from aoq.kernels import act_quant

        x = [torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda") for _ in range(3)]
        cases = {
            "int8_per_token": (lambda t: act_quant.quantize_int8_act_triton(t, 0, None), 1),
            "fp8_per_row": (
                lambda t: act_quant.quantize_fp8_act_triton(t, True, torch.float8_e4m3fn),
                1,
            ),
            "fp8_per_tensor": (
                lambda t: act_quant.quantize_fp8_act_triton(t, False, torch.float8_e4m3fn),
                1,
            ),
        }
        for name, (fn, out_bytes) in cases.items():
            t = time_calls([lambda t=t, fn=fn: fn(t) for t in x], graph=True)
            nbytes = x[0].numel() * (2 + out_bytes)
            bw = nbytes / t["p50"] / 1e3
            frac = bw / self.ceil["copy_GBps"]
            self.record(
                f"act_quant/{name}/M8192-K8192",
                check="bandwidth",
                kernel=name,
                metrics={**t, "GBps": bw, "frac_of_copy": frac},
            )
            self.rows.append(
                (f"act_quant {name}", f"{t['p50']:.1f}us {bw:.0f} GB/s = {frac:.0%} of copy")
            )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="reports/runs")
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--no-torchao", action="store_true")
    ap.add_argument("--ms", default=",".join(map(str, MS)))
    ap.add_argument("--shapes", default=",".join(f"{k}x{n}" for k, n in SHAPES))
    ap.add_argument("--torchao-compile", action="store_true", help="also time torchao compiled")
    ap.add_argument("--skip-extras", action="store_true", help="no act-quant / host rows")
    args = ap.parse_args()
    b = Bench(args.out)
    b.ao_compile = args.torchao_compile
    b.ceilings()
    if not args.skip_extras:
        b.act_quant()
        b.host_overhead()
    for k, n in (tuple(map(int, kn.split("x"))) for kn in args.shapes.split(",")):
        for m in map(int, args.ms.split(",")):
            b.linear_rows(k, n, m, args.configs.split(","), not args.no_torchao)
            print(f"done K{k} N{n} M{m}", flush=True)
    b.writer.close()
    for name, text in b.rows:
        print(f"{name:<28} {text}")
    print(f"records: {b.writer.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
