"""Reference linear math for every inference scheme: the spec that kernels are checked against
and the CPU path of last resort.

y = x Wᵀ + b with x [M, K], W [N, K]. Arithmetic runs in float32 (float64 when x is float64)
and the result is cast to x's dtype. Weight-only schemes dequantize W and multiply.
Integer-activation schemes multiply integer codes exactly (float64 holds every partial sum)
and scale in the epilogue::

    acc[m, n, g] = Σ_{k in group g} (xq[m, k] - xz[m]) · wq[n, k]          (exact integers)
    static bias: acc[m, n, g*(n)] += bq[n]  where g*(n) = argmax_g ws[n, g]  (the int32 bias
                 is stored in units of act_scale · ws[n, g*], so it joins that accumulator)
    y[m, n]   = xs[m] · Σ_g acc[m, n, g] · ws[n, g]  (+ float bias in dynamic mode)
"""

from __future__ import annotations

import torch


def compute_dtype(x: torch.Tensor) -> torch.dtype:
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def weight_only_linear(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x [M, K] @ dequantized w [N, K]ᵀ (+ bias) in the compute dtype, cast to x.dtype."""
    ct = compute_dtype(x)
    y = x.to(ct) @ w.to(ct).t()
    if bias is not None:
        y = y + bias.to(ct)
    return y.to(x.dtype)


def bias_group(w_scale: torch.Tensor) -> torch.Tensor:
    """g*(n): the group whose scale is largest (first on ties), where a static bias lives."""
    return w_scale.argmax(dim=-1)


def int_act_linear(
    xq: torch.Tensor,
    x_scale: torch.Tensor,
    x_zero: torch.Tensor | None,
    wq: torch.Tensor,
    w_scale: torch.Tensor,
    out_dtype: torch.dtype,
    bias: torch.Tensor | None = None,
    bias_int: torch.Tensor | None = None,
) -> torch.Tensor:
    """Integer-activation linear (W8A8, W4A8).

    xq int8 [M, K]; x_scale float32 [M] or [] (static); x_zero int32 [M] or None;
    wq integer values [N, K]; w_scale float32 [N, G]; bias float [N] (dynamic) or
    bias_int int32 [N] (static, in units of x_scale · w_scale[n, g*]).
    """
    m, k = xq.shape
    n, groups = w_scale.shape
    g = k // groups
    xi = xq.to(torch.float64)
    if x_zero is not None:
        xi = xi - x_zero.to(torch.float64).unsqueeze(-1)
    wi = wq.to(torch.float64)
    # [G, M, g] @ [G, g, N] -> [G, M, N]: exact integer accumulators, one per group.
    acc = torch.bmm(
        xi.reshape(m, groups, g).transpose(0, 1), wi.reshape(n, groups, g).permute(1, 2, 0)
    )
    if bias_int is not None:
        gstar = bias_group(w_scale)
        acc[gstar, :, torch.arange(n)] += bias_int.to(torch.float64).unsqueeze(-1)
    ct = torch.float64 if out_dtype == torch.float64 else torch.float32
    y = (acc.to(ct) * w_scale.t().to(ct).unsqueeze(1)).sum(dim=0)
    y = y * x_scale.to(ct).reshape(-1, 1) if x_scale.dim() else y * x_scale.to(ct)
    if bias is not None:
        y = y + bias.to(ct)
    return y.to(out_dtype)


def fp8_act_linear(
    xq: torch.Tensor,
    x_scale: torch.Tensor,
    wq: torch.Tensor,
    w_scale: torch.Tensor,
    out_dtype: torch.dtype,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """fp8 x fp8: (xq @ wqᵀ) · xs · wsᵀ (+ bias). xs [M, 1] or [1]; ws [N, 1] or [1]."""
    ct = torch.float64 if out_dtype == torch.float64 else torch.float32
    y = xq.to(ct) @ wq.to(ct).t()
    y = y * x_scale.to(ct) * w_scale.to(ct).reshape(1, -1)
    if bias is not None:
        y = y + bias.to(ct)
    return y.to(out_dtype)
