"""kernels/mx_decode.py: MX and NVFP4 decode linears against the emulated path they replace
(the weight dequantized to x's dtype, then a float32-accumulated matmul), under the
interpreter (in a subprocess unless this process defined its kernels for it) and on a GPU;
the dispatch rows that choose it."""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F
from _pairwise import pairwise
from aoq.kernels import mx_decode as mdc
from test_mx_cast import run_interpreted

from aoq import dispatch
from aoq.formats.mx import MXElem, mx_dequantize, mx_quantize, pack_mx_codes
from aoq.formats.nvfp4 import nvfp4_dequantize, nvfp4_quantize
from aoq.formats.packing import pack_uint4
from aoq.tensors.mx import big_scale_flag

ULP = {torch.bfloat16: 2.0**-7, torch.float16: 2.0**-10}
XDTS = {"bf16": torch.bfloat16, "fp16": torch.float16}


def _weight(elem: MXElem | None, n: int, k: int, bs: int, g: torch.Generator):
    """(qdata, scale, tensor_scale, float32 values) of a random [n, k] weight; one block of
    row 2 holds a NaN (its block scale marks it, so outputs of row 2 are NaN)."""
    w = torch.randn(n, k, generator=g) * 3
    w[2, 5] = float("nan")
    if elem is None:  # NVFP4
        codes, bscale, ts = nvfp4_quantize(w)
        return pack_uint4(codes), bscale, ts, nvfp4_dequantize(codes, bscale, ts, 16)
    codes, scale = mx_quantize(w, elem, bs, 1)
    values = mx_dequantize(codes, scale, elem, bs, 1)
    return pack_mx_codes(codes, elem), scale, None, values


def _close(y: torch.Tensor, want: torch.Tensor) -> bool:
    """NaN where the emulated path has NaN; elsewhere within one ulp of x's dtype (the two
    float32 sums differ in order only, and each rounds once to the dtype)."""
    y = y.cpu().float()
    nan = want.isnan()
    if not torch.equal(y.isnan(), nan):
        return False
    ulp = ULP[torch.bfloat16 if y.dtype == torch.float32 else y.dtype]
    err = (y - want).abs()[~nan]
    bound = (want.abs() * ulp + 1e-5 * want[~nan].abs().max())[~nan]
    return bool((err <= bound).all())


def check_decode_matches_emulated(device: str) -> list[str]:
    """Every MX element and NVFP4 x M in {1, 7, 16} x bf16 / fp16 x bias or not x split
    (the rule's, 3); N = 72 and K = 320 leave tails in both; block sizes 16 and 64 too."""
    bad = []
    g = torch.Generator().manual_seed(0)
    n, k = 72, 320
    cases = [(e, 32) for e in MXElem] + [(None, 16), (MXElem.FP4_E2M1, 64), (MXElem.FP6_E3M2, 16)]
    for i, (elem, bs) in enumerate(cases):
        q, s, ts, values = _weight(elem, n, k, bs, g)
        for m in (1, 7, 16):
            dtype = (torch.bfloat16, torch.float16)[(i + m) % 2]
            x = torch.randn(m, k, generator=g).to(dtype)
            bias = torch.randn(n, generator=g).to(dtype) if m != 7 else None
            want = F.linear(x.double(), values.to(dtype).double())
            if bias is not None:
                want = want + bias.double()
            for split in (None, 3):
                args = [t.to(device) if t is not None else None for t in (x, q, s, ts)]
                b = bias.to(device) if bias is not None else None
                y = mdc.mx_decode_triton(*args, (elem or MXElem.FP4_E2M1).value, bs, b, split)
                if y.dtype != dtype or not _close(y, want.float()):
                    name = elem.value if elem else "nvfp4"
                    bad.append(f"{name}/b{bs}/M{m}/{dtype}/split {split}")
    return bad


def test_decode_matches_emulated_under_the_interpreter():
    run_interpreted("test_mx_decode", "check_decode_matches_emulated")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_decode_matches_emulated_on_gpu():
    assert check_decode_matches_emulated("cuda") == []


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """The same dtype, shape and bits (NaN where the other has NaN)."""
    a, b = a.cpu(), b.cpu()
    if a.dtype != b.dtype or a.shape != b.shape or not torch.equal(a.isnan(), b.isnan()):
        return False
    return torch.equal(a.nan_to_num(0.0), b.nan_to_num(0.0))


