"""What the MX and NVFP4 decode_mma tests share (test_decode_mma_mx.py, _mx8.py, _fp6.py,
_nvfp4.py): where they run (TRITON_INTERPRET=1 before import, or a GPU: also
test_int4_zmma.py's and test_w4a8_gemv.py's), the output dtype there, and the comparison of
a one-hot product with the emulated path's weights."""

import pytest
import torch
from aoq.kernels._common import INTERPRET

GPU = torch.cuda.is_available() and not INTERPRET
NEEDS_KERNELS = pytest.mark.skipif(
    not (INTERPRET or GPU), reason="needs TRITON_INTERPRET=1 before import, or a GPU"
)
DEV = "cuda" if GPU else "cpu"
OUT = torch.bfloat16 if GPU else torch.float32  # the interpreter's kernels store float32


def out_dtype(xdt: torch.dtype) -> torch.dtype:
    """The output dtype of a test: x's on a GPU; float32 under the interpreter."""
    return xdt if GPU else OUT


def same(got: torch.Tensor, want: torch.Tensor) -> bool:
    """Equal values (infinities included), NaN where the reference is NaN."""
    got, want = got.float().cpu(), want.to(got.dtype).float()
    nan = want.isnan()
    return torch.equal(got.isnan(), nan) and torch.equal(got[~nan], want[~nan])


def random_case(elem, n: int, k: int, m: int, xdt: torch.dtype, seed: int) -> tuple:
    """A quantized random weight [n, k] in blocks of 32 and random activations [m, k] with a
    bias -> (codes, E8M0 scale, x, bias, the emulated path's float32-accumulated product)."""
    from aoq.formats.mx import mx_dequantize, mx_quantize

    g = torch.Generator().manual_seed(seed)
    codes, scale = mx_quantize(torch.randn(n, k, generator=g), elem, 32, 1)
    w = mx_dequantize(codes, scale, elem, 32, 1, xdt).float()
    x = torch.randn(m, k, generator=g).to(xdt)
    bias = torch.randn(n, generator=g).to(xdt)
    return codes, scale, x, bias, x.float() @ w.T + bias.float()


def random_decode(elem, wfmt, flag_of, m: int, split: int, xdt: torch.dtype, tile) -> tuple:
    """random_case's weight [130, 1024] (unaligned N, a bias) and m rows of activations through
    decode_mma with group-major E8M0 bytes and the flag ``flag_of(scale)``, K split ``split``
    ways, ``tile`` -> (the emulated product, decode_mma's output as float32 on the CPU)."""
    from aoq.kernels import decode_mma as dm

    from aoq.formats.mx import pack_mx_codes

    n, k = 130, 1024
    codes, scale, x, bias, want = random_case(elem, n, k, m, xdt, m)
    q, s = pack_mx_codes(codes, elem).to(DEV), scale.to(DEV)
    sg = s.t().contiguous().t()
    y = torch.empty(m, n, dtype=out_dtype(xdt), device=DEV)
    dm.decode_mma(x.to(DEV), q, sg, flag_of(s), bias.to(DEV), y, k // 32, wfmt, split, tile=tile)
    return want, y.float().cpu()


def one_hot_decodes(q, scale, zero, groups: int, wfmt, n: int, k: int, xdt: torch.dtype,
                    tile: dict | None = None):  # fmt: skip
    """(k0, x, y) for k0 = 0, 16, ...: x [16, k] whose row r is e_{k0 + r}, y [16, n] its
    decode by decode_mma (asserted to serve it; ``tile`` its overrides) from codes ``q``,
    ``scale`` and ``zero``: the weight's columns k0 .. k0 + 15, one exact term each."""
    from aoq.kernels import decode_mma as dm

    for k0 in range(0, k, 16):
        x = torch.zeros(16, k, dtype=xdt, device=DEV)
        x[torch.arange(16), k0 + torch.arange(16)] = 1.0
        y = torch.empty(16, n, dtype=out_dtype(xdt), device=DEV)
        assert dm.serves(x, q, groups, wfmt, scale, zero)
        dm.decode_mma(x, q, scale, zero, None, y, groups, wfmt, None, tile=tile)
        yield k0, x, y
