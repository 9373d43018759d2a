"""bench/decode_rows.py's runners that quantize the activation first, as the bench's graphs
run them: W4A8 (``w4a8gemv``: the activation kernel, then the GEMV or int_act_mm's decode;
``w4a8rows``: kernels/w4a8_mma.py alone; the group-tile probe), W8A8 and fp8 row
(``w8a8act``, ``fp8act``)."""

from __future__ import annotations

from typing import Any

import torch


def gemv_runner(x: torch.Tensor, t: tuple, tile: dict) -> Any:
    """W4A8 decode as the bench's graphs run it: the activation kernel, then the GEMV (M = 1)
    or int_act_mm's decode (on group-major scales). ``ASYM``: activations with zero points;
    ``ROWS_MMA`` false: int_act_mm.ROWS_MMA off (decode_mma where w4a8_mma would serve);
    ``ROWS_TILE``: keys of w4a8_mma.TILE for the call; ``DM_TILE``: keys of decode_mma's
    W4A8 TILE for the call (e.g. ``{"IMMA": false}``: x on bf16 pairs, past 16 rows);
    ``LATE`` (with PDL): the activation kernel lets the decode start as it ends (act_quant's
    ``late``; default: where w4a8_mma.late_trigger says, as the linear path)."""
    from aoq.kernels import act_quant
    from aoq.kernels import decode_mma as dm
    from aoq.kernels import int_act_mm as ia
    from aoq.kernels import w4a8_mma as wm
    from aoq.kernels.int_act_mm import int_act_mm_triton
    from aoq.kernels.w4a8_gemv import w4a8_gemv

    tile = dict(tile)
    xq_in, pdl = tile.pop("XQ", False), tile.pop("PDL", False)
    rows_tile = {**wm.TILE, **tile.pop("ROWS_TILE", {})}
    dm_tile = {**dm.TILE[dm.WeightFormat.INT4_SYM], **tile.pop("DM_TILE", {})}
    mode, rows_mma = (1 if tile.pop("ASYM", False) else 0), tile.pop("ROWS_MMA", ia.ROWS_MMA)
    if xq_in and mode:
        raise ValueError("XQ (x quantized in the GEMV) is timed with symmetric activations")
    m = x.shape[0]
    if tile.pop("TILED", False):
        return group_tiles_runner(x, t, tile, pdl)
    gemv = m == 1 or tile.pop("GEMV", False)  # (M > 1: the GEMV's rows, up to its MAX_ROWS)
    mma = tile.pop("MMA", False)  # M > 1: decode_mma even where int_act_mm takes the GEMV
    rows_path = not gemv and not mma and rows_mma and m >= ia.ROWS_MMA_FROM
    late_rule = rows_path and wm.late_trigger(m, t[0].shape[0], x.shape[1], x.device)
    late = tile.pop("LATE", late_rule) and pdl
    s = t[1].t().contiguous().t() if tile.pop("SGM", False) or not gemv else t[1]
    y = torch.empty(m, t[0].shape[0], dtype=x.dtype, device=x.device)
    flags = dict(GROUP_SIZE=32, ASYM=mode == 1, STATIC=False, HAS_BIAS=False, HAS_BIAS_INT=False)
    xs1 = torch.empty(1, dtype=torch.float32, device=x.device)

    def call() -> torch.Tensor:
        if not gemv:
            xq, xs, xz = act_quant.quantize_int8_act_triton(x, mode, None, pdl, late)
            was = ia.GEMV_ROWS, ia.ROWS_MMA_FROM, ia.ROWS_MMA, wm.TILE
            was_dm = dm.TILE[dm.WeightFormat.INT4_SYM]
            ia.GEMV_ROWS, ia.ROWS_MMA_FROM = (0, 2) if mma else was[:2]
            ia.ROWS_MMA, wm.TILE = rows_mma, rows_tile
            dm.TILE[dm.WeightFormat.INT4_SYM] = dm_tile
            try:
                return int_act_mm_triton(xq, xs, xz if mode else None, t[0], s, None, None,
                                         x.dtype, 0, None, pdl)  # fmt: skip
            finally:
                ia.GEMV_ROWS, ia.ROWS_MMA_FROM, ia.ROWS_MMA, wm.TILE = was
                dm.TILE[dm.WeightFormat.INT4_SYM] = was_dm
        if xq_in:
            xq, xs, xz = x, xs1, xs1
        else:
            xq, xs, xz = act_quant.quantize_int8_act_triton(x, mode, None, pdl)
        w4a8_gemv((xq, xs, xz if mode else xs, t[0], s, s, s, s), y, x.shape[1], 32, flags, None,
                  xq_in, pdl and not xq_in, tile)  # fmt: skip
        return y

    return call


