"""Activation quantization for the integer-activation schemes, by ActQuant mode."""

from __future__ import annotations

import torch

from aoq.formats import affine
from aoq.tensors.base import ActQuant
from aoq.tensors.bias import Int32Bias


def quantize_int8_activation(
    x: torch.Tensor, act: ActQuant, act_scale: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """x [M, K] -> (xq int8, scale float32 [M] (or [] when static), zero int32 [M] or None)."""
    if act is ActQuant.INT8_DYNAMIC:
        q, s = affine.quantize_per_token_int8(x)
        return q, s, None
    if act is ActQuant.INT8_DYNAMIC_ASYM:
        return affine.quantize_per_token_int8_asymmetric(x)
    if act is ActQuant.INT8_STATIC:
        if act_scale is None:
            raise ValueError("static activation quantization needs an act_scale")
        return affine.quantize_static_int8(x, act_scale), act_scale, None
    raise ValueError(f"{act} is not an int8 activation mode")


def split_bias(
    bias: torch.Tensor | None, static: bool
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """(float bias, int32 bias) of a linear call; at most one is set. An Int32Bias joins the
    integer accumulator only for a static weight; anywhere else it is used dequantized."""
    if isinstance(bias, Int32Bias):
        return (None, bias.int_data) if static else (bias.dequantize(torch.float32), None)
    return bias, None
