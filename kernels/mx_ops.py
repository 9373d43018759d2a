"""The MX cast ops, without Triton: ``aoq::mx_cast`` and ``aoq::mx_qdq`` with their CPU
implementation (the aoq.formats.mx reference) and fake implementation (torch.compile), and
the rule that picks the Triton casts' tiles. kernels/mx_cast.py registers the Triton
implementation for CUDA/ROCm where Triton exists, so a CPU-only install has the ops too.
Signatures and layouts: see kernels/mx_cast.py.
"""

from __future__ import annotations

import dataclasses
import re

import torch
from torch import Tensor

from aoq.backends import interpret_enabled
from aoq.formats import mx as ref
from aoq.formats.mx import MXElem, ScaleRounding, parse_choice

PACK_GROUP = {4: 2, 6: 4}
"""Codes packed together along the blocked dim, by element bits: fp4 two per byte, fp6 four
in three bytes (aoq.formats.packing)."""


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def triton_block_ok(block_size: int) -> bool:
    """Block sizes the Triton casts take: powers of two from 8 (one 16-byte load of bf16 per
    thread holds whole pack groups) to 256 (registers); others run the reference."""
    return _is_pow2(block_size) and 8 <= block_size <= 256


def _check(x: Tensor, elem: str, block_size: int, dim: int, scale_rounding: str) -> None:
    if x.dim() != 2:
        raise ValueError(f"mx_cast takes a 2-D tensor, got {x.dim()}-D; reshape it to 2-D first")
    if dim not in (0, 1):
        raise ValueError(f"dim={dim} must be 0 or 1")
    if not isinstance(block_size, int) or block_size <= 0 or x.shape[dim] % block_size:
        raise ValueError(
            f"size {x.shape[dim]} along dim {dim} is not divisible by block_size={block_size}; "
            f"pad dim {dim} to a multiple of {block_size}"
        )
    e = parse_choice(MXElem, elem, "MX element")
    parse_choice(ScaleRounding, scale_rounding, "scale_rounding")
    group = PACK_GROUP.get(e.spec.bits, 1)
    if x.shape[dim] % group:
        raise ValueError(
            f"{e.value} packs {group} codes together along dim {dim}, whose size "
            f"{x.shape[dim]} is not a multiple of {group}; pad dim {dim}"
        )


def packed_shape(shape: tuple[int, ...], elem: MXElem, dim: int) -> tuple[int, int]:
    """The codes' shape: ``dim`` holds bits / 8 bytes per element (MXTensor.qdata)."""
    r, c = shape
    if dim == 0:
        return r * elem.spec.bits // 8, c
    return r, c * elem.spec.bits // 8


