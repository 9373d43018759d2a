"""Time decode_mma with x padded to 8 rows and to 16 (tile ROWS), on one GPU.

``python -m bench.decode_rows [--out FILE.json]`` times, for M in {1, 8} and K x N in {8192 x
8192, 4096 x 14336, 14336 x 4096}, each format decode_mma serves (int4-g128, int8, fp8, W4A8 g32
on int8 codes, MX fp4, fp8 e4m3 / e5m2 and fp6 e3m2 / e2m3, NVFP4) at its TILE and at the variants
below, as CUDA- graph replays over 8 weight copies (past L2), against bf16 F.linear. Each
variant's output is first checked against the TILE's on the GPU: bit for bit where only the
padding changed, to 1e-2 where the split did. Prints µs and the speedup over bf16 per case,
beside the time a plain read of the weight's bytes takes (``read``: a grid-strided int32 sum,
the floor of any kernel that reads them once), and writes every row to ``--out``;
``--timeline`` adds each variant's kernels in time (bench/timeline.py). ``--extra``
adds variants (JSON, per format; beside TILE's keys, int4 takes ``ZW``: the zero points as
32-bit words, ``TILED``: the codes in tile order, with ZW unless ``"ZW": false``, as
Int4Tensor ships them: int4's default, ``"TILED": false`` times row-major codes, and ``TMA``
with tiled codes: each step's tile copied by the tensor-memory accelerator (a probe, sm90 on;
``--tma-read`` adds the read floor through TMA beside ``read``); ``TILE_B`` /
``TILE_R`` with it: other tiles, e.g. W4A8's one group a tile; ``CHAINS`` 2 (a probe): int4's
low- and high-nibble MMAs as two chains; int8 and fp8 take ``TILED``
too, a probe, with TILE_B at least their STEP_K, e.g. ``{"TILED": true, "TILE_B": 256,
"TILE_R": 32}`` for their 32 x 256 TILE, and so does MX fp4 (``mxfp4``, a probe: its BIG
flag stays as it is)), ``--no-defaults`` drops the ones below.
int8 and fp8 also take ``GEMV`` (weight_only.tile_decode, its M = 1 register-tile GEMV, with
its tile keys BLOCK_N, BLOCK_K, num_warps, num_stages, per_sm and the kernel's probe keys
EVICT, UNROLL, EVEN), ``STATIC`` (kernels/gemv_static.py: a GEMV with K compiled in, served
on H100-class GPUs; keys BLOCK_N, BLOCK_K, num_warps) and ``INDUCTOR`` (the same math as
torchao's weight-only linears, compiled by torch.compile with torchao's Inductor settings:
the peer's kernel).
``w4a8gemv`` times W4A8's decode as the bench's graphs run it: the activation kernel, then
w4a8_gemv (M = 1) or int_act_mm's decode (M > 1); keys GEMV_TILE's (M = 1), ``SGM`` (the
scales group-major), ``XQ`` (x quantized in the GEMV: one launch), ``PDL`` (the decode
kernel launched with programmatic dependent launch while the activation kernel runs;
``LATE`` with it: placed only as the activation kernel ends, false: at once) and
``GEMV`` (M > 1: the GEMV for every row, up to w4a8_gemv.MAX_ROWS, on row-major scales),
``MMA`` (M > 1: the matrix-unit decode, where int_act_mm.GEMV_ROWS would take the GEMV) and
``TILED`` (a probe: decode_mma at every M on the codes in tiles of one group, tile_uint4's
TILE_B 16 x TILE_R 64, one group a step over 5 stages; other decode_mma.TILE keys beside
it; bench/NOTES.md, session 28). ``w4a8rows`` times kernels/w4a8_mma.py alone (W4A8 at
2 <= M <= 16 on row-major codes, x quantized before; its TILE's keys). A
tuning aid for decode_mma.TILE and w4a8_gemv.GEMV_TILE, not the benchmark of record (that
is ``make bench``). ``w8a8act`` and ``fp8act`` (per-row) time W8A8's and fp8's decode the same
way, with ``PDL`` their one key. Every format takes ``CHAIN`` (false: the split-K reduction
kernel launched plainly, not chained to the split kernel; splitk.CHAIN) and ``AHEAD``
(false: a decode kernel launched with PDL loads no weights before its wait;
_common.PDL_AHEAD); the runners that quantize x take ``ACT_PDL`` (false: with ``PDL``, the
activation kernel launched plainly, not with PDL after the kernel before it;
act_quant.ACT_PDL).

Why 8 rows (bench/NOTES.md, session 18): at M <= 8 the 16-row padding doubles the MMAs, x's
loads and x's and the accumulators' registers. Compiled for sm90, int4's loop drops from 393
to 342 instructions and 168 to 128 registers (eight programs an SM instead of six), int8's
from 473 to 399 and 112 to 80 (shared memory 32 -> 24 KB).
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
from typing import Any

import torch
import torch.nn.functional as F

from bench.decode_rows_act import act_runner, gemv_runner, rows_runner
from bench.decode_rows_mx import generic_mx_runner, xmx_runner
from bench.decode_rows_weights import weight_bytes, weight_case
from bench.decode_sweep import graph_us
from bench.read_floor import read_tma_us, read_us
from bench.timeline import describe, graph_timeline

VARIANTS: dict[str, list[dict[str, Any]]] = {
    "int4": [{"ROWS": 16}, {"ROWS": 8, "per_sm": 8}, {"SK": False}, {"TILED": False}],
    "int8": [{"ROWS": 16}, {"ROWS": 8, "num_stages": 4}],
    "fp8": [{"ROWS": 16}, {"ROWS": 8, "BLOCK_N": 64, "STEP_K": 128}],
    "w4a8": [{"ROWS": 16}, {"IMMA": False}, {"ROWS": 16, "IMMA": False}, {"per_sm": 14}],
    "mxfp4": [{"ROWS": 16}, {"ROWS": 8, "per_sm": 12}],
    "mxfp8": [{"ROWS": 16}, {"POST": True}, {"POST": True, "ROWS": 8}, {"per_sm": 8}],
    "mxint8": [
        {"ROWS": 16},
        {"GENERIC": True},
        {"per_sm": 8},
        {"XMX": True},
        {"XMX": True, "ROWS": 16},
    ],
    "mxfp6": [{"ROWS": 16}, {"num_stages": 4}, {"per_sm": 12}],
    "mxfp6e2m3": [{"ROWS": 16}],
    "mxfp8e5m2": [{"per_sm": 8}],
    "nvfp4": [{"ROWS": 16}, {"num_stages": 4}],
    "w4a8gemv": [{"PDL": True}, {"XQ": True}, {"SGM": True}],
    "w4a8rows": [{"BLOCK_N": 32}, {"STEP_K": 128}],
    "w8a8act": [{"PDL": True}],
    "fp8act": [{"PDL": True}],
}
"""Per format: tile overrides beside the TILE itself (which pads x to 8 rows at M <= 8 for
every format; per_sm: programs an SM the split aims for). The MX 8-bit formats' 64 x 128
step at 3 stages takes 48 KB of shared memory on sm90: 4 programs an SM fit, their TILE's
per_sm since session 36 (per_sm 8 the variant it beat); mxint8's ``GENERIC`` is
mx_decode's own tile, which served MX int8 before, and ``XMX`` decode_mma's integer MMA
against x's MX int8 codes (2 stages at 8 rows: decode_mma.XMX_STAGES8; timed in session 37,
no faster than the TILE: bench/NOTES.md). int4's register caps (``maxnreg``, more programs
an SM) were timed in session 38 and lost everywhere (bench/NOTES.md); ``SK`` False is
split-K where the TILE takes stream-K, an int forces that many stream-K programs."""

SHAPES = ((8192, 8192), (4096, 14336), (14336, 4096))  # K x N
EXACT_KEYS = {"ROWS", "PDL", "CHAIN", "AHEAD", "ACT_PDL", "XQ", "XQ_BLOCK_N", "XQ_num_warps",
              "ALIGNED", "TMA", "L2PRE", "ASYM", "ZEROS", "LATE"}  # fmt: skip
"""Variants whose keys are all here must give the TILE's bits (only the padding, the launch,
or the GEMV's rows a program changed); others (a split or a step) agree to 1e-2. An ``ASYM``
variant (W4A8 with zero points: x quantized otherwise) is checked against ``{"ASYM": true}``
at the TILE."""


def parse_shapes(spec: str | None) -> tuple[tuple[int, int], ...]:
    """``--shapes``' K x N pairs ("8192x28672,4096x4096"), or the goal shapes."""
    if not spec:
        return SHAPES
    return tuple((int(k), int(n)) for k, n in (s.lower().split("x") for s in spec.split(",")))


