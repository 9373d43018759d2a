"""Float64 evaluation of the same quantized math a kernel performs: the yardstick for
"output within tolerance". Activations are quantized from the very input the kernel sees;
everything after that runs in float64."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from aoq.dispatch import Scheme
from aoq.formats import float8
from aoq.formats import linear as ref
from aoq.formats.mx import mx_dequantize, mx_quantize
from aoq.formats.nvfp4 import nvfp4_dequantize, nvfp4_quantize
from aoq.tensors import Float8Tensor, Int4Tensor, Int8Tensor, Int32Bias, QuantizedWeight
from aoq.tensors.activation import quantize_int8_activation, split_bias
from aoq.tensors.base import ActQuant


@torch.no_grad()
def float64_linear(
    x: torch.Tensor, weight: QuantizedWeight, bias: torch.Tensor | None
) -> torch.Tensor:
    """The quantized linear y = x Wᵀ + b evaluated in float64 (x [..., K] -> [..., N])."""
    lead, k = x.shape[:-1], x.shape[-1]
    x2 = x.reshape(-1, k)
    static = weight.act is ActQuant.INT8_STATIC
    fb, ib = split_bias(bias, static)
    if weight.scheme in (Scheme.INT8_INT8, Scheme.INT8_INT4):
        assert isinstance(weight, (Int8Tensor, Int4Tensor))
        codes = weight.codes() if isinstance(weight, Int4Tensor) else weight.qdata
        xq, xs, xz = quantize_int8_activation(x2, weight.act, weight.act_scale)
        y = ref.int_act_linear(xq, xs, xz, codes, weight.scale, torch.float64, fb, ib)
    elif weight.scheme is Scheme.FP8_FP8:
        assert isinstance(weight, Float8Tensor)
        xq, xs = float8.quantize_fp8(x2, weight.act_granularity, weight.qdata.dtype)
        y = ref.fp8_act_linear(xq, xs, weight.qdata, weight.scale, torch.float64, fb)
    else:
        w = weight.dequantize(torch.float32).to(torch.float64)
        if weight.act is ActQuant.MX_DYNAMIC:  # the activation's MX blocks, from aoq.formats
            a = weight.attrs()
            codes, scale = mx_quantize(x2, a["elem"], a["block_size"], -1, a["scale_rounding"])
            x2 = mx_dequantize(codes, scale, a["elem"], a["block_size"])
        elif weight.act is ActQuant.NVFP4_DYNAMIC:
            x2 = nvfp4_dequantize(*nvfp4_quantize(x2))
        y = F.linear(x2.to(torch.float64), w, None if fb is None else fb.to(torch.float64))
    return y.reshape(*lead, -1)


@torch.no_grad()
def float_torch_error(x: torch.Tensor, weight: QuantizedWeight, bias: torch.Tensor | None) -> float:
    """Relative error plain torch makes computing F.linear on the dequantized weight in x's
    dtype: the yardstick of the "no worse than ~2x plain torch" rule."""
    fb = bias.dequantize(torch.float32) if isinstance(bias, Int32Bias) else bias
    w = weight.dequantize(torch.float32)
    y = F.linear(x, w.to(x.dtype), None if fb is None else fb.to(x.dtype))
    y64 = F.linear(
        x.to(torch.float64), w.to(torch.float64), None if fb is None else fb.to(torch.float64)
    )
    den = y64.norm()
    return float((y.to(torch.float64) - y64).norm() / den) if den > 0 else 0.0
