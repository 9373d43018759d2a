"""kernels/decode_mma_sk.py: stream-K for int4's decode tile.

The kernel tests run under TRITON_INTERPRET=1 on CPU tensors (``make kernels-interpret``) and
on a GPU; the plain CPU unit run skips them and keeps the host-side rules' tests."""

import pytest
import torch
from _mx_cases import DEV, NEEDS_KERNELS, OUT
from aoq.kernels import decode_mma as dm
from aoq.kernels import decode_mma_sk as sk
from aoq.kernels._common import WeightFormat

from aoq.backends import Backend
from aoq.formats import affine
from aoq.formats.packing import pack_uint4, pack_zero_words, tile_uint4
from aoq.testing.metrics import max_rel_error


def _case(n: int, k: int, m: int, gs: int = 128):
    q, s, z = affine.quantize_uint4_asymmetric(torch.randn(n, k, device=DEV), gs)
    x = torch.randn(m, k, device=DEV).to(torch.bfloat16)
    ref = x.float() @ affine.dequantize_uint4_asymmetric(q, s, z).float().t()
    return x, q, s.t().contiguous().t(), z.t().contiguous().t(), k // gs, ref


def _nan_partials(n_parts: int, m: int, n: int, device: torch.device) -> torch.Tensor:
    return torch.full((n_parts, m, n), float("nan"), device=device)


def _y(x, q, s, z, groups, tile=None, split=None, bias=None, tiled=False) -> torch.Tensor:
    y = torch.empty(x.shape[0], q.shape[0], dtype=OUT, device=DEV)
    dm.decode_mma(x, q, s, z, bias, y, groups, WeightFormat.UINT4, split, tile=tile, tiled=tiled)
    return y


@NEEDS_KERNELS
@pytest.mark.parametrize("programs", [4, 5, 7, 11, 24])
@pytest.mark.parametrize("m", [1, 9])
def test_stream_k_sums_every_step_once(programs, m, monkeypatch):
    """Three column tiles of eight 128-code steps shared by 4 to 24 programs (ranges that
    cross a tile's end, tiles of one to eight parts, the slots a tile does not use zeroed:
    they start as NaN here): the unsplit kernel's result up to float32 summation order,
    and the reference product's."""
    monkeypatch.setattr(sk, "partials", _nan_partials)
    x, q, s, z, groups, ref = _case(192, 1024, m)
    want = _y(x, pack_uint4(q), s, z, groups, split=1)
    got = _y(x, pack_uint4(q), s, z, groups, tile={"SK": programs})
    assert max_rel_error(want.float(), got.float()) < 4e-3
    assert max_rel_error(ref, got.float()) < 1e-2


@NEEDS_KERNELS
@pytest.mark.parametrize("gs", [64, 128])
def test_layouts_and_rows_keep_the_bits(gs):
    """The partition depends on the shape and the programs only: codes in tile order with
    zero-point words, and x padded to 8 or 16 rows, give the row-major codes' bits."""
    x, q, s, z, groups, _ = _case(192, 1024, 3, gs)
    want = _y(x, pack_uint4(q), s, z, groups, tile={"SK": 7})
    tiled = _y(x, tile_uint4(pack_uint4(q)), s, pack_zero_words(z), groups,
               tile={"SK": 7}, tiled=True)  # fmt: skip
    rows16 = _y(x, pack_uint4(q), s, z, groups, tile={"SK": 7, "ROWS": 16})
    rows8 = _y(x, pack_uint4(q), s, z, groups, tile={"SK": 7, "ROWS": 8})
    assert torch.equal(want, tiled) and torch.equal(rows16, rows8)


@NEEDS_KERNELS
def test_bias_and_a_cut_tile():
    """A bias, and a last column tile cut by N (160 = 2.5 tiles), reach the output."""
    n = 160
    x, q, s, z, groups, ref = _case(n, 1024, 3)
    bias = torch.randn(n, device=DEV).to(torch.bfloat16)
    got = _y(x, pack_uint4(q), s, z, groups, tile={"SK": 5}, bias=bias)
    assert max_rel_error(ref + bias.float(), got.float()) < 1e-2


@NEEDS_KERNELS
def test_a_forced_split_is_not_stream_k():
    """A caller's split (tests, bench probes) keeps split-K: the SK tile key gives way."""
    x, q, s, z, groups, _ = _case(128, 1024, 2)
    a = _y(x, pack_uint4(q), s, z, groups, tile={"SK": 5, "KINT": False}, split=2)
    b = _y(x, pack_uint4(q), s, z, groups, tile={"SK": False, "KINT": False}, split=2)
    assert torch.equal(a, b)


def _parts_by_tile(n_tiles: int, steps: int, programs: int) -> list[list[int]]:
    t_steps = n_tiles * steps
    ranges = [(p * t_steps // programs, (p + 1) * t_steps // programs) for p in range(programs)]
    return [
        [p for p, (lo, hi) in enumerate(ranges) if lo < (t + 1) * steps and hi > t * steps]
        for t in range(n_tiles)
    ]


@pytest.mark.parametrize(
    "n_tiles, steps, programs", [(3, 8, 4), (3, 8, 7), (3, 8, 24), (224, 32, 792), (5, 9, 13)]
)
def test_parts_and_first_part(n_tiles, steps, programs):
    """The partials' slots are the most programs any tile is shared by; the kernel's closed
    form of a tile's first program is the first range that holds the tile's first step, and
    a tile's programs are consecutive."""
    by_tile = _parts_by_tile(n_tiles, steps, programs)
    assert sk.parts(n_tiles, steps, programs) == max(len(p) for p in by_tile)
    t_steps = n_tiles * steps
    for t, ps in enumerate(by_tile):
        assert ps == list(range(ps[0], ps[-1] + 1))
        assert ps[0] == ((t * steps + 1) * programs + t_steps - 1) // t_steps - 1


def test_stream_k_serves_only_an_emptier_wave():
    """H100 / H200 slots (6 programs an SM x 132): 8192 x 28672's 448 tiles of 64 steps
    (split 1) fill 57 % of the wave and go stream-K on all 792 slots; 4096 x 14336 (224 x
    32, split 3: 85 %), 8192^2 (128 x 64, split 6) and 14336 x 4096 (64 x 112, split 12: 97
    %) keep split-K; so do shapes whose ranges would be shorter than the minimum, or no more
    programs than the split's."""
    assert sk.programs(448, 64, 1, 792, 4) == 792
    assert sk.programs(224, 32, 3, 792, 4) is None
    assert sk.programs(128, 64, 6, 792, 4) is None
    assert sk.programs(64, 112, 12, 792, 4) is None
    assert sk.programs(16, 8, 2, 792, 4) is None  # 32 programs: the split's own count
    assert sk.programs(2, 100, 1, 792, 4) == 50
    cpu = torch.device("cpu")
    assert sk.wave_programs(5, Backend.INTERPRET, cpu, 3, 1024, 128, 6, True) == 5  # forced
    assert sk.wave_programs(True, Backend.INTERPRET, cpu, 448, 8192, 128, 6, True) is None