def scale_shape(shape: tuple[int, ...], block_size: int, dim: int) -> tuple[int, int]:
    r, c = shape
    return (r // block_size, c) if dim == 0 else (r, c // block_size)


# --- tiles: what one program of the Triton casts (kernels/mx_cast.py) takes ---------------


@dataclasses.dataclass(frozen=True)
class Dim1Tile:
    """A dim-1 program: ``blocks`` consecutive blocks, each thread holding ``pieces`` 16-byte
    vectors of one block (so B / (pieces * 8) lanes share a bf16 block and its scale work)."""

    blocks: int
    pieces: int
    warps: int

    @property
    def label(self) -> str:
        return f"b{self.blocks}h{self.pieces}w{self.warps}"


@dataclasses.dataclass(frozen=True)
class Dim0Tile:
    """A dim-0 program: ``rows`` block-rows of ``groups`` column groups each (warps take
    groups; more groups than warps repeat in-thread), a group being 32 / ``lanes`` 16-byte
    vectors wide (bf16: 256 / lanes columns), with ``lanes`` lanes down each block."""

    lanes: int
    groups: int
    rows: int
    warps: int

    @property
    def label(self) -> str:
        return f"l{self.lanes}g{self.groups}r{self.rows}w{self.warps}"


Tile = Dim1Tile | Dim0Tile


def parse_tile(text: str) -> Tile:
    """``b256h2w4`` (dim 1) or ``l4g4r1w4`` (dim 0), as the labels write them."""
    m1 = re.fullmatch(r"b(\d+)h(\d+)w(\d+)", text)
    m0 = re.fullmatch(r"l(\d+)g(\d+)r(\d+)w(\d+)", text)
    if m1:
        return Dim1Tile(*(int(v) for v in m1.groups()))
    if m0:
        return Dim0Tile(*(int(v) for v in m0.groups()))
    raise ValueError(
        f"tile {text!r}: expected b<blocks>h<pieces>w<warps> (dim 1) or "
        "l<lanes>g<groups>r<rows>w<warps> (dim 0)"
    )


def _warp_size() -> int:
    return 64 if torch.version.hip is not None else 32  # CDNA wavefronts hold 64 threads


def cast_tile(
    dim: int,
    shape: tuple[int, int],
    block_size: int,
    elem: MXElem,
    vec: int,
    interpret: bool | None = None,
) -> Tile:
    """The tile of a cast, by rule (every tile gives the same bits, so no timing autotune).
    GPU: 16 KB of bf16 per program, 4 warps; which vectors of a block a thread takes by
    element format, from H200 sweeps at 8192 x 8192 bf16 (runs 64635a, b92b8a; % of copy
    bandwidth): dim 1 one vector of a block per thread, 4 lanes a block (fp8 91 %, fp6 80 %,
    int8 91 %, against 80 / 56 / 82 % with two), fp4 a whole block and 128 blocks a program
    (93 % against 83 %); dim 0 4 lanes down a block for fp8 (95 %), 2 for the others (fp4
    90 %, fp6 89 %, int8 93 %, against 80 / 83 / 92 % with 4). Narrower for small tensors.
    Interpreter: few, large programs (each costs Python time). bench/mx_cast_speed.py
    --variants times others."""
    r, c = shape
    interpret = interpret_enabled() if interpret is None else interpret
    bits = elem.spec.bits
    if dim == 1:
        per_program = 4096 if bits == 4 else 8192
        most = 1024 if interpret else max(1, per_program // block_size)
        blocks = min(most, _next_pow2(max(1, r * c // block_size)))
        pieces = max(1, min(4 if bits == 4 else 1, block_size // vec))
        threads = blocks * block_size // (pieces * vec)
        return Dim1Tile(blocks, pieces, max(1, min(4, threads // 32)))
    want = 4 if elem in (MXElem.FP8_E4M3, MXElem.FP8_E5M2) or interpret else 2
    lanes = max(1, min(want, block_size // PACK_GROUP.get(bits, 1)))
    width = vec * _warp_size() // lanes
    groups = _next_pow2(-(-c // width))
    if not interpret:
        return Dim0Tile(lanes, min(4, groups), 1, min(4, groups))
    groups = min(64, groups)  # up to 2^20 elements a program
    rows = min(_next_pow2(r // block_size), max(1, 2**20 // (block_size * groups * width)))
    return Dim0Tile(lanes, groups, rows, 4)


def default_tile(dim: int, elem: MXElem = MXElem.FP8_E4M3) -> Tile:
    """The GPU tile of a cast at 8192 x 8192 bf16, block 32 (what the compile targets check)."""
    return cast_tile(dim, (8192, 8192), 32, elem, 8, interpret=False)


def _next_pow2(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


# --- torch.library: reference everywhere, Triton on GPUs, fake for torch.compile ------------


def mx_cast_reference(
    x: Tensor, elem: str, block_size: int, dim: int, scale_rounding: str
) -> tuple[Tensor, Tensor]:
    _check(x, elem, block_size, dim, scale_rounding)
    e = MXElem(elem)
    codes, scale = ref.mx_quantize(x, e, block_size, dim, scale_rounding)
    packed = ref.pack_mx_codes(codes.movedim(dim, -1), e).movedim(-1, dim).contiguous()
    return packed, scale


def mx_qdq_reference(
    x: Tensor, elem: str, block_size: int, dim: int, scale_rounding: str
) -> Tensor:
    _check(x, elem, block_size, dim, scale_rounding)
    codes, scale = ref.mx_quantize(x, elem, block_size, dim, scale_rounding)
    return ref.mx_dequantize(codes, scale, elem, block_size, dim, dtype=x.dtype)


@torch.library.custom_op("aoq::mx_cast", mutates_args=())
def mx_cast(
    x: Tensor, elem: str, block_size: int, dim: int, scale_rounding: str
) -> tuple[Tensor, Tensor]:
    """MX-quantize 2-D x along ``dim``: (codes uint8 packed along ``dim`` as in
    MXTensor.qdata, E8M0 scale bytes uint8)."""
    return mx_cast_reference(x, elem, block_size, dim, scale_rounding)


@torch.library.custom_op("aoq::mx_qdq", mutates_args=())
def mx_qdq(x: Tensor, elem: str, block_size: int, dim: int, scale_rounding: str) -> Tensor:
    """MX quantize-dequantize of 2-D x along ``dim``, in x's dtype."""
    return mx_qdq_reference(x, elem, block_size, dim, scale_rounding)


@mx_cast.register_fake
def _mx_cast_fake(
    x: Tensor, elem: str, block_size: int, dim: int, scale_rounding: str
) -> tuple[Tensor, Tensor]:
    _check(x, elem, block_size, dim, scale_rounding)
    shape = (x.shape[0], x.shape[1])
    codes = x.new_empty(packed_shape(shape, MXElem(elem), dim), dtype=torch.uint8)
    return codes, x.new_empty(scale_shape(shape, block_size, dim), dtype=torch.uint8)


@mx_qdq.register_fake
def _mx_qdq_fake(x: Tensor, elem: str, block_size: int, dim: int, scale_rounding: str) -> Tensor:
    _check(x, elem, block_size, dim, scale_rounding)
    return torch.empty_like(x, memory_format=torch.contiguous_format)
