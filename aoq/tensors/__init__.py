"""Tensor subclasses, one per (format, packing). Importing this registers their kernels."""

from aoq.tensors.base import ActQuant, AoqTensor, QuantizedWeight
from aoq.tensors.bias import Int32Bias
from aoq.tensors.float8 import Float8Tensor
from aoq.tensors.int4 import Int4Tensor
from aoq.tensors.int8 import Int8Tensor

TENSOR_CLASSES: dict[str, type[AoqTensor]] = {
    c.__name__: c for c in (Int8Tensor, Int4Tensor, Float8Tensor, Int32Bias)
}

__all__ = [
    "ActQuant",
    "AoqTensor",
    "Float8Tensor",
    "Int32Bias",
    "Int4Tensor",
    "Int8Tensor",
    "QuantizedWeight",
    "TENSOR_CLASSES",
]
