"""int8 activation quantize-dequantize in one pass: x [M, K] -> the values of its per-token
(or static) int8 codes, (q - z) * s in float32 rounded once to x's dtype, without the codes
ever reaching memory.

Why: W4A8 past the Triton band dequantizes both operands and runs the BLAS matmul
(aoq.tensors.triton_linear, ``cublas.w4a8.dequant_mm``). Its activation side was the codes
kernel plus four elementwise torch passes over float32 (to float, less the zero point,
times the scale, to x's dtype): ~27 bytes an element, ~0.5 ms of the 1.5 ms W4A8 linear at
M = 4096, K = 14336 on an H200 (run 312f0f, bf16 0.6 ms). Here act_quant's kernel stores
the values instead of the codes (QDQ): one read of x and one write, 4 bytes an element for
bf16, the same scale, zero point and codes bit for bit, so the same values as before.

Op (namespace ``aoq``): ``qdq_int8_act(x, mode, act_scale) -> x's dtype [M, K]``; CPU runs
the reference (aoq.formats through ``aoq::quantize_int8_act``, then the same float32 math).
"""

from __future__ import annotations

import torch
import triton
from aoq.kernels._common import FLOAT_DTYPES, backend_of, check_2d, out_dtype_for
from aoq.kernels._launch import launch
from aoq.kernels.act_quant import ActMode, _act_quant_kernel, _blocks, quantize_int8_act


def qdq_int8_act_triton(x: torch.Tensor, mode: int, act_scale: torch.Tensor | None) -> torch.Tensor:
    """Triton launcher of ``aoq::qdq_int8_act`` (mode: an int8 :class:`ActMode`)."""
    check_2d("x", x, FLOAT_DTYPES)
    backend_of(x.device)
    amode = ActMode(mode)
    if amode is ActMode.FP8:
        raise ValueError("qdq_int8_act takes the int8 modes (0, 1, 2), got FP8")
    static = amode is ActMode.INT8_STATIC
    if static and (act_scale is None or act_scale.numel() != 1):
        raise ValueError("static int8 activations need a one-element float32 act_scale")
    m, k = x.shape
    out = torch.empty((m, k), dtype=out_dtype_for(x.dtype), device=x.device)
    if m == 0 or k == 0:
        return out.to(x.dtype)
    given = act_scale.reshape(1).to(torch.float32) if static else None  # type: ignore[union-attr]
    scale = torch.empty(1 if static else m, dtype=torch.float32, device=x.device)
    zero = torch.empty(m, dtype=torch.int32, device=x.device)  # (written, not read)
    bm, bk, warps = _blocks(m, k)
    launch(_act_quant_kernel, (triton.cdiv(m, bm),),
        x, out, scale, zero, given if given is not None else scale, m, k, x.stride(0),
        out.stride(0), MODE=int(amode), GIVEN=static, QMAX=127.0, BLOCK_M=bm, BLOCK_K=bk,
        ONE_TILE=k <= bk, QDQ=True, num_warps=warps,
    )  # fmt: skip
    return out.to(x.dtype)


@torch.library.custom_op("aoq::qdq_int8_act", mutates_args=(), device_types="cpu")
def qdq_int8_act(x: torch.Tensor, mode: int, act_scale: torch.Tensor | None) -> torch.Tensor:
    """Reference on CPU: ``aoq::quantize_int8_act``'s codes, ((q - z) * s).to(x.dtype)."""
    q, s, z = quantize_int8_act(x, mode, act_scale)
    values = (q.to(torch.float32) - z.to(torch.float32)[:, None]) * s.reshape(-1, 1)
    return values.to(x.dtype)


@qdq_int8_act.register_fake
def _(x, mode, act_scale):  # type: ignore[no-untyped-def]
    return torch.empty_like(x)


qdq_int8_act.register_kernel("cuda")(qdq_int8_act_triton)
