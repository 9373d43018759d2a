"""aoq.mx: OCP Microscaling (MX v1.0) tensors.

    t = aoq.mx.to_mx(x, "fp8_e4m3", block_size=32, axis=-1, scale_rounding="floor")
    t.qdata        # uint8 codes packed along axis (fp4: 2 per byte, fp6: 4 per 3 bytes)
    t.scale        # torch.float8_e8m0fnu, one per block (0xFF: a NaN/Inf block)
    t.dequantize(torch.bfloat16)

Elements: fp8_e4m3 fp8_e5m2 fp6_e2m3 fp6_e3m2 fp4_e2m1 int8 (MXElem); scale rules: floor (the
spec) and rceil (NVIDIA's; never saturates) (ScaleRounding). The math is aoq.formats.mx.
An MXTensor saves and loads like every aoq tensor (torch.save + torch.load(weights_only=True)
once aoq is imported, or aoq.save_pretrained as a module buffer or parameter).
"""

from aoq.formats.mx import MXElem, ScaleRounding
from aoq.tensors.mx import MXTensor, MXWeight, to_mx

__all__ = ["MXElem", "MXTensor", "MXWeight", "ScaleRounding", "to_mx"]
