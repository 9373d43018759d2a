"""Where fp8 W8A8 prefill (per-row scales) spends its time, on one GPU: each GEMM the dispatch
could run, its accuracy, and the activation quantization beside it.

``python -m bench.fp8_prefill [--ms 2048,4096] [--out FILE.json]`` times, for K x N in {8192 x
8192, 4096 x 14336, 14336 x 4096}, as CUDA-graph replays over enough weight copies to pass
L2 (bench.decode_sweep.graph_us): bf16 ``F.linear``; the activation kernel
(``aoq::quantize_fp8_act``, per row); and the GEMM of the quantized operands as
- ``rowwise``: ``torch._scaled_mm`` with the row and column scales (what ``cublas.fp8.
  scaled_mm`` runs for bf16 outputs),
- ``rowwise-fast``: the same with ``use_fast_accum=True`` (the tensor cores' own accumulation
  between promotions: faster on sm90, less exact: its error is printed beside the others),
- ``tensorwise``: unit scales to float32, then the scales and the cast in torch (what
  ``cublas.fp8.scaled_mm`` runs for float32 outputs),
- ``triton``: aoq's Triton prefill kernel (``triton.fp8.prefill``; autotuned on first use).
Each line prints µs and the GEMM's speedup over bf16 with the activation kernel added (as a
linear runs them), and each GEMM's relative error (Frobenius) against the float64 product of
the same fp8 operands and scales. A tuning aid for the fp8-row prefill goal (issue 3: 1.5x bf16
at M 4096), not the benchmark of record (``make bench``).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from bench.decode_sweep import graph_us

SHAPES = ((8192, 8192), (4096, 14336), (14336, 4096))  # K x N
COPIES = 3
"""Weight copies a pass rotates through: 3 x 8192^2 fp8 = 201 MB, past an H100/H200 L2."""


def gemms(
    xq: torch.Tensor, xs: torch.Tensor, wq: torch.Tensor, ws: torch.Tensor
) -> dict[str, Callable[[], torch.Tensor]]:
    """The GEMM variants for fp8 codes xq [M, K] (scales xs [M, 1]) and wq [N, K] (ws [N, 1])."""
    from aoq.kernels._common import Strategy
    from aoq.kernels.fp8_mm import fp8_mm_triton

    sa, sb = xs.reshape(-1, 1), ws.reshape(1, -1)
    one = torch.ones((), dtype=torch.float32, device=xq.device)

    def rowwise(fast: bool) -> torch.Tensor:
        return torch._scaled_mm(xq, wq.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16,
                                use_fast_accum=fast)  # fmt: skip

    def tensorwise() -> torch.Tensor:
        y = torch._scaled_mm(xq, wq.t(), scale_a=one, scale_b=one, out_dtype=torch.float32)
        return (y * sa * sb).to(torch.bfloat16)

    return {
        "rowwise": lambda: rowwise(False),
        "rowwise-fast": lambda: rowwise(True),
        "tensorwise": tensorwise,
        "triton": lambda: fp8_mm_triton(
            xq, xs, wq, ws, None, torch.bfloat16, int(Strategy.PREFILL)
        ),  # fmt: skip
    }


def exact(xq: torch.Tensor, xs: torch.Tensor, wq: torch.Tensor, ws: torch.Tensor) -> torch.Tensor:
    """The float64 product of the fp8 operands and their scales (the quantized math, exactly
    up to float64), on the GPU."""
    x = xq.to(torch.float64) * xs.to(torch.float64).reshape(-1, 1)
    w = wq.to(torch.float64) * ws.to(torch.float64).reshape(-1, 1)
    return x @ w.t()


def rel_error(got: torch.Tensor, want: torch.Tensor) -> float:
    return ((got.double() - want).norm() / want.norm()).item()


def case(m: int, k: int, n: int) -> dict[str, Any]:
    """One shape's row: µs of each side and the GEMMs' errors."""
    from aoq.kernels.act_quant import quantize_fp8_act_triton

    from aoq.formats import float8

    f8 = torch.float8_e4m3fn
    x = torch.randn(m, k, dtype=torch.bfloat16, device="cuda")
    wb = [torch.randn(n, k, dtype=torch.bfloat16, device="cuda") for _ in range(COPIES)]
    row: dict[str, Any] = {"m": m, "k": k, "n": n}
    row["bf16_us"] = graph_us([lambda w=w: F.linear(x, w) for w in wb])
    weights = [float8.quantize_fp8(w.float(), float8.Granularity.ROW) for w in wb]
    del wb
    weights = [(q.to(f8), s.reshape(-1, 1).float()) for q, s in weights]
    row["act_us"] = graph_us([lambda: quantize_fp8_act_triton(x, True, f8)] * COPIES)
    xq, xs = quantize_fp8_act_triton(x, True, f8)
    want = exact(xq, xs, *weights[0])
    row["us"], row["rel_err"] = {}, {}
    for name in gemms(xq, xs, *weights[0]):
        try:
            calls = [gemms(xq, xs, q, s)[name] for q, s in weights]
            row["rel_err"][name] = rel_error(calls[0](), want)
            row["us"][name] = graph_us(calls)
        except Exception as e:  # noqa: BLE001 - a variant that fails is a result
            row["us"][name] = None
            row["rel_err"][name] = f"{type(e).__name__}: {str(e)[:160]}"
    return row


def line(row: dict[str, Any]) -> str:
    out = (f"M{row['m']} K{row['k']} N{row['n']}: bf16 {row['bf16_us']:7.1f} us, "
           f"act {row['act_us']:5.1f}")  # fmt: skip
    for name, us in row["us"].items():
        err = row["rel_err"][name]
        if us is None:
            out += f" | {name} error {err}"
            continue
        out += f" | {name} {us:7.1f} x{row['bf16_us'] / (us + row['act_us']):.2f} err {err:.1e}"
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ms", default="2048,4096")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    rows = []
    for m in (int(v) for v in args.ms.split(",")):
        for k, n in SHAPES:
            rows.append(case(m, k, n))
            print(line(rows[-1]), flush=True)
            torch.cuda.empty_cache()
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
