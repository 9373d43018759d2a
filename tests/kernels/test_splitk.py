"""kernels/splitk.py: the split chosen by rule, the epilogue bits, the per-stream counters,
and the fused reduction (the last program of a column tile sums the partials) against the
reduction kernel, for every split decode kernel: under the interpreter (in a subprocess
unless this process defined its kernels for it) and on a GPU."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from aoq.kernels import act_quant as aq
from aoq.kernels import splitk
from test_mx_cast import run_interpreted

from aoq.formats import affine, float8
from aoq.formats.packing import pack_uint4
from aoq.testing.metrics import bit_equal


def decode_calls(device: str, n: int, k: int) -> list[tuple[str, Callable[[], torch.Tensor]]]:
    """(name, call) per split decode kernel and path at K split 3 (the interpreter) or by
    rule (a GPU), M 1 and 5; each call returns its output."""
    from aoq.kernels import fp8_mm
    from aoq.kernels import int_act_mm as ia
    from aoq.kernels import mx_decode as mdc
    from aoq.kernels import weight_only as wo

    from aoq.formats.mx import MXElem, mx_quantize, pack_mx_codes
    from aoq.formats.nvfp4 import nvfp4_quantize

    split = 3 if device == "cpu" else None
    g = torch.Generator().manual_seed(3)

    def dev(*ts):
        return [t.to(device) if t is not None else None for t in ts]

    w, bias = torch.randn(n, k, generator=g), torch.randn(n, generator=g)
    q8, s8 = dev(*affine.quantize_int8_symmetric(w, None))
    q4, s4, z4 = affine.quantize_uint4_asymmetric(w, 128)
    p4, s4, z4 = dev(pack_uint4(q4), s4, z4)
    w4q, w4s = affine.quantize_int4_symmetric(w, 32)
    w4, w4s = dev(pack_uint4(w4q + 8), w4s)
    f8, f8s = dev(*float8.quantize_fp8(w, float8.Granularity.ROW))
    mxq, mxs = mx_quantize(w, MXElem.FP4_E2M1, 32, 1)
    mxq, mxs = dev(pack_mx_codes(mxq, MXElem.FP4_E2M1), mxs)
    nvq, nvs, nvts = nvfp4_quantize(w)
    nvq, nvs, nvts = dev(pack_uint4(nvq), nvs, nvts)
    (bias,) = dev(bias)
    wo_mm, ia_mm, f32 = wo.weight_only_mm_triton, ia.int_act_mm_triton, torch.float32
    calls = []
    for m in (1, 5):
        (x,) = dev(torch.randn(m, k, generator=g))
        xb = x.to(torch.bfloat16)
        xq, xs, _ = aq.quantize_int8_act(x, 0, None)
        xq_st, xs_st, _ = aq.quantize_int8_act(x, 2, torch.tensor(0.035, device=device))
        (bias_int,) = dev(torch.randint(-999, 999, (n,), dtype=torch.int32, generator=g))
        f8x, f8xs = aq.quantize_fp8_act(x, True, torch.float8_e4m3fn)
        f8t, f8ts = aq.quantize_fp8_act(x, False, torch.float8_e4m3fn)
        calls += [
            (f"int8wo-f32/M{m}", lambda x=x: wo_mm(x, q8, s8, None, bias, 0, split=split)),
            (f"int4wo-f32/M{m}", lambda x=x: wo_mm(x, p4, s4, z4, bias, 0, split=split)),
            (f"int4wo-bf16/M{m}", lambda x=xb: wo_mm(x, p4, s4, z4, bias, 0, split=split)),
            (f"int8wo-bf16/M{m}", lambda x=xb: wo_mm(x, q8, s8, None, None, 0, split=split)),
            (f"fp8wo-bf16/M{m}", lambda x=xb: wo_mm(x, f8, f8s, None, bias, 0, split=split)),
            (f"w8a8/M{m}", lambda a=(xq, xs): ia_mm(*a, None, q8, s8, bias, None, f32, 0, split)),
            (f"w8a8-static/M{m}", lambda a=(xq_st, xs_st), bi=bias_int: ia_mm(
                *a, None, q8, s8, None, bi, f32, 0, split)),
            (f"w4a8/M{m}", lambda a=(xq, xs): ia_mm(*a, None, w4, w4s, bias, None, f32, 0, split)),
            (f"fp8-row/M{m}", lambda a=(f8x, f8xs): fp8_mm.fp8_mm_triton(
                *a, f8, f8s, bias, torch.bfloat16, 0, split)),
            (f"fp8-tensor/M{m}", lambda a=(f8t, f8ts): fp8_mm.fp8_mm_triton(
                *a, f8, f8s, None, f32, 0, split)),
            (f"mx-fp4/M{m}", lambda x=xb: mdc.mx_decode_triton(
                x, mxq, mxs, None, "fp4_e2m1", 32, bias, split)),
            (f"nvfp4/M{m}", lambda x=xb: mdc.mx_decode_triton(
                x, nvq, nvs, nvts, "fp4_e2m1", 16, None, split)),
        ]  # fmt: skip
    return calls


def check_fused_reduction(device: str, n: int = 72, k: int = 2048) -> list[str]:
    """Per call: fused (no reduction kernel ran) and unfused (one ran) give the same bits,
    and the stream's counters are back at zero. Restores splitk's switches. K 2048: the W4A8
    GEMV's steps are 1024 codes, so a shorter K would leave it one range."""
    bad = []
    real, fused_flag = splitk.reduce_partials, splitk.FUSED
    reductions = []

    def spy(*a, **kw):
        reductions.append(1)
        return real(*a, **kw)

    splitk.reduce_partials = spy
    try:
        for name, call in decode_calls(device, n, k):
            splitk.FUSED = True
            reductions.clear()
            fused = call()
            ran_fused = not reductions
            zeroed = all(int(c.abs().sum()) == 0 for c in splitk._COUNTERS.values())
            splitk.FUSED = False
            unfused = call()
            if not (ran_fused and reductions == [1]):
                bad.append(f"{name}: fused {ran_fused}, reductions {reductions}")
            elif not zeroed:
                bad.append(f"{name}: counters left non-zero")
            elif fused.dtype != unfused.dtype or not bit_equal(fused.cpu(), unfused.cpu()):
                bad.append(f"{name}: fused and unfused bits differ")
    finally:
        splitk.reduce_partials, splitk.FUSED = real, fused_flag
    return bad