def _rows(k: int, g: torch.Generator) -> dict[str, torch.Tensor]:
    """One-row activations: wide magnitudes, the same with a NaN, with ties (halfway points
    of the fp4 / fp6 grids), all zeros."""
    wide = torch.randn(1, k, generator=g) * torch.exp(torch.randn(1, k, generator=g) * 2)
    nan, ties = wide.clone(), wide.clone()
    nan[0, 40] = float("nan")
    ties[0, :32] = torch.arange(32) * 0.25
    return {"wide": wide, "nan": nan, "ties": ties, "zeros": torch.zeros(1, k)}


def _one_row_plan(cases: int, rows: dict) -> list[list[tuple]]:
    """Per case, its (row name, dtype, split) runs: every case x row, every case x dtype and
    x split, and every pair of row, dtype and split (the one-row checks' launches are a
    second or more each under the interpreter)."""
    plan: list[list[tuple]] = [[] for _ in range(cases)]
    for p in pairwise(list(range(cases)), list(rows), XDTS, [None, 3], full=[(0, 1), (0, 2)]):
        plan[p.values[0]].append(p.values[1:])
    return plan


def check_one_row_matches_two_launches(device: str, n: int = 72, k: int = 320) -> list[str]:
    """mx_decode_triton's one_row (x's quantize-dequantize inside the decode kernel) against the
    activation kernel then mx_decode_triton, bit for bit: every MX element x both scale
    roundings, NVFP4, each with every row (wide magnitudes, a NaN, ties, all zeros), in
    bf16 or fp16, split None or 3, chosen so that each case takes both dtypes and both splits
    and every pair of row, dtype and split runs (:func:`_one_row_plan`: 52 pairs of
    launches where every combination was 208); K = 320 leaves a K tail."""
    from aoq.kernels.mx_cast import mx_cast_triton
    from aoq.kernels.nvfp4_act import nvfp4_qdq_triton

    bad = []
    g = torch.Generator().manual_seed(3)
    rows = _rows(k, g)
    cases = [(e, 32, r) for e in MXElem for r in ("floor", "rceil")] + [(None, 16, "floor")]
    plan = _one_row_plan(len(cases), rows)
    for c, (elem, bs, rule) in enumerate(cases):
        q, s, ts, _ = (t.to(device) if t is not None else None for t in _weight(elem, n, k, bs, g))
        name = elem.value if elem else "nvfp4"
        for j, (rname, dtype, split) in enumerate(plan[c]):
            x = rows[rname].to(dtype).to(device)
            bias = torch.randn(n, generator=g).to(dtype).to(device) if j % 3 else None
            if elem is None:
                xq = nvfp4_qdq_triton(x)
            else:
                xq = mx_cast_triton(x, elem, bs, 1, rule, qdq=True)[0]
            e = (elem or MXElem.FP4_E2M1).value
            want = mdc.mx_decode_triton(xq, q, s, ts, e, bs, bias, split)
            got = mdc.mx_decode_triton(x, q, s, ts, e, bs, bias, split, rule if elem else "nvfp4")
            if not _same(got, want):
                bad.append(f"{name}/{rule}/{rname}/{dtype}/split {split}")
    return bad


