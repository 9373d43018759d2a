"""An independent oracle for aoq.formats.mx, written from the OCP MX v1.0 spec in numpy.

Nothing of aoq is used to compute the expected values: the element formats come from
ml_dtypes (float8_e4m3fn, float8_e5m2, float6_e2m3fn, float6_e3m2fn, float4_e2m1fn) and the
int8 grid from np.round; the scale exponent comes from math.frexp (FLOOR) and from exact
rational arithmetic with fractions.Fraction (RCEIL). All the scaling is done in float64, where
multiplying a float32 value by 2^s is exact.

* ml_dtypes casts round to nearest, ties to even (test_ml_dtypes_rounds_half_to_even checks it),
  so they implement the spec's element rounding. They do not saturate on overflow (e4m3fn gives
  NaN, e5m2 Inf), so the oracle clamps to +-max before casting: the spec clamps normal numbers.
* np.round rounds half to even too (int8 elements).
* A block holding NaN or Inf: scale byte 0xFF and all-NaN values.

For every element and both scale rules the dequantized float32 values must be bit-identical
(NaN positions equal), and the scale bytes and sub-byte codes must match too.
"""

from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
import torch

from aoq.formats.mx import mx_dequantize, mx_quantize

BLOCK = 32
# name -> (ml_dtypes type or None for int8, emax_elem from the spec's tables)
ELEMS: dict[str, tuple[type | None, int]] = {
    "fp8_e4m3": (ml_dtypes.float8_e4m3fn, 8),
    "fp8_e5m2": (ml_dtypes.float8_e5m2, 15),
    "fp6_e2m3": (ml_dtypes.float6_e2m3fn, 2),
    "fp6_e3m2": (ml_dtypes.float6_e3m2fn, 4),
    "fp4_e2m1": (ml_dtypes.float4_e2m1fn, 2),
    "int8": (None, 0),
}


def _max(elem: str) -> float:
    t = ELEMS[elem][0]
    return 127 / 64 if t is None else float(ml_dtypes.finfo(t).max)


def _grid(elem: str) -> np.ndarray:
    """Every non-negative value of the element format (cast a superset through ml_dtypes)."""
    t = ELEMS[elem][0]
    if t is None:
        return np.arange(128) / 64
    cand = np.array([k * 2.0**j for k in range(16) for j in range(-20, 17)])
    cand = cand[cand <= _max(elem)]
    return np.unique(cand.astype(t).astype(np.float64))


def oracle_shared_exp(amax: float, elem: str, rule: str) -> int:
    if amax == 0:
        return -127
    if rule == "floor":
        s = math.frexp(amax)[1] - 1 - ELEMS[elem][1]  # frexp: amax = m * 2^e, m in [0.5, 1)
    else:
        q = Fraction(amax) / Fraction(_max(elem))
        s = math.frexp(float(q))[1]
        while Fraction(2) ** s < q:
            s += 1
        while Fraction(2) ** (s - 1) >= q:
            s -= 1
    return max(-127, min(127, s))


