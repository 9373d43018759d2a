"""aoq/tensors/triton_linear.py: which eager calls quantize their activation row inside the
decode kernel (the kernels themselves: tests/kernels/test_one_row.py)."""

import types

import torch

from aoq.tensors import triton_linear as tlin


def _weight(n: int, k: int, dtype: torch.dtype = torch.int8):
    return types.SimpleNamespace(qdata=torch.empty(n, k, dtype=dtype))


def test_one_row_only_for_one_row_and_small_weights():
    small, x = _weight(1024, 1024), torch.randn(1, 1024)
    assert tlin._one_row_pays(x, small)
    assert not tlin._one_row_pays(torch.randn(2, 1024), small)  # M = 2: its own kernel
    big = tlin.ONE_ROW_MAX_WEIGHT_BYTES // 1024 + 1
    assert not tlin._one_row_pays(torch.randn(1, 1024), _weight(big, 1024))
    # int4 packs two codes a byte: twice the elements for the same bytes still pays
    assert tlin._one_row_pays(torch.randn(1, 1024), _weight(big // 2, 1024, torch.uint8))
