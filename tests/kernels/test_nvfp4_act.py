"""kernels/nvfp4_act.py: NVFP4 activation quantize-dequantize in Triton, bit for bit against
aoq.formats.nvfp4 (every dtype; NaN / Inf blocks, all-zero and -0 blocks, blocks whose e4m3
scale is subnormal or rounds to 0, float32 subnormal inputs, many amax partials), under the
interpreter (in a subprocess unless this process defined its kernels for it) and on a GPU;
the op's CUDA implementation, and the NVFP4 x NVFP4 decode entry."""

from __future__ import annotations

import pytest
import torch
from aoq.kernels import nvfp4_act as na
from test_mx_cast import run_interpreted

from aoq.formats.nvfp4 import nvfp4_dequantize, nvfp4_quantize
from aoq.testing.metrics import bit_equal

DTYPES = (torch.bfloat16, torch.float16, torch.float32)


def _reference(x: torch.Tensor) -> torch.Tensor:
    codes, block_scale, ts = nvfp4_quantize(x)
    return nvfp4_dequantize(codes, block_scale, ts, 16, x.dtype)


def _same(got: torch.Tensor, want: torch.Tensor) -> bool:
    """Bit for bit (-0.0 included), NaN in the same places."""
    got = got.cpu()
    nan = want.isnan()
    if got.dtype != want.dtype or got.shape != want.shape:
        return False
    if not torch.equal(got.isnan(), nan):
        return False
    return bit_equal(got.masked_fill(nan, 0), want.masked_fill(nan, 0))


def _cases(dtype: torch.dtype, device: str) -> list[tuple[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(11)

    def wide(*shape: int) -> torch.Tensor:  # magnitudes over ~12 binades
        x = torch.randn(shape, generator=g) * torch.exp(torch.randn(shape, generator=g) * 2)
        return x.to(dtype)

    special = wide(3, 512)
    special[0, 5] = float("nan")
    special[1, 40] = float("-inf")
    special[0, 16:32] = 0.0
    special[0, 20] = -0.0  # an all-zero block with a -0: +0 out
    special[2, 64:80] *= 1e-4  # block scale far below amax: e4m3 subnormal or 0
    special[2, 80:96] = -(special[2, 80:96].abs()) * 1e-6
    cases = [
        ("one row", wide(1, 64)),
        ("rows and a tile tail", wide(5, 16 * 33)),
        ("NaN, Inf, zero and tiny blocks", special),
        ("3-D", wide(2, 3, 96)),
        ("all zero", torch.zeros(2, 32, dtype=dtype)),
        ("several amax partials", wide(1, 16 * 4200)),
    ]
    if device != "cpu":  # more than MAX_PARTIALS chunks: each amax program reads several
        cases.append(("capped amax partials", wide(64, 16 * 4800)))
    if dtype == torch.float32:  # subnormal inputs and a subnormal tensor scale
        cases.append(("subnormal", torch.randn(2, 64, generator=g) * 1e-39))
    return cases


def check_qdq_matches_reference(device: str) -> list[str]:
    bad = []
    for dtype in DTYPES:
        for name, x in _cases(dtype, device):
            if not _same(na.nvfp4_qdq_triton(x.to(device)), _reference(x)):
                bad.append(f"{dtype}/{name}")
    return bad


def test_qdq_bit_exact_under_the_interpreter():
    run_interpreted("test_nvfp4_act", "check_qdq_matches_reference")


@pytest.mark.parametrize(
    "shape,dtype,ok",
    [((4, 64), torch.bfloat16, True), ((2, 3, 32), torch.float32, True),
     ((4, 40), torch.bfloat16, False), ((4, 64), torch.int8, False), ((), torch.float32, False)],
)  # fmt: skip
def test_serves(shape, dtype, ok):
    assert na.serves(torch.zeros(shape, dtype=dtype)) is ok


def test_launcher_refuses_what_it_does_not_serve():
    with pytest.raises(ValueError, match="multiple of 16"):
        na.nvfp4_qdq_triton(torch.zeros(2, 40))


GPU = torch.cuda.is_available()


@pytest.mark.skipif(not GPU, reason="needs a GPU")
def test_qdq_bit_exact_on_gpu():
    assert check_qdq_matches_reference("cuda") == []


@pytest.mark.skipif(not GPU, reason="needs a GPU")
def test_op_on_gpu_runs_the_kernel_and_passes_opcheck():
    x = torch.randn(4, 96, dtype=torch.bfloat16)
    got = torch.ops.aoq.nvfp4_qdq(x.cuda())
    assert _same(got, _reference(x))
    odd = torch.randn(4, 40)  # not a multiple of 16: the reference's error, on the GPU too
    with pytest.raises(ValueError, match="divisible"):
        torch.ops.aoq.nvfp4_qdq(odd.cuda())
    torch.library.opcheck(torch.ops.aoq.nvfp4_qdq.default, (x.cuda(),))