def oracle(x: np.ndarray, elem: str, rule: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x float32 [R, N] -> (dequantized float32, scale bytes, element codes as ml_dtypes bits)."""
    t = ELEMS[elem][0]
    xb = x.astype(np.float64).reshape(x.shape[0], -1, BLOCK)
    ok = np.asarray(np.isfinite(xb).all(axis=-1))
    s = np.zeros(ok.shape, dtype=np.int64)
    for idx in np.ndindex(*ok.shape):
        if ok[idx]:
            s[idx] = oracle_shared_exp(float(np.abs(xb[idx]).max()), elem, rule)
    v = np.clip(np.where(ok[..., None], xb, 0.0) * 2.0 ** -s[..., None], -_max(elem), _max(elem))
    if t is None:
        codes = np.round(v * 64).astype(np.int8)
        q = codes.astype(np.float64) / 64
    else:
        cast = v.astype(t)
        codes, q = cast.view(np.uint8), cast.astype(np.float64)
    deq = np.where(ok[..., None], q * 2.0 ** s[..., None], np.nan)
    scale = np.where(ok, s + 127, 255).astype(np.uint8)
    return deq.astype(np.float32).reshape(x.shape), scale, codes.reshape(x.shape)


def make_data(elem: str, seed: int = 0) -> np.ndarray:
    """float32 [R, 4 * 32]: blocks of every kind the spec has to get right."""
    rng = np.random.default_rng(seed)
    mx, emax = _max(elem), ELEMS[elem][1]

    def signs(n: int) -> np.ndarray:
        return rng.choice([-1.0, 1.0], n)

    blocks: list[np.ndarray] = []
    for _ in range(160):  # log-uniform magnitudes, block centres spanning 2^-140 .. 2^140
        c = rng.uniform(-140, 140)
        blocks.append(signs(BLOCK) * 2.0 ** (c - rng.uniform(0, 24, BLOCK)))
    for _ in range(40):  # one block spans the whole float32 range
        blocks.append(signs(BLOCK) * 2.0 ** rng.uniform(-150, 128, BLOCK))
    blocks.append(np.zeros(BLOCK))
    blocks.append(-np.zeros(BLOCK))
    blocks.append(np.where(rng.random(BLOCK) < 0.5, 0.0, signs(BLOCK) * rng.random(BLOCK)))
    for _ in range(6):  # float32 subnormals, alone and under a small normal
        sub = signs(BLOCK) * rng.integers(1, 2**23, BLOCK) * 2.0**-149
        blocks.append(sub)
        blocks.append(np.concatenate([[2.0 ** rng.integers(-126, -100)], sub[1:]]))
    for k in range(-149, 128, 6):  # the block amax an exact power of two
        rest = signs(BLOCK - 1) * 2.0 ** (k - rng.uniform(0, 10, BLOCK - 1))
        blocks.append(np.concatenate([[2.0**k], rest]))
    ties = (_grid(elem)[1:] + _grid(elem)[:-1]) / 2
    for s in rng.integers(-135, 128 - emax, 60):  # +-max, ties and near-ties at scale 2^s
        vals = rng.choice(ties, BLOCK) * 2.0**s
        vals[1::3] = np.nextafter(vals[1::3].astype(np.float32), np.float32(np.inf))
        vals[2::3] = np.nextafter(vals[2::3].astype(np.float32), np.float32(0))
        vals[0] = mx * 2.0**s
        blocks.append(signs(BLOCK) * vals)
        top = float(np.nextafter(np.float32(2.0 ** (emax + 1 + s)), np.float32(0)))
        near = [np.nextafter(np.float32(mx * 2.0**s), np.float32(np.inf)), top, mx * 1.01 * 2.0**s]
        blocks.append(np.concatenate([near, vals[3:]]) * signs(BLOCK))
    for bad in (np.nan, np.inf, -np.inf):  # NaN / Inf in a block of ordinary values
        b = rng.standard_normal(BLOCK)
        b[rng.integers(BLOCK)] = bad
        blocks.append(b)
    blocks.append(np.full(BLOCK, np.nan))
    while len(blocks) % 4:
        blocks.append(rng.standard_normal(BLOCK))
    with np.errstate(over="ignore"):  # magnitudes past 2^128 become Inf (more Inf blocks)
        return np.stack(blocks).astype(np.float32).reshape(-1, 4 * BLOCK)


def test_ml_dtypes_rounds_half_to_even() -> None:
    ties = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -2.5], np.float32)
    assert ties.astype(ml_dtypes.float4_e2m1fn).astype(np.float32).tolist() == [
        0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0, -2.0,
    ]  # fmt: skip
    # e4m3: 1 + 1/16 lies halfway between 1 and 1.125 (even mantissa 000), 1 + 3/16 -> 1.25
    e4m3 = np.array([1 + 1 / 16, 1 + 3 / 16], np.float32).astype(ml_dtypes.float8_e4m3fn)
    assert e4m3.astype(np.float32).tolist() == [1.0, 1.25]
    assert np.round(np.array([0.5, 1.5, 2.5, -0.5])).tolist() == [0.0, 2.0, 2.0, -0.0]
    # and they do not saturate, hence the clamp in the oracle
    assert np.isnan(np.float32(500).astype(ml_dtypes.float8_e4m3fn).astype(np.float32))


@pytest.mark.parametrize("rule", ["floor", "rceil"])
@pytest.mark.parametrize("elem", list(ELEMS))
def test_mx_matches_oracle_bit_for_bit(elem: str, rule: str) -> None:
    x = make_data(elem)
    want, want_scale, want_codes = oracle(x, elem, rule)
    codes, scale = mx_quantize(torch.from_numpy(x), elem, BLOCK, -1, rule)
    got = mx_dequantize(codes, scale, elem, BLOCK).numpy()

    assert np.array_equal(scale.numpy(), want_scale)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    bad = np.flatnonzero(got[~nan].view(np.uint32) != want[~nan].view(np.uint32))
    assert bad.size == 0, (
        f"{bad.size} mismatches, e.g. x={x[~nan][bad[:4]]} -> {got[~nan][bad[:4]]}"
    )
    if codes.dtype == torch.uint8:  # fp6 / fp4 bit patterns equal ml_dtypes' (NaN blocks: ours 0)
        assert np.array_equal(codes.numpy()[~nan], want_codes[~nan])
