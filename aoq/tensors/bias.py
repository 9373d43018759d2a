"""Int32 bias of a statically quantized linear (W8A8 / W4A8 with a calibrated act_scale).

Fields:
    int_data  int32   [N]  the bias in integer units of ``scale``; it is added to the integer
                           accumulator of group g*(n) (see aoq.formats.linear)
    scale     float32 [N]  act_scale * weight_scale[n, g*(n)]

It keeps the nominal float dtype and shape of the bias it replaced, so the state_dict key
``<module>.bias`` and ``load_state_dict(assign=True)`` into a float model work unchanged.
"""

from __future__ import annotations

import torch

from aoq.formats.affine import quantize_bias_int32
from aoq.formats.linear import bias_group
from aoq.tensors.base import AoqTensor


class Int32Bias(AoqTensor):
    tensor_fields = ("int_data", "scale")

    int_data: torch.Tensor
    scale: torch.Tensor

    def validate(self) -> None:
        (n,) = self.shape
        self._expect("int_data", (torch.int32,), (n,))
        self._expect("scale", (torch.float32,), (n,))

    def dequantize(self, dtype: torch.dtype | None = None) -> torch.Tensor:  # type: ignore[override]
        return (self.int_data.to(torch.float32) * self.scale).to(dtype or self.dtype)

    @classmethod
    def from_float(cls, bias: torch.Tensor, weight: torch.Tensor) -> Int32Bias:
        """Quantize a float bias for a static weight (one with ``scale`` [N, G] and a scalar
        ``act_scale``): units of act_scale * scale[n, g*(n)], zero point 0."""
        act_scale = getattr(weight, "act_scale", None)
        if act_scale is None:
            raise ValueError("an int32 bias needs a weight with a static act_scale")
        w_scale: torch.Tensor = weight.scale  # type: ignore[attr-defined]
        gstar = bias_group(w_scale)
        scale = act_scale * w_scale.gather(1, gstar.unsqueeze(-1)).squeeze(-1)
        return cls(bias.shape, bias.dtype, int_data=quantize_bias_int32(bias, scale), scale=scale)