def check_fp6_one_row_matches_two_launches(device: str, n: int = 72, k: int = 384) -> list[str]:
    """MX fp6 with group-major bytes and the BIG flag: one_row runs decode_mma's fp6 loop
    with x quantize-dequantized in it (x_qdq; the call is watched), bit for bit the
    activation kernel then the same loop: both fp6 elements x both scale roundings, each
    with every row (wide magnitudes, a NaN, ties, all zeros) in bf16 or fp16, split None or
    3, as :func:`_one_row_plan` picks them (16 pairs of launches where there were 64)."""
    from aoq.kernels.mx_cast import mx_cast_triton

    from aoq.tensors.mx import BIG_LIMIT

    calls = []
    launch = mdc.dm.decode_mma

    def watched(*args, **kwargs):
        calls.append(kwargs.get("x_qdq"))
        return launch(*args, **kwargs)

    bad = []
    g = torch.Generator().manual_seed(5)
    rows = _rows(k, g)
    mdc.dm.decode_mma = watched
    try:
        fp6 = list(itertools.product((MXElem.FP6_E3M2, MXElem.FP6_E2M3), ("floor", "rceil")))
        plan = _one_row_plan(len(fp6), rows)
        for c, (elem, rule) in enumerate(fp6):
            q, s, _, _ = (
                t.to(device) if t is not None else None for t in _weight(elem, n, k, 32, g)
            )
            gm = s.t().contiguous().t()  # the weight's derived scale_gm, as the linear passes it
            flag = big_scale_flag(s, BIG_LIMIT[elem])
            for j, (rname, dtype, split) in enumerate(plan[c]):
                x = rows[rname].to(dtype).to(device)
                bias = torch.randn(n, generator=g).to(dtype).to(device) if j % 3 else None
                xq = mx_cast_triton(x, elem, 32, 1, rule, qdq=True)[0]
                del calls[:]
                want = mdc.mx_decode_triton(xq, q, gm, None, elem.value, 32, bias, split,
                                            big_scales=flag)  # fmt: skip
                got = mdc.mx_decode_triton(x, q, gm, None, elem.value, 32, bias, split, rule,
                                           big_scales=flag)  # fmt: skip
                name = f"{elem.value}/{rule}/{rname}/{dtype}/split {split}"
                if len(calls) != 2 or calls[0] is not None or not calls[1]:
                    bad.append(f"{name}: decode_mma calls {calls}")
                elif not _same(got, want):
                    bad.append(name)
    finally:
        mdc.dm.decode_mma = launch
    return bad


def test_fp6_one_row_matches_two_launches_under_the_interpreter():
    run_interpreted("test_mx_decode", "check_fp6_one_row_matches_two_launches")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_fp6_one_row_matches_two_launches_on_gpu():
    assert check_fp6_one_row_matches_two_launches("cuda") == []
    assert check_fp6_one_row_matches_two_launches("cuda", 264, 8192) == []  # the rule's split


def test_one_row_matches_two_launches_under_the_interpreter():
    run_interpreted("test_mx_decode", "check_one_row_matches_two_launches")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_one_row_matches_two_launches_on_gpu():
    assert check_one_row_matches_two_launches("cuda") == []
    assert check_one_row_matches_two_launches("cuda", 264, 8192) == []  # the rule's split


def test_one_row_takes_one_row():
    x = torch.zeros(2, 64, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="one row"):
        mdc.mx_decode_triton(x, torch.zeros(8, 32, dtype=torch.uint8),
                             torch.zeros(8, 2, dtype=torch.uint8), None, "fp4_e2m1", 32, None,
                             None, "floor")  # fmt: skip


def test_every_element_with_derived_bytes_has_a_decode_mma_format():
    """MXWeight builds group-major bytes and a BIG flag for the elements of BIG_LIMIT, and
    mx_decode sends those to decode_mma by DECODE_MMA_FORMATS: one list, or an element with
    the bytes would silently run mx_decode's own, slower tile (MX int8 before session 36)."""
    from aoq.tensors.mx import BIG_LIMIT

    assert set(BIG_LIMIT) == set(mdc.DECODE_MMA_FORMATS)
    assert set(mdc.DECODE_MMA_FORMATS.values()) <= set(mdc.dm.MX_FORMATS)


def test_serves():
    q = torch.zeros(8, 32, dtype=torch.uint8)
    x = torch.zeros(4, 64, dtype=torch.bfloat16)
    assert mdc.serves(x, q, 32) is None
    assert "float32 activations" in mdc.serves(x.float(), q, 32)
    assert "M=17" in mdc.serves(torch.zeros(17, 64, dtype=torch.bfloat16), q, 32)
    assert "block_size=48" in mdc.serves(x, q, 48)
    assert "block_size=8" in mdc.serves(x, q, 8)
    assert "non-contiguous" in mdc.serves(x, q.t(), 32)


def test_launcher_checks_shapes():
    x = torch.zeros(1, 64, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="do not hold K=64 fp4_e2m1"):
        mdc.mx_decode_triton(x, torch.zeros(8, 16, dtype=torch.uint8), torch.zeros(8, 2), None,
                      "fp4_e2m1", 32, None)  # fmt: skip
    with pytest.raises(ValueError, match="expected contiguous \\(8, 2\\)"):
        s = torch.zeros(8, 4, dtype=torch.uint8)
        mdc.mx_decode_triton(
            x, torch.zeros(8, 32, dtype=torch.uint8), s, None, "fp4_e2m1", 32, None
        )


