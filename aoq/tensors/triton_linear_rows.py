"""W4A8 at 65-128 rows on sm90: ``triton.w4a8.rows`` (kernels/wt_rows_w4a8.py, wt_rows' tile).

The path it replaces there, ``cublas.w4a8.dequant_mm``, dequantizes the activations (act_qdq)
and the weights (a bf16 copy of all N x K, written then read back by cuBLAS) and multiplies.
This entry multiplies the same two operands' values, the weights dequantized tile by tile in
the kernel's registers: the int4 codes are read once, nothing is written but y. Float32 sums
in both; the float bias added in float32 here (dequant_mm adds it in x's dtype).
"""

from __future__ import annotations

from typing import Any

import torch

from aoq.dispatch import kernel
from aoq.tensors.activation import split_bias
from aoq.tensors.int4 import Int4Tensor
from aoq.tensors.triton_linear import INT_ACT_MODE, _call, _int_act_check, _k


def _w4a8_rows_check(x: torch.Tensor, w: Any, bias: Any) -> str | None:
    why = _int_act_check(x, w, bias)
    if why is not None:
        return why
    if not isinstance(w, Int4Tensor):
        return "W8A8: its exact int32 accumulator is the Triton kernels' (this is W4A8's tile)"
    wr, w4 = _k.wt_rows, _k.wt_rows_w4a8
    if not w4.serves_w4a8(x, w.qdata, w.scale):
        return (
            f"wt_rows takes W4A8 at {w4.W4A8_MIN_ROWS}-{wr.ROWS} rows of bf16 / fp16 x, N a "
            f"multiple of {wr.BLOCK_N}, K of {wr.BLOCK_K}, groups a power of two, on "
            f"sm90 (AOQ_WT_ROWS on): got x {tuple(x.shape)} {x.dtype} on {x.device}, groups "
            f"of {w.group_size}"
        )
    return None


def _w4a8_rows(x: torch.Tensor, w: Any, bias: Any) -> torch.Tensor:
    xd = _call("qdq_int8_act", _k.act_qdq.qdq_int8_act_triton, x, INT_ACT_MODE[w.act],
               w.act_scale)  # fmt: skip
    fb, _ = split_bias(bias, static=False)  # an Int32Bias is used dequantized, as dequant_mm
    fb = None if fb is None else fb.to(x.dtype)
    return _call("w4a8_rows_mm", _k.wt_rows_w4a8.w4a8_rows, xd, w.qdata, w.scale, fb)


kernel("triton.w4a8.rows", _w4a8_rows_check)(_w4a8_rows)