def test_fused_reduction_under_the_interpreter():
    run_interpreted(__name__, "check_fused_reduction")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_fused_reduction_on_gpu():
    """Thousands of programs racing for their tickets: 4104 outputs x K 4096 (rule split)."""
    assert check_fused_reduction("cuda", 4104, 4096) == []


def test_epilogue_bits_and_tail():
    s, one = torch.ones(4), torch.tensor(2.0)
    assert splitk.epilogue_bits() == 0
    bits = splitk.epilogue_bits(col_scale=s, row_scale=one, bias=s)
    assert bits == splitk.COL_SCALE | splitk.ROW_SCALE | splitk.STATIC_ROW | splitk.BIAS
    assert splitk.epilogue_bits(col_scale=one, bias_int=s) == (
        splitk.COL_SCALE | splitk.STATIC_COL | splitk.BIAS_INT
    )
    y = torch.empty(1, 8)
    unfused = splitk.Plan(2, 64, torch.empty(2, 1, 8), None)
    fused = splitk.Plan(2, 64, torch.empty(2, 1, 8), torch.zeros(4, dtype=torch.int32))
    assert unfused.tail(bits) == 0 and unfused.counter_arg() is unfused.partials
    assert fused.tail(bits) == bits | splitk.FUSE and fused.counter_arg() is fused.counters
    assert splitk.plan(y, splitk.Backend.INTERPRET, 1, 128, 64).counters is None  # no split


def test_the_reduction_is_fused_up_to_fused_max_m_rows():
    """Past FUSED_MAX_M rows the split takes the reduction kernel: the fused tail's last
    program sums all of its tile's rows alone (slower past a few rows, bench.host_profile)."""
    for m in (1, splitk.FUSED_MAX_M, splitk.FUSED_MAX_M + 1, 64):
        y = torch.empty(m, 8)
        p = splitk.plan(y, splitk.Backend.INTERPRET, 1, 1024, 64, forced=2)
        assert p.split == 2 and (p.counters is not None) == (m <= splitk.FUSED_MAX_M), m
        never = splitk.plan(y, splitk.Backend.INTERPRET, 1, 1024, 64, 2, fused=False)
        assert never.counters is None