def _runner(wf: Any, groups: int, x: torch.Tensor, t: tuple, tile: dict, fmt: str = "") -> Any:
    """The call of ``fmt``'s case with ``tile``; its ``CHAIN``, ``AHEAD`` (every format) and
    ``ACT_PDL`` set splitk.CHAIN, _common.PDL_AHEAD and act_quant.ACT_PDL around each call
    (false: the split-K reduction kernel launched plainly; a decode kernel launched with PDL
    reads nothing before its wait; the activation kernel launched plainly)."""
    from aoq.kernels import _common, act_quant, splitk

    tile = dict(tile)
    chain = tile.pop("CHAIN", splitk.CHAIN)
    ahead = tile.pop("AHEAD", _common.PDL_AHEAD)
    act_pdl = tile.pop("ACT_PDL", act_quant.ACT_PDL)
    call = _runner_of(wf, groups, x, t, tile, fmt)

    def switched() -> Any:
        was = splitk.CHAIN, _common.PDL_AHEAD, act_quant.ACT_PDL
        splitk.CHAIN, _common.PDL_AHEAD, act_quant.ACT_PDL = chain, ahead, act_pdl
        try:
            return call()
        finally:
            splitk.CHAIN, _common.PDL_AHEAD, act_quant.ACT_PDL = was

    return switched


