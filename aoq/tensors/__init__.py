"""Tensor subclasses, one per (format, packing). Importing this registers their kernels."""

# GPU / interpreter entries; without Triton each says so as its fallback reason
from aoq.tensors import triton_linear, triton_linear_mx, triton_linear_rows  # noqa: F401
from aoq.tensors.base import ActQuant, AoqTensor, QuantizedWeight
from aoq.tensors.bias import Int32Bias
from aoq.tensors.float8 import Float8Tensor
from aoq.tensors.int4 import Int4Tensor
from aoq.tensors.int8 import Int8Tensor
from aoq.tensors.mx import MXTensor, MXWeight
from aoq.tensors.nvfp4 import NVFP4Tensor

TENSOR_CLASSES: dict[str, type[AoqTensor]] = {
    c.__name__: c
    for c in (Int8Tensor, Int4Tensor, Float8Tensor, Int32Bias, MXTensor, MXWeight, NVFP4Tensor)
}

__all__ = [
    "ActQuant",
    "AoqTensor",
    "Float8Tensor",
    "Int32Bias",
    "Int4Tensor",
    "Int8Tensor",
    "MXTensor",
    "MXWeight",
    "NVFP4Tensor",
    "QuantizedWeight",
    "TENSOR_CLASSES",
]
