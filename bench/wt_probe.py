"""Probe: weight-only linears at 17-256 rows with the dequantized weights as the MMA's
register operand (y^T = W x^T: on sm90 wgmma takes its A operand from registers, so the
converted weights skip shared memory; x^T comes through shared memory as B).

Why: the shipped 65-256-row path (decode_mma at ROWS 128 / 256) writes every dequantized step
to shared memory for the MMA and runs at 0.43-0.90x bf16 (bench/NOTES.md, session 45). Its own
WT orientation is refused on 4+ warps (decode_mma: "sums came out wrong", with its inline-asm
pairs). This probe asks two things of plain Triton conversions (``.to(bf16)``, no asm):
are the sums right on wgmma with A from registers, and how fast is it against bf16 F.linear
and the shipped aoq call, by tile and split.

``python -m bench.wt_probe --formats int8,fp8,int4 --ms 64,128,256`` prints one line a
variant: µs (graph replays over weight copies past L2), x bf16, relative error against the
float64 product of the same dequantized weights, and whether the PTX's wgmma reads A from
registers. Partials of a K split are summed by torch (one extra kernel, timed in).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import re
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from aoq.kernels import splitk
from aoq.kernels._common import INTERPRET
from triton.tools.tensor_descriptor import TensorDescriptor

from aoq.formats import affine, float8
from aoq.formats.packing import pack_uint4
from bench.decode_sweep import graph_us

FMT_ID = {"int8": 0, "fp8": 2, "int4": 1}


@triton.jit
def _wt_kernel(
    x_ptr, w_ptr, s_ptr, z_ptr, p_ptr, M, N, K, K_SPLIT,
    WFMT: tl.constexpr, GROUP: tl.constexpr, ROWS: tl.constexpr, BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr, SWAP: tl.constexpr, STAGES: tl.constexpr, UPCAST: tl.constexpr = False,
    DESC: tl.constexpr = 0, WS: tl.constexpr = False,
):  # fmt: skip
    """Program (n, s): float32 partial [ROWS, BLOCK_N] of K range s into p[s]. int8 / fp8
    (WFMT 0 / 2): per-channel scale at the end; int4 (1): packed [N, K / 2] low nibble
    first, (q - z) exact in bf16 on the MMA, each group's product tile times its scale
    (BLOCK_K == GROUP). DESC: x and the codes through tensor descriptors, x's rows past M read
    as zeros: 1 x_ptr and w_ptr are the host's descriptors, 2 pointers that each program
    makes its descriptors over; WS: the loop warp-specialized (bench/ws_probe)."""
    pid_n = tl.program_id(0)
    pid_s = tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_m = tl.arange(0, ROWS)
    mmask = offs_m < M
    k_lo = pid_s * K_SPLIT
    k_hi = tl.minimum(k_lo + K_SPLIT, K)
    if SWAP:
        acc = tl.zeros((BLOCK_N, ROWS), dtype=tl.float32)
    else:
        acc = tl.zeros((ROWS, BLOCK_N), dtype=tl.float32)
    if DESC == 2:
        x_ptr = tl.make_tensor_descriptor(x_ptr, [M, K], [K, 1], [ROWS, BLOCK_K])
        if WFMT == 1:
            w_ptr = tl.make_tensor_descriptor(
                w_ptr, [N, K // 2], [K // 2, 1], [BLOCK_N, BLOCK_K // 2]
            )
        else:
            w_ptr = tl.make_tensor_descriptor(w_ptr, [N, K], [K, 1], [BLOCK_N, BLOCK_K])
    for k0 in tl.range(k_lo, k_hi, BLOCK_K, num_stages=STAGES, warp_specialize=WS):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        if DESC:
            xt = x_ptr.load([0, k0])
        else:
            xt = tl.load(
                x_ptr + offs_m[:, None] * K + offs_k[None, :], mask=mmask[:, None], other=0
            )
        if UPCAST:  # the interpreter: float32 dots (its bf16 ones are not float32 sums)
            xt = xt.to(tl.float32)
        if WFMT == 1:
            offs_b = k0 // 2 + tl.arange(0, BLOCK_K // 2)
            if DESC:
                b = w_ptr.load([pid_n * BLOCK_N, k0 // 2])
            else:
                b = tl.load(w_ptr + offs_n[:, None] * (K // 2) + offs_b[None, :])
            g = k0 // GROUP
            z = tl.load(z_ptr + offs_n * (K // GROUP) + g).to(tl.int32)
            s = tl.load(s_ptr + offs_n * (K // GROUP) + g).to(tl.float32)
            lo = (b & 15).to(tl.int32) - z[:, None]
            hi = (b >> 4).to(tl.int32) - z[:, None]
            w = tl.join(lo, hi).reshape(BLOCK_N, BLOCK_K).to(xt.dtype)
            if SWAP:
                part = tl.dot(w, tl.trans(xt))
                acc += part * s[:, None]
            else:
                part = tl.dot(xt, tl.trans(w))
                acc += part * s[None, :]
        else:
            if DESC:
                w = w_ptr.load([pid_n * BLOCK_N, k0])
            else:
                w = tl.load(w_ptr + offs_n[:, None] * K + offs_k[None, :])
            if WFMT == 0 and UPCAST:
                w = w.to(tl.float32)  # (the interpreter's int8 -> bf16 gives NaN)
            w = w.to(tl.bfloat16).to(xt.dtype)
            if SWAP:  # noqa: SIM108 (one dot a branch: Triton's constexpr if)
                acc = tl.dot(w, tl.trans(xt), acc)
            else:
                acc = tl.dot(xt, tl.trans(w), acc)
    if WFMT != 1:
        s = tl.load(s_ptr + offs_n).to(tl.float32)
        if SWAP:  # noqa: SIM108
            acc = acc * s[:, None]
        else:
            acc = acc * s[None, :]
    part_ptr = p_ptr + pid_s.to(tl.int64) * M * N
    if SWAP:
        tl.store(part_ptr + offs_m[None, :] * N + offs_n[:, None], acc, mask=mmask[None, :])
    else:
        tl.store(part_ptr + offs_m[:, None] * N + offs_n[None, :], acc, mask=mmask[:, None])


def make_weight(fmt: str, n: int, k: int, device: str = "cuda") -> tuple[Any, ...]:
    """(codes, scale, zero, dequantized float64 weight) on ``device``."""
    w = torch.randn(n, k, device=device)
    if fmt == "int8":
        q, s = affine.quantize_int8_symmetric(w, None)
        s = s.reshape(-1).float()
        return q, s, s, q.double() * s.double()[:, None]
    if fmt == "fp8":
        q, s = float8.quantize_fp8(w, float8.Granularity.ROW)
        s = s.reshape(-1).float()
        return q, s, s, q.double() * s.double()[:, None]
    q, s, z = affine.quantize_uint4_asymmetric(w, 128)
    s, z = s.float().contiguous(), z.to(torch.uint8).contiguous()
    deq = (q.double() - z.double().repeat_interleave(128, 1)) * s.double().repeat_interleave(128, 1)
    return pack_uint4(q), s, z, deq


def run(x: torch.Tensor, wt: tuple[Any, ...], fmt: str, cfg: dict[str, int]) -> Any:
    """Launch one variant; returns (output [M, N] float32, compiled kernel). A cfg with a
    ``ws`` key passes x and the codes as tensor descriptors (at least 64 rows of x) and
    warp-specializes the loop when it is set (bench/ws_probe); ``desc`` 2 has each program
    make its descriptors over the pointers (Triton's allocator set for their scratch)."""
    m, k = x.shape
    n = wt[0].shape[0]
    split = cfg["split"]
    k_split = splitk.k_per_split(k, split, cfg["BLOCK_K"])
    p = torch.empty(split, m, n, device=x.device, dtype=torch.float32)
    desc = cfg.get("desc", 1) if "ws" in cfg else 0
    rows = max(64 if desc else 16, triton.next_power_of_2(m))
    xa, wa = x, wt[0]
    if desc == 2:
        triton.set_allocator(_scratch)
    if desc == 1:
        wk = cfg["BLOCK_K"] // 2 if fmt == "int4" else cfg["BLOCK_K"]
        xa = TensorDescriptor.from_tensor(x, [rows, cfg["BLOCK_K"]])
        wa = TensorDescriptor.from_tensor(wt[0], [cfg["BLOCK_N"], wk])
    ck = _wt_kernel[(n // cfg["BLOCK_N"], split)](
        xa, wa, wt[1], wt[2], p, m, n, k, k_split,
        WFMT=FMT_ID[fmt], GROUP=128, ROWS=rows, BLOCK_N=cfg["BLOCK_N"], BLOCK_K=cfg["BLOCK_K"],
        SWAP=cfg["swap"], STAGES=cfg["stages"], UPCAST=INTERPRET, DESC=desc,
        WS=bool(cfg.get("ws")), num_warps=cfg["warps"], num_stages=cfg["stages"],
    )  # fmt: skip
    return (p[0] if split == 1 else p.sum(0)), ck


def _scratch(size: int, align: int, stream: Any) -> torch.Tensor:
    """Triton's allocator: global scratch for device-made tensor descriptors."""
    return torch.empty(size, dtype=torch.int8, device="cpu" if INTERPRET else "cuda")


def wgmma_a(ck: Any) -> str:
    """'reg' / 'smem' for the first wgmma's A operand in the PTX, 'none' without wgmma."""
    for line in ck.asm["ptx"].splitlines():
        if "wgmma.mma_async" in line:
            tail = line.split("}", 1)[1] if "}" in line else line
            return "reg" if re.match(r"\s*,\s*\{", tail) else "smem"
    return "none"


def variants(fmt: str) -> list[dict[str, int]]:
    out = []
    for swap, bn, bk, warps, stages in itertools.product(
        (1, 0), (64, 128), (64, 128), (4, 8), (3, 4)
    ):
        if fmt == "int4" and bk != 128:
            continue
        out.append({"swap": swap, "BLOCK_N": bn, "BLOCK_K": bk, "warps": warps, "stages": stages})
    return out


def time_case(xs: list[torch.Tensor], fmt: str, n: int, bf: float, args: Any, probe: Probe) -> None:
    """Every variant of ``fmt`` at x's shape: the fastest ``args.top`` printed."""
    k = xs[0].shape[1]
    wts = [make_weight(fmt, n, k) for _ in range(args.copies)]
    ref = xs[0].double() @ wts[0][3].T
    wts = [w[:3] for w in wts]
    rows = []
    splits = (int(v) for v in args.splits.split(","))
    for base, split in itertools.product(probe.variants(fmt), splits):
        if not 64 <= n // base["BLOCK_N"] * split <= 2 * args.sms:
            continue  # a grid well under one wave or past two
        cfg = dict(base, split=split)
        if args.verbose:  # before the launch: a variant that hangs is the last line
            print(f"    {fmt} {cfg} ...", end=" ", flush=True)
        try:
            y, ck = probe.run(xs[0], wts[0], fmt, cfg)
            err = ((y.double() - ref).norm() / ref.norm()).item()
            calls = [
                lambda x=x, w=w, c=cfg: probe.run(x, w, fmt, c)
                for x, w in zip(xs, wts, strict=True)
            ]
            us = graph_us(calls, warm_s=0.05)
        except Exception as e:  # a tile Triton refuses: say so, go on
            print(f"  {fmt} {cfg}: {type(e).__name__}: {str(e)[:120]}", flush=True)
            continue
        rows.append((us, err, f"A={wgmma_a(ck)} {probe.note(ck)}".strip(), cfg))
        if args.verbose:
            print(f"{us:.1f} us err {err:.1e}", flush=True)
    rows.sort(key=lambda r: r[0])
    for us, err, what, cfg in rows[: args.top]:
        print(f"  {fmt:5s} {us:7.1f} us {bf / us:5.2f}x err {err:.1e} {what} {cfg}")
    worst = max((r[1] for r in rows), default=float("nan"))
    print(f"  {fmt:5s} {len(rows)} variants, worst error {worst:.1e}", flush=True)


@dataclasses.dataclass
class Probe:
    """What a sweep launches: ``run(x, weight, fmt, cfg)``, the cfgs of a format, and an extra
    column from the compiled kernel."""

    run: Callable[..., Any]
    variants: Callable[[str], list[dict[str, int]]]
    note: Callable[[Any], str] = lambda ck: ""


def add_args(ap: argparse.ArgumentParser, ms: str = "64,128,256", splits: str = "1,2,4") -> None:
    ap.add_argument("--formats", default="int8,fp8,int4")
    ap.add_argument("--ms", default=ms)
    ap.add_argument("--shapes", default="8192x8192,4096x14336,14336x4096", help="K x N")
    ap.add_argument("--splits", default=splits)
    ap.add_argument("--copies", type=int, default=6)
    ap.add_argument("--top", type=int, default=6, help="fastest variants printed a case")
    ap.add_argument("-v", "--verbose", action="store_true", help="a line a variant as it runs")


def sweep(args: Any, probe: Probe) -> None:
    """Each K x N and M of ``args``: bf16 F.linear's time, then each format's variants."""
    args.sms = torch.cuda.get_device_properties(0).multi_processor_count
    torch.manual_seed(0)
    for shape in args.shapes.split(","):
        k, n = (int(v) for v in shape.split("x"))
        for m in (int(v) for v in args.ms.split(",")):
            bf16 = torch.bfloat16
            xs = [torch.randn(m, k, device="cuda", dtype=bf16) for _ in range(args.copies)]
            wb = [torch.randn(n, k, device="cuda", dtype=bf16) for _ in range(args.copies)]
            bf = graph_us([lambda x=x, w=w: F.linear(x, w) for x, w in zip(xs, wb, strict=True)])
            del wb
            print(f"== K {k} N {n} M {m}: bf16 {bf:.1f} us", flush=True)
            for fmt in args.formats.split(","):
                time_case(xs, fmt, n, bf, args, probe)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_args(ap)
    sweep(ap.parse_args(), Probe(run, variants))


if __name__ == "__main__":
    main()
