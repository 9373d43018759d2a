"""MX casts of a 2-D tensor along dim 0 or dim 1: the six casts of MX training need both.

Two ops, registered with torch.library; the CPU implementation is the aoq.formats.mx
reference, the CUDA (and ROCm) implementation the Triton kernels below, bit for bit the same:

    aoq::mx_cast(x, elem, block_size, dim, scale_rounding) -> (qdata, scale)
        qdata  uint8 codes packed along ``dim`` (MXTensor.qdata's layout): fp8 / int8 one
               byte each; fp4 two per byte, first element in the low nibble; fp6 four in
               three bytes (aoq.formats.packing)   [R, C * bits / 8] or [R * bits / 8, C]
        scale  uint8 E8M0 bytes, 0xFF = NaN block  [R, C / B] (dim 1) or [R / B, C] (dim 0)
    aoq::mx_qdq(x, elem, block_size, dim, scale_rounding) -> x's dtype [R, C]
        quantize then dequantize in one pass (emulated MX GEMMs multiply these)

Tiles. Each thread loads 16 contiguous bytes at a time, each block is reduced inside one
warp (registers, then shuffles: no shared memory, no barriers), codes are stored at the
load's width, and consecutive programs read consecutive memory (the access pattern of a
copy). bf16, B = 32, the default tiles (``cast_tile``)::

    dim 1  blocks are runs of B consecutive elements of the flattened tensor; a program takes
           NB = 256 of them (16 KB) as [NB, H, W], W = B / H: thread t holds 8 elements of
           each of the H = 2 pieces of one block, so 2 lanes share a block and its scale
                block b: | piece 0: lane 0 | lane 1 | piece 1: lane 0 | lane 1 |
    dim 0  blocks run down columns; a program takes one block-row, B rows x 256 columns,
           as [L, CG, RPT, CW] = [4, 4, 8, 64]: row = l * RPT + i, col = g * CW + c
                lanes 0..7 of a warp: 8 columns each, 64 columns   (x 4 warps = CG)
                lanes  +8, +16, +24: the next 8-row quarters of the block   (L = 4)
           a thread holds 8 consecutive rows x 8 columns; a block = 4 lanes, 2 shuffles;
           programs walk the columns of a block-row first, so whole rows stream together.

Packing happens in registers: along dim 1 a thread's 8 codes split into pairs / quads;
along dim 0 its 8 consecutive rows (a register permutation puts rows last) do.

Exactness: kernels/mx_steps.py (float32, one element at a time) and kernels/mx_packed.py
(two bf16 elements a register, sm90) repeat the reference step by step.

Speed. Goal: >= 80% of device-copy bandwidth at 8192 x 8192 bf16 (read 128 MiB, write the
codes and 2 MiB of scales). The first kernels reached 54% (dim 1) and 24% (dim 0) on an
H200: dim 0 transposed tiles through shared memory (7 barriers a tile), both read 256-byte
pieces of 64 rows 16 KB apart instead of streaming rows, NaN/Inf took a second reduction,
and rounding spent 26 (dim 1) / 40 (dim 0) SASS instructions per element. Now: blocks
reduced inside a warp, one integer max for amax and NaN/Inf, programs over contiguous rows,
codes stored at the load's width, rounding by one add, packing in registers, and on sm90
bf16 two elements per instruction (mx_packed.py; fp6 dim 1 stores 3 x uint16 per 8 codes).
SASS instructions per element, sm90, dim 1 | dim 0 (first kernels -> float32 path ->
packed): fp8 via cvt 10.9 -> 8.8 | 25.0 -> 11.5; fp4 26.0 -> 18.9 -> 11.6 | 40.3 -> 20.8
-> 14.0; fp6 21.4 -> 12.5 | 21.8 -> 15.6; int8 11.0 | 13.5. At 80% of copy an H200 SM casts
~5 elements a clock (of 128 issue slots). Measured: bench/mx_cast_speed.py.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl
from aoq.kernels import mx_packed as pk
from aoq.kernels import mx_steps as st
from aoq.kernels._common import INTERPRET, out_dtype_for
from aoq.kernels._launch import launch
from aoq.kernels.mx_ops import (
    PACK_GROUP,
    Dim0Tile,
    Dim1Tile,
    Tile,
    _check,
    _warp_size,
    cast_tile,
    mx_cast,
    mx_cast_reference,
    mx_qdq,
    mx_qdq_reference,
    packed_shape,
    scale_shape,
    triton_block_ok,
)
from torch import Tensor

from aoq.formats.mx import MXElem, ScaleRounding, parse_choice


@triton.jit
def _mx_cast_dim1_kernel(
    x_ptr, out_ptr, scale_ptr,
    NBLK,
    QDQ: tl.constexpr, BLOCK: tl.constexpr, NB: tl.constexpr, H: tl.constexpr,
    VEC: tl.constexpr, EVEN: tl.constexpr, PACK: tl.constexpr, BITS: tl.constexpr,
    SHIFT: tl.constexpr, ELEM_SCALE: tl.constexpr, MIN_NORMAL_BITS: tl.constexpr,
    MAX_CODE: tl.constexpr, MAX_NORMAL: tl.constexpr, EMAX: tl.constexpr,
    MAX_FRAC: tl.constexpr, RCEIL: tl.constexpr, IS_INT: tl.constexpr, HW_FP8: tl.constexpr,
    FP8_TY: tl.constexpr, PACKED: tl.constexpr, ASM: tl.constexpr, MBITS: tl.constexpr,
    BIAS: tl.constexpr, MAXN_BITS: tl.constexpr, MIN_BITS: tl.constexpr,
):  # fmt: skip
    """NB consecutive blocks of the flattened tensor as [NB, H, W]: a block is H pieces of W =
    BLOCK / H elements, and a thread holds one 16-byte vector of each piece (H per block).
    PACKED: bf16 read as [NB, H, W / 2] words of two elements (kernels/mx_packed.py)."""
    W: tl.constexpr = BLOCK // H
    b0 = tl.program_id(0).to(tl.int64) * NB  # first block; int64 only in the program origin
    offs_b = tl.arange(0, NB)[:, None, None]
    offs_h = tl.arange(0, H)[None, :, None]
    offs_w = tl.max_contiguous(tl.arange(0, W), VEC)[None, None, :]
    bmask = None if EVEN else offs_b < NBLK - b0  # EVEN: every program's blocks exist
    offs = offs_b * BLOCK + offs_h * W + offs_w
    offs2 = offs_b * (BLOCK // 2) + offs_h * (W // 2)
    offs2 += tl.max_contiguous(tl.arange(0, W // 2), VEC // 2)[None, None, :]
    if PACKED:
        p = tl.load(x_ptr.to(tl.pointer_type(tl.uint32)) + b0 * (BLOCK // 2) + offs2, bmask)
        amax = pk.half_max(pk.amax2(pk.amax2(p, 2, ASM), 1, ASM)).to(tl.int32) << 16
    else:
        x = tl.load(x_ptr + b0 * BLOCK + offs, bmask)
        amax = tl.max(st.amax_bits(x, 2), axis=1)  # in-thread and BLOCK / H / VEC lanes, pieces
    shared, ok = st.shared_exp(amax, EMAX, MAX_FRAC, RCEIL)
    if PACKED:
        inv, scl, lim, sgn, keep = pk.block_halves(shared, ok, MAXN_BITS, BITS, IS_INT)
        inv2 = pk.pair(inv, inv)[:, None, None]
        lim2 = pk.pair(lim, lim)[:, None, None]
    if QDQ:
        if PACKED:
            y = pk.qdq2(
                p, inv2, pk.pair(scl, scl)[:, None, None], lim2,
                pk.pair(keep, keep)[:, None, None], MBITS, MIN_BITS, IS_INT, ASM,
            )  # fmt: skip
            tl.store(out_ptr.to(tl.pointer_type(tl.uint32)) + b0 * (BLOCK // 2) + offs2, y, bmask)
        else:
            y = st.qdq(
                x, st.exp2i(-shared, not IS_INT)[:, None, None],
                st.exp2i(shared, False)[:, None, None], ok[:, None, None], SHIFT,
                MIN_NORMAL_BITS, MAX_NORMAL, IS_INT, HW_FP8, FP8_TY,
            )  # fmt: skip
            tl.store(out_ptr + b0 * BLOCK + offs, y.to(out_ptr.dtype.element_ty), bmask)
    else:
        if PACKED:
            c = pk.codes2(
                p, inv2, lim2, pk.pair(sgn, sgn)[:, None, None], BITS, MBITS, BIAS, MIN_BITS,
                IS_INT, ASM,
            )  # fmt: skip
        else:
            q = st.codes(
                x, st.exp2i(-shared, not IS_INT)[:, None, None], ok[:, None, None], BITS, SHIFT,
                MIN_NORMAL_BITS, ELEM_SCALE, MAX_CODE, IS_INT, HW_FP8, FP8_TY,
            )  # fmt: skip
        s = tl.where(ok, shared + 127, 255).to(tl.uint8)
        offs_s = tl.arange(0, NB)
        tl.store(scale_ptr + b0 + offs_s, s, None if EVEN else offs_s < NBLK - b0)
        PB: tl.constexpr = W * BITS // 8  # bytes of one piece
        out = out_ptr + (b0 + offs_b) * (BLOCK * BITS // 8) + offs_h * PB
        if PACK == 1:
            tl.store(out + offs_w, pk.unpair(c) if PACKED else q, bmask)
        elif PACK == 2:
            offs_w2 = tl.max_contiguous(tl.arange(0, W // 2), VEC // 2)[None, None, :]
            tl.store(out + offs_w2, st.pairs(pk.unpair(c) if PACKED else q), bmask)
        else:  # pairs of 6-bit codes: a word's halves, or neighbouring codes
            two = pk.pair_codes(c, BITS) if PACKED else st.pair_codes(q, BITS)
            st.store_fp6_pairs(out, two, bmask, VEC, ASM)


@triton.jit
def _mx_cast_dim0_kernel(
    x_ptr, out_ptr, scale_ptr,
    C, NBR, NCT, stride_xr, stride_or, stride_sr,
    QDQ: tl.constexpr, BLOCK: tl.constexpr, LANES: tl.constexpr, CG: tl.constexpr,
    RB: tl.constexpr, WARP: tl.constexpr, VEC: tl.constexpr, EVEN: tl.constexpr,
    PACK: tl.constexpr, BITS: tl.constexpr, SHIFT: tl.constexpr, ELEM_SCALE: tl.constexpr,
    MIN_NORMAL_BITS: tl.constexpr, MAX_CODE: tl.constexpr, MAX_NORMAL: tl.constexpr,
    EMAX: tl.constexpr, MAX_FRAC: tl.constexpr, RCEIL: tl.constexpr, IS_INT: tl.constexpr,
    HW_FP8: tl.constexpr, FP8_TY: tl.constexpr, PACKED: tl.constexpr, ASM: tl.constexpr,
    MBITS: tl.constexpr, BIAS: tl.constexpr, MAXN_BITS: tl.constexpr, MIN_BITS: tl.constexpr,
):  # fmt: skip
    """RB block-rows x CG * CW columns as [LANES, RB * CG, RPT, CW]: group g is column group
    g % CG of block-row g // CG; row = lane * RPT + i within the block. PACKED: bf16 read as
    [..., CW / 2] words, the two halves of a word in neighbouring columns (two blocks)."""
    RPT: tl.constexpr = BLOCK // LANES  # consecutive rows a thread holds
    CW: tl.constexpr = VEC * (WARP // LANES)  # columns of one warp (WARP threads: 32, 64)
    pid = tl.program_id(0)
    blk0 = (pid // NCT).to(tl.int64) * RB  # the first block-row; column tiles vary fastest
    col0 = (pid % NCT) * (CG * CW)
    g = tl.arange(0, RB * CG)
    lane = tl.arange(0, LANES)[:, None, None, None]
    rb = (g // CG)[None, :, None, None]
    cols = (g % CG * CW)[None, :, None, None]
    cols += tl.max_contiguous(tl.arange(0, CW), VEC)[None, None, None, :]
    rows = rb * BLOCK + lane * RPT + tl.arange(0, RPT)[None, None, :, None]
    mask = None if EVEN else (cols < C - col0) & (rb < NBR - blk0)  # EVEN: whole tiles
    cols2 = (g % CG * (CW // 2))[None, :, None, None]
    cols2 += tl.max_contiguous(tl.arange(0, CW // 2), VEC // 2)[None, None, None, :]
    mask2 = None if EVEN else (cols2 * 2 < C - col0) & (rb < NBR - blk0)
    if PACKED:
        words = x_ptr.to(tl.pointer_type(tl.uint32)) + (blk0 * BLOCK * stride_xr + col0) // 2
        p = tl.load(words + rows * (stride_xr // 2) + cols2, mask2)
        amax2 = pk.amax2(pk.amax2(p, 2, ASM), 0, ASM)  # [RB * CG, CW / 2] packed
        sh_lo, ok_lo = st.shared_exp((amax2 & 0xFFFF).to(tl.int32) << 16, EMAX, MAX_FRAC, RCEIL)
        sh_hi, ok_hi = st.shared_exp((amax2 >> 16).to(tl.int32) << 16, EMAX, MAX_FRAC, RCEIL)
        inv_l, scl_l, lim_l, sgn_l, keep_l = pk.block_halves(sh_lo, ok_lo, MAXN_BITS, BITS, IS_INT)
        inv_h, scl_h, lim_h, sgn_h, keep_h = pk.block_halves(sh_hi, ok_hi, MAXN_BITS, BITS, IS_INT)
        inv2 = pk.pair(inv_l, inv_h)[None, :, None, :]
        lim2 = pk.pair(lim_l, lim_h)[None, :, None, :]
        shared = tl.reshape(tl.join(sh_lo, sh_hi), [RB * CG, CW])
        ok = tl.reshape(tl.join(ok_lo, ok_hi), [RB * CG, CW])
    else:
        x = tl.load(x_ptr + blk0 * BLOCK * stride_xr + col0 + rows * stride_xr + cols, mask)
        amax = tl.max(st.amax_bits(x, 2), axis=0)  # in-thread rows, then lanes: [RB * CG, CW]
        shared, ok = st.shared_exp(amax, EMAX, MAX_FRAC, RCEIL)
    if QDQ:
        if PACKED:
            y = pk.qdq2(
                p, inv2, pk.pair(scl_l, scl_h)[None, :, None, :], lim2,
                pk.pair(keep_l, keep_h)[None, :, None, :], MBITS, MIN_BITS, IS_INT, ASM,
            )  # fmt: skip
            o_words = out_ptr.to(tl.pointer_type(tl.uint32))
            o_words += (blk0 * BLOCK * stride_or + col0) // 2
            tl.store(o_words + rows * (stride_or // 2) + cols2, y, mask2)
        else:
            y = st.qdq(
                x, st.exp2i(-shared, not IS_INT)[None, :, None, :],
                st.exp2i(shared, False)[None, :, None, :], ok[None, :, None, :], SHIFT,
                MIN_NORMAL_BITS, MAX_NORMAL, IS_INT, HW_FP8, FP8_TY,
            )  # fmt: skip
            o_ptrs = out_ptr + blk0 * BLOCK * stride_or + col0 + rows * stride_or + cols
            tl.store(o_ptrs, y.to(out_ptr.dtype.element_ty), mask)
    else:
        if PACKED:
            c = pk.codes2(
                p, inv2, lim2, pk.pair(sgn_l, sgn_h)[None, :, None, :], BITS, MBITS, BIAS,
                MIN_BITS, IS_INT, ASM,
            )  # fmt: skip
            q = pk.unpair(c)
        else:
            q = st.codes(
                x, st.exp2i(-shared, not IS_INT)[None, :, None, :], ok[None, :, None, :], BITS,
                SHIFT, MIN_NORMAL_BITS, ELEM_SCALE, MAX_CODE, IS_INT, HW_FP8, FP8_TY,
            )  # fmt: skip
        s_rb = (g // CG)[:, None]
        s_cols = (g % CG * CW)[:, None] + tl.max_contiguous(tl.arange(0, CW), VEC)[None, :]
        s = tl.where(ok, shared + 127, 255).to(tl.uint8)
        s_mask = None if EVEN else (s_cols < C - col0) & (s_rb < NBR - blk0)
        s_ptrs = scale_ptr + blk0 * stride_sr + col0 + s_rb * stride_sr + s_cols
        tl.store(s_ptrs, s, s_mask)
        # packed rows: PACK code rows -> PACK * BITS / 8 byte rows, in a thread's registers
        # ([LANES, G, CW, RPT] is a register permutation): row lane * RPT / PACK + j
        out = out_ptr + blk0 * (BLOCK * BITS // 8) * stride_or + col0
        if PACK == 1:
            tl.store(out + rows * stride_or + cols, q, mask)
        else:
            qt = tl.permute(q, (0, 1, 3, 2))
            j = tl.arange(0, RPT // PACK)[None, None, None, :]
            prow = (rb * BLOCK + lane * RPT) // PACK + j  # [LANES, G, 1, RPT / PACK]
            p = out + prow * (PACK * BITS // 8) * stride_or + tl.permute(cols, (0, 1, 3, 2))
            m = None if EVEN else tl.permute(mask, (0, 1, 3, 2))
            if PACK == 2:
                tl.store(p, st.pairs(qt), m)
            else:
                st.store_fp6(p, stride_or, qt, m)


def has_fp8_cvt(device: torch.device) -> bool:
    """NVIDIA sm90+: Triton converts float32 to e4m3 / e5m2 in one instruction (RNE). Not
    sm89: there it goes through float16 (cvt.rn.satfinite.e4m3x2.f16x2), a double rounding
    that misrounds values just past a tie; the integer path serves sm89."""
    if device.type != "cuda":
        return False
    return _nvidia_sm90(torch.cuda.current_device() if device.index is None else device.index)


def _has_pair_ops(device: torch.device) -> bool:
    """NVIDIA sm90+: mul/add.rn.bf16x2 and min/max.u16x2 (PTX 8.0), the PACKED path's ops."""
    return has_fp8_cvt(device)


