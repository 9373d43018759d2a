"""torch.library ops of aoq.kernels: schema, CPU (reference) implementation and fake
implementation pass torch.library.opcheck; the kernel table names a kernel for every band."""

import pytest
import torch
from aoq.kernels import act_qdq, act_quant, fp8_mm, int_act_mm, weight_dequant, weight_only

from aoq import dispatch
from aoq.backends import Backend
from aoq.formats import affine, float8
from aoq.formats.packing import pack_uint4

OPCHECK_TESTS = ("test_schema", "test_faketensor", "test_aot_dispatch_dynamic")


def _cases():
    w, x = torch.randn(48, 128), torch.randn(5, 128, dtype=torch.bfloat16)
    q8, s8 = affine.quantize_int8_symmetric(w, None)
    q4, s4, z4 = affine.quantize_uint4_asymmetric(w, 32)
    qs4, ss4 = affine.quantize_int4_symmetric(w, 32)
    qf, sf = float8.quantize_fp8(w, float8.Granularity.ROW)
    xq, xs, xz = act_quant.quantize_int8_act(x, 1, None)
    xf, xfs = float8.quantize_fp8(x, float8.Granularity.ROW)
    b = torch.randn(48, dtype=torch.bfloat16)
    return {
        "int8_act": (act_quant.quantize_int8_act, (x, 0, None)),
        "int8_act_static": (act_quant.quantize_int8_act, (x, 2, torch.tensor(0.05))),
        "fp8_act": (act_quant.quantize_fp8_act, (x, False, torch.float8_e4m3fn)),
        "int8_qdq_asym": (act_qdq.qdq_int8_act, (x, 1, None)),
        "int8_qdq_static": (act_qdq.qdq_int8_act, (x, 2, torch.tensor(0.05))),
        "int8wo": (weight_only.weight_only_mm, (x, q8, s8, None, b, 0)),
        "int4wo": (weight_only.weight_only_mm, (x, pack_uint4(q4), s4, z4, None, 1)),
        "fp8wo": (weight_only.weight_only_mm, (x, qf, sf, None, b, 0)),
        "dequant": (
            weight_dequant.dequantize_weight,
            (pack_uint4(q4), s4, z4, 128, torch.bfloat16),
        ),
        "w8a8": (int_act_mm.int_act_mm, (xq, xs, None, q8, s8, b, None, torch.bfloat16, 1)),
        "w4a8": (
            int_act_mm.int_act_mm,
            (xq, xs, xz, pack_uint4(qs4 + 8), ss4, None, None, torch.float32, 0),
        ),
        "fp8": (fp8_mm.fp8_mm, (xf, xfs, qf, sf, b, torch.bfloat16, 0)),
    }


@pytest.mark.parametrize("name", list(_cases()))
def test_opcheck(name):
    op, args = _cases()[name]
    tests = OPCHECK_TESTS
    if any(isinstance(a, torch.Tensor) and a.dtype == torch.float8_e4m3fn for a in args):
        # opcheck's schema test compares inputs with allclose, which torch lacks for float8
        tests = tuple(t for t in tests if t != "test_schema")
    torch.library.opcheck(op, args, test_utils=tests)


def test_every_gpu_band_names_registered_kernels():
    for (scheme, backend), bands in dispatch.BY_M.items():
        assert bands[-1][0] == dispatch.M_ANY, (scheme, backend)
        for _, names in bands:
            for name in names:
                assert name in dispatch._IMPLS, name
    plat = dispatch.Platform(Backend.CUDA, "sm90")
    assert dispatch.candidates(dispatch.Scheme.INT4_WEIGHT_ONLY, plat, 1) == (
        "triton.int4wo.decode",
    )
    assert dispatch.candidates(dispatch.Scheme.INT4_WEIGHT_ONLY, plat, 4096) == (
        "cublas.int4wo.dequant_mm",
    )
    sm80 = dispatch.Platform(Backend.CUDA, "sm80")
    assert dispatch.candidates(dispatch.Scheme.FP8_FP8, sm80, 1) == ()
    assert "cuda M1-16" in dispatch.describe()
