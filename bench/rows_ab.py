"""Probe: weight-only, MX and NVFP4 linears at 65-128 rows three ways, through F.linear on
quantized weights (the library's whole path: dispatch, the weight's GPU layouts, split,
reduction).

``python -m bench.rows_ab [--configs int8wo,fp8wo,int4wo-g128] [--ms 65,80,96,112,128]
[--shapes 8192x8192,4096x14336,14336x4096]`` prints a line per shape, config and M: bf16
``F.linear`` and µs (graph replays over 8 weight copies, past L2) with kernels/wt_rows.py and
wt_rows_mx.py off (``mma``: decode_mma; NVFP4 past 64 rows: the emulated path), on with x
through its tensor descriptor (``tma``) and on with x by masked loads (``ptr``), every format
served from 65 rows for the probe. ``--ways`` picks some of the three, ``--mx-tile`` sets
wt_rows_mx.TILE (its K split's programs an SM, its pipeline's stages) for every format,
``--tile`` wt_rows.TILE by the kernel's WFMT, ``--fp6-tile`` wt_rows_fp6.TILE. Rows below 65
in ``--ms`` serve every format from the fewest of them (probes of TILE's ``rows``).

Why (session 50): wt_rows's descriptor box over x holds 128 rows, and where x has fewer the
box runs past its last row; such loads ran slowly on an H200. This is the table that
wt_rows.MIN_ROWS and X_DESC_ROWS come from (bench/NOTES.md, session 50).
"""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.nn.functional as F
from aoq.kernels import wt_rows, wt_rows_fp6, wt_rows_mx

from bench.band_sweep import _quantized
from bench.decode_rows import parse_shapes
from bench.decode_sweep import graph_us

WAYS = {"mma": (False, wt_rows.ROWS + 1), "tma": (True, 1), "ptr": (True, wt_rows.ROWS + 1)}
"""name -> (wt_rows.ENABLED, wt_rows.X_DESC_ROWS)."""


@contextlib.contextmanager
def way(name: str, lo: int = 65) -> Iterator[None]:
    """wt_rows as ``name`` sets it, every format served from ``lo`` rows; restored after."""
    saved = wt_rows.ENABLED, wt_rows.X_DESC_ROWS, dict(wt_rows.MIN_ROWS)
    saved_mx = dict(wt_rows_mx.MIN_ROWS), dict(wt_rows_mx.X_DESC_ROWS)
    wt_rows.ENABLED, wt_rows.X_DESC_ROWS = WAYS[name]
    wt_rows.MIN_ROWS.update(dict.fromkeys(wt_rows.MIN_ROWS, lo))
    wt_rows_mx.MIN_ROWS.update(dict.fromkeys(wt_rows_mx.MIN_ROWS, lo))
    wt_rows_mx.X_DESC_ROWS.update(dict.fromkeys(wt_rows_mx.X_DESC_ROWS, WAYS[name][1]))
    try:
        yield
    finally:
        wt_rows.ENABLED, wt_rows.X_DESC_ROWS = saved[:2]
        wt_rows.MIN_ROWS.update(saved[2])
        wt_rows_mx.MIN_ROWS.update(saved_mx[0])
        wt_rows_mx.X_DESC_ROWS.update(saved_mx[1])


def _calls(xs: list[torch.Tensor], ws: list[Any]) -> list[Callable[[], Any]]:
    return [lambda x=x, w=w: F.linear(x, w) for x, w in zip(xs, ws, strict=True)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--configs", default="int8wo,fp8wo,int4wo-g128")
    ap.add_argument("--ms", default="65,80,96,112,128")
    ap.add_argument("--shapes", default="8192x8192,4096x14336,14336x4096", help="K x N")
    ap.add_argument("--ways", default=",".join(WAYS), help="of " + ", ".join(WAYS))
    ap.add_argument("--mx-tile", default="{}", help='wt_rows_mx.TILE for every format, e.g. '
                    '\'{"per_sm": 4, "stages": 4}\'')  # fmt: skip
    ap.add_argument("--tile", default="{}", help='wt_rows.TILE by WFMT (0 per-channel, 1 int4, '
                    '2 W4A8), e.g. \'{"1": {"step": 64, "per_sm": 3}}\'')  # fmt: skip
    ap.add_argument("--fp6-tile", default="{}", help='wt_rows_fp6.TILE, e.g. \'{"stages": 3, '
                    '"per_sm": 1}\'')  # fmt: skip
    args = ap.parse_args()
    wt_rows_fp6.TILE.update(json.loads(args.fp6_tile))
    tile = json.loads(args.mx_tile)
    wt_rows_mx.TILE.update(dict.fromkeys(wt_rows_mx.MIN_ROWS, tile) if tile else {})
    wt_rows.TILE.update({int(w): t for w, t in json.loads(args.tile).items()})
    from aoq.testing.cases import inference_configs

    configs = {c.id: c for c in inference_configs()}
    ms = [int(v) for v in args.ms.split(",")]
    torch.manual_seed(0)
    for k, n in parse_shapes(args.shapes):
        wb = [torch.randn(n, k, dtype=torch.bfloat16, device="cuda") * k**-0.5 for _ in range(8)]
        for cid in args.configs.split(","):
            ws = _quantized(configs[cid], wb)
            for m in ms:
                xs = [torch.randn(m, k, dtype=torch.bfloat16, device="cuda") for _ in range(8)]
                cols = {"bf16": graph_us(_calls(xs, wb))}
                for name in args.ways.split(","):
                    with way(name, min(65, *ms)):
                        cols[name] = graph_us(_calls(xs, ws), warm_s=0.1)
                row = " ".join(f"{a} {v:6.1f}" for a, v in cols.items())
                print(f"K{k} N{n} M{m:<4} {cid:<12} {row}", flush=True)
            del ws
        del wb
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
