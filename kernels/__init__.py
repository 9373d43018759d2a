"""Triton kernels, imported as ``aoq.kernels`` (mapped in pyproject.toml).

One file per op family: a private ``@triton.jit`` kernel, a launcher registered with
``torch.library`` (namespace ``aoq``) whose CPU implementation is the aoq.formats reference,
and a fake implementation for torch.compile:

- ``act_quant``    int8 per-token (sym / asym / static) and float8 row / tensor activations
- ``act_qdq``      int8 activation quantize-dequantize in one pass (W4A8 at large M)
- ``act_one_row``  the activation row quantized inside a decode kernel at M = 1
- ``weight_only``  int8, int4 (asymmetric, groupwise) and float8 weight-only linears
- ``weight_dequant`` their codes dequantized: the tile helper, and the dequantize kernel
                   of the dequantize-then-BLAS prefill path
- ``int_act_mm``   W8A8 and W4A8 with exact int32 accumulators
- ``fp8_mm``       float8 x float8 (Triton GEMM, and torch._scaled_mm)
- ``targets``      ahead-of-time compilation for every GPU target
                   (``python -m aoq.kernels.targets``)

Importing this package defines the kernels: set TRITON_INTERPRET=1 *before* the first import
to run them on CPU tensors through Triton's interpreter. Importing the package itself imports
no submodule, so no Triton: aoq imports the families only where Triton is installed
(aoq.tensors.triton_linear).
"""
