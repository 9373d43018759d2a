import subprocess
import sys
import warnings

import pytest
import torch
from torch import nn

import aoq
import aoq.tensors.float8 as float8_tensors
from aoq import dispatch


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(64, 128)
        self.down = nn.Linear(128, 64)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


def test_trace_records_module_config_kernel_backend():
    model = nn.Sequential(Block(), Block())
    aoq.quantize_(model, aoq.Int8DynamicActivationInt8WeightConfig())
    with aoq.trace_kernels() as trace:
        model(torch.randn(3, 64))
    assert [r.module for r in trace.records] == ["0.up", "0.down", "1.up", "1.down"]
    r = trace.records[0]
    assert (r.config, r.kernel, r.backend, r.fallback, r.reason) == (
        "w8a8",
        "aten._int_mm",
        "cpu",
        False,
        None,
    )
    assert r.shape == (3, 64, 128) and r.dtype == "float32"
    assert trace.fallbacks == []


def test_functional_call_and_nesting_outside_trace_records_nothing():
    lin = aoq.quantize_(nn.Linear(64, 32), aoq.Int8WeightOnlyConfig())
    lin(torch.randn(2, 64))  # no trace active: nothing recorded anywhere
    with aoq.trace_kernels() as trace:
        torch.nn.functional.linear(torch.randn(2, 64), lin.weight)
    assert trace.records[0].module == "<functional>"


def test_fallback_is_recorded_with_reason():
    lin = aoq.quantize_(nn.Linear(64, 40), aoq.Int4WeightOnlyConfig(group_size=32))
    with aoq.trace_kernels() as trace:
        lin(torch.randn(2, 64))
    r = trace.records[0]
    assert r.fallback and r.kernel == "reference.int4_weight_only"
    assert "N=40 is not a multiple of 16" in r.reason


def test_strict_turns_fallback_into_error():
    lin = aoq.quantize_(nn.Linear(64, 40), aoq.Int4WeightOnlyConfig(group_size=32))
    with aoq.strict(), pytest.raises(aoq.FallbackError, match="N=40 is not a multiple of 16"):
        lin(torch.randn(2, 64))
    lin(torch.randn(2, 64))  # outside strict it runs
    ok = aoq.quantize_(nn.Linear(64, 48), aoq.Int4WeightOnlyConfig(group_size=32))
    with aoq.strict():
        ok(torch.randn(2, 64))  # intended kernel: no error


