"""Decode kernels that quantize their own activation row at M = 1 (act_one_row.one_row_scale):
fp8 W8A8 (fp8_mm.fp8_linear_one_row) and W8A8 / W4A8 int8 (int_act_mm.int_act_linear_one_row)
give the bits of the two launches they replace (the activation quantization, then the
decode), under the interpreter (in a subprocess unless this process defined its kernels for
it) and on a GPU."""

from __future__ import annotations

import itertools

import pytest
import torch
from _pairwise import pairwise
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
    """Fused output == two-launch output, bit for bit, at each K (1000: one pass of
    one_row_scale's 2048 block with a masked tail, int8 weights only; 2304: two passes, int4
    too), split 3 on the interpreter (the rule's on a GPU). int8 activations: every mode x
    row (the quantization's cases), each at a dtype and weight (int8, int4 in groups of 32
    or 128: the decode kernels' paths) chosen so that every pair of mode, row, dtype and
    weight runs (12 launches a K where every combination was 24 at K 1000 and 72 at 2304);
    fp8: every row x dtype, the row or tensor scale alternating so that each row and dtype
    takes both."""
    from aoq.kernels import fp8_mm
    from aoq.kernels import int_act_mm as ia

    bad = []
    g = torch.Generator().manual_seed(5)
    split = 3 if device == "cpu" else None
    for ki, k in enumerate(ks):
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
        rows, dtypes = _rows(k, device, g), {"bf16": torch.bfloat16, "fp32": torch.float32}
        for j, (rname, dtype) in enumerate(itertools.product(rows, dtypes.values())):
            x = rows[rname].to(dtype)
            name = f"K{k}/{rname}/{dtype}"
            per_row = (j + j // 2 + ki) % 2 == 0
            # the interpreter loads a NaN float8 code as a finite value, so the two-launch
            # path loses the NaN the fused kernel keeps (on GPUs the clamp maps it to -448
            # on both paths: compared there)
            if not (rname == "nan" and device == "cpu"):
                out = torch.bfloat16 if per_row else torch.float32
                b = bias if per_row else None
                xq, xs = aq.quantize_fp8_act_triton(x, per_row, f8.dtype)
                want = fp8_mm.fp8_mm_triton(xq, xs, f8, f8s, b, out, 0, split)
                got = fp8_mm.fp8_linear_one_row(x, per_row, f8, f8s, b, out, split)
                if not _same(got, want):
                    bad.append(f"fp8 {'row' if per_row else 'tensor'} {name}")
        for p in pairwise(list(rows), [0, 1, 2], dtypes, list(weights), full=2):
            rname, mode, dtype, wname = p.values
            x, (wq, ws) = rows[rname].to(dtype), weights[wname]
            name = f"K{k}/{rname}/{dtype}"
            if not ia.one_row_serves(x, wq, ws):
                bad.append(f"int mode {mode} {wname} {name}: not served")
                continue
            bi = bias_int if mode == 2 and wname == "w8" else None
            fb = None if bi is not None else bias
            xq, xs, xz = aq.quantize_int8_act_triton(x, mode, act_scale)
            zero = xz if mode == 1 else None
            want = ia.int_act_mm_triton(xq, xs, zero, wq, ws, fb, bi, x.dtype, 0, split)
            got = ia.int_act_linear_one_row(x, mode, act_scale, wq, ws, fb, bi, x.dtype, split)
            if not _same(got, want):
                bad.append(f"int mode {mode} {wname} {name}")
    return bad


def test_one_row_under_the_interpreter():
    run_interpreted(__name__, "check_one_row")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_one_row_on_gpu():
    assert check_one_row("cuda", 4104, (4096, 14336)) == []
