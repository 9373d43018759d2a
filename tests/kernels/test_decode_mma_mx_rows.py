"""MX and NVFP4 weights past 16 rows of x (kernels/decode_mma_tiles.ROWS_TILE's 32-, 64- and
128-row tiles, served on sm90 since session 51), through mx_decode_triton as the linear path
calls it (the weight's group-major bytes and its BIG flag or tensor scale): the emulated path's
float32-accumulated product, up to summation order and one rounding to x's dtype, as the
16-row tile's tests check it (test_decode_mma_mx.py, _nvfp4, _mx8, _fp6); and the refusals
past 16 rows where decode_mma does not take them.

Runs under TRITON_INTERPRET=1 on CPU tensors and on a GPU; the plain CPU unit run skips it.
"""

import pytest
import torch
from _mx_cases import DEV, NEEDS_KERNELS, random_case
from aoq.kernels import decode_mma as dm
from aoq.kernels import mx_decode, wt_rows
from aoq.kernels._common import WeightFormat

from aoq.formats.mx import MXElem, pack_mx_codes
from aoq.formats.nvfp4 import nvfp4_dequantize, nvfp4_quantize
from aoq.formats.packing import pack_uint4
from aoq.tensors.mx import BIG_LIMIT, big_scale_flag
from aoq.testing.metrics import max_rel_error

pytestmark = NEEDS_KERNELS

# each element at each of its paddings (17 rows in 32, 40 and 64 in 64, 100 in 128: MX fp4,
# e4m3, e5m2 and int8 (bf16 x) only), split and not
CASES = [
    ("fp4_e2m1", 17, 3), ("fp4_e2m1", 100, 1), ("nvfp4", 40, 1), ("nvfp4", 64, 3),
    ("fp8_e4m3", 40, 3), ("fp8_e4m3", 100, 1), ("fp8_e5m2", 17, 1), ("fp8_e5m2", 100, 3),
    ("int8", 17, 1), ("int8", 64, 3), ("int8", 100, 3), ("fp6_e3m2", 40, 1),
    ("fp6_e2m3", 64, 3),
]  # fmt: skip


def _case(elem: str, m: int, xdt: torch.dtype = torch.bfloat16, k: int = 512) -> tuple:
    """mx_decode_triton's arguments for a quantized random weight [130, k] (unaligned N, a
    bias) and m rows of x, with its group-major bytes, and the emulated product."""
    n = 130
    if elem == "nvfp4":
        g = torch.Generator().manual_seed(m)
        codes, scale, ts = nvfp4_quantize(torch.randn(n, k, generator=g) * 0.02)
        w = nvfp4_dequantize(codes, scale, ts, 16, xdt).float()
        x = torch.randn(m, k, generator=g).to(xdt)
        bias = torch.randn(n, generator=g).to(xdt)
        gm = scale.view(torch.uint8).t().contiguous().t().to(DEV)
        args = (x.to(DEV), pack_uint4(codes).to(DEV), gm, ts.to(DEV), "fp4_e2m1", 16, bias.to(DEV))
        return args, {}, x.float() @ w.T + bias.float()
    e = MXElem(elem)
    codes, scale, x, bias, want = random_case(e, n, k, m, xdt, m)
    s = scale.view(torch.uint8)
    limit = BIG_LIMIT[e]
    gm = s.t().contiguous().t().to(DEV)
    args = (x.to(DEV), pack_mx_codes(codes, e).to(DEV), gm, None, elem, 32, bias.to(DEV))
    return args, {"big_scales": big_scale_flag(s, limit).to(DEV)}, want


@pytest.mark.parametrize("elem,m,split", CASES)
def test_rows_past_sixteen_match_the_emulated_product(elem, m, split):
    """x padded to 32, 64 or 128 rows (wider column tiles; past 32 rows x as the MMA's A
    operand, except MX fp6, whose loop takes the weights as A): the emulated product."""
    args, kw, want = _case(elem, m)
    wfmt = WeightFormat.NVFP4 if elem == "nvfp4" else mx_decode.DECODE_MMA_FORMATS[MXElem(elem)]
    most = dm.max_rows(wfmt, torch.device(DEV))
    if m > most:
        pytest.skip(f"{elem}: this device takes at most {most} rows (decode_mma_tiles.max_rows: "
                    "sm90 and the interpreter past 16)")  # fmt: skip
    zero = args[3] if elem == "nvfp4" else kw["big_scales"]
    assert mx_decode.mma_rows(args[0], args[1], args[2], zero, args[5], wfmt) == m
    y = mx_decode.mx_decode_triton(*args, split, **kw)
    assert y.shape == (m, 130) and y.dtype == torch.bfloat16
    assert max_rel_error(want, y.float().cpu()) < 4e-3


