"""kernels/decode_mma.py at other row counts than 16: x padded to 8 rows (M <= 8) and past 16
rows (ROWS_TILE's 32, 64, 128 and 256-row tiles), the ALIGNED probe on those cases, and the
launchers and dispatch checks that send 17-256 rows to decode_mma (test_decode_mma.py holds
the 16-row tile's formats, layouts and tiles; split from it so that ``make
kernels-interpret``'s two workers each take half).

Runs under TRITON_INTERPRET=1 on CPU tensors and on a GPU; the plain CPU unit run skips it.
"""

import pytest
import torch
from _mx_cases import DEV, GPU, NEEDS_KERNELS, OUT
from _pairwise import pairwise
from aoq.kernels import decode_mma as dm
from aoq.kernels import weight_only as wo
from aoq.kernels._common import WeightFormat
from test_decode_mma import _int4

from aoq.formats import affine
from aoq.formats.packing import pack_uint4
from aoq.testing.metrics import max_rel_error

pytestmark = NEEDS_KERNELS


def _eight_row_case(fmt: str, m: int) -> tuple[tuple, dict]:
    """decode_mma's arguments for ``fmt`` at M = m, with unaligned N and a bias."""
    n, k = 130, 1024
    g = torch.Generator().manual_seed(m)
    x = torch.randn(m, k, generator=g).to(torch.bfloat16).to(DEV)
    bias = torch.randn(n, generator=g).to(torch.bfloat16).to(DEV)
    w = torch.randn(n, k, generator=g).to(DEV)
    if fmt == "int4":
        q, s, z = _int4(n, k, 128)
        sg, zg = s.t().contiguous().t(), z.t().contiguous().t()
        return (x, q, sg, zg, bias, k // 128, WeightFormat.UINT4), {}
    if fmt == "int8":
        q, s = affine.quantize_int8_symmetric(w, None)
        return (x, q, s, None, bias, 1, WeightFormat.INT8), {}
    if fmt == "fp8":
        from aoq.formats import float8

        q, s = float8.quantize_fp8(w, float8.Granularity.ROW)
        return (x, q, s.reshape(-1), None, bias, 1, WeightFormat.FP8), {}
    from aoq.kernels import act_quant as aq

    q4, s4 = affine.quantize_int4_symmetric(w, 32)
    mode = {"w4a8": 0, "w4a8-asym": 1}[fmt]
    xq, xs, xz = aq.quantize_int8_act(x.float().cpu() + mode, mode, None)
    extra = {"x_scale": xs.to(DEV), "x_zero": xz.to(DEV) if mode else None}
    return (xq.to(DEV), pack_uint4(q4 + 8), s4.t().contiguous().t(), None, bias.float(),
            k // 32, WeightFormat.INT4_SYM), extra  # fmt: skip


# every format at every row count (padded 1 and 5, a full 8), each format and each row count
# split and not: 15 of 30 cases
@pytest.mark.parametrize(
    "fmt,m,split", pairwise(["int4", "int8", "fp8", "w4a8", "w4a8-asym"], [1, 5, 8], [1, 3])
)
def test_eight_rows_are_sixteen_rows_bit_for_bit(m, split, fmt):
    """x padded to 8 rows (tile ROWS 8, M <= 8: NVIDIA's m16n8k16 with n = 8, half the
    MMAs and x's registers of the 16-row tile) gives the 16-row tile's output bit for bit:
    each output's products and their summation order do not depend on the padding (on a
    GPU; the interpreter's float32 dot is numpy's, whose summation order follows the shape:
    there the two agree to float32 rounding, exactly for W4A8's integer sums)."""
    args, extra = _eight_row_case(fmt, m)
    ys = []
    for rows in (16, 8):
        out = torch.float32 if fmt.startswith("w4a8") else OUT
        ys.append(torch.empty(m, args[1].shape[0], dtype=out, device=DEV))
        dm.decode_mma(*args[:5], ys[-1], *args[5:], split, tile={"ROWS": rows}, **extra)
    if GPU or fmt.startswith("w4a8"):
        assert torch.equal(ys[0], ys[1])
    else:
        assert max_rel_error(ys[0], ys[1]) < 1e-6


def test_rows_must_hold_x():
    args, _ = _eight_row_case("int8", 9)
    y = torch.empty(9, args[1].shape[0], dtype=OUT, device=DEV)
    with pytest.raises(ValueError, match="ROWS=8"):
        dm.decode_mma(*args[:5], y, *args[5:], None, tile={"ROWS": 8})
    with pytest.raises(ValueError, match="ROWS=24"):
        dm.decode_mma(*args[:5], y, *args[5:], None, tile={"ROWS": 24})
    args, _ = _eight_row_case("int8", 65)
    y = torch.empty(65, args[1].shape[0], dtype=OUT, device=DEV)
    with pytest.raises(ValueError, match="ROWS=64"):
        dm.decode_mma(*args[:5], y, *args[5:], None, tile={"ROWS": 64})


# each format at each of its ROWS_TILE paddings (32, 64, 128; int8 / e4m3 256; W4A8 to 64),
# once with a part-filled tile (17, 40, 100, 200 rows) or a full one (32, 64), every format
# and every row count split and not: 15 cases where every format x row count x split ran 50
ROWS_CASES = [
    ("int4", 17, 3), ("int4", 64, 1), ("int4", 100, 3),
    ("int8", 32, 1), ("int8", 40, 3), ("int8", 100, 1), ("int8", 200, 3),
    ("fp8", 17, 1), ("fp8", 64, 3), ("fp8", 100, 3), ("fp8", 200, 1),
    ("w4a8", 32, 3), ("w4a8", 40, 1),
    ("w4a8-asym", 17, 3), ("w4a8-asym", 64, 1),
]  # fmt: skip


@pytest.mark.parametrize("fmt,m,split", ROWS_CASES)
def test_rows_past_sixteen_are_sixteen_row_launches(m, split, fmt):
    """17-256 rows take ROWS_TILE's tile (x padded to 32, 64, 128 or 256, wider column tiles;
    past 32 rows with x as the MMA's A operand): each 16-row slice of the output is what a
    16-row launch of that slice gives, up to float32 summation order (other tiles, the same
    K ranges)."""
    wfmt = {"int4": WeightFormat.UINT4, "int8": WeightFormat.INT8, "fp8": WeightFormat.FP8}
    wfmt = wfmt.get(fmt, WeightFormat.INT4_SYM)
    if m > dm.max_rows(wfmt, torch.device(DEV)):
        pytest.skip(f"{fmt}: this device takes at most {dm.max_rows(wfmt, torch.device(DEV))} "
                    "rows (decode_mma_tiles.max_rows)")  # fmt: skip
    args, extra = _eight_row_case(fmt, m)
    out = torch.float32 if fmt.startswith("w4a8") else OUT
    y = torch.empty(m, args[1].shape[0], dtype=out, device=DEV)
    assert dm.serves(args[0], args[1], args[5], args[6], args[2], args[3])
    dm.decode_mma(*args[:5], y, *args[5:], split, **extra)
    for lo in range(0, m, 16):
        xs = args[0][lo : lo + 16].contiguous()
        want = torch.empty(xs.shape[0], args[1].shape[0], dtype=out, device=DEV)
        sub = {k: v[lo : lo + 16] if v is not None else None for k, v in extra.items()}
        dm.decode_mma(xs, *args[1:5], want, *args[5:], split, **sub)
        assert max_rel_error(want.float(), y[lo : lo + 16].float()) < 4e-3, lo


# each format that takes ALIGNED at both row paddings (8, 16), each split and not: 6 of 12
@pytest.mark.parametrize("fmt,m,split", pairwise(["int4", "w4a8", "w4a8-asym"], [1, 16], [1, 3]))
def test_aligned_group_codes_are_the_same_bits(m, split, fmt):
    """The ALIGNED probe (each group's codes hinted as one aligned run, so sm90 loads them 16
    bytes at a time) reads the same bytes: the same output bit for bit."""
    args, extra = _eight_row_case(fmt, m)
    ys = []
    for tile in ({}, {"ALIGNED": True}):
        out = torch.float32 if fmt.startswith("w4a8") else OUT
        ys.append(torch.empty(m, args[1].shape[0], dtype=out, device=DEV))
        dm.decode_mma(*args[:5], ys[-1], *args[5:], split, tile=tile, **extra)
    assert torch.equal(ys[0], ys[1])


def test_weight_only_decode_takes_past_sixteen_rows_where_decode_mma_does(monkeypatch):
    """The weight-only launcher's decode strategy at 17-256 rows runs decode_mma where it
    serves them, else the prefill kernel; the dispatch's decode check names why it refuses
    (float32 x)."""
    from torch import nn

    import aoq
    from aoq.tensors import triton_linear as tlin

    n, k = 96, 512
    q, s = affine.quantize_int8_symmetric(torch.randn(n, k, device=DEV), None)
    ran = []
    real = dm.decode_mma
    monkeypatch.setattr(dm, "decode_mma", lambda *a, **kw: ran.append(a[0].shape) or real(*a, **kw))
    want = wo.weight_only_mm(torch.randn(1, k), q.cpu(), s.cpu(), None, None, 0)  # (warm)
    for x in (torch.randn(m, k, device=DEV) for m in (32, 64, 256)):
        x = x.to(torch.bfloat16)
        want = wo.weight_only_mm(x.cpu(), q.cpu(), s.cpu(), None, None, 0).float()
        got = wo.weight_only_mm_triton(x, q, s, None, None, 0).float().cpu()
        assert max_rel_error(want, got) < 4e-3
    wide = dm.max_rows(WeightFormat.INT8, torch.device(DEV)) == 256
    assert ran == ([(32, k), (64, k), (256, k)] if wide else [])
    lin = aoq.quantize_(nn.Linear(k, n, device=DEV), aoq.Int8WeightOnlyConfig())
    xb = torch.randn(32, k, device=DEV, dtype=torch.bfloat16)
    assert (tlin._wo_decode_check(xb, lin.weight, None) is None) == wide
    why = tlin._wo_decode_check(xb.float(), lin.weight, None)
    assert why is not None and "32 rows of torch.float32" in why


def test_w4a8_decode_check_past_sixteen_rows():
    """The dispatch's W4A8 decode check: past 16 rows only where decode_mma takes them (its
    max_rows: 64 on sm90 and the interpreter), and it says why it refuses."""
    from torch import nn

    import aoq
    from aoq.tensors import triton_linear as tlin

    lin = aoq.quantize_(nn.Linear(256, 64, device=DEV), aoq.Int8DynamicActivationInt4WeightConfig())
    most = dm.max_rows(WeightFormat.INT4_SYM, torch.device(DEV))
    for m in (16, 32, 64, 65):
        x = torch.randn(m, 256, device=DEV, dtype=torch.bfloat16)
        why = tlin._int_act_decode_check(x, lin.weight, None)
        assert (why is None) == (m <= max(16, most)), (m, why)
        if why is not None:
            assert f"{m} rows" in why and f"takes {most}" in why


def test_w4a8_int32_bias_past_sixteen_rows_takes_the_prefill_tiles():
    """A static W4A8 linear's int32 bias, which decode_mma leaves, past 16 rows: the decode
    entry passes its check and runs the prefill entry's tiles (int_act_mm), the same bits."""
    from torch import nn

    import aoq
    from aoq import dispatch
    from aoq.tensors import Int32Bias

    cfg = aoq.Int8DynamicActivationInt4WeightConfig(act_scale=0.05)
    lin = aoq.quantize_(nn.Linear(256, 64, device=DEV), cfg)
    assert isinstance(lin.bias, Int32Bias)
    x = torch.randn(32, 256, device=DEV, dtype=torch.bfloat16)
    decode, prefill = (dispatch._IMPLS[f"triton.w4a8.{s}"] for s in ("decode", "prefill"))
    if dm.max_rows(WeightFormat.INT4_SYM, x.device) < 32:
        assert "32 rows" in decode.check(x, lin.weight, lin.bias)
        return
    assert decode.check(x, lin.weight, lin.bias) is None
    y = decode.fn(x, lin.weight, lin.bias)
    assert torch.equal(y, prefill.fn(x, lin.weight, lin.bias))
