"""Probe: weight-only linears at 65-256 rows on a warp-specialized loop (sm90).

Why: past 64 rows the shipped path (decode_mma at ROWS 128 / 256) and session 48's register-A
probe (bench/wt_probe.py) both run at 0.43-0.85x bf16. In both, the warps that load a step also
convert it and issue the MMA, so a step's loads, conversion and MMA serialize within a warp
group as far as the software pipeline fails to overlap them. Triton 3.6's warp specialization
(``tl.range(..., warp_specialize=True)``) on sm90 gives the loads to a producer warp group (TMA
through tensor descriptors) and the conversion and MMA to two consumer warp groups, which split
the accumulator: with the weights as A (y^T = W x^T) each consumer converts only its own rows.

Prediction, 8192^2 at 128 rows: int8 reads 67 MB (15.6 µs at 4.3 TB/s) and does 17.2 GFLOP
(21.5 µs at the 801 TFLOP/s bf16 ceiling). If the producer keeps the weights streaming while
the consumers convert and multiply, a step costs the larger of the two, so 25-35 µs against
bf16's 38.5 and the shipped 51.9. If the conversion, not the loads, bounds it, nothing moves.

``python -m bench.ws_probe --formats int8,fp8,int4 --ms 128`` prints, a case, the fastest
variants (µs as graph replays over weight copies past L2, x bf16, relative error against the
float64 product of the same dequantized weights, wgmma's A operand, warps launched), each
warp-specialized tile beside the same tile without it.
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Callable

from bench import wt_probe

WS = {"both": (1, 0), "on": (1,), "off": (0,)}
"""``--ws``: the warp_specialize values kept."""
DESC = {"host": (1,), "device": (2,), "both": (1, 2)}
"""``--desc``: where the tensor descriptors are made, 1 the host, 2 each program."""


def variants(fmt: str) -> list[dict[str, int]]:
    """Each tile with and without warp specialization, its descriptors made by the host or by
    each program; 2-3 stages at 128-code steps (4 pass the shared memory at 128-wide tiles),
    3-4 at 64; int4 at its group's 128 codes."""
    out = []
    for ws, swap, bn, bk in itertools.product((1, 0), (1, 0), (64, 128), (64, 128)):
        if fmt == "int4" and bk != 128:
            continue
        for stages in (2, 3) if bk == 128 else (3, 4):
            cfg = {"ws": ws, "swap": swap, "BLOCK_N": bn, "BLOCK_K": bk, "stages": stages}
            out += [dict(cfg, warps=4, desc=d) for d in (1, 2)]
    return out


def kept(args: argparse.Namespace) -> Callable[[str], list[dict[str, int]]]:
    """:func:`variants` as ``--ws``, ``--desc`` and ``--where`` (key=value,...) keep them."""
    want = {k: int(v) for k, v in (kv.split("=") for kv in args.where.split(",") if kv)}

    def keep(fmt: str) -> list[dict[str, int]]:
        return [
            c for c in variants(fmt)
            if c["ws"] in WS[args.ws] and c["desc"] in DESC[args.desc]
            and all(c.get(k) == v for k, v in want.items())
        ]  # fmt: skip

    return keep


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    wt_probe.add_args(ap, ms="128", splits="1,2")
    ap.add_argument("--ws", choices=tuple(WS), default="both")
    ap.add_argument("--desc", choices=tuple(DESC), default="host")
    ap.add_argument("--where", default="", help="keep variants with these values: swap=1,stages=3")
    args = ap.parse_args()
    warps = lambda ck: f"warps={ck.metadata.num_warps}"  # noqa: E731
    wt_probe.sweep(args, wt_probe.Probe(wt_probe.run, kept(args), warps))


if __name__ == "__main__":
    main()
