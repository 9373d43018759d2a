"""Decode kernels that quantize their own activation row at M = 1 (act_one_row.one_row_scale):
fp8 W8A8 (fp8_mm.fp8_linear_one_row) and W8A8 / W4A8 int8 (int_act_mm.int_act_linear_one_row)
give the bits of the two launches they replace (the activation quantization, then the
decode), under the interpreter (in a subprocess unless this process defined its kernels for
it) and on a GPU."""

from __future__ import annotations

import pytest
import torch
from aoq.kernels import act_quant as aq
from test_mx_cast import run_interpreted

from aoq.formats import affine, float8
from aoq.formats.packing import pack_uint4


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """The same dtype, shape and bits (NaN where the other has NaN)."""
    a, b = a.cpu(), b.cpu()
    if a.dtype != b.dtype or a.shape != b.shape or not torch.equal(a.isnan(), b.isnan()):
        return False
    return torch.equal(a.nan_to_num(0.0), b.nan_to_num(0.0))


def _rows(k: int, device: str, g: torch.Generator) -> dict[str, torch.Tensor]:
    """Activation rows: Gaussian, with an outlier and ties, all zeros, with a NaN."""
    x = torch.randn(1, k, generator=g) * 3
    odd = x.clone()
    odd[0, :5] = torch.tensor([0.0, 1.5, -2.5, 1e-30, 65.0])
    nan = x.clone()
    nan[0, 7] = float("nan")
    rows = {"randn": x, "outlier": odd, "zeros": torch.zeros(1, k), "nan": nan}
    return {name: r.to(device) for name, r in rows.items()}


def check_one_row(device: str, n: int = 72, ks: tuple[int, ...] = (1000, 2304)) -> list[str]:
    """Every mode x weight x activation dtype x row x split (3 on the interpreter, the
    rule's on a GPU): fused output == two-launch output, bit for bit."""
    from aoq.kernels import fp8_mm
    from aoq.kernels import int_act_mm as ia

    bad = []
    g = torch.Generator().manual_seed(5)
    split = 3 if device == "cpu" else None
    for k in ks:
        w = torch.randn(n, k, generator=g)
        bias = torch.randn(n, generator=g).to(device)
        bias_int = torch.randint(-999, 999, (n,), dtype=torch.int32, generator=g).to(device)
        f8, f8s = (t.to(device) for t in float8.quantize_fp8(w, float8.Granularity.ROW))
        weights = {"w8": tuple(t.to(device) for t in affine.quantize_int8_symmetric(w, None))}
        for gs in (32, 128):
            if k % gs == 0:
                q4, s4 = affine.quantize_int4_symmetric(w, gs)
                weights[f"w4g{gs}"] = (pack_uint4(q4 + 8).to(device), s4.to(device))
        act_scale = torch.tensor(0.035, device=device)
        for rname, row in _rows(k, device, g).items():
            for dtype in (torch.bfloat16, torch.float32):
                x = row.to(dtype)
                name = f"K{k}/{rname}/{dtype}"
                for per_row in (True, False):
                    if rname == "nan" and device == "cpu":
                        # the interpreter loads a NaN float8 code as a finite value, so the
                        # two-launch path loses the NaN the fused kernel keeps (on GPUs the
                        # clamp maps it to -448 on both paths: compared there)
                        continue
                    out = torch.bfloat16 if per_row else torch.float32
                    b = bias if per_row else None
                    xq, xs = aq.quantize_fp8_act_triton(x, per_row, f8.dtype)
                    want = fp8_mm.fp8_mm_triton(xq, xs, f8, f8s, b, out, 0, split)
                    got = fp8_mm.fp8_linear_one_row(x, per_row, f8, f8s, b, out, split)
                    if not _same(got, want):
                        bad.append(f"fp8 {'row' if per_row else 'tensor'} {name}")
                for mode in (0, 1, 2):
                    for wname, (wq, ws) in weights.items():
                        if not ia.one_row_serves(x, wq, ws):
                            bad.append(f"int mode {mode} {wname} {name}: not served")
                            continue
                        bi = bias_int if mode == 2 and wname == "w8" else None
                        fb = None if bi is not None else bias
                        xq, xs, xz = aq.quantize_int8_act_triton(x, mode, act_scale)
                        zero = xz if mode == 1 else None
                        want = ia.int_act_mm_triton(xq, xs, zero, wq, ws, fb, bi, x.dtype, 0, split)
                        got = ia.int_act_linear_one_row(
                            x, mode, act_scale, wq, ws, fb, bi, x.dtype, split
                        )
                        if not _same(got, want):
                            bad.append(f"int mode {mode} {wname} {name}")
    return bad


def test_one_row_under_the_interpreter():
    run_interpreted(__name__, "check_one_row")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_one_row_on_gpu():
    assert check_one_row("cuda", 4104, (4096, 14336)) == []
