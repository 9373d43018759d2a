"""kernels/mx_dequant.py: MX and NVFP4 weights dequantized by Triton, bit for bit against
aoq.formats (every code of every element format, NaN / subnormal / extreme block scales,
unaligned shapes, every output dtype), under the interpreter (in a subprocess unless this
process defined its kernels for it) and on a GPU in tests/kernels/test_gpu.py; and the
ops' CUDA implementation choosing between the kernel and the reference."""

from __future__ import annotations

import pytest
import torch
from aoq.kernels import mx_dequant as md
from test_mx_cast import run_interpreted

from aoq.formats.mx import MXElem, mx_dequantize, unpack_mx_codes
from aoq.formats.nvfp4 import NVFP4_BLOCK, nvfp4_dequantize, nvfp4_quantize
from aoq.formats.packing import pack_uint4, unpack_uint4
from aoq.testing.metrics import bit_equal

DTYPES = (torch.bfloat16, torch.float16, torch.float32)
SHAPES = ((16, 256), (37, 96), (5, 1024 + 64))
"""Rows x elements: one whole tile; a row tail and a K shorter than a tile; a K tail."""


def _mx_case(elem: MXElem, n: int, k: int, bs: int, seed: int) -> tuple[torch.Tensor, ...]:
    """Random packed bytes (so every code appears, NaN and Inf codes of fp8 included) and
    random E8M0 bytes with 0 (2^-127), 1, 254 and 0xFF (NaN) forced into the first blocks."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randint(0, 256, (n, k * elem.spec.bits // 8), dtype=torch.uint8, generator=g)
    s = torch.randint(100, 150, (n, k // bs), dtype=torch.uint8, generator=g)
    s.view(-1)[:4] = torch.tensor([0, 1, 254, 255], dtype=torch.uint8)
    return q, s


def _same(got: torch.Tensor, want: torch.Tensor) -> bool:
    """Bit for bit (-0.0 included) except NaNs, which must be NaN in the same places: their
    payloads come from torch's float8 conversions on one side, the GPU's on the other."""
    got = got.cpu()
    nan = want.isnan()
    if got.dtype != want.dtype or not torch.equal(got.isnan(), nan):
        return False
    return bit_equal(got.masked_fill(nan, 0), want.masked_fill(nan, 0))


def _mx_reference(q: torch.Tensor, s: torch.Tensor, elem: MXElem, bs: int, dtype: torch.dtype):
    return mx_dequantize(unpack_mx_codes(q, elem), s, elem, bs, 1, dtype)


def check_dequant_matches_reference(device: str) -> list[str]:
    """Every element format x output dtype x shape, block sizes 32, 16 and 64 (fp4), and
    NVFP4 from random bytes and from quantized data: the kernel's bits equal the
    reference's."""
    bad = []
    for elem in MXElem:
        for i, (n, k) in enumerate(SHAPES):
            for dtype in DTYPES:
                q, s = _mx_case(elem, n, k, 32, seed=i)
                got = md.mx_dequantize_triton(q.to(device), s.to(device), elem, 32, dtype)
                if not _same(got, _mx_reference(q, s, elem, 32, dtype)):
                    bad.append(f"{elem.value}/{n}x{k}/{dtype}")
    for bs in (16, 64):
        q, s = _mx_case(MXElem.FP4_E2M1, 9, 512, bs, seed=bs)
        got = md.mx_dequantize_triton(
            q.to(device), s.to(device), MXElem.FP4_E2M1, bs, torch.float32
        )
        if not _same(got, _mx_reference(q, s, MXElem.FP4_E2M1, bs, torch.float32)):
            bad.append(f"fp4_e2m1/block {bs}")
    g = torch.Generator().manual_seed(7)
    for i, (n, k) in enumerate(SHAPES):
        q = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, generator=g)
        s = torch.randint(0, 256, (n, k // NVFP4_BLOCK), dtype=torch.uint8, generator=g)
        ts = torch.tensor(3.7e-3 * (i + 1), dtype=torch.float32)
        for dtype in DTYPES:
            got = md.nvfp4_dequantize_triton(q.to(device), s.to(device), ts.to(device), dtype)
            want = nvfp4_dequantize(unpack_uint4(q), s.view(torch.float8_e4m3fn), ts, 16, dtype)
            if not _same(got, want):
                bad.append(f"nvfp4/random/{n}x{k}/{dtype}")
    w = torch.randn(24, 320, generator=g) * 5
    w[3, 17] = float("nan")
    codes, bscale, ts = nvfp4_quantize(w)
    q = pack_uint4(codes)
    got = md.nvfp4_dequantize_triton(q.to(device), bscale.to(device), ts.to(device), torch.bfloat16)
    if not _same(got, nvfp4_dequantize(codes, bscale, ts, 16, torch.bfloat16)):
        bad.append("nvfp4/quantized")
    return bad


def test_dequant_bit_exact_under_the_interpreter():
    run_interpreted("test_mx_dequant", "check_dequant_matches_reference")


@pytest.mark.parametrize(
    "shape,bs,axis,ok",
    [((64, 48), 32, 1, True), ((64, 48), 16, -1, True), ((64, 48), 48, 1, False),
     ((64, 48), 32, 0, False), ((2, 64, 48), 32, 2, False), ((64, 48), 2048, 1, False)],
)  # fmt: skip
def test_serves(shape, bs, axis, ok):
    assert md.serves(torch.zeros(shape, dtype=torch.uint8), bs, axis) is ok


def test_launcher_checks_its_inputs():
    q = torch.zeros(4, 16, dtype=torch.uint8)
    with pytest.raises(ValueError, match="packed uint8"):
        md.mx_dequantize_triton(q.to(torch.int8), torch.zeros(4, 1, dtype=torch.uint8),
                                MXElem.INT8, 16, torch.float32)  # fmt: skip
    with pytest.raises(ValueError, match="expected \\(4, 1\\)"):
        md.mx_dequantize_triton(q, torch.zeros(4, 2, dtype=torch.uint8), MXElem.INT8, 16,
                                torch.float32)  # fmt: skip
    with pytest.raises(ValueError, match="float32 tensor scale"):
        ts = torch.tensor(1.0, dtype=torch.float64)
        md.nvfp4_dequantize_triton(q, torch.zeros(4, 2, dtype=torch.uint8), ts, torch.float32)


GPU = torch.cuda.is_available()


@pytest.mark.skipif(not GPU, reason="needs a GPU")
def test_dequant_bit_exact_on_gpu():
    assert check_dequant_matches_reference("cuda") == []


@pytest.mark.skipif(not GPU, reason="needs a GPU")
def test_ops_on_gpu_run_the_kernel_where_it_serves():
    """The CUDA implementations: the kernel for [N, K] blocked along K, the reference for a
    block size it does not take (48) and for codes blocked along dim 0; opcheck passes."""
    q, s = _mx_case(MXElem.FP6_E3M2, 64, 96, 48, seed=3)
    for args in ((q, s, "fp6_e3m2", 48, 1, torch.bfloat16), (q.t(), s.t(), "fp6_e3m2", 48, 0,
                 torch.bfloat16)):  # fmt: skip
        want = torch.ops.aoq.mx_dequantize(*args)
        gpu = [a.cuda() if isinstance(a, torch.Tensor) else a for a in args]
        assert _same(torch.ops.aoq.mx_dequantize(*gpu), want)
    q, s = _mx_case(MXElem.FP4_E2M1, 64, 96, 32, seed=4)
    args = (q.cuda(), s.cuda(), "fp4_e2m1", 32, 1, torch.bfloat16)
    assert _same(torch.ops.aoq.mx_dequantize(*args), _mx_reference(q, s, MXElem.FP4_E2M1, 32,
                                                                   torch.bfloat16))  # fmt: skip
    finite = (args[0], args[1].clamp(100, 150), *args[2:])  # opcheck compares without NaNs
    torch.library.opcheck(torch.ops.aoq.mx_dequantize.default, finite)
    sn = torch.randint(0, 120, (64, 96 // 16), dtype=torch.uint8, device="cuda")
    ts = torch.tensor(0.01, device="cuda")
    torch.library.opcheck(torch.ops.aoq.nvfp4_dequantize.default,
                          (q.cuda(), sn, ts, torch.float32))  # fmt: skip
