"""bench/decode_rows.py's MX runners beside decode_mma's own: mx_decode's generic tile
(``GENERIC``) and decode_mma's integer MMA against MX int8 activation codes (``XMX``)."""

from __future__ import annotations

from typing import Any

import torch


def generic_mx_runner(wf: Any, x: torch.Tensor, t: tuple) -> Any:
    """An MX weight on kernels/mx_decode.py's own tile (row-major E8M0 bytes, no BIG flag):
    the path MX elements that decode_mma does not take run (MX int8 before session 35)."""
    from aoq.kernels._common import WeightFormat as W
    from aoq.kernels.mx_decode import DECODE_MMA_FORMATS, mx_decode_triton

    from aoq.formats.mx import MXElem

    elems = {v: k for k, v in DECODE_MMA_FORMATS.items()} | {W.MX_INT8: MXElem.INT8}
    elem = elems[wf].value
    s = t[1].contiguous()
    return lambda: mx_decode_triton(x, t[0], s, None, elem, 32, None)


def xmx_runner(groups: int, x: torch.Tensor, t: tuple, tile: dict) -> Any:
    """MX int8 weights against x cast to MX int8 codes (decode_mma's XMX, the integer MMA):
    the cast runs once here, so this times the decode alone, as the TILE's row (x in bf16,
    whose config runs an MX quantize-dequantize kernel first, as XMX would its cast)."""
    from aoq.kernels import decode_mma
    from aoq.kernels._common import WeightFormat as W
    from aoq.kernels.mx_cast import mx_cast_triton

    codes, xsc = mx_cast_triton(x, "int8", x.shape[1] // groups, 1, "floor")
    y = torch.empty(x.shape[0], t[0].shape[0], dtype=x.dtype, device=x.device)

    def call() -> torch.Tensor:
        decode_mma.decode_mma(codes.view(torch.int8), t[0], t[1], t[2], None, y, groups,
                              W.MX_INT8, None, tile=tile, x_block_scale=xsc)  # fmt: skip
        return y

    return call