@pytest.mark.parametrize("backend", ["cuda", "rocm", "interpret"])
def test_dispatch_rows(backend):
    """Decode band: the MX decode kernel, then the emulated path where it refuses a call (a
    recorded fallback); past it and for float32 activations the emulated path (dequantize,
    then the BLAS matmul), as intended. On sm90 the band runs to MX_ROWS_MAX_M rows for MX
    fp4, fp6, fp8 and int8 with bf16 x and NVFP4 (kernels/wt_rows_mx.py past 64, fp6
    kernels/wt_rows_fp6.py), to MX_NARROW_ROWS_MAX_M for MX int8 with fp16 x
    (decode_mma_tiles.ROWS_TILE, sessions 51, 53-55); other CUDA archs end at 16. fp6 codes:
    the same on CUDA (decode_mma's fp6 loop), the emulated path at any M elsewhere."""
    platform = dispatch.Platform(dispatch.Backend(backend), "sm90" if backend == "cuda" else "x")
    rows = {
        dispatch.Scheme.MX_WEIGHT_ONLY: ("triton.mxwo.decode", "emulated.mx_dequant_mm"),
        dispatch.Scheme.MX_MX: ("triton.mx.decode", "emulated.mx_qdq_mm"),
        dispatch.Scheme.NVFP4_WEIGHT_ONLY: ("triton.nvfp4wo.decode", "emulated.nvfp4_dequant_mm"),
        dispatch.Scheme.NVFP4_NVFP4: ("triton.nvfp4.decode", "emulated.nvfp4_qdq_mm"),
    }
    for scheme, (decode, emulated) in rows.items():
        assert dispatch.candidates(scheme, platform, 16, torch.bfloat16) == (decode, emulated)
        past = (decode, emulated) if backend == "cuda" else (emulated,)
        mx = scheme.value.startswith("mx")
        narrow = dispatch.MX_NARROW_ROWS_MAX_M
        wide = dispatch.MX_ROWS_MAX_M
        for variant, most in ((None, wide), ("int8", wide), ("fp6", wide)):
            if not mx and variant:
                continue
            for dtype in (torch.bfloat16, torch.float16):
                if variant == "int8" and dtype == torch.float16:
                    most = narrow  # (its 128-row tile takes bf16 x only)
                for m, want in ((17, past), (most, past), (most + 1, (emulated,))):
                    got = dispatch.candidates(scheme, platform, m, dtype, variant)
                    if variant == "fp6" and backend != "cuda":
                        want = (emulated,)
                    assert got == want, (scheme, variant, m)
        assert dispatch.candidates(scheme, platform, 1, torch.float32) == (emulated,)
        assert dispatch.candidates(scheme, platform, 32, torch.float32) == (emulated,)
        for arch in ("sm89", "sm100"):
            other = dispatch.Platform(dispatch.Backend.CUDA, arch)
            assert dispatch.candidates(scheme, other, 17, torch.bfloat16) == (emulated,)
        if scheme.value.startswith("mx"):
            fp6 = dispatch.candidates(scheme, platform, 1, torch.bfloat16, "fp6")
            assert fp6 == ((decode, emulated) if backend == "cuda" else (emulated,))
            assert dispatch.candidates(scheme, platform, 1, torch.float32, "fp6") == (emulated,)


def test_mx_weights_name_their_variant():
    import aoq

    def variant(elem):
        lin = aoq.quantize_(torch.nn.Linear(64, 8), aoq.MXWeightOnlyConfig(elem))
        return lin.weight.dispatch_variant

    assert variant("fp6_e3m2") == variant("fp6_e2m3") == "fp6"
    assert variant("int8") == "int8"
    assert variant("fp4_e2m1") is None and variant("fp8_e4m3") is None


