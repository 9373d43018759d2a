"""Sub-byte packing: round trips, the documented bit layouts on hand-written bytes, bad lengths."""

from __future__ import annotations

import pytest
import torch

from aoq.formats.packing import pack_fp6, pack_uint4, unpack_fp6, unpack_uint4


def _u8(values: list[int]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.uint8)


# --- uint4 ---------------------------------------------------------------------------------------


def test_uint4_layout_low_nibble_first() -> None:
    assert pack_uint4(_u8([0x1, 0x2, 0x3, 0x4])).tolist() == [0x21, 0x43]
    assert pack_uint4(_u8([0xF, 0x0])).tolist() == [0x0F]
    assert pack_uint4(_u8([0x0, 0xF])).tolist() == [0xF0]
    assert unpack_uint4(_u8([0xA5])).tolist() == [0x5, 0xA]


def test_uint4_round_trip() -> None:
    g = torch.Generator().manual_seed(0)
    codes = torch.randint(0, 16, (3, 5, 64), generator=g, dtype=torch.uint8)
    packed = pack_uint4(codes)
    assert packed.shape == (3, 5, 32) and packed.dtype == torch.uint8
    assert torch.equal(unpack_uint4(packed), codes)


def test_uint4_odd_length_raises() -> None:
    with pytest.raises(ValueError, match="odd"):
        pack_uint4(_u8([1, 2, 3]))


# --- fp6 -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("codes", "packed"),
    [
        # each code alone: c0 at word bit 0, c1 at bit 6, c2 at bit 12, c3 at bit 18
        ([1, 0, 0, 0], [0x01, 0x00, 0x00]),
        ([0, 1, 0, 0], [0x40, 0x00, 0x00]),
        ([0, 0, 1, 0], [0x00, 0x10, 0x00]),
        ([0, 0, 0, 1], [0x00, 0x00, 0x04]),
        ([63, 0, 0, 0], [0x3F, 0x00, 0x00]),
        ([0, 0, 0, 63], [0x00, 0x00, 0xFC]),
        ([63, 63, 63, 63], [0xFF, 0xFF, 0xFF]),
        # c0=0b101010 c1=0b010101 c2=0b110011 c3=0b001100, by the byte formulas:
        # b0 = 42 | (21 & 3) << 6 = 0x6A;  b1 = 21 >> 2 | (51 & 15) << 4 = 0x35;
        # b2 = 51 >> 4 | 12 << 2 = 0x33
        ([42, 21, 51, 12], [0x6A, 0x35, 0x33]),
    ],
)
def test_fp6_documented_layout(codes: list[int], packed: list[int]) -> None:
    assert pack_fp6(_u8(codes)).tolist() == packed
    assert unpack_fp6(_u8(packed)).tolist() == codes


def test_fp6_groups_follow_each_other() -> None:
    codes = _u8([1, 0, 0, 0, 0, 0, 0, 1])
    assert pack_fp6(codes).tolist() == [0x01, 0, 0, 0, 0, 0x04]


def test_fp6_round_trip() -> None:
    g = torch.Generator().manual_seed(1)
    codes = torch.randint(0, 64, (2, 7, 96), generator=g, dtype=torch.uint8)
    packed = pack_fp6(codes)
    assert packed.shape == (2, 7, 72) and packed.dtype == torch.uint8
    assert torch.equal(unpack_fp6(packed), codes)
    every = torch.arange(64, dtype=torch.uint8)
    assert torch.equal(unpack_fp6(pack_fp6(every)), every)


def test_fp6_accepts_integer_dtypes_and_empty() -> None:
    codes = torch.tensor([5, 6, 7, 8], dtype=torch.int64)
    assert torch.equal(unpack_fp6(pack_fp6(codes)), codes.to(torch.uint8))
    assert pack_fp6(torch.zeros(3, 0, dtype=torch.uint8)).shape == (3, 0)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 6, 7, 30])
def test_fp6_length_not_multiple_of_4_raises(n: int) -> None:
    with pytest.raises(ValueError, match="multiple of 4"):
        pack_fp6(torch.zeros(n, dtype=torch.uint8))


@pytest.mark.parametrize("n", [1, 2, 4, 5])
def test_fp6_unpack_length_not_multiple_of_3_raises(n: int) -> None:
    with pytest.raises(ValueError, match="multiple of 3"):
        unpack_fp6(torch.zeros(n, dtype=torch.uint8))


def test_fp6_code_out_of_range_raises() -> None:
    with pytest.raises(ValueError, match=r"\[0, 63\]"):
        pack_fp6(_u8([0, 64, 0, 0]))


def test_uint4_tiles_are_64_rows_of_64_bytes() -> None:
    """tile_uint4's documented offset: byte (n, j) at (n // 64) 32 K + (j // 64) 4096 +
    (n % 64) 64 + j % 64; untile_uint4 inverts it."""
    from aoq.formats.packing import tile_uint4, tiles_uint4, untile_uint4

    n, kb = 128, 192  # two bands of three tiles
    packed = torch.randint(0, 256, (n, kb), dtype=torch.uint8)
    flat = tile_uint4(packed).reshape(-1)
    for r, j in ((0, 0), (63, 63), (64, 0), (5, 64), (70, 130), (127, 191)):
        at = (r // 64) * 32 * (2 * kb) + (j // 64) * 4096 + (r % 64) * 64 + j % 64
        assert flat[at] == packed[r, j]
    assert torch.equal(untile_uint4(tile_uint4(packed)), packed)
    assert tiles_uint4(128, 384, 128) and not tiles_uint4(96, 384, 128)
    assert not tiles_uint4(128, 320, 64) and not tiles_uint4(128, 512, 256)
    with pytest.raises(ValueError, match="do not tile"):
        tile_uint4(packed[:100])


def test_uint4_tiles_of_other_shapes() -> None:
    """tile_uint4's R rows x B bytes tiles (the decode probes' TILE_R / TILE_B): byte (n, j)
    at (n // R) R K / 2 + (j // B) R B + (n % R) B + j % B; untile_uint4 inverts it."""
    from aoq.formats.packing import tile_uint4, untile_uint4

    n, kb = 64, 96
    packed = torch.randint(0, 256, (n, kb), dtype=torch.uint8)
    for rows, width in ((16, 16), (64, 16), (32, 32)):
        flat = tile_uint4(packed, width, rows).reshape(-1)
        for r, j in ((0, 0), (15, 15), (17, 40), (63, 95), (40, 17)):
            at = (r // rows) * rows * kb + (j // width) * rows * width + (r % rows) * width
            assert flat[at + j % width] == packed[r, j]
        assert torch.equal(untile_uint4(tile_uint4(packed, width, rows), width, rows), packed)
    with pytest.raises(ValueError, match="multiple of 32"):
        tile_uint4(packed[:48], 16, 32)