def test_strict_env_var_in_fresh_process():
    code = (
        "import torch, aoq\n"
        "lin = aoq.quantize_(torch.nn.Linear(64, 40), aoq.Int4WeightOnlyConfig(group_size=32))\n"
        "try:\n    lin(torch.randn(2, 64))\n"
        "except aoq.FallbackError as e:\n    print('raised', e)\n"
    )
    env = {"AOQ_STRICT": "1", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert "raised" in out.stdout, out.stderr


def test_every_scheme_has_a_reference_and_the_table_prints():
    for scheme in dispatch.Scheme:
        assert dispatch.reference_name(scheme) in dispatch._IMPLS
    for names in dispatch.TABLE.values():
        for name in names:
            assert name in dispatch._IMPLS, name
    text = dispatch.describe()
    assert "int4_weight_only" in text and "aten._weight_int4pack_mm_for_cpu" in text


def test_m0_input_runs_and_records():
    lin = aoq.quantize_(nn.Linear(64, 32), aoq.Int8DynamicActivationInt8WeightConfig())
    with aoq.trace_kernels() as trace:
        y = lin(torch.randn(0, 64))
    assert y.shape == (0, 32) and trace.records[0].shape == (0, 64, 32)


def test_misaligned_weight_falls_back_instead_of_crashing():
    lin = aoq.quantize_(nn.Linear(128, 48), aoq.Int8WeightOnlyConfig())
    buf = torch.empty(48 * 128 + 40, dtype=torch.int8)
    view = buf[40:].view(48, 128)  # what safetensors hands back: an offset into one buffer
    view.copy_(lin.weight.qdata)
    lin.weight = nn.Parameter(lin.weight.replace(qdata=view), requires_grad=False)
    with aoq.trace_kernels() as trace:
        lin(torch.randn(2, 128))
    assert trace.records[0].fallback and "aligned" in trace.records[0].reason


def test_int8pack_check_reads_no_address_of_a_fake_weight():
    """torch 2.11's dynamo runs F.linear on fake tensors with is_compiling() unset: the
    alignment check must not ask a fake tensor for its address (conformance's compile check
    failed on the GPU image with "Cannot access data pointer of Tensor")."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from aoq.tensors import int8 as int8_tensors

    lin = aoq.quantize_(nn.Linear(128, 48), aoq.Int8WeightOnlyConfig())
    mode = FakeTensorMode()
    w, x = mode.from_tensor(lin.weight), mode.from_tensor(torch.randn(2, 128))
    with warnings.catch_warnings():  # torch 2.13 warns ("Accessing the data pointer of
        warnings.simplefilter("error")  # FakeTensor is deprecated") and returns 0
        assert int8_tensors._int8pack_check(x, w, None) is None


def test_int8pack_op_copies_a_misaligned_weight():
    """The opaque op (what a compiled graph calls) gets no dispatch check: it copies."""
    from aoq.tensors import cpu_ops

    q = torch.randint(-128, 128, (48, 128), dtype=torch.int8)
    buf = torch.empty(q.numel() + 40, dtype=torch.int8)
    view = buf[40:].view(48, 128)
    view.copy_(q)
    assert view.data_ptr() % 64
    x, s = torch.randn(2, 128), torch.rand(48)
    assert torch.equal(cpu_ops.weight_int8pack_mm(x, view, s), cpu_ops.weight_int8pack_mm(x, q, s))


def test_fp8_rows_depend_on_the_activation_dtype():
    """float32 activations: cuBLAS's fp8 GEMM is not a float32 sum, so the Triton kernel is
    the intended kernel at every M (H200 run 98e5df recorded a fallback for fp8-row fp32)."""
    sm90 = dispatch.Platform(dispatch.Backend.CUDA, "sm90")
    fp8 = dispatch.Scheme.FP8_FP8
    for dtype in (torch.bfloat16, torch.float16, None):
        # sm90 at 17-64 rows: the Triton kernel with K split first (kernels/mid_rows.py)
        assert dispatch.candidates(fp8, sm90, 17, dtype) == (
            "triton.fp8.prefill",
            "cublas.fp8.scaled_mm",
        )
        assert dispatch.candidates(fp8, sm90, 64, dtype) == (
            "triton.fp8.prefill",
            "cublas.fp8.scaled_mm",
        )
        for plat, m in ((sm90, 65), (dispatch.Platform(dispatch.Backend.CUDA, "sm89"), 32)):
            assert dispatch.candidates(fp8, plat, m, dtype) == (
                "cublas.fp8.scaled_mm",
                "triton.fp8.prefill",
            )
    assert dispatch.candidates(fp8, sm90, 32, torch.float32) == ("triton.fp8.prefill",)
    assert dispatch.candidates(fp8, sm90, 4096, torch.float32) == ("triton.fp8.prefill",)
    assert dispatch.candidates(fp8, sm90, 1, torch.float32) == ("triton.fp8.decode",)
    gfx = dispatch.Platform(dispatch.Backend.ROCM, "gfx942")
    assert dispatch.candidates(fp8, gfx, 256, torch.float32) == ("triton.fp8.prefill",)
    sm80 = dispatch.Platform(dispatch.Backend.CUDA, "sm80")
    assert dispatch.candidates(fp8, sm80, 32, torch.float32) == ()  # the arch row still wins
    # other schemes have no dtype rows: every dtype gets the M band
    int4 = dispatch.Scheme.INT4_WEIGHT_ONLY
    assert dispatch.candidates(int4, sm90, 32, torch.float32) == ("triton.int4wo.prefill",)
    text = dispatch.describe()
    assert "cuda fp32 M>16   triton.fp8.prefill -> reference.fp8_fp8" in text
    assert "cuda M>16        cublas.fp8.scaled_mm, triton.fp8.prefill" in text
    assert "cuda sm90 M17-64 triton.fp8.prefill, cublas.fp8.scaled_mm" in text
    for names in dispatch.DTYPE_BY_M.values():
        for _, row in names:
            assert all(n in dispatch._IMPLS for n in row)


def test_fp8_tensor_scales_keep_cublas_at_mid_rows(monkeypatch):
    """Per-tensor activation scales are the "tensor" variant: on sm90 their 17-64 rows keep
    torch._scaled_mm first (its tensor-wise GEMM led the Triton kernel there), row scales
    take the Triton kernel; float32 x takes the Triton kernel either way (its dtype row)."""
    sm90 = dispatch.Platform(dispatch.Backend.CUDA, "sm90")
    fp8 = dispatch.Scheme.FP8_FP8
    both = ("cublas.fp8.scaled_mm", "triton.fp8.prefill")
    assert dispatch.candidates(fp8, sm90, 32, torch.bfloat16, "tensor") == both
    assert dispatch.candidates(fp8, sm90, 32, torch.float32, "tensor") == ("triton.fp8.prefill",)
    assert dispatch.candidates(fp8, sm90, 8, torch.bfloat16, "tensor") == ("triton.fp8.decode",)
    monkeypatch.setattr(dispatch, "platform_of", lambda device: sm90)
    x = torch.randn(32, 64, dtype=torch.bfloat16)
    for config, first in ((aoq.Float8DynamicActivationFloat8WeightConfig(), "triton"),
                          (aoq.Float8DynamicActivationFloat8WeightConfig(granularity="tensor"),
                           "cublas")):  # fmt: skip
        lin = aoq.quantize_(nn.Linear(64, 32), config)
        _, _, reason, _ = dispatch.select(fp8, x, lin.weight, None)
        assert reason.startswith(first), reason  # CPU tensors: no GPU kernel runs


def test_fp8_row_scales_of_narrow_weights_take_the_triton_kernel_to_128_rows(monkeypatch):
    """The "row-narrow" variant (on by default; AOQ_FP8_NARROW=0 turns it off): on sm90, row
    scales with N <= FP8_NARROW_N and no fast accumulation keep the Triton kernel
    first to 128 rows."""
    sm90 = dispatch.Platform(dispatch.Backend.CUDA, "sm90")
    fp8 = dispatch.Scheme.FP8_FP8
    triton_first = ("triton.fp8.prefill", "cublas.fp8.scaled_mm")
    assert dispatch.candidates(fp8, sm90, 100, torch.bfloat16, "row-narrow") == triton_first
    assert dispatch.candidates(fp8, sm90, 129, torch.bfloat16, "row-narrow") == triton_first[::-1]
    assert dispatch.candidates(fp8, sm90, 100, torch.bfloat16, None) == triton_first[::-1]
    gfx = dispatch.Platform(dispatch.Backend.ROCM, "gfx942")
    assert dispatch.candidates(fp8, gfx, 100, torch.bfloat16, "row-narrow")[0].startswith("hip")
    row = aoq.Float8DynamicActivationFloat8WeightConfig()
    fast = aoq.Float8DynamicActivationFloat8WeightConfig(fast_accum=True)
    narrow = aoq.quantize_(nn.Linear(64, 32), row).weight
    assert narrow.dispatch_variant == "row-narrow"  # on by default
    monkeypatch.setattr(float8_tensors, "_FP8_NARROW", False)
    assert narrow.dispatch_variant is None
    monkeypatch.setattr(float8_tensors, "_FP8_NARROW", True)
    monkeypatch.setattr(float8_tensors, "FP8_NARROW_N", 16)
    assert narrow.dispatch_variant is None  # N 32 > 16
    monkeypatch.setattr(float8_tensors, "FP8_NARROW_N", 4096)
    assert aoq.quantize_(nn.Linear(64, 32), fast).weight.dispatch_variant is None


def test_selection_asks_the_row_of_the_input_dtype(monkeypatch):
    """select() passes x's dtype: on a (pretended) H200 a float32 call never tries cuBLAS."""
    sm90 = dispatch.Platform(dispatch.Backend.CUDA, "sm90")
    monkeypatch.setattr(dispatch, "platform_of", lambda device: sm90)
    monkeypatch.setattr(float8_tensors, "_FP8_NARROW", False)  # (its N 32 would be narrow)
    lin = aoq.quantize_(nn.Linear(64, 32), aoq.Float8DynamicActivationFloat8WeightConfig())
    for dtype, tried in ((torch.float32, "triton.fp8.prefill:"), (torch.bfloat16, "cublas")):
        x = torch.randn(65, 64, dtype=dtype)
        _, fallback, reason, _ = dispatch.select(dispatch.Scheme.FP8_FP8, x, lin.weight, None)
        assert fallback and reason.startswith(tried), reason  # CPU tensors: no GPU kernel runs
    _, _, reason, _ = dispatch.select(
        dispatch.Scheme.FP8_FP8, torch.randn(65, 64), lin.weight, None
    )
    assert "cublas" not in reason


def test_weight_only_past_sixteen_rows_decodes_on_sm90_only():
    """17-128 rows (int4) or 17-256 (int8, e4m3) of bf16 / fp16 x: the decode kernel first on
    sm90 (its ROWS_TILE was timed there), the prefill kernel behind it; int4 past 128 rows
    dequantize + cuBLAS. Every other arch and float32 x keep the prefill kernel as the
    intended one, so strict mode raises nowhere it did not."""
    sm90 = dispatch.Platform(dispatch.Backend.CUDA, "sm90")
    for fam, scheme, most in (("int4wo", dispatch.Scheme.INT4_WEIGHT_ONLY, 128),
                              ("int8wo", dispatch.Scheme.INT8_WEIGHT_ONLY, 256),
                              ("fp8wo", dispatch.Scheme.FP8_WEIGHT_ONLY, 256)):  # fmt: skip
        assert dispatch.DECODE_ROWS_MAX_M[scheme] == most
        both = (f"triton.{fam}.decode", f"triton.{fam}.prefill")
        blas = (f"cublas.{fam}.dequant_mm",)
        for dtype in (torch.bfloat16, torch.float16, None):
            assert dispatch.candidates(scheme, sm90, 16, dtype) == (f"triton.{fam}.decode",)
            assert dispatch.candidates(scheme, sm90, 17, dtype) == both
            assert dispatch.candidates(scheme, sm90, most, dtype) == both
            assert dispatch.candidates(scheme, sm90, most + 1, dtype) == blas
            assert dispatch.candidates(scheme, sm90, 257, dtype) == blas
        assert dispatch.candidates(scheme, sm90, 32, torch.float32) == (f"triton.{fam}.prefill",)
        assert dispatch.candidates(scheme, sm90, 129, torch.float32) == (f"triton.{fam}.prefill",)
        assert dispatch.band_edges(scheme) == sorted({16, most, 256})
        for plat in (dispatch.Platform(dispatch.Backend.CUDA, "sm100"),
                     dispatch.Platform(dispatch.Backend.CUDA, "sm89"),
                     dispatch.Platform(dispatch.Backend.ROCM, "gfx942")):  # fmt: skip
            assert dispatch.candidates(scheme, plat, 32, torch.bfloat16) == (
                f"triton.{fam}.prefill",
            )
    w4a8 = dispatch.Scheme.INT8_INT4
    assert dispatch.candidates(w4a8, sm90, 64, torch.bfloat16) == (
        "triton.w4a8.decode",
        "triton.w4a8.prefill",
    )
    # 65-128 rows: wt_rows' W4A8 tile, the BLAS path behind it; past that the BLAS path
    rows = ("triton.w4a8.rows", "cublas.w4a8.dequant_mm")
    assert dispatch.candidates(w4a8, sm90, 65, torch.bfloat16) == rows
    assert dispatch.candidates(w4a8, sm90, 128, torch.float16) == rows
    assert dispatch.candidates(w4a8, sm90, 129, torch.bfloat16) == ("cublas.w4a8.dequant_mm",)
    assert dispatch.candidates(w4a8, sm90, 65, torch.float32) == ("triton.w4a8.prefill",)
    sm89 = dispatch.Platform(dispatch.Backend.CUDA, "sm89")
    assert dispatch.candidates(w4a8, sm89, 32, torch.bfloat16) == ("triton.w4a8.prefill",)
    assert "cuda sm90 M17-128 triton.int4wo.decode, triton.int4wo.prefill" in dispatch.describe()
    assert "cuda sm90 M>128  cublas.int4wo.dequant_mm" in dispatch.describe()
    for bands in dispatch.ARCH_BY_M.values():
        for _, row in bands:
            assert all(n in dispatch._IMPLS for n in row)
