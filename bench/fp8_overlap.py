"""Probe: fp8 row-wise W8A8 prefill with the activation quantization overlapped with the GEMM.

Why: at M 4096, K 14336, N 4096 on an H100 the fp8-row linear takes 430-453 µs, of which the
activation kernel (a memory-bound pass over 117 MB of bf16 x) is ~60 µs and the row-wise
torch._scaled_mm ~380 (about 89 % of the measured fp8 peak): 1.30-1.57x bf16 across runs
(bench/NOTES.md, session 38), against a 1.5x goal. Cutting M into chunks lets chunk i + 1's
quantization run on a second stream while chunk i's GEMM runs, so most of the memory-bound
pass could hide under the compute-bound one. The same bits: each row's scale and codes do
not depend on the chunking, nor does each output row's GEMM.

Times, as CUDA-graph replays (µs, median): bf16 F.linear, the shipped two launches, the GEMM
alone, the quantization alone, and C chunks run in order and overlapped (C = 2, 4, 8), and
checks the overlapped output against the shipped one bit for bit. GPU only:
``python -m bench.fp8_overlap [--shapes 14336x4096,...] [--m 4096]``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from bench.decode_rows import parse_shapes
from bench.decode_sweep import graph_us


def _quant(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    from aoq.kernels.act_quant import quantize_fp8_act_triton

    return quantize_fp8_act_triton(x, True, torch.float8_e4m3fn)


def _mm(q: torch.Tensor, s: torch.Tensor, wq: torch.Tensor, ws: torch.Tensor) -> torch.Tensor:
    from aoq.kernels.fp8_mm import scaled_mm

    return scaled_mm(q, s, wq, ws, None, torch.bfloat16)


def _mm_into(
    q: torch.Tensor, s: torch.Tensor, wq: torch.Tensor, ws: torch.Tensor, out: torch.Tensor
) -> None:
    """The row block's GEMM written in place (``out``: rows of y, contiguous), without the
    copy ``y[b] = ...`` would add (a [rows, N] bf16 write and read)."""
    torch._scaled_mm(q, wq.t(), scale_a=s.reshape(-1, 1), scale_b=ws.reshape(1, -1),
                     out_dtype=torch.bfloat16, out=out)  # fmt: skip


def shipped(x: torch.Tensor, wq: torch.Tensor, ws: torch.Tensor) -> torch.Tensor:
    q, s = _quant(x)
    return _mm(q, s, wq, ws)


def chunked(
    x: torch.Tensor, wq: torch.Tensor, ws: torch.Tensor, chunks: int, side: torch.cuda.Stream | None
) -> torch.Tensor:
    """``chunks`` row blocks; with ``side``, block i + 1 quantized there while block i's GEMM
    runs on the current stream."""
    y = torch.empty(x.shape[0], wq.shape[0], dtype=torch.bfloat16, device=x.device)
    rows = -(-x.shape[0] // chunks)
    blocks = [slice(i, min(i + rows, x.shape[0])) for i in range(0, x.shape[0], rows)]
    main = torch.cuda.current_stream()
    if side is None:
        for b in blocks:
            q, s = _quant(x[b])
            _mm_into(q, s, wq, ws, y[b])
        return y
    done = []
    side.wait_stream(main)
    with torch.cuda.stream(side):
        for b in blocks:  # every block's quantization queued on the side stream, in order
            done.append((_quant(x[b]), torch.cuda.Event()))
            done[-1][1].record(side)
    for b, ((q, s), ev) in zip(blocks, done, strict=True):
        main.wait_event(ev)
        _mm_into(q, s, wq, ws, y[b])
        if not torch.cuda.is_current_stream_capturing():  # (a graph's pool keeps them)
            q.record_stream(main)
            s.record_stream(main)
    return y


def _shape(k: int, n: int, m: int, side: torch.cuda.Stream) -> str:
    """One K x N at M rows: every case's µs and whether the chunked outputs keep the bits."""
    x = torch.randn(m, k, dtype=torch.bfloat16, device="cuda")
    w = torch.randn(n, k, dtype=torch.bfloat16, device="cuda")
    amax = w.float().abs().amax(dim=1, keepdim=True).clamp(min=1e-12)
    ws = (amax / 448.0).reshape(1, -1).contiguous()
    wq = (w.float() / amax * 448.0).to(torch.float8_e4m3fn)
    q0, s0 = _quant(x)
    want = shipped(x, wq, ws)
    cases: dict[str, Callable[[], Any]] = {
        "bf16": lambda: F.linear(x, w),
        "shipped": lambda: shipped(x, wq, ws),
        "gemm": lambda: _mm(q0, s0, wq, ws),
        "quant": lambda: _quant(x),
    }
    for c in (2, 4, 8):
        cases[f"seq{c}"] = lambda c=c: chunked(x, wq, ws, c, None)
        cases[f"ovl{c}"] = lambda c=c: chunked(x, wq, ws, c, side)
    line = [f"K{k} N{n} M{m}"] + [f"{name} {graph_us([call]):7.1f}" for name, call in cases.items()]
    same = all(torch.equal(chunked(x, wq, ws, c, side), want) for c in (2, 4, 8))
    same = same and torch.equal(chunked(x, wq, ws, 4, None), want)
    return " | ".join(line) + f" | bits {'same' if same else 'DIFFER'}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default=None, help="K x N pairs (default: the goal shapes)")
    ap.add_argument("--m", type=int, default=4096)
    args = ap.parse_args()
    torch.manual_seed(0)
    side = torch.cuda.Stream()
    for k, n in parse_shapes(args.shapes):
        print(_shape(k, n, args.m, side), flush=True)


if __name__ == "__main__":
    main()
