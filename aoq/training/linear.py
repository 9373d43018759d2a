"""The MX linear of MX training: six casts, each operand blocked along its GEMM's reduction axis.

With x [M, K], W [N, K] and g = dL/dy [M, N]::

    forward      y  = x  · Wᵀ      reduces over K:  x along K (dim 1),  W along K (dim 1)
    grad_input   gx = g  · W       reduces over N:  g along N (dim 1),  W along N (dim 0)
    grad_weight  gW = gᵀ · x       reduces over M:  g along M (dim 0),  x along M (dim 0)

Block-scaled GEMM hardware needs each operand's blocks to run along the reduction axis of the
GEMM it feeds, and no GPU offers a transposed scale layout, so the forward casts (blocks along
K) cannot be reused in backward: a peer's MX linear that quantizes g once and reuses them
computes a different function (tests/training/test_mx_linear.py: its gradients are ~1e-2 off
the six-cast ones for e4m3 under FLOOR, e2m3, e2m1 and int8).

Scales follow ``config.scale_rounding``, RCEIL by default for training (see MXTrainingConfig:
FLOOR saturates cross-entropy gradients and MXFP8 training diverges on the toy task).

Emulated mode, on every backend: each cast is a quantize-dequantize (aoq::mx_qdq: the Triton
kernel on GPUs, the aoq.formats reference on CPU) and the GEMMs multiply the dequantized
operands in the input dtype. A native block-scaled GEMM (torch._scaled_mm with E8M0 block
scales) exists only on sm100-class GPUs; it is not wired in because it cannot be verified
here, and the emulated GEMM computes the same function up to accumulation order.

A size along a blocked axis that is not a multiple of block_size is zero-padded for the cast:
zeros change neither a block's amax nor any dot product.
"""

from __future__ import annotations

from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from aoq.configs import MXTrainingConfig, register_handler
from aoq.kernels import mx_ops  # noqa: F401  (defines aoq::mx_cast / aoq::mx_qdq)
from aoq.tensors import QuantizedWeight


def mx_qdq_padded(t: Tensor, elem: str, block_size: int, dim: int, rule: str) -> Tensor:
    """MX quantize-dequantize of 2-D ``t`` along ``dim``, in t's dtype; a partial last block
    is zero-padded for the cast and cut off again."""
    n = t.shape[dim]
    pad = -n % block_size
    if pad:
        t = F.pad(t, (0, pad) if dim == 1 else (0, 0, 0, pad))
    q = torch.ops.aoq.mx_qdq(t, elem, block_size, dim, rule)
    return q.narrow(dim, 0, n) if pad else q


class _MXLinearFunction(torch.autograd.Function):
    """y = x Wᵀ with the six casts above; x [M, K], W [N, K]. GEMMs run in x's dtype."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any, x: Tensor, w: Tensor, elem: str, grad_elem: str, block_size: int, rule: str
    ) -> Tensor:
        ctx.save_for_backward(x, w)
        ctx.mx = (elem, grad_elem, block_size, rule)
        xq = mx_qdq_padded(x, elem, block_size, 1, rule)  # x along K
        wq = mx_qdq_padded(w, elem, block_size, 1, rule).to(x.dtype)  # W along K
        return xq @ wq.t()

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        x, w = ctx.saved_tensors
        elem, grad_elem, bs, rule = ctx.mx
        g = g.contiguous()
        grad_x = grad_w = None
        if ctx.needs_input_grad[0]:
            g_n = mx_qdq_padded(g, grad_elem, bs, 1, rule)  # g along N
            w_n = mx_qdq_padded(w, elem, bs, 0, rule).to(g.dtype)  # W along N
            grad_x = (g_n @ w_n).to(x.dtype)
        if ctx.needs_input_grad[1]:
            g_m = mx_qdq_padded(g, grad_elem, bs, 0, rule)  # g along M
            x_m = mx_qdq_padded(x, elem, bs, 0, rule).to(g.dtype)  # x along M
            grad_w = (g_m.t() @ x_m).to(w.dtype)
        return grad_x, grad_w, None, None, None, None


def mx_linear(x: Tensor, weight: Tensor, bias: Tensor | None, config: MXTrainingConfig) -> Tensor:
    """F.linear(x, weight, bias) with MX casts in forward and backward (x [..., K]). The bias
    is added, and its gradient summed, in full precision: it is no GEMM operand."""
    k = x.shape[-1]
    grad_elem = config.grad_elem or config.elem
    y = _MXLinearFunction.apply(
        x.reshape(-1, k), weight, config.elem, grad_elem, config.block_size, config.scale_rounding
    )
    y = y.reshape(*x.shape[:-1], weight.shape[0])
    return y if bias is None else y + bias.to(y.dtype)


class MXLinear(nn.Linear):
    """An nn.Linear trained with MX casts (``config``: MXTrainingConfig). Same parameters,
    same state_dict keys; quantizing it later for inference (any inference config) makes it
    run that quantized weight instead."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        config: MXTrainingConfig | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__(in_features, out_features, bias, device=device, dtype=dtype)
        self.config = config or MXTrainingConfig()

    def forward(self, x: Tensor) -> Tensor:
        if isinstance(self.weight, QuantizedWeight):
            return F.linear(x, self.weight, self.bias)
        return mx_linear(x, self.weight, self.bias, self.config)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, mx={self.config.id}, gemm=emulated"


@register_handler(MXTrainingConfig)
def _mx_training(module: nn.Module, config: MXTrainingConfig) -> nn.Module:
    if not isinstance(module, nn.Linear):
        raise TypeError(f"{config.id} swaps nn.Linear modules, got {type(module).__name__}")
    if isinstance(module, MXLinear):
        raise ValueError(f"this Linear already trains with MX ({module.config.id})")
    if isinstance(module.weight, QuantizedWeight):
        raise ValueError(
            f"this Linear holds a quantized inference weight ({module.weight.config_id}); MX "
            "training needs the float master weight"
        )
    # in place: the same object keeps its Parameters (an optimizer built before the swap keeps
    # training them), hooks and place in the model, and a bare Linear can be the model itself
    module.__class__ = MXLinear
    mx = cast(MXLinear, module)
    mx.config = config
    return mx