@functools.cache
def _compiled() -> Any:
    def dequant_linear(x: torch.Tensor, q: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        return F.linear(x, q.to(x.dtype)) * s.reshape(1, -1).to(x.dtype)

    import torch._inductor.config as inductor

    # torchao's configs set these (torchao.quantization.utils.recommended_inductor_config_setter,
    # on by default): at M == 1 Inductor then decomposes the matmul into a multiply and a sum
    # over K, one reduction kernel with the cast fused, its tile tuned by timing
    inductor.coordinate_descent_tuning = True
    inductor.coordinate_descent_check_all_directions = True
    return torch.compile(dequant_linear, dynamic=False)


def _inductor_runner(x: torch.Tensor, t: tuple) -> Any:
    """Per-channel codes as torchao's weight-only linears compute them (codes cast to x's
    dtype, the matmul, the channel scale after), compiled by Inductor with torchao's settings:
    the peer's M = 1 kernel."""
    fn = _compiled()
    return lambda: fn(x, t[0], t[1])


def _tile_gemv_runner(wf: Any, x: torch.Tensor, t: tuple, tile: dict) -> Any:
    """weight_only.tile_decode on per-channel codes (row-major, scale [N]): at M == 1 its
    GEMV, FMA into a [BLOCK_N, BLOCK_K] register tile; tile keys BLOCK_N, BLOCK_K,
    num_warps, num_stages and per_sm."""
    from aoq.kernels import weight_only

    s = t[1].reshape(-1).contiguous()
    y = torch.empty(x.shape[0], t[0].shape[0], dtype=x.dtype, device=x.device)

    def call() -> torch.Tensor:
        weight_only.tile_decode(x, t[0], s, s, None, y, 1, wf, None, tile=tile)
        return y

    return call


def _static_gemv_runner(x: torch.Tensor, t: tuple, tile: dict) -> Any:
    """kernels/gemv_static.py on per-channel codes (K compiled in) at static_tile(K), or at
    the tile's keys BLOCK_N, BLOCK_K, num_warps, whatever the GPU (its rule not asked)."""
    from aoq.kernels.gemv_static import gemv_static

    y = torch.empty(x.shape[0], t[0].shape[0], dtype=x.dtype, device=x.device)
    tile = dict(tile)
    pdl = tile.pop("PDL", False)
    return lambda: gemv_static(x, t[0], t[1], None, y, tile=tile, pdl=pdl)


def _runner_of(wf: Any, groups: int, x: torch.Tensor, t: tuple, tile: dict, fmt: str) -> Any:
    if fmt == "w4a8gemv":
        return gemv_runner(x, t, tile)
    if fmt == "w4a8rows":
        return rows_runner(x, t, tile)
    if fmt in ("w8a8act", "fp8act"):
        return act_runner(fmt, x, t, tile)
    from aoq.kernels import act_quant, decode_mma
    from aoq.kernels._common import WeightFormat as W

    tile = dict(tile)
    if tile.pop("INDUCTOR", False):
        return _inductor_runner(x, t)
    if tile.pop("GEMV", False):
        return _tile_gemv_runner(wf, x, t, tile)
    if tile.pop("STATIC", False):
        return _static_gemv_runner(x, t, tile)
    if tile.pop("GENERIC", False):
        return generic_mx_runner(wf, x, t)
    if tile.pop("XMX", False):
        return xmx_runner(groups, x, t, tile)
    xq, xs = x, None
    from aoq.formats.packing import pack_zero_words, tile_uint4

    # the codes in tile order, as Int4Tensor ships int4 weights on CUDA (its "tiled"): int4's
    # default here since session 38, whose first timings ran row-major codes unawares;
    # {"TILED": False} times row-major int4 codes
    tiled = tile.pop("TILED", wf is W.UINT4)
    # the zero points as 32-bit words of four groups: with tiled codes by default, as
    # Int4Tensor ships them (its zero_gw); row-major codes take them on request
    if tile.pop("ZW", tiled and wf is W.UINT4) and t[2] is not None:
        t = (t[0], t[1], pack_zero_words(t[2].contiguous()))
    if tiled:  # (int8 and fp8 byte codes too: a probe; their TILE_B at least the step)
        b = t[0].view(torch.uint8)
        b = tile_uint4(b, tile.get("TILE_B", 64), tile.get("TILE_R", 64))
        t = (b.view(t[0].dtype), *t[1:])
    # launched with programmatic dependent launch after the kernel before it (the previous
    # call's reduction in the replayed rotation), waiting for it before reading x
    pdl = tile.pop("PDL", False)
    if wf is W.INT4_SYM:
        xq, xs, _ = act_quant.quantize_int8_act_triton(x, 0, None)
    out = torch.float32 if wf is W.INT4_SYM else x.dtype
    y = torch.empty(x.shape[0], t[0].shape[0], dtype=out, device=x.device)

    def call() -> torch.Tensor:
        decode_mma.decode_mma(xq, t[0], t[1], t[2], None, y, groups, wf, None, x_scale=xs,
                              tile=tile, tiled=tiled, pdl=pdl)  # fmt: skip
        return y

    return call


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--formats", default=",".join(VARIANTS))
    ap.add_argument("--ms", default="1,8")
    ap.add_argument("--out", default=None)
    ap.add_argument("--extra", default="{}", help='more variants, JSON: {"int4": [{...}]}')
    ap.add_argument("--no-defaults", action="store_true", help="only --extra's variants")
    ap.add_argument("--shapes", default=None, help="K x N pairs, e.g. 8192x28672,4096x4096")
    ap.add_argument("--tma-read", action="store_true", help="also the read floor through TMA")
    ap.add_argument("--timeline", action="store_true", help="each variant's kernels in time")
    args = ap.parse_args()
    extra = json.loads(args.extra)
    rows: list[dict[str, Any]] = []
    for (k, n), m, fmt in itertools.product(
        parse_shapes(args.shapes), [int(v) for v in args.ms.split(",")], args.formats.split(",")
    ):
        copies = 8
        wf, ws, groups = weight_case(fmt, n, k, copies)
        xs = [torch.randn(m, k, dtype=torch.bfloat16, device="cuda") for _ in range(copies)]
        wb = [torch.randn(n, k, dtype=torch.bfloat16, device="cuda") for _ in range(copies)]
        bf16 = graph_us([lambda x=x, w=w: F.linear(x, w) for x, w in zip(xs, wb, strict=True)])
        del wb
        floor = read_us(weight_bytes(ws[0]))
        tma_floor = read_tma_us(weight_bytes(ws[0])) if args.tma_read else None
        tiles = [{}, *([] if args.no_defaults else VARIANTS[fmt]), *extra.get(fmt, [])]
        bases = {
            asym: _runner(wf, groups, xs[0], ws[0], {"ASYM": True} if asym else {}, fmt)().clone()
            for asym in {bool(t.get("ASYM")) for t in tiles}
        }
        line = f"K{k} N{n} M{m} {fmt:6s} bf16 {bf16:6.1f} read {floor:5.1f}"
        if tma_floor is not None:
            line += f" read_tma {tma_floor:5.1f}"
        for tile in tiles:
            row: dict[str, Any] = {
                "fmt": fmt,
                "k": k,
                "n": n,
                "m": m,
                "tile": tile,
                "bf16_us": bf16,
                "read_us": floor,
                "read_tma_us": tma_floor,
            }
            try:
                got = _runner(wf, groups, xs[0], ws[0], tile, fmt)()
                base = bases[bool(tile.get("ASYM"))]
                if set(tile) <= EXACT_KEYS:
                    ok = torch.equal(got.nan_to_num(), base.nan_to_num())
                else:
                    err = ((got.float() - base.float()).norm() / base.float().norm()).item()
                    ok = err < 1e-2
                row["matches"] = ok
                calls = [_runner(wf, groups, x, t, tile, fmt) for x, t in zip(xs, ws, strict=True)]
                row["us"] = graph_us(calls)
                line += f" | {json.dumps(tile) if tile else 'TILE'} {row['us']:6.1f}"
                line += f" x{bf16 / row['us']:.2f}" + ("" if ok else " MISMATCH")
                if args.timeline:  # (bench/timeline.py: CUPTI's kernel records)
                    row["timeline"] = graph_timeline(calls)
                    line += f" [{describe(row['timeline'])}]"
            except Exception as e:  # noqa: BLE001 - a variant that fails is a result
                row["error"] = f"{type(e).__name__}: {str(e)[:200]}"
                line += f" | {json.dumps(tile)} error {row['error'][:80]}"
            rows.append(row)
        print(line, flush=True)
        del ws, xs
        torch.cuda.empty_cache()
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