def test_counters_are_per_stream_and_grow(monkeypatch):
    monkeypatch.setattr(splitk, "_COUNTERS", {})
    cpu = torch.device("cpu")
    a = splitk.counters_at(cpu, 0, 7, 10)
    assert a.numel() == splitk.MIN_COUNTERS and int(a.abs().sum()) == 0
    assert splitk.counters_at(cpu, 0, 7, 100) is a
    assert splitk.counters_at(cpu, 0, 9, 10) is not a  # another stream
    big = splitk.counters_at(cpu, 0, 7, splitk.MIN_COUNTERS + 1)
    assert big is not a and big.numel() == splitk.MIN_COUNTERS + 1
    assert splitk.is_counters(big) and not splitk.is_counters(a)
    monkeypatch.setattr(splitk, "FUSED", False)
    assert splitk.counters(cpu, 10) is None


def test_split_rule_powers_of_two_or_exactly_one_wave(monkeypatch):
    """The default rule rounds the programs an SM should hold down to a power-of-two split;
    ``exact`` takes the most programs that fit in one wave (decode_mma's int4 tile: six an
    SM), each range still at least MIN_K_PER_SPLIT long."""
    from aoq.backends import Backend

    monkeypatch.setattr(splitk, "sm_count", lambda index: 132)
    cuda = torch.device("cuda", 0)

    def split(n_programs, k, exact):
        return splitk.split_k(Backend.CUDA, cuda, n_programs, k, 128, per_sm=6, exact=exact)

    # 8192 x 8192 (128 column tiles of 64), 4096 x 14336 (224), 14336 x 4096 (64)
    assert [split(128, 8192, False), split(224, 4096, False), split(64, 14336, False)] == [4, 2, 8]
    assert [split(128, 8192, True), split(224, 4096, True), split(64, 14336, True)] == [6, 3, 12]
    assert split(64, 4096, True) == 8  # 12 would leave ranges of 341 < MIN_K_PER_SPLIT
    assert split(2000, 8192, True) == 1
    assert splitk.split_k(Backend.INTERPRET, cuda, 128, 8192, 128, per_sm=6, exact=True) == 1


def test_the_reduction_is_chained_only_unfused_and_where_the_gpu_has_pdl(monkeypatch):
    """Plan.chain (the split kernel's TRIGGER, the reduction launched with programmatic
    dependent launch): only with a split, a reduction kernel (no counters: graph capture,
    past FUSED_MAX_M rows or AOQ_FUSED_SPLITK=0), a GPU that has PDL, and CHAIN on; finish
    passes it on."""
    from aoq.backends import Backend

    y = torch.empty(1, 64)
    monkeypatch.setattr(splitk, "pdl", lambda device: True)
    monkeypatch.setattr(splitk, "counters", lambda device, n: None)

    def chain(split: int) -> bool:
        return splitk.plan(y, Backend.INTERPRET, 1, 4096, 64, split).chain

    assert chain(4) and not chain(1)
    rows = torch.empty(splitk.FUSED_MAX_M + 1, 64)
    monkeypatch.setattr(splitk, "counters", lambda device, n: torch.zeros(4, dtype=torch.int32))
    assert splitk.plan(rows, Backend.INTERPRET, 1, 4096, 64, 4).chain  # too many rows to fuse
    monkeypatch.setattr(splitk, "counters", lambda device, n: None)
    monkeypatch.setattr(splitk, "CHAIN", False)
    assert not chain(4)
    monkeypatch.setattr(splitk, "CHAIN", True)
    monkeypatch.setattr(splitk, "pdl", lambda device: False)
    assert not chain(4)
    monkeypatch.setattr(splitk, "pdl", lambda device: True)
    monkeypatch.setattr(splitk, "counters", lambda device, n: torch.zeros(4, dtype=torch.int32))
    assert not chain(4)  # fused: no reduction kernel to chain
    calls = []
    monkeypatch.setattr(splitk, "reduce_partials", lambda *a: calls.append(a[-1]))
    splitk.Plan(2, 64, torch.empty(2, 1, 64), None, True).finish(y)
    splitk.Plan(2, 64, torch.empty(2, 1, 64), None).finish(y)
    assert calls == [True, False]