@pytest.mark.parametrize("k", [96, 192])
@pytest.mark.parametrize("elem,m", [("fp4_e2m1", 1), ("fp4_e2m1", 40), ("fp4_e2m1", 100),
                                    ("nvfp4", 1), ("nvfp4", 40), ("fp8_e4m3", 40),
                                    ("fp8_e5m2", 100)])  # fmt: skip
def test_steps_narrower_than_the_tiles_match_the_emulated_product(elem, m, k):
    """K that the tiles' 64- or 128-code steps do not divide (96: one group a step; 192: two
    where the tile asks four): every WIDE step width, and NVFP4's one-group steps, which keep
    the per-group loop (decode_mma_wide: block_columns refuses two blocks over 16 columns)."""
    args, kw, want = _case(elem, m, k=k)
    y = mx_decode.mx_decode_triton(*args, None, **kw)
    assert max_rel_error(want, y.float().cpu()) < 4e-3


@pytest.mark.parametrize("host", [True, False], ids=["host-flag", "device-flag"])
def test_e4m3_at_128_rows_steps_by_where_the_flag_is_read(host, monkeypatch):
    """e4m3's 128-row tile reads 128-code steps where the weight's BIG flag is known on the
    host, and STEP_K_DEV's 64 where the kernel reads it on the device (under graph capture;
    both of its loops at 128 would not fit sm90's shared memory): both the emulated product."""
    if dm.max_rows(WeightFormat.MX_FP8, torch.device(DEV)) < 100:
        pytest.skip(
            "e4m3's 128-row tile is served on sm90 and the interpreter only; this "
            "device takes 16 rows at most (decode_mma_tiles.max_rows)"
        )
    args, kw, want = _case("fp8_e4m3", 100)
    flag = kw["big_scales"]
    if not host:  # (the host flag's length is its answer: [0] none above the limit, [2] some)
        kw["big_scales"] = torch.tensor([flag.numel() // 2], dtype=torch.int32, device=DEV)
    steps = []
    launch = dm.launch
    monkeypatch.setattr(dm, "launch", lambda *a, **k: steps.append(k["BLOCK_K"]) or launch(*a, **k))
    y = mx_decode.mx_decode_triton(*args, None, **kw)
    assert steps == [128 if host else 64]
    assert max_rel_error(want, y.float().cpu()) < 4e-3


def test_past_sixteen_rows_only_decode_mma_serves(monkeypatch):
    """mx_decode's own tile holds 16 rows: past them serves() refuses unless mma_rows says
    decode_mma takes the call, and mx_decode_triton refuses what decode_mma does not take
    (here row-major bytes, which it reads only at 16 rows and fewer)."""
    args, kw, _ = _case("fp4_e2m1", 40)
    x, q, gm = args[:3]
    assert mx_decode.serves(x, q, 32) is not None
    rows = mx_decode.mma_rows(x, q, gm, kw["big_scales"], 32, WeightFormat.MX_FP4)
    assert rows == (40 if dm.max_rows(WeightFormat.MX_FP4, x.device) >= 40 else 16)
    if rows == 40:
        assert mx_decode.serves(x, q, 32, rows) is None
    assert mx_decode.mma_rows(x, q, None, kw["big_scales"], 32, WeightFormat.MX_FP4) == 16
    with pytest.raises(ValueError, match="past 16 rows"):
        mx_decode.mx_decode_triton(x, q, gm.contiguous(), None, "fp4_e2m1", 32, None)
    assert mx_decode.serves(x[:16], q, 32) is None
    # NVFP4, fp6 and MX int8 with fp16 x stop at 64 rows (at 128 the emulated path was the
    # faster; MX int8's 128-row tile takes bf16 x only: decode_mma_tiles.BF16_ONLY_ROWS);
    # past 64 NVFP4 goes to kernels/wt_rows_mx.py (test_wt_rows_mx.py), off here
    args, kw, _ = _case("nvfp4", 100)
    served = mx_decode.mma_rows(args[0], args[1], args[2], args[3], 16, WeightFormat.NVFP4)
    assert served == (100 if dm.max_rows(WeightFormat.NVFP4, args[0].device) > 16 else 16)
    monkeypatch.setattr(wt_rows, "ENABLED", False)
    for elem, xdt in (("nvfp4", torch.bfloat16), ("int8", torch.float16),
                      ("fp6_e3m2", torch.bfloat16)):  # fmt: skip
        args, kw, _ = _case(elem, 100, xdt)
        zero = args[3] if elem == "nvfp4" else kw["big_scales"]
        wfmt = WeightFormat.NVFP4 if elem == "nvfp4" else mx_decode.DECODE_MMA_FORMATS[MXElem(elem)]
        assert mx_decode.mma_rows(args[0], args[1], args[2], zero, args[5], wfmt) == 16, elem
    args, kw, _ = _case("int8", 100)
    rows = mx_decode.mma_rows(args[0], args[1], args[2], kw["big_scales"], 32, WeightFormat.MX_INT8)
    assert rows == (100 if dm.max_rows(WeightFormat.MX_INT8, args[0].device) >= 100 else 16)
