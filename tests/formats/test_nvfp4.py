"""aoq.formats.nvfp4: an independent numpy + ml_dtypes computation of the same recipe
(bit for bit), round-trip bounds, saturation, zero blocks, the tensor scale, NaN/Inf."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import torch

from aoq.formats.nvfp4 import nvfp4_dequantize, nvfp4_quantize, nvfp4_tensor_scale


def oracle(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.float32]:
    """float32 [R, K] -> (codes, block scale bits, dequantized float32, tensor scale), each step
    one float32 numpy operation (IEEE, round to nearest even) in the documented order."""
    f = np.float32
    finite = np.isfinite(x)
    amax = np.where(finite, np.abs(x), f(0)).max()
    ts = amax / f(448 * 6)
    ts = ts if ts > 0 else f(1)
    xb = x.reshape(x.shape[0], -1, 16)
    ok = np.isfinite(xb).all(-1)
    amax_b = np.where(np.isfinite(xb), np.abs(xb), f(0)).max(-1)
    bs = np.minimum((amax_b / f(6)) / ts, f(448)).astype(ml_dtypes.float8_e4m3fn)
    d = bs.astype(np.float32) * ts
    with np.errstate(invalid="ignore", divide="ignore"):
        v = np.where((ok & (d > 0))[..., None], xb / d[..., None], f(0))
    q = np.clip(v, f(-6), f(6)).astype(ml_dtypes.float4_e2m1fn)
    deq = np.where(ok[..., None], q.astype(np.float32) * d[..., None], np.nan).astype(np.float32)
    bs = np.where(ok, bs, np.float32(np.nan).astype(ml_dtypes.float8_e4m3fn))
    return q.view(np.uint8).reshape(x.shape), bs.view(np.uint8), deq.reshape(x.shape), ts


def _data(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((64, 128)) * 2.0 ** rng.uniform(-30, 30, (64, 1))
    x[3, :16] = 0.0  # a zero block
    x[4, 16:32] *= 1e-12  # a block whose e4m3 scale underflows to 0
    x[5, 32:48] = np.array([6, -6, 0.5, 3] * 4) * 1e-9  # exact grid values
    x[6, 7] = np.nan
    x[7, 100] = np.inf
    x[8, 0] = -np.inf
    return x.astype(np.float32)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_independent_computation(seed: int) -> None:
    x = _data(seed)
    codes, bs, ts = nvfp4_quantize(torch.from_numpy(x))
    want_codes, want_bs, want_deq, want_ts = oracle(x)
    assert ts.dtype == torch.float32 and ts.shape == ()
    assert float(ts) == float(want_ts)
    assert np.array_equal(codes.numpy(), want_codes)
    assert np.array_equal(bs.view(torch.uint8).numpy(), want_bs)
    got = nvfp4_dequantize(codes, bs, ts).numpy()
    nan = np.isnan(want_deq)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got[~nan].view(np.uint32), want_deq[~nan].view(np.uint32))


def test_round_trip_within_one_step_of_each_block() -> None:
    x = torch.randn(32, 256) * torch.logspace(-2, 2, 32).unsqueeze(-1)
    codes, bs, ts = nvfp4_quantize(x)
    y = nvfp4_dequantize(codes, bs, ts)
    d = (bs.to(torch.float32) * ts).repeat_interleave(16, dim=-1)
    # the largest gap of the e2m1 grid is 2 (4 -> 6): RNE error <= 1 step; the block max lands
    # within e4m3's relative rounding (2^-4) of 6, so saturation adds less than one step
    assert bool(((x - y).abs() <= d).all())
    assert float((x - y).norm() / x.norm()) < 0.12
    assert codes.dtype == torch.uint8 and int(codes.max()) <= 15 and bs.shape == (32, 16)


def test_tensor_scale_and_block_scale_range() -> None:
    x = torch.randn(8, 64)
    x[2, 5] = 1000.0
    ts = nvfp4_tensor_scale(x)
    assert float(ts) == float(torch.tensor(1000.0) / torch.tensor(2688.0))
    _, bs, ts2 = nvfp4_quantize(x)
    assert torch.equal(ts, ts2)
    assert float(bs.to(torch.float32).max()) == 448.0  # the block holding amax
    assert float(nvfp4_tensor_scale(torch.zeros(4, 16))) == 1.0
    assert float(nvfp4_tensor_scale(torch.full((16,), 2.0**-149))) == 1.0  # underflows to 0
    x[0, 0] = float("nan")
    x[1, 1] = float("inf")
    assert torch.equal(nvfp4_tensor_scale(x), ts)  # finite values only


def test_zero_tensor_and_zero_blocks() -> None:
    codes, bs, ts = nvfp4_quantize(torch.zeros(3, 32))
    assert float(ts) == 1.0 and not codes.any() and not bs.to(torch.float32).any()
    assert not nvfp4_dequantize(codes, bs, ts).any()
    x = torch.ones(1, 32)
    x[0, 16:] = 1e-12  # its block scale rounds to 0 in e4m3: the block becomes 0
    codes, bs, ts = nvfp4_quantize(x)
    assert float(bs[0, 1].float()) == 0.0 and not codes[0, 16:].any()
    assert nvfp4_dequantize(codes, bs, ts)[0, 16:].tolist() == [0.0] * 16


def test_saturation_with_a_static_tensor_scale() -> None:
    x = torch.linspace(-100, 100, 32).reshape(1, 32)
    codes, bs, ts = nvfp4_quantize(x, tensor_scale=torch.tensor(0.01))
    assert bs.to(torch.float32).tolist() == [[448.0, 448.0]]  # 100 / 6 / 0.01 > 448: clamped
    y = nvfp4_dequantize(codes, bs, ts)
    step = torch.tensor(448.0) * torch.tensor(0.01)
    assert float(y.abs().max()) == float(6 * step)  # elements saturate at +-6
    assert float(y[0, 0]) < 0 < float(y[0, -1])


def test_nan_and_inf_blocks_dequantize_to_nan() -> None:
    x = torch.randn(2, 48)
    x[0, 20] = float("nan")
    x[1, 47] = -float("inf")
    codes, bs, ts = nvfp4_quantize(x)
    assert bs.view(torch.uint8)[0, 1] == 0x7F and bs.view(torch.uint8)[1, 2] == 0x7F
    assert not codes[0, 16:32].any() and not codes[1, 32:].any()
    y = nvfp4_dequantize(codes, bs, ts)
    nan = torch.zeros(2, 48, dtype=torch.bool)
    nan[0, 16:32] = nan[1, 32:] = True
    assert torch.equal(y.isnan(), nan)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64])
def test_input_dtypes(dtype: torch.dtype) -> None:
    x = torch.randn(4, 32, dtype=torch.float64).to(dtype)
    got = nvfp4_quantize(x)
    ref = nvfp4_quantize(x.to(torch.float32))
    assert torch.equal(got[0], ref[0]) and torch.equal(
        got[1].view(torch.uint8), ref[1].view(torch.uint8)
    )
    assert got[2].dtype == torch.float32
    assert nvfp4_dequantize(*got, dtype=dtype).dtype == dtype


def test_errors() -> None:
    with pytest.raises(ValueError, match=r"last dim 40 is not divisible by block_size=16.*48"):
        nvfp4_quantize(torch.zeros(2, 40))
    with pytest.raises(ValueError, match="finite and > 0"):
        nvfp4_quantize(torch.zeros(2, 32), tensor_scale=torch.tensor(0.0))
    codes, bs, ts = nvfp4_quantize(torch.randn(2, 32))
    with pytest.raises(TypeError, match="float8_e4m3fn"):
        nvfp4_dequantize(codes, bs.to(torch.float32), ts)
    with pytest.raises(ValueError, match=r"expected \[2, 2\]"):
        nvfp4_dequantize(codes, bs[:, :1], ts)
