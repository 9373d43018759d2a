"""Run one decode_mma case's call a few times, for a profiler to attach to:
``ncu --clock-control none --kernel-name regex:_decode_mma_kernel --launch-skip 3
--launch-count 1 --section WarpStateStats python -m bench.decode_once --format int4 --k 8192
--n 8192 --m 1``.

The case is bench.decode_rows's (its weights per format, its tile keys as ``--tile`` JSON),
run eagerly (a profiler times each launch alone) over ``--copies`` weight copies in turn, so
each launch reads its weight from DRAM as in the timed replays."""

from __future__ import annotations

import argparse
import json

import torch

from bench.decode_rows import _runner
from bench.decode_rows_weights import weight_case


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--format", default="int4")
    ap.add_argument("--k", type=int, default=8192)
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--m", type=int, default=1)
    ap.add_argument("--tile", default="{}", help="decode_rows tile keys, JSON")
    ap.add_argument("--calls", type=int, default=8)
    ap.add_argument("--copies", type=int, default=4)
    args = ap.parse_args()
    wf, ws, groups = weight_case(args.format, args.n, args.k, args.copies)
    x = torch.randn(args.m, args.k, dtype=torch.bfloat16, device="cuda")
    calls = [_runner(wf, groups, x, t, json.loads(args.tile), args.format) for t in ws]
    for i in range(args.calls):
        calls[i % len(calls)]()
    torch.cuda.synchronize()
    print(f"{args.calls} calls of {args.format} K{args.k} N{args.n} M{args.m} {args.tile}")


if __name__ == "__main__":
    main()
