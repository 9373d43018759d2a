"""bench/band_sweep.py: which kernels it times per config, and its lines (no GPU needed)."""

import sys

import pytest
import torch

from aoq import dispatch
from bench import band_sweep


def test_band_kernels_follow_the_arch_and_dtype_rows():
    sm90 = dispatch.Platform(dispatch.Backend.CUDA, "sm90")
    sm80 = dispatch.Platform(dispatch.Backend.CUDA, "sm80")
    int4 = dispatch.Scheme.INT4_WEIGHT_ONLY
    want = ["triton.int4wo.decode", "triton.int4wo.prefill", "cublas.int4wo.dequant_mm"]
    assert band_sweep.band_kernels(int4, sm90, torch.bfloat16) == want
    assert band_sweep.band_kernels(int4, sm80, torch.bfloat16) == want
    fp8 = dispatch.Scheme.FP8_FP8
    assert band_sweep.band_kernels(fp8, sm90, torch.bfloat16) == [
        "triton.fp8.decode",
        "triton.fp8.prefill",  # first at 17-64 rows on sm90
        "cublas.fp8.scaled_mm",
    ]
    assert band_sweep.band_kernels(fp8, sm80, torch.bfloat16) == []  # no float8 there
    sm89 = dispatch.Platform(dispatch.Backend.CUDA, "sm89")
    assert band_sweep.band_kernels(fp8, sm89, torch.bfloat16) == [
        "triton.fp8.decode",
        "cublas.fp8.scaled_mm",
        "triton.fp8.prefill",
    ]
    assert band_sweep.band_kernels(fp8, sm90, torch.float32) == [
        "triton.fp8.decode",
        "triton.fp8.prefill",
    ]


def test_a_line_marks_the_fastest_and_the_refused():
    row = {
        "config": "int8wo", "k": 8192, "n": 8192, "m": 32, "bf16_us": 34.0,
        "shipped": "triton.int8wo.decode", "shipped_us": 26.6,
        "us": {"triton.int8wo.decode": 26.7, "triton.int8wo.prefill": 71.0,
               "triton.int8wo.prefill:unsplit": 85.0},
        "refused": {"cublas.int8wo.dequant_mm": "BLAS paths serve GPU tensors only"},
    }  # fmt: skip
    line = band_sweep._line(row)
    assert line.startswith("K8192 N8192 M32   int8wo       bf16    34.0 | shipped decode")
    assert "decode    26.7 x1.27 (fastest)" in line and "prefill    71.0 x0.48 |" in line
    assert "prefill:unsplit    85.0 x0.40 |" in line  # (--unsplit: without mid_rows' split)
    assert line.endswith("dequant_mm refused")


def test_unknown_configs_are_named(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["band_sweep", "--configs", "int4wo-g128,nope"])
    with pytest.raises(SystemExit, match="unknown configs \\['nope'\\]"):
        band_sweep.main()
