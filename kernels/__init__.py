"""Triton kernels, imported as ``aoq.kernels`` (mapped in pyproject.toml).

One file per op family: a private ``@triton.jit`` kernel, a launcher registered with
``torch.library`` whose CPU implementation is the aoq.formats reference, and a fake
implementation for torch.compile.
"""
