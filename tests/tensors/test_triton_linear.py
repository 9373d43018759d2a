"""aoq/tensors/triton_linear.py: which eager calls quantize their activation row inside the
decode kernel (the kernels themselves: tests/kernels/test_one_row.py)."""

import types

import torch

from aoq.tensors import triton_linear as tlin


def _weight(n: int, k: int, dtype: torch.dtype = torch.int8):
    return types.SimpleNamespace(qdata=torch.empty(n, k, dtype=dtype))


def test_one_row_only_for_one_row_and_small_weights():
    small, x = _weight(1024, 1024), torch.randn(1, 1024)
    assert tlin._one_row_pays(x, small)
    assert not tlin._one_row_pays(torch.randn(2, 1024), small)  # M = 2: its own kernel
    big = tlin.ONE_ROW_MAX_WEIGHT_BYTES // 1024 + 1
    assert not tlin._one_row_pays(torch.randn(1, 1024), _weight(big, 1024))
    # int4 packs two codes a byte: twice the elements for the same bytes still pays
    assert tlin._one_row_pays(torch.randn(1, 1024), _weight(big // 2, 1024, torch.uint8))


def test_group_major_int4_parameters_only_where_decode_mma_reads_them():
    """CUDA int4 weights carry group-major scales and zero points (Int4Tensor.build_derived);
    the decode path passes them only when decode_mma serves x (bf16 or fp16, M <= 16): the
    other decode kernels would copy them back to row-major on every call."""
    from aoq.tensors.base import ActQuant
    from aoq.tensors.int4 import Int4Tensor

    w = Int4Tensor.from_float(torch.randn(64, 256), 128, ActQuant.NONE, "int4wo", "{}")
    w._derived = {"scale_gm": w.scale.t().contiguous(), "zero_gm": w.zero_point.t().contiguous()}
    for dt in (torch.bfloat16, torch.float16):
        _, s, z = tlin._decode_parts(torch.randn(1, 256).to(dt), w)
        assert s.stride() == (1, 64) and z.stride() == (1, 64) and torch.equal(s, w.scale)
        assert torch.equal(z, w.zero_point)
    for x in (torch.randn(1, 256), torch.randn(17, 256).to(torch.bfloat16)):
        _, s, z = tlin._decode_parts(x, w)
        assert s is w.scale and z is w.zero_point


def test_group_major_w4a8_scales_only_where_the_matrix_decode_reads_them():
    """W4A8 weights on CUDA carry group-major scales too; the decode path hands them to
    int_act_mm only where it may run the matrix-unit decode (int8 codes, ROWS_MMA_FROM <= M
    <= 16, no int32 bias: w4a8_mma): the GEMV's rows below ROWS_MMA_FROM (it reads either
    order) and the M > 16 kernel read row-major and would copy a view back every call."""
    from aoq.kernels.int_act_mm import ROWS_MMA_FROM

    from aoq.tensors.base import ActQuant
    from aoq.tensors.int4 import Int4Tensor

    w = Int4Tensor.from_float(torch.randn(64, 256), 32, ActQuant.INT8_DYNAMIC, "w4a8", "{}")
    w._derived = {"scale_gm": w.scale.t().contiguous()}
    xq = torch.randint(-127, 128, (16, 256), dtype=torch.int8)
    s = tlin._w4a8_decode_scale(xq, w, None)
    assert s.stride() == (1, 64) and torch.equal(s, w.scale)
    assert tlin._w4a8_decode_scale(xq[:ROWS_MMA_FROM], w, None).stride() == (1, 64)
    for x, bias_int in ((xq[:1], None), (xq[: ROWS_MMA_FROM - 1], None),
                        (torch.zeros(17, 256, dtype=torch.int8), None),
                        (xq, torch.zeros(64, dtype=torch.int32))):  # fmt: skip
        assert tlin._w4a8_decode_scale(x, w, bias_int) is w.scale
    # an asymmetric weight-only tensor's copies belong to _decode_parts
    wo = Int4Tensor.from_float(torch.randn(64, 256), 32, ActQuant.NONE, "int4wo", "{}")
    wo._derived = {"scale_gm": wo.scale.t().contiguous(), "zero_gm": wo.zero_point.t().contiguous()}
    assert tlin._w4a8_decode_scale(xq, wo, None) is wo.scale


def test_programmatic_dependent_launch_only_at_decode_with_few_rows(monkeypatch):
    """The activation kernel triggers and the decode kernel launches with PDL only where the
    GPU has it, at decode, for M <= PDL_ROWS; the W8A8 / W4A8 and fp8 paths pass both flags
    together or neither."""
    from aoq.kernels import _common, act_quant, fp8_mm, int_act_mm

    from aoq.tensors.base import ActQuant

    seen: list[tuple[str, bool]] = []

    def quantize_int8(x, mode, act_scale, trigger=False, late=False):
        seen.append(("trigger", trigger))
        assert not late  # (W8A8: never)
        m = x.shape[0]
        return torch.zeros_like(x, dtype=torch.int8), torch.ones(m), torch.zeros(m)

    def quantize_fp8(x, per_row, dtype, trigger=False):
        seen.append(("trigger", trigger))
        return x, torch.ones(x.shape[0], 1)

    def mm(*args, pdl=False, **kw):
        seen.append(("pdl", pdl))
        return torch.zeros(args[0].shape[0], 8)

    monkeypatch.setattr(act_quant, "quantize_int8_act_triton", quantize_int8)
    monkeypatch.setattr(act_quant, "quantize_fp8_act_triton", quantize_fp8)
    monkeypatch.setattr(int_act_mm, "int_act_mm_triton", mm)
    monkeypatch.setattr(fp8_mm, "fp8_mm_triton", mm)
    monkeypatch.setattr(tlin, "_one_row_pays", lambda x, w: False)
    monkeypatch.setattr(tlin, "_w4a8_decode_scale", lambda xq, w, ib: w.scale)
    w8 = types.SimpleNamespace(qdata=torch.empty(8, 16, dtype=torch.int8), scale=torch.ones(8, 1),
                               act=ActQuant.INT8_DYNAMIC, act_scale=None)  # fmt: skip
    f8 = types.SimpleNamespace(qdata=torch.empty(8, 16), scale=torch.ones(8, 1),
                               act=ActQuant.FP8_ROW)  # fmt: skip
    cases = ((tlin._int_act, w8), (tlin._fp8_triton, f8))
    for gpu_has_it in (True, False):
        monkeypatch.setattr(_common, "pdl", lambda device, on=gpu_has_it: on)
        for make, w in cases:
            for strategy, m in ((0, 1), (0, int_act_mm.PDL_ROWS), (0, 3), (1, 1)):
                seen.clear()
                make(strategy)(torch.randn(m, 16), w, None)
                want = gpu_has_it and strategy == 0 and m <= int_act_mm.PDL_ROWS
                assert seen == [("trigger", want), ("pdl", want)], (make, strategy, m)


def test_xmx_takes_the_mx_int8_config_at_decode_only_when_asked(monkeypatch):
    """AOQ_XMX=1 (kernels/mx_decode.XMX) sends the mx-int8 config's decode to mx_int8_xmx
    with the weight's group-major bytes and BIG flag, the activation's scale rounding and
    the bias; MX int8 weight-only and other elements, float32 x, or the flag off keep the
    path they had."""
    from aoq.kernels import mx_decode
    from torch import nn

    import aoq
    from aoq.tensors import triton_linear_mx as tlm

    calls = []

    def fake(x, q, gm, flag, bs, bias, rule):
        calls.append((gm.stride(), flag.numel(), bs, bias is not None, rule))
        return torch.zeros(x.shape[0], q.shape[0], dtype=x.dtype)

    def with_bytes(w):
        s = w.scale.view(torch.uint8)
        flag = torch.zeros(0, dtype=torch.int32)
        w._derived = {"scale_gm": s.t().contiguous(), "big_scales": flag}
        return w

    def weight(config):
        return with_bytes(aoq.quantize_(nn.Linear(64, 8), config).weight)

    monkeypatch.setattr(mx_decode, "mx_int8_xmx", fake)
    monkeypatch.setattr(mx_decode, "XMX", True)
    x = torch.randn(3, 64, dtype=torch.bfloat16)
    mx_int8 = weight(aoq.MXDynamicActivationMXWeightConfig("int8", scale_rounding="rceil"))
    y = tlm._mx_decode(x, mx_int8, torch.zeros(8, dtype=torch.bfloat16))
    assert y.shape == (3, 8)
    assert calls == [((1, 8), 0, 32, True, "rceil")]  # the bytes [N, G] with strides (1, N)
    assert tlm._xmx(x.half(), mx_int8) and not tlm._xmx(x.float(), mx_int8)
    assert not tlm._xmx(x, weight(aoq.MXWeightOnlyConfig("int8")))
    assert not tlm._xmx(x, weight(aoq.MXDynamicActivationMXWeightConfig("fp8_e4m3")))
    monkeypatch.setattr(mx_decode, "XMX", False)
    assert not tlm._xmx(x, mx_int8)


def test_pdl_asked_for_w4a8_wherever_w4a8_mma_may_serve(monkeypatch):
    """Programmatic dependent launch (a GPU with it, as if): W4A8 in groups of 32 without an
    int32 bias asks for it up to w4a8_mma's 16 rows (placed late where _late says); with an
    int32 bias, other groups or AOQ_W4A8_ROWS=0, up to the GEMV's rows; W8A8 up to
    int_act_mm.PDL_ROWS; traced calls never."""
    from aoq.kernels import _common
    from aoq.kernels import int_act_mm as ia

    from aoq.tensors.base import ActQuant
    from aoq.tensors.int4 import Int4Tensor
    from aoq.tensors.int8 import Int8Tensor

    monkeypatch.setattr(_common, "pdl", lambda device: True)
    w32 = Int4Tensor.from_float(torch.randn(64, 256), 32, ActQuant.INT8_DYNAMIC, "w4a8", "{}")
    w64 = Int4Tensor.from_float(torch.randn(64, 256), 64, ActQuant.INT8_DYNAMIC, "w4a8", "{}")
    w8 = Int8Tensor.from_float(torch.randn(64, 256), None, ActQuant.INT8_DYNAMIC, "w8a8", "{}")

    def most(w, bias_int=None) -> int:
        return max(m for m in range(1, 40) if tlin._pdl(0, torch.randn(m, 256), w, bias_int))

    assert most(w32) == 16
    assert most(w32, torch.zeros(64, dtype=torch.int32)) == ia.GEMV_ROWS
    assert most(w64) == ia.GEMV_ROWS
    assert most(w8) == ia.PDL_ROWS
    assert not tlin._pdl(1, torch.randn(4, 256), w32)  # prefill
    monkeypatch.setattr(ia, "ROWS_MMA", False)
    assert most(w32) == ia.GEMV_ROWS


def test_late_where_w4a8_mma_serves_and_splits(monkeypatch):
    """The activation kernel places the decode as it ends (``late``) where w4a8_mma serves
    (W4A8 in groups of 32, no int32 bias, 3..16 rows) and its late_trigger says so (past its
    PDL_ROWS rows, K split: the split faked here); nowhere else."""
    from aoq.kernels import int_act_mm as ia
    from aoq.kernels import w4a8_mma as wm

    from aoq.tensors.base import ActQuant
    from aoq.tensors.int4 import Int4Tensor
    from aoq.tensors.int8 import Int8Tensor

    w32 = Int4Tensor.from_float(torch.randn(64, 256), 32, ActQuant.INT8_DYNAMIC, "w4a8", "{}")
    w64 = Int4Tensor.from_float(torch.randn(64, 256), 64, ActQuant.INT8_DYNAMIC, "w4a8", "{}")
    w8 = Int8Tensor.from_float(torch.randn(64, 256), None, ActQuant.INT8_DYNAMIC, "w8a8", "{}")
    monkeypatch.setattr(wm, "backend_of", lambda device: None)  # (CPU tensors, as if a GPU)
    for split in (1, 2):
        monkeypatch.setattr(wm.splitk, "splits", lambda *a, s=split, **k: s)
        late = [m for m in range(1, 20) if tlin._late(torch.randn(m, 256), w32)]
        assert late == (list(range(wm.PDL_ROWS + 1, wm.MAX_ROWS + 1)) if split > 1 else [])
        assert not tlin._late(torch.randn(8, 256), w64)
        assert not tlin._late(torch.randn(8, 256), w8)
        assert not tlin._late(torch.randn(8, 256), w32, torch.zeros(64, dtype=torch.int32))
    monkeypatch.setattr(ia, "ROWS_MMA", False)
    assert not tlin._late(torch.randn(8, 256), w32)