def group_tiles_runner(x: torch.Tensor, t: tuple, tile: dict, pdl: bool) -> Any:
    """W4A8's activation kernel, then decode_mma (at any M <= 16) on the codes in tiles of
    one group (``TILE_B`` bytes x ``TILE_R`` rows, 16 x 64 unless given) with group-major
    scales: the layout that W4A8 does not ship (bench/NOTES.md, sessions 27 and 28)."""
    from aoq.kernels import act_quant, decode_mma
    from aoq.kernels._common import WeightFormat as W

    from aoq.formats.packing import tile_uint4

    tile = {"TILE_B": 16, "STEP_K": 32, "LOOP_STAGES": 5, **tile}
    codes = tile_uint4(t[0], tile["TILE_B"], tile.get("TILE_R", 64))
    s = t[1].t().contiguous().t()
    k = x.shape[1]
    y = torch.empty(x.shape[0], codes.shape[0], dtype=x.dtype, device=x.device)

    def call() -> torch.Tensor:
        xq, xs, _ = act_quant.quantize_int8_act_triton(x, 0, None, pdl)
        decode_mma.decode_mma(xq, codes, s, None, None, y, k // 32, W.INT4_SYM, None,
                              x_scale=xs, tile=dict(tile), tiled=True, pdl=pdl)  # fmt: skip
        return y

    return call


def act_runner(fmt: str, x: torch.Tensor, t: tuple, tile: dict) -> Any:
    """W8A8 / fp8 row decode as the bench's graphs run them: the activation kernel, then the
    decode kernel (``PDL``: with programmatic dependent launch)."""
    from aoq.kernels import act_quant
    from aoq.kernels.fp8_mm import fp8_mm_triton
    from aoq.kernels.int_act_mm import int_act_mm_triton

    pdl = tile.get("PDL", False)

    def call() -> torch.Tensor:
        if fmt == "w8a8act":
            xq, xs, _ = act_quant.quantize_int8_act_triton(x, 0, None, pdl)
            return int_act_mm_triton(xq, xs, None, t[0], t[1], None, None, x.dtype, 0, None, pdl)
        xq, xs = act_quant.quantize_fp8_act_triton(x, True, t[0].dtype, pdl)
        return fp8_mm_triton(xq, xs, t[0], t[1], None, x.dtype, 0, None, pdl)

    return call


def rows_runner(x: torch.Tensor, t: tuple, tile: dict) -> Any:
    """kernels/w4a8_mma.py alone (x quantized before), at its TILE with ``tile``'s keys
    (``ASYM``: activations with zero points; ``ZEROS``: symmetric ones through the zero-point
    loop, every zero point 0: the same bits)."""
    from aoq.kernels import act_quant
    from aoq.kernels.w4a8_mma import w4a8_mma

    tile = dict(tile)
    mode = 1 if tile.pop("ASYM", False) else 0
    xq, xs, xz = act_quant.quantize_int8_act_triton(x, mode, None)
    y = torch.empty(x.shape[0], t[0].shape[0], dtype=torch.float32, device=x.device)
    zero = xz if mode else None
    if tile.pop("ZEROS", False):
        zero = torch.zeros(x.shape[0], dtype=torch.int32, device=x.device)
    return lambda: w4a8_mma(xq, xs, t[0], t[1], None, y, tile=dict(tile), x_zero=zero)
