"""aoq::mx_cast / aoq::mx_qdq: the ops against aoq.formats.mx, opcheck, and the Triton kernel
bit for bit against the reference, under the interpreter (a subprocess with TRITON_INTERPRET=1
set before anything defines a kernel) and on a GPU when one is present."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from aoq.kernels import mx_cast as k
from formats.test_mx_oracle import make_data

from aoq.formats.mx import MXElem, mx_dequantize, mx_quantize
from aoq.testing.metrics import bit_equal

ELEMS = [e.value for e in MXElem]
RULES = ["floor", "rceil"]


def _cases(elem: str, dtypes: bool, device: str) -> list[tuple[str, torch.Tensor]]:
    """The oracle's hard blocks for ``elem`` in every layout the kernel meets (contiguous and
    transposed strides), optionally plain inputs of the other dtypes, and an empty one."""
    x = torch.from_numpy(make_data(elem)).to(device)  # [R, 128] float32
    x = x[: x.shape[0] // 32 * 32]
    out = [("oracle", x), ("oracle-t", x.t())]
    for dtype in (torch.bfloat16, torch.float16, torch.float64) if dtypes else ():
        out.append((str(dtype), (torch.randn(64, 96, device=device) * 3).to(dtype)))
    out.append(("M0", torch.randn(0, 64, device=device)))
    return out


def check_kernel_matches_reference(
    device: str, full: bool = True, hw_fp8: bool = False, elems: list[str] = ELEMS
) -> list[str]:
    """Codes, scales and qdq bits equal the reference's for every elem x dim x case, both
    rules. ``full=False`` (GPUs, where each constexpr combination compiles): RCEIL and the
    other dtypes only for fp8_e4m3 and int8 (the RCEIL subnormal edge). ``hw_fp8``: round fp8
    elements with the GPU's float8 conversion."""
    bad = []
    for elem in elems:
        more = full or elem in ("fp8_e4m3", "int8")
        for name, x in _cases(elem, more, device):
            for rule in RULES if more else RULES[:1]:
                for dim in (0, 1):
                    if x.shape[dim] % 32:
                        continue
                    codes, scale = k.mx_cast_triton(x, elem, 32, dim, rule, hw_fp8=hw_fp8)
                    rc, rs = mx_quantize(x.cpu(), elem, 32, dim, rule)
                    q, _ = k.mx_cast_triton(x, elem, 32, dim, rule, True, hw_fp8=hw_fp8)
                    rq = mx_dequantize(rc, rs, elem, 32, dim, dtype=x.dtype)
                    ok = bit_equal(codes.cpu(), rc.view(torch.uint8)) and bit_equal(scale.cpu(), rs)
                    if not (ok and bit_equal(q.cpu(), rq)):
                        bad.append(f"{name}/{elem}/{rule}/dim{dim}")
    return bad


INTERPRETED = r"""
import sys
sys.path[:0] = sys.argv[1:3]
from test_mx_cast import check_kernel_matches_reference
print("BAD", check_kernel_matches_reference("cpu"))
"""


def test_triton_kernel_bit_exact_under_the_interpreter():
    here = Path(__file__).parent
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    out = subprocess.run(
        [sys.executable, "-c", INTERPRETED, str(here), str(here.parent)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "BAD []" in out.stdout, out.stdout[-3000:]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_triton_kernel_bit_exact_on_gpu():
    assert check_kernel_matches_reference("cuda", full=False) == []


@pytest.mark.skipif(
    not (torch.cuda.is_available() and k._has_fp8_cvt(torch.device("cuda"))),
    reason="needs an NVIDIA GPU with float8 conversions (sm89+)",
)
def test_hardware_fp8_rounding_bit_exact_on_gpu():
    fp8 = ["fp8_e4m3", "fp8_e5m2"]
    assert check_kernel_matches_reference("cuda", full=False, hw_fp8=True, elems=fp8) == []


@pytest.mark.parametrize("elem", ELEMS)
@pytest.mark.parametrize("dim", [0, 1])
def test_ops_are_the_reference_on_cpu(elem, dim):
    x = torch.randn(64, 96) * 10
    codes, scale = torch.ops.aoq.mx_cast(x, elem, 32, dim, "floor")
    rc, rs = mx_quantize(x, elem, 32, dim, "floor")
    assert bit_equal(codes, rc.view(torch.uint8)) and bit_equal(scale, rs)
    q = torch.ops.aoq.mx_qdq(x.to(torch.bfloat16), elem, 32, dim, "rceil")
    rc, rs = mx_quantize(x.to(torch.bfloat16), elem, 32, dim, "rceil")
    assert bit_equal(q, mx_dequantize(rc, rs, elem, 32, dim, dtype=torch.bfloat16))


DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dim", [0, 1])
def test_opcheck(device, dim):
    x = torch.randn(64, 96, device=device)
    torch.library.opcheck(torch.ops.aoq.mx_cast.default, (x, "fp4_e2m1", 32, dim, "floor"))
    torch.library.opcheck(torch.ops.aoq.mx_qdq.default, (x, "fp8_e4m3", 32, dim, "rceil"))


def test_clear_errors():
    with pytest.raises(ValueError, match="not divisible by block_size=32; pad dim 0"):
        torch.ops.aoq.mx_cast(torch.randn(40, 64), "fp8_e4m3", 32, 0, "floor")
    with pytest.raises(ValueError, match="2-D"):
        torch.ops.aoq.mx_qdq(torch.randn(2, 32, 32), "fp8_e4m3", 32, 1, "floor")
    with pytest.raises(ValueError, match="unknown MX element 'fp5'"):
        torch.ops.aoq.mx_qdq(torch.randn(32, 32), "fp5", 32, 1, "floor")
    with pytest.raises(ValueError, match="dim=2"):
        torch.ops.aoq.mx_qdq(torch.randn(32, 32), "fp8_e4m3", 32, 2, "floor")
    if not k.INTERPRET:
        with pytest.raises(RuntimeError, match="TRITON_INTERPRET=1"):
            k.mx_cast_triton(torch.randn(32, 32), "fp8_e4m3", 32, 1)
