"""Sweep the decode kernels' tile and split-K on one GPU (the data behind configs.decode_tile).

``python bench/decode_sweep.py [--quick]`` times, for M in {1, 16} and K x N in {8192 x 8192,
4096 x 14336}, the weight-only decode kernel (int8, int4-g128, fp8) and the W4A8 decode path
(activation quantization + int_act_mm) at several tiles and splits, as CUDA-graph replays over
enough weight copies to overflow L2, against bf16 F.linear. Prints per case the rule's choice
and the fastest variants (µs, speedup vs bf16, fraction of the weight-bytes floor at the
measured copy bandwidth). A tuning aid, not the benchmark of record (that is ``make bench``).
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from aoq.formats import affine, float8
from aoq.formats.packing import pack_uint4


def capture(calls: list[Callable[[], Any]], warm_s: float = 0.0) -> torch.cuda.CUDAGraph:
    """``calls`` run once eagerly and once on a side stream, then captured as one CUDA graph,
    replayed for ``warm_s`` seconds (at least once)."""
    for c in calls:
        c()
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for c in calls:
            c()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for c in calls:
            c()
    start = time.perf_counter()
    while True:
        g.replay()
        torch.cuda.synchronize()
        if time.perf_counter() - start >= warm_s:
            return g


def graph_us(calls: list[Callable[[], Any]], reps: int = 20, warm_s: float = 0.3) -> float:
    """Median µs a call over ``reps`` replays of ``calls`` captured as one CUDA graph, after
    ``warm_s`` seconds of replays, the replays queued back to back between event pairs and
    one synchronization at the end, as the bench's EventClock. Until session 43 each replay
    was synchronized on its own, which read graphs of PDL launches up to ~1 µs a call slower
    than their kernels ran (bench/NOTES.md, session 43)."""
    g = capture(calls, warm_s)
    pairs = [
        (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        for _ in range(reps)
    ]
    for a, b in pairs:
        a.record()
        g.replay()
        b.record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) * 1e3 / len(calls) for a, b in pairs)


def copy_gbps() -> float:
    a = torch.empty(1 << 28, dtype=torch.bfloat16, device="cuda")
    b = torch.empty_like(a)
    return 2 * a.numel() * 2 / graph_us([lambda: b.copy_(a)]) / 1e3


def weights(fmt: str, n: int, k: int, copies: int) -> list[tuple]:
    out = []
    for _ in range(copies):
        w = torch.randn(n, k, device="cuda")
        if fmt == "int8":
            q, s = affine.quantize_int8_symmetric(w, None)
            out.append((q, s, None))
        elif fmt == "int4":
            q, s, z = affine.quantize_uint4_asymmetric(w, 128)
            out.append((pack_uint4(q), s, z))
        elif fmt == "fp8":
            q, s = float8.quantize_fp8(w, float8.Granularity.ROW)
            out.append((q, s.reshape(-1), None))
        else:  # w4a8
            q, s = affine.quantize_int4_symmetric(w, 32)
            out.append((pack_uint4(q + 8), s, None))
    return out


def variants(m: int, quick: bool, fmt: str = "", mma: bool = False) -> list[dict]:
    """Tiles x splits to time (each pair compiles once; shapes reuse the binaries). Integer
    weights at M=1 run the word GEMV (kernels/gemv.py): its tile is swept instead."""
    if mma and fmt in ("int4", "int8", "w4a8"):
        tiles = [
            (bn, st, w, s)
            for bn, st in ((64, 128), (64, 256), (128, 128), (32, 128))
            for w, s in ((4, 3), (4, 4), (2, 3))
        ]
        if quick:
            tiles = tiles[:3]
        grid = [{"mma": t, "split": s} for t, s in itertools.product(tiles, (1, 2, 4, 8))]
        return grid + [{"tile": None, "split": None}]
    if m == 1 and fmt in ("int4", "int8"):
        words = [(bn, w, nw) for bn in (64, 128, 256) for w in (4, 8, 16) for nw in (4,)]
        words += [(128, 16, 8), (256, 16, 8)]
        grid = [{"words": t, "split": s} for t, s in itertools.product(words, (4, 8, 16))]
        return grid + [{"tile": None, "split": None}]
    if m == 1:
        tiles = [(16, 256, 4), (32, 128, 4), (32, 256, 4), (64, 128, 4), (8, 256, 4), (32, 128, 8)]
    else:
        tiles = [(32, 128, 4), (64, 128, 4), (64, 64, 4), (128, 64, 4)]
    splits = (2, 4, 8, 16)
    if quick:
        tiles, splits = tiles[:2], (4, 8)
    grid = [{"tile": t, "split": s} for t, s in itertools.product(tiles, splits)]
    return grid + [{"tile": None, "split": None}]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--formats", default="int4,int8,fp8,w4a8")
    ap.add_argument("--ms", default="1,16")
    ap.add_argument("--mma", action="store_true", help="sweep decode_mma's tiles (int4, int8)")
    args = ap.parse_args()
    from aoq.kernels import act_quant, configs, decode_mma, gemv, int_act_mm, weight_only
    from aoq.kernels._common import WeightFormat

    bw = copy_gbps()
    print(f"copy bandwidth {bw:.0f} GB/s", flush=True)
    real_tile = configs.decode_tile
    real_words = dict(gemv.GEMV_TILE)
    for (k, n), m, fmt in itertools.product(
        ((8192, 8192), (4096, 14336)),
        [int(v) for v in args.ms.split(",")],
        args.formats.split(","),
    ):
        copies = 8
        ws = weights(fmt, n, k, copies)
        xs = [torch.randn(m, k, dtype=torch.bfloat16, device="cuda") for _ in range(copies)]
        wb = [torch.randn(n, k, dtype=torch.bfloat16, device="cuda") for _ in range(copies)]
        bf16 = graph_us([lambda x=x, w=w: F.linear(x, w) for x, w in zip(xs, wb, strict=True)])
        del wb
        nbytes = sum(t.numel() * t.element_size() for t in ws[0] if t is not None)
        floor = nbytes / bw / 1e3
        res = []
        for v in variants(m, args.quick, fmt, args.mma):
            gemv.GEMV_TILE.update(real_words)
            if "words" in v:
                bn, words, nw = v["words"]
                gemv.GEMV_TILE.update(BLOCK_N=bn, WORDS=words, num_warps=nw)
            elif v.get("tile") is not None:
                bn, bk, w = v["tile"]

                def tile(backend, mm, int4, group_size, bn=bn, bk=bk, w=w):
                    cfg = real_tile(backend, mm, int4, group_size)
                    cap = group_size if group_size else 1 << 30
                    cfg.update(BLOCK_N=bn, BLOCK_K=max(16, min(bk, cap)), num_warps=w)
                    return cfg

                weight_only.decode_tile = tile
                int_act_mm.decode_tile = tile
            else:
                weight_only.decode_tile = real_tile
                int_act_mm.decode_tile = real_tile
            sp = v["split"]
            try:
                if "mma" in v:
                    bn, step, nw, st = v["mma"]
                    tile = {"BLOCK_N": bn, "STEP_K": step, "num_warps": nw, "num_stages": st}
                    wf = {"int4": WeightFormat.UINT4, "int8": WeightFormat.INT8}
                    wf = wf.get(fmt, WeightFormat.INT4_SYM)

                    def mcall(x, t, sp=sp, tile=tile, wf=wf):
                        y = torch.empty(x.shape[0], t[0].shape[0], dtype=x.dtype, device=x.device)
                        g = t[1].shape[-1] if t[1].dim() == 2 else 1
                        xsc = None
                        if wf is WeightFormat.INT4_SYM:
                            x, xsc, _ = act_quant.quantize_int8_act_triton(x, 0, None)
                        decode_mma.decode_mma(x, t[0], t[1], t[2], None, y, g, wf, sp,
                                              x_scale=xsc, tile=tile)  # fmt: skip
                        return y

                    if wf is WeightFormat.INT4_SYM:
                        xq0, xs0, _ = act_quant.quantize_int8_act_triton(xs[0], 0, None)
                        ref = int_act_mm.int_act_mm_triton(
                            xq0, xs0, None, ws[0][0], ws[0][1], None, None, xs[0].dtype, 0
                        ).float()
                    else:
                        ref = weight_only.weight_only_mm_triton(xs[0], *ws[0], None, 0).float()
                    err = (mcall(xs[0], ws[0]).float() - ref).abs().max() / ref.abs().max()
                    if not err < 1e-2:
                        raise AssertionError(f"decode_mma differs from the decode kernel: {err}")
                    calls = [lambda x=x, t=t: mcall(x, t) for x, t in zip(xs, ws, strict=True)]
                elif fmt == "w4a8":

                    def call(x, q, s, sp=sp):
                        xq, xsc, _ = act_quant.quantize_int8_act_triton(x, 0, None)
                        return int_act_mm.int_act_mm_triton(
                            xq, xsc, None, q, s, None, None, x.dtype, 0, split=sp
                        )

                    pairs = zip(xs, ws, strict=True)
                    calls = [lambda x=x, t=t: call(x, t[0], t[1]) for x, t in pairs]
                else:
                    calls = [
                        lambda x=x, t=t, sp=sp: weight_only.weight_only_mm_triton(
                            x, t[0], t[1], t[2], None, 0, split=sp
                        )
                        for x, t in zip(xs, ws, strict=True)
                    ]
                t = graph_us(calls)
                res.append((t, v))
            except Exception as e:  # noqa: BLE001 - a variant that fails to compile is skipped
                print(f"  {fmt} M{m} {v}: {type(e).__name__}: {str(e)[:120]}")
        weight_only.decode_tile = real_tile
        int_act_mm.decode_tile = real_tile
        res.sort(key=lambda r: r[0])
        gemv.GEMV_TILE.update(real_words)
        rule = next((t for t, v in res if v.get("tile", 0) is None), float("nan"))
        head = f"{fmt:5} M{m:<3} K{k} N{n}: bf16 {bf16:6.1f}us floor {floor:5.1f}us"
        print(f"{head} | rule {rule:6.1f}us x{bf16 / rule:.2f} roof {floor / rule:.0%}")
        for t, v in res[: 8 if args.mma else 4]:
            print(f"      {t:6.1f}us x{bf16 / t:.2f} roof {floor / t:.0%} {v}", flush=True)
        del ws, xs
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