@functools.cache
def _nvidia_sm90(index: int) -> bool:
    """Asked once per device: every launch asks, and eager casts are host-bound."""
    return torch.version.hip is None and torch.cuda.get_device_capability(index) >= (9, 0)


def mx_cast_triton(
    x: Tensor,
    elem: MXElem | str,
    block_size: int,
    dim: int,
    scale_rounding: ScaleRounding | str = ScaleRounding.FLOOR,
    qdq: bool = False,
    tile: Tile | None = None,
    hw_fp8: bool | None = None,
    packed: bool | None = None,
) -> tuple[Tensor, Tensor | None]:
    """Launch the Triton cast: (packed codes uint8, scale uint8) or, with qdq, (x.dtype
    values, None). Runs on GPU tensors, or on CPU tensors under TRITON_INTERPRET=1; a
    non-contiguous x is copied first. ``tile`` overrides cast_tile's choice (bench sweeps);
    ``hw_fp8`` rounds fp8 elements with the GPU's float8 conversion (default: on NVIDIA
    sm90+) instead of the integer path every element format takes; ``packed`` computes
    bf16 two elements at a time (kernels/mx_packed.py; default: where sm90's paired
    instructions run it, and the float8 conversion does not serve)."""
    elem = parse_choice(MXElem, elem, "MX element")
    rule = parse_choice(ScaleRounding, scale_rounding, "scale_rounding")
    _check(x, elem.value, block_size, dim, rule.value)
    if not triton_block_ok(block_size):
        raise ValueError(
            f"the Triton MX cast takes block sizes 8, 16, ..., 256, got {block_size}; "
            "torch.ops.aoq.mx_cast runs the reference for the others"
        )
    hw = (has_fp8_cvt(x.device) if hw_fp8 is None else hw_fp8) and elem in st.FP8_TY
    asm = _has_pair_ops(x.device)
    pair_ok = x.dtype == torch.bfloat16 and not hw and (dim == 1 or x.shape[1] % 2 == 0)
    if packed and not pair_ok:
        raise ValueError(
            "packed=True takes bf16 input (along dim 0 an even number of columns) and no "
            "float8 conversion (hw_fp8=False)"
        )
    if x.device.type == "cpu" and not INTERPRET:
        raise RuntimeError(
            "mx_cast_triton got a CPU tensor but its kernel was defined for GPUs; set "
            "TRITON_INTERPRET=1 before aoq is first imported to run it on CPU, or call "
            "torch.ops.aoq.mx_cast (the reference on CPU)"
        )
    x = x.contiguous()
    shape = (x.shape[0], x.shape[1])
    pairs = pair_ok and (asm if packed is None else packed)
    if qdq:  # the packed path stores bf16 words, exact under the interpreter too
        dtype = x.dtype if pairs else out_dtype_for(x.dtype)
        out = torch.empty(shape, dtype=dtype, device=x.device)
    else:
        out = torch.empty(packed_shape(shape, elem, dim), dtype=torch.uint8, device=x.device)
    scale = torch.empty(scale_shape(shape, block_size, dim), dtype=torch.uint8, device=x.device)
    if x.numel():
        vec = min(16 // x.element_size(), block_size)
        tile = tile or cast_tile(dim, shape, block_size, elem, vec)
        consts = dict(st.elem_constants(elem, rule, hw))  # a copy: the cache's stays whole
        consts.update(PACKED=pairs, ASM=asm)
        pack = 1 if qdq else PACK_GROUP.get(elem.spec.bits, 1)
        _launch(x, out, scale, dim, block_size, qdq, tile, vec, pack, consts)
    return (out.to(x.dtype), None) if qdq else (out, scale)


def _launch(
    x: Tensor, out: Tensor, scale: Tensor, dim: int, block: int, qdq: bool, tile: Tile,
    vec: int, pack: int, consts: dict[str, object],
) -> None:  # fmt: skip
    r, c = x.shape
    if dim == 1:
        if not isinstance(tile, Dim1Tile) or block % (tile.pieces * pack):
            raise ValueError(f"tile {tile.label} does not fit dim 1 with block_size {block}")
        nblk = r * c // block
        launch(_mx_cast_dim1_kernel, (triton.cdiv(nblk, tile.blocks),),
            x, out, scale, nblk,
            QDQ=qdq, BLOCK=block, NB=tile.blocks, H=tile.pieces, VEC=min(vec, block // tile.pieces),
            EVEN=nblk % tile.blocks == 0, PACK=pack, num_warps=tile.warps, **consts,
        )  # fmt: skip
        return
    if not isinstance(tile, Dim0Tile) or 32 % tile.lanes or block % (tile.lanes * pack):
        raise ValueError(
            f"tile {tile.label} does not fit dim 0 with block_size {block}: lanes must divide "
            f"32 and leave whole groups of {pack} rows to each lane"
        )
    warp = _warp_size()
    tile_c = tile.groups * vec * (warp // tile.lanes)
    nct, nbr = triton.cdiv(c, tile_c), r // block
    launch(_mx_cast_dim0_kernel, (nct * triton.cdiv(nbr, tile.rows),),
        x, out, scale, c, nbr, nct, x.stride(0), out.stride(0), scale.stride(0),
        QDQ=qdq, BLOCK=block, LANES=tile.lanes, CG=tile.groups, RB=tile.rows, WARP=warp,
        VEC=vec, EVEN=c % tile_c == 0 and nbr % tile.rows == 0, PACK=pack,
        num_warps=tile.warps, **consts,
    )  # fmt: skip


# --- the CUDA / ROCm implementation of the ops in kernels/mx_ops.py -----------------------


@mx_cast.register_kernel("cuda")
def _mx_cast_cuda(
    x: Tensor, elem: str, block_size: int, dim: int, scale_rounding: str
) -> tuple[Tensor, Tensor]:
    if not triton_block_ok(block_size):
        return mx_cast_reference(x, elem, block_size, dim, scale_rounding)
    codes, scale = mx_cast_triton(x, elem, block_size, dim, scale_rounding)
    assert scale is not None
    return codes, scale


@mx_qdq.register_kernel("cuda")
def mx_qdq_gpu(x: Tensor, elem: str, block_size: int, dim: int, scale_rounding: str) -> Tensor:
    """``aoq::mx_qdq`` on a GPU (the Triton cast, the reference for other block sizes); the
    linears call it directly when eager (an op call costs host time, and plans replay only
    launches)."""
    if not triton_block_ok(block_size):
        return mx_qdq_reference(x, elem, block_size, dim, scale_rounding)
    return mx_cast_triton(x, elem, block_size, dim, scale_rounding, qdq=True)[0]