def test_op_cpu_is_the_emulated_path_and_opcheck():
    """aoq::mx_decode on CPU: the reference dequantization and one matmul; opcheck (fake
    implementation, schema) on CPU and, where there is one, on a GPU."""
    g = torch.Generator().manual_seed(1)
    q, s, _, values = _weight(MXElem.FP4_E2M1, 48, 64, 32, g)
    x = torch.randn(3, 64, generator=g).to(torch.bfloat16)
    bias = torch.randn(48, generator=g).to(torch.bfloat16)
    y = torch.ops.aoq.mx_decode(x, q, s, None, "fp4_e2m1", 32, bias)
    want = F.linear(x, values.to(torch.bfloat16), bias)
    assert torch.equal(y.isnan(), want.isnan()) and torch.equal(y.nan_to_num(), want.nan_to_num())
    s = s.clamp(100, 150)  # opcheck compares without NaNs
    for dev in ["cpu"] + (["cuda"] if torch.cuda.is_available() else []):
        args = (x.to(dev), q.to(dev), s.to(dev), None, "fp4_e2m1", 32, bias.to(dev))
        torch.library.opcheck(torch.ops.aoq.mx_decode.default, args)
        # with MXWeight's derived group-major bytes and BIG flag (the bf16 decode on CUDA)
        sg = s.view(torch.uint8).t().contiguous().t().to(dev)
        flag = (sg > 128).any().to(torch.int32).reshape(1)
        torch.library.opcheck(torch.ops.aoq.mx_decode.default, (*args[:2], sg, *args[3:], flag))


def check_group_major_bytes_take_decode_mma(device: str) -> list[str]:
    """``big_scales`` with group-major bytes (MXWeight.build_derived's layout): bf16 and fp16
    x and fp4 or fp8 e4m3 codes go to decode_mma's bf16-pair decode, whose output is the
    emulated matmul up to summation order, on its one-multiply path (every byte <= 128, fp8
    134) and its BIG one (a NaN block); int8 codes to its post-scaled loop (one path for
    every byte, a NaN block too); so is this kernel's on the row-major bytes."""
    from aoq.formats.mx import unpack_mx_codes

    bad = []
    g = torch.Generator().manual_seed(5)
    n, k = 72, 256
    for elem, limit in ((MXElem.FP4_E2M1, 128), (MXElem.FP8_E4M3, 134), (MXElem.INT8, 255)):
        q, s, _, _ = _weight(elem, n, k, 32, g)
        s = s.view(torch.uint8)
        codes = unpack_mx_codes(q, elem)
        finite = torch.where(s == 255, 127, s).to(torch.uint8)
        for scale in (finite, s):
            bad += _check_group_major(device, elem, limit, q, codes, scale, g)
    return bad


def _check_group_major(device, elem, limit, q, codes, scale, g) -> list[str]:
    bad, k = [], codes.shape[1]
    values = mx_dequantize(codes, scale, elem, 32, 1)
    qd, sd = q.to(device), scale.to(device)
    gm, flag = sd.t().contiguous().t(), (sd > limit).any().to(torch.int32).reshape(1)
    flags = (flag, big_scale_flag(sd, limit))  # the answer on the device, or on the host
    for dtype, flag in itertools.product((torch.bfloat16, torch.float16), flags):
        case = f"{elem.value}/{dtype}/big {bool((sd > limit).any())}/flag {tuple(flag.shape)}"
        x = torch.randn(5, k, generator=g).to(dtype)
        wfmt = mdc.DECODE_MMA_FORMATS[elem]
        serves = mdc.dm.serves(x.to(device), qd, k // 32, wfmt, gm, flag)
        if not serves:
            bad.append(f"{case}: decode_mma does not serve it")
        plain = mdc.mx_decode_triton(x.to(device), qd, sd, None, elem.value, 32, None)
        got = mdc.mx_decode_triton(x.to(device), qd, gm, None, elem.value, 32, None,
                                   big_scales=flag)  # fmt: skip
        want = x.float() @ values.to(dtype).float().T
        if not _close(got, want):
            bad.append(f"{case}: not the emulated matmul")
        if not _close(plain, want):
            bad.append(f"{case}: the row-major kernel is not the emulated matmul")
    return bad


def test_group_major_bytes_take_decode_mma_under_the_interpreter():
    run_interpreted("test_mx_decode", "check_group_major_bytes_take_decode_mma")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_group_major_bytes_take_decode_mma_on_gpu():
    assert check_group_major_bytes_take_decode_mma("cuda") == []
