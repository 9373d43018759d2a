"""Sub-byte packing shared by every format that stores codes narrower than a byte.

uint4 (int4 weights, MX fp4): two codes per byte along the last dim, the first element
in the low nibble::

    codes  [.., 2j]   [.., 2j+1]
            c0         c1            ->  byte j = (c1 << 4) | c0
           bits 3..0   bits 3..0         high nibble = c1, low nibble = c0

fp6 (MX fp6_e2m3 / fp6_e3m2): four 6-bit codes in three bytes along the last dim, as a
little-endian bit stream. Codes [.., 4j .. 4j+3] form the 24-bit word
w = c0 | c1 << 6 | c2 << 12 | c3 << 18, stored as bytes [.., 3j .. 3j+2] = w's bytes, low first::

    word bit  23        18 17        12 11         6 5          0
              [    c3    ][    c2     ][    c1     ][    c0     ]
              [      byte 2     ][      byte 1     ][   byte 0   ]
    word bit  23             16 15               8 7            0

    byte 0 = c0        | (c1 & 0b11)   << 6
    byte 1 = c1 >> 2   | (c2 & 0b1111) << 4
    byte 2 = c2 >> 4   |  c3           << 2
"""

from __future__ import annotations

import torch


def pack_uint4(codes: torch.Tensor) -> torch.Tensor:
    """Pack codes in [0, 15] (any integer dtype, last dim even) into uint8, low nibble first."""
    if codes.shape[-1] % 2:
        raise ValueError(
            f"last dim {codes.shape[-1]} is odd; uint4 packing needs an even length (pad it)"
        )
    c = codes.to(torch.uint8)
    return c[..., 0::2] | (c[..., 1::2] << 4)


def unpack_uint4(packed: torch.Tensor) -> torch.Tensor:
    """Inverse of pack_uint4: uint8 [..., n] -> uint8 codes [..., 2n] in [0, 15]."""
    lo = packed & 0x0F
    hi = packed >> 4
    return torch.stack([lo, hi], dim=-1).flatten(-2)


def pack_fp6(codes: torch.Tensor) -> torch.Tensor:
    """Pack 6-bit codes in [0, 63] (any integer dtype, last dim a multiple of 4) into uint8
    [..., 3n/4]: each group of four codes becomes the three little-endian bytes of
    w = c0 | c1 << 6 | c2 << 12 | c3 << 18 (see the module diagram)."""
    n = codes.shape[-1]
    if n % 4:
        raise ValueError(
            f"last dim {n} is not a multiple of 4; fp6 packing stores 4 codes in 3 bytes "
            f"(pad it to {-(-n // 4) * 4})"
        )
    c = codes.to(torch.int32)
    # checked where it costs no device sync (as in mx_elem.encode_elem): aoq's encoders make
    # codes in range by construction, and a sync here would block every emulated MX call
    if not c.is_cuda and c.numel() and (int(c.min()) < 0 or int(c.max()) > 63):
        raise ValueError(f"fp6 codes must be in [0, 63], got [{int(c.min())}, {int(c.max())}]")
    c = c.reshape(*c.shape[:-1], n // 4, 4)
    w = c[..., 0] | (c[..., 1] << 6) | (c[..., 2] << 12) | (c[..., 3] << 18)
    packed = torch.stack([w & 0xFF, (w >> 8) & 0xFF, (w >> 16) & 0xFF], dim=-1)
    return packed.flatten(-2).to(torch.uint8)


def unpack_fp6(packed: torch.Tensor) -> torch.Tensor:
    """Inverse of pack_fp6: uint8 [..., 3m] -> uint8 codes [..., 4m] in [0, 63]."""
    n = packed.shape[-1]
    if n % 3:
        raise ValueError(
            f"last dim {n} is not a multiple of 3; packed fp6 holds 4 codes per 3 bytes "
            "(was it produced by pack_fp6?)"
        )
    b = packed.to(torch.int32).reshape(*packed.shape[:-1], n // 3, 3)
    w = b[..., 0] | (b[..., 1] << 8) | (b[..., 2] << 16)
    codes = torch.stack([(w >> shift) & 0x3F for shift in (0, 6, 12, 18)], dim=-1)
    return codes.flatten(-2).to(torch.uint8)


TILE_ROWS = 64
TILE_BYTES = 64
"""int4's tiled packing (``tile_uint4``): 64 rows x 64 bytes (128 codes) a tile."""


def tiles_uint4(n: int, k: int, group_size: int) -> bool:
    """Whether an [N, K] int4 weight in groups of ``group_size`` takes the tiled packing:
    whole tiles (N a multiple of 64, K of 128), and no group crossing a tile's columns."""
    return n % TILE_ROWS == 0 and k % (2 * TILE_BYTES) == 0 and group_size <= 2 * TILE_BYTES


def tile_uint4(
    packed: torch.Tensor, tile_bytes: int = TILE_BYTES, tile_rows: int = TILE_ROWS
) -> torch.Tensor:
    """Packed int4 codes [N, K // 2] (pack_uint4, row-major) -> the same bytes in tile order,
    as [N, K // 2]: tiles of R = ``tile_rows`` rows x B = ``tile_bytes`` bytes (64 x 64 by
    default, Int4Tensor's "tiled"), one after another along K within a band of R rows, the
    bands one after another; a tile's rows are its B-byte runs. Byte (n, j) goes to flat
    offset (n // R) * R K / 2 + (j // B) * R B + (n % R) * B + j % B. A decode kernel's step
    over 64 rows and 128 codes then reads 4 KB in one run instead of 64 runs of 64 bytes
    (H100, K = N = 8192, M = 1: 20.2 -> 17.5 us). Other tiles are probes
    (bench.decode_rows' TILE_B / TILE_R; bench/NOTES.md, session 27)."""
    n, kb = packed.shape
    if n % tile_rows or kb % tile_bytes:
        raise ValueError(
            f"int4 codes [{n}, {kb}] bytes do not tile: rows must be a multiple of "
            f"{tile_rows} and bytes a row of {tile_bytes}"
        )
    t = packed.reshape(n // tile_rows, tile_rows, kb // tile_bytes, tile_bytes)
    return t.permute(0, 2, 1, 3).contiguous().reshape(n, kb)


def untile_uint4(
    tiled: torch.Tensor, tile_bytes: int = TILE_BYTES, tile_rows: int = TILE_ROWS
) -> torch.Tensor:
    """Inverse of tile_uint4: tile order [N, K // 2] -> row-major packed codes."""
    n, kb = tiled.shape
    t = tiled.reshape(n // tile_rows, kb // tile_bytes, tile_rows, tile_bytes)
    return t.permute(0, 2, 1, 3).contiguous().reshape(n, kb)


def pack_zero_words(zero: torch.Tensor) -> torch.Tensor:
    """uint8 zero points [N, G] -> int32 words [N, ceil(G / 4)], group-major (strides (1, N),
    as decode kernels read scales): word j of row n holds groups 4j .. 4j + 3, a byte each,
    the first in the low byte (G padded with zeros). A kernel loads a row's word as one
    32-bit value, which a pipeliner can copy ahead (cp.async moves 4, 8 or 16 bytes)."""
    n, g = zero.shape
    padded = torch.zeros(n, -(-g // 4) * 4, dtype=torch.uint8, device=zero.device)
    padded[:, :g] = zero
    return padded.view(torch.int32).t().contiguous().t()
