"""Every kernel of a config's M bands, forced, at the M between decode and prefill, on one GPU.

``python -m bench.band_sweep [--configs int4wo-g128,int8wo] [--ms 16,32,64,128,256]
[--shapes 8192x8192,4096x14336] [--budget-s 400] [--out FILE.json]`` quantizes 8 copies of a
bf16 weight per config and shape, then per M times as CUDA-graph replays over those copies
(past L2): bf16 F.linear, the shipped dispatch (F.linear on the quantized weight: the kernel
the table picks for this GPU, dtype and M) and each kernel named in any of the config's bands
for this GPU (``dispatch.candidates`` at every band edge), called directly whether or not its
band holds M. A kernel whose check refuses the call is listed with its reason. Prints µs and
the speedup over bf16 per kernel, the shipped pick and the fastest (``--unsplit``: each
prefill kernel also without kernels/mid_rows.py's K split); the data for placing the
band edges (bench/NOTES.md, session 44: the prefill kernel read 0.16-0.89x bf16 at 17-64 rows
on an H200, where the decode kernel now serves). A tuning aid, not the benchmark of record.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from bench.decode_rows import parse_shapes
from bench.decode_sweep import graph_us

DEFAULT_CONFIGS = "int4wo-g128,int8wo,fp8wo,w4a8-g32,w8a8,fp8-row"


def band_kernels(scheme: Any, platform: Any, dtype: torch.dtype) -> list[str]:
    """Every kernel named in ``scheme``'s bands on ``platform`` for ``dtype`` x, in band order
    (each band's edge asked of dispatch.candidates, so the arch, dtype and variant rows apply)."""
    from aoq import dispatch

    edges = {1, *dispatch.band_edges(scheme)}
    names: dict[str, None] = {}
    for m in sorted(edges | {e + 1 for e in edges}):
        names.update(dict.fromkeys(dispatch.candidates(scheme, platform, m, dtype)))
    return list(names)


def _quantized(config: Any, wb: list[torch.Tensor]) -> list[Any]:
    import aoq

    out = []
    for w in wb:
        layer = nn.Linear(w.shape[1], w.shape[0], bias=False, device=w.device, dtype=w.dtype)
        with torch.no_grad():
            layer.weight.copy_(w)
        aoq.quantize_(layer, config)
        out.append(layer.weight)
    return out


def sweep_config(
    config: Any, k: int, n: int, ms: list[int], deadline: float, unsplit: bool = False
) -> list[dict]:
    """One config at one K x N: a row per M (µs per kernel, the shipped pick; ``unsplit``:
    each prefill kernel also without kernels/mid_rows.py's split, as ``<name>:unsplit``)."""
    from aoq.kernels import mid_rows

    from aoq import dispatch

    wb = [torch.randn(n, k, dtype=torch.bfloat16, device="cuda") * k**-0.5 for _ in range(8)]
    ws = _quantized(config, wb)
    platform = dispatch.platform_of(wb[0].device)
    names = band_kernels(ws[0].scheme, platform, torch.bfloat16)
    rows = []
    for m in ms:
        if time.monotonic() > deadline:
            print("budget spent: stopping", flush=True)
            break
        xs = [torch.randn(m, k, dtype=torch.bfloat16, device="cuda") for _ in range(8)]
        row: dict[str, Any] = {"config": config.id, "k": k, "n": n, "m": m, "us": {}, "refused": {}}
        row["bf16_us"] = graph_us(
            [lambda x=x, w=w: F.linear(x, w) for x, w in zip(xs, wb, strict=True)]
        )
        row["shipped_us"] = graph_us(
            [lambda x=x, w=w: F.linear(x, w) for x, w in zip(xs, ws, strict=True)]
        )
        row["shipped"] = dispatch.select(ws[0].scheme, xs[0], ws[0], None)[0].name
        for name in names:
            impl = dispatch._IMPLS[name]
            why = impl.check(xs[0], ws[0], None)
            if why:
                row["refused"][name] = why
                continue
            calls = [lambda x=x, w=w, f=impl.fn: f(x, w, None) for x, w in zip(xs, ws, strict=True)]
            row["us"][name] = graph_us(calls)
            if unsplit and name.endswith(".prefill") and 16 < m <= mid_rows.MAX_M:
                mid_rows.ENABLED = False  # the autotuned tiles over all of K, as before
                try:
                    row["us"][f"{name}:unsplit"] = graph_us(calls)
                finally:
                    mid_rows.ENABLED = True
        rows.append(row)
        print(_line(row), flush=True)
    return rows


def _line(row: dict) -> str:
    bf16 = row["bf16_us"]
    head = f"K{row['k']} N{row['n']} M{row['m']:<4} {row['config']:<12} bf16 {bf16:7.1f}"
    ship = row["shipped"].split(".")[-1]
    parts = [f"shipped {ship} {row['shipped_us']:7.1f} x{bf16 / row['shipped_us']:.2f}"]
    best = min(row["us"], key=row["us"].get) if row["us"] else None
    for name, us in row["us"].items():
        mark = " (fastest)" if name == best else ""
        parts.append(f"{name.split('.')[-1]} {us:7.1f} x{bf16 / us:.2f}{mark}")
    parts += [f"{name.split('.')[-1]} refused" for name in row["refused"]]
    return head + " | " + " | ".join(parts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", default=DEFAULT_CONFIGS)
    ap.add_argument("--ms", default="16,32,64,128,256,512")
    ap.add_argument("--shapes", default="8192x8192,4096x14336")
    ap.add_argument("--budget-s", type=float, default=400.0)
    ap.add_argument("--out", default=None)
    ap.add_argument(
        "--unsplit", action="store_true", help="also time prefill kernels without K split"
    )
    args = ap.parse_args()
    from aoq.testing.cases import inference_configs

    configs = {c.id: c for c in inference_configs()}
    wanted = args.configs.split(",")
    if unknown := [c for c in wanted if c not in configs]:
        raise SystemExit(f"unknown configs {unknown}; known: {sorted(configs)}")
    deadline = time.monotonic() + args.budget_s
    ms = [int(v) for v in args.ms.split(",")]
    rows: list[dict] = []
    for k, n in parse_shapes(args.shapes):
        for cid in wanted:
            rows += sweep_config(configs[cid], k, n, ms, deadline, args.unsplit)
            torch.cuda.empty_cache()
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
