"""kernels/decode_mma_dyn.py (a probe): int4 units handed out by an atomic counter sum each
output's chunks in chunk order, so the result is split-K's over the same contiguous ranges,
bit for bit, whatever the programs' count; the counters are left at zero.

Runs under TRITON_INTERPRET=1 on CPU tensors (``make kernels-interpret``) and on a GPU; the
plain CPU unit run skips it."""

import pytest
import torch
from aoq.kernels import decode_mma as dm
from aoq.kernels import decode_mma_dyn
from aoq.kernels._common import INTERPRET, WeightFormat

from aoq.formats import affine
from aoq.formats.packing import pack_uint4, pack_zero_words, tile_uint4

GPU = torch.cuda.is_available() and not INTERPRET
pytestmark = pytest.mark.skipif(
    not (INTERPRET or GPU), reason="needs TRITON_INTERPRET=1 before import, or a GPU"
)
DEV = "cuda" if GPU else "cpu"
OUT = torch.bfloat16 if GPU else torch.float32  # the interpreter's kernels store float32


@pytest.mark.parametrize("m", [1, 9])
@pytest.mark.parametrize("programs", [1, 3, 40])
@pytest.mark.parametrize("tiled", [True, False])
def test_units_are_split_k_over_the_same_ranges(m, programs, tiled):
    n, k, gs = 192, 1024, 128  # 3 column tiles x 8 steps: chunks of 2 steps, as split 4
    q, s, z = affine.quantize_uint4_asymmetric(torch.randn(n, k, device=DEV), gs)
    x = torch.randn(m, k, device=DEV).to(torch.bfloat16)
    codes = tile_uint4(pack_uint4(q)) if tiled else pack_uint4(q)
    sg, zw = s.t().contiguous().t(), pack_zero_words(z)
    bias = torch.randn(n, device=DEV).to(torch.bfloat16)
    want = torch.empty(m, n, dtype=OUT, device=DEV)
    dm.decode_mma(x, codes, sg, zw, bias, want, k // gs, WeightFormat.UINT4, 4,
                  tile={"KINT": False, "SK": False}, tiled=tiled)  # fmt: skip
    for _ in range(2):  # the second launch finds the counters reset by the first
        got = torch.full((m, n), float("nan"), dtype=OUT, device=DEV)
        dm.decode_mma(x, codes, sg, zw, bias, got, k // gs, WeightFormat.UINT4, None,
                      tile={"DYN": 2, "DYN_PROGRAMS": programs}, tiled=tiled)  # fmt: skip
        assert torch.equal(got, want)
        assert decode_mma_dyn.ticket(got.device).tolist() == [0, 0]


def test_a_last_chunk_cut_short():
    n, k, gs = 64, 640, 128  # 5 steps in chunks of 2: the last chunk is one step
    q, s, z = affine.quantize_uint4_asymmetric(torch.randn(n, k, device=DEV), gs)
    x = torch.randn(1, k, device=DEV).to(torch.bfloat16)
    codes, sg, zw = tile_uint4(pack_uint4(q)), s.t().contiguous().t(), pack_zero_words(z)
    want = torch.empty(1, n, dtype=OUT, device=DEV)
    dm.decode_mma(x, codes, sg, zw, None, want, k // gs, WeightFormat.UINT4, 1,
                  tile={"SK": False}, tiled=True)  # fmt: skip
    got = torch.empty(1, n, dtype=OUT, device=DEV)
    dm.decode_mma(x, codes, sg, zw, None, got, k // gs, WeightFormat.UINT4, None,
                  tile={"DYN": 2, "DYN_PROGRAMS": 2}, tiled=True)  # fmt: skip
    torch.testing.assert_close(got.float(), want.float(), rtol=2e-2, atol=2e-2)
