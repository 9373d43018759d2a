"""What the activation-quantized linears' tests share (test_interpret.py, test_mid_rows.py):
one random W8A8 / W4A8 case per activation mode, one fp8 case per scale granularity."""

import torch
from aoq.kernels import act_quant as aq

from aoq.formats import affine, float8
from aoq.formats.packing import pack_uint4


def int_act_case(m: int, k: int, n: int, mode: int):
    """(xq, xs, zero, bias, bias_int, weights) for ``mode`` 0 symmetric, 1 asymmetric (zero
    points), 2 static (an int32 bias, no float one); weights: [(int8 codes, per-channel
    scales)] for the modes W8A8 takes, then (packed int4 codes, scales per 32)."""
    w = torch.randn(n, k)
    x = torch.randn(m, k)
    xq, xs, xz = aq.quantize_int8_act(x, mode, torch.tensor(0.035))
    zero = xz if mode == 1 else None
    bias_int = torch.randint(-999, 999, (n,), dtype=torch.int32) if mode == 2 else None
    bias = None if mode == 2 else torch.randn(n)
    q8, s8 = affine.quantize_int8_symmetric(w, None)
    q4, s4 = affine.quantize_int4_symmetric(w, 32)
    weights = [(q8, s8)] if mode != 1 else []  # W8A8 activations are symmetric
    return xq, xs, zero, bias, bias_int, [*weights, (pack_uint4(q4 + 8), s4)]


def fp8_case(m: int, k: int, n: int, per_row: bool):
    """(xq, xs, wq, ws, bias): e4m3 codes with row scales (``per_row``) or tensor scales."""
    w, x, bias = torch.randn(n, k), torch.randn(m, k), torch.randn(n)
    gran = float8.Granularity.ROW if per_row else float8.Granularity.TENSOR
    wq, ws = float8.quantize_fp8(w, gran)
    xq, xs = aq.quantize_fp8_act(x, per_row, torch.float8_e4m3fn)
    return xq, xs, wq, ws, bias
