"""aoq::mx_mm, the native MX GEMM (kernels/mx_mm.py): the op is the reference on CPU (opcheck);
the Triton kernel against dequantize-then-matmul under the interpreter (its dequantizing
branch: triton 3.6's interpreter has no tl.dot_scaled) and on a GPU (tl.dot_scaled: Triton's
emulation on sm89/sm90, the block-scaled MMA on sm100). Its sm100 assembly is checked in
test_targets.py."""

from __future__ import annotations

import pytest
import torch
from aoq.kernels import mx_mm as mm
from aoq.kernels.mx_ops import mx_cast_reference
from test_mx_cast import run_interpreted

from aoq.formats.mx import mx_dequantize, unpack_mx_codes

PAIRS = [
    ("fp8_e4m3", "fp8_e4m3"),
    ("fp8_e5m2", "fp8_e4m3"),
    ("fp4_e2m1", "fp4_e2m1"),
    ("fp4_e2m1", "fp8_e5m2"),
]


def _operands(m: int, n: int, k: int, ea: str, eb: str, device: str, nan: bool = True) -> tuple:
    """x [M, K] cast along K (RCEIL, a zero block and a NaN block), w [N, K] (FLOOR)."""
    x = torch.randn(m, k) * 3
    x[:1, :32] = 0.0
    x[2:3, k - 1] = float("nan") if nan else 1.0
    w = torch.randn(n, k) * torch.logspace(-3, 3, k)  # scales spread over many binades
    a, sa = mx_cast_reference(x, ea, 32, 1, "rceil")
    b, sb = mx_cast_reference(w, eb, 32, 1, "floor")
    return tuple(t.to(device) for t in (a, sa, b, sb))


def _reference(
    a: torch.Tensor, sa: torch.Tensor, b: torch.Tensor, sb: torch.Tensor, ea: str, eb: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """(dequant(a) · dequant(b)ᵀ, |dequant(a)| · |dequant(b)|ᵀ), float32 on the CPU."""
    da = mx_dequantize(unpack_mx_codes(a.cpu(), ea), sa.cpu(), ea, 32, 1)
    db = mx_dequantize(unpack_mx_codes(b.cpu(), eb), sb.cpu(), eb, 32, 1)
    return da @ db.t(), da.abs() @ db.abs().t()


def _close(y: torch.Tensor, ref: torch.Tensor, bound: torch.Tensor) -> bool:
    """NaN where the reference has NaN; elsewhere within 1e-5 of sum |a||b| (float32 sums in
    another order, and bf16 operands inside Triton's emulation: exact for these codes)."""
    y, ref = y.float().cpu(), ref.float().cpu()
    nan = torch.isnan(ref)
    if not torch.equal(torch.isnan(y), nan):
        return False
    return bool(((y - ref).abs()[~nan] <= 1e-5 * bound[~nan] + 1e-30).all())


def check_kernel_matches_reference(device: str) -> list[str]:
    bad = []
    native_only = False  # off sm100: the interpreter branch, or Triton's emulation
    for ea, eb in PAIRS:
        for m, n, k in ((37, 50, 160), (1, 33, 32), (0, 8, 64)):  # K: 3 tiles, the last partial
            a, sa, b, sb = _operands(m, n, k, ea, eb, device)
            ref, bound = _reference(a, sa, b, sb, ea, eb)
            for dtype in (torch.float32, torch.bfloat16) if m == 1 else (torch.float32,):
                y = mm.mx_mm_triton(a, sa, b, sb, ea, eb, dtype, native_only)
                if y.dtype != dtype or not _close(y, ref.to(dtype), bound + ref.abs()):
                    bad.append(f"{ea}x{eb}/{m}x{n}x{k}/{dtype}")
        # transposed storage (the backward GEMMs' operands): same values, other strides
        a, sa, b, sb = _operands(40, 24, 128, ea, eb, device)
        ref, bound = _reference(a, sa, b, sb, ea, eb)
        tr = [t.t().contiguous().t() for t in (a, sa, b, sb)]
        y = mm.mx_mm_triton(*tr, ea, eb, torch.float32, native_only)
        if not _close(y, ref, bound):
            bad.append(f"{ea}x{eb}/strided")
    return bad


def test_kernel_matches_reference_under_the_interpreter():
    run_interpreted(__name__, "check_kernel_matches_reference")


@pytest.mark.skipif(
    not (torch.cuda.is_available() and torch.cuda.get_device_capability() >= (8, 9)),
    reason="tl.dot_scaled with float8 needs an sm89+ GPU (emulated before sm100)",
)
def test_kernel_matches_reference_on_gpu():
    assert check_kernel_matches_reference("cuda") == []


def test_op_is_the_reference_on_cpu():
    a, sa, b, sb = _operands(16, 24, 96, "fp8_e4m3", "fp4_e2m1", "cpu")
    y = torch.ops.aoq.mx_mm(a, sa, b, sb, "fp8_e4m3", "fp4_e2m1", torch.bfloat16)
    ref = mm.mx_mm_reference(a, sa, b, sb, "fp8_e4m3", "fp4_e2m1", torch.bfloat16)
    assert torch.equal(y.isnan(), ref.isnan()) and torch.equal(y.nan_to_num(), ref.nan_to_num())
    a, sa, b, sb = _operands(16, 24, 96, "fp8_e4m3", "fp4_e2m1", "cpu", nan=False)
    torch.library.opcheck(  # (NaN outputs would never compare equal)
        torch.ops.aoq.mx_mm.default,
        (a, sa, b, sb, "fp8_e4m3", "fp4_e2m1", torch.float32),
        test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_dynamic"),
    )


def test_native_only_where_the_mma_takes_block_scales():
    assert not mm.native_mx_mm(torch.device("cpu"))
    a, sa, b, sb = _operands(8, 8, 64, "fp8_e4m3", "fp8_e4m3", "cpu")
    with pytest.raises(ValueError, match="mx_mm multiplies fp8_e4m3, fp8_e5m2, fp4_e2m1"):
        mm.mx_mm_reference(a, sa, b, sb, "fp6_e2m3", "fp8_e4m3", torch.float32)
    with pytest.raises(ValueError, match=r"b must be uint8 \[8, 64\] for K=64"):
        mm.mx_mm_reference(a, sa, b[:, :32], sb, "fp8_e4m3", "fp8_e4m3", torch.float32)
    if torch.cuda.is_available() and not mm.native_mx_mm(torch.device("cuda")):
        g = [t.cuda() for t in (a, sa, b, sb)]
        with pytest.raises(RuntimeError, match="no block-scaled MMA"):
            mm.mx_mm_triton(*g, "fp8_e4m3", "fp8_e4m3", torch.float32)
        y = torch.ops.aoq.mx_mm(*g, "fp8_e4m3", "fp8_e4m3", torch.float32)  # the reference
        ref = mm.mx_mm_reference(a, sa, b, sb, "fp8_e4m3", "fp8_e4m3", torch.float32)
        # the GPU reference is the same dequantize-then-matmul, summed by cuBLAS in its own
        # order: float32 rounding only, so a bound scaled by the output, not atol=0
        # (the random operands hold NaN blocks: the bound comes from the finite outputs)
        scale = float(ref.abs().nan_to_num(0.0, 0.0, 0.0).max())
        assert torch.allclose(y.cpu(), ref, rtol=1e-5, atol=1e-6 * scale, equal_nan=True)
