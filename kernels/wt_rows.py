"""Weight-only int8, e4m3 and int4 (groups of 128) linears at up to 128 rows of x on sm90 (from
112 rows for int8 and e4m3, from 65 on the wide tile; 96 for int4), and W4A8 at 65-128 rows
(kernels/wt_rows_w4a8.py's entry): the weights as wgmma's register operand, x and the codes
through tensor descriptors.

Orientation: y^T = W x^T. A program takes BLOCK_N rows of W (the MMA's M side, 64: one
wgmma's rows per warp group; the wide tile 128 on two) against all ROWS (128) rows of x (the
MMA's N side). Each step's
codes arrive in shared memory by TMA, are converted to x's dtype in registers and go to wgmma
as its A operand from registers; x^T is the B operand from shared memory, as TMA wrote it.
The per-channel scale multiplies the outputs, not the codes: y[m, n] = s[n] Σ_k x[m, k] q[n, k]
+ b[n] with float32 sums (aoq.formats.linear.weight_only_linear's math, as decode_mma's).
int4: a step is one group; (q - z) is exact in x's dtype on the MMA and each group's product
tile is multiplied by its scale before it is added, as in decode_mma. Its codes come plain or
in packing.tile_uint4's order, whose 64 x 64-byte tiles are exactly one step's block, with
zero points as bytes or as pack_zero_words' words (a GPU weight's layout).

Each program makes its two descriptors over plain pointers (``tl.make_tensor_descriptor``), so
the launch takes tensors only (kernels/_launch.py's bound launches and aoq/plans.py's replays
handle those); the descriptors live in global scratch from Triton's allocator, which
_launch.scratch_allocator points at torch's caching allocator where none is set. Rows of x
past M read as zeros (TMA's out-of-bounds fill) and are not stored.

K is split where the column tiles would leave SMs idle (splitk.plan, two programs an SM, the
wide tile one), the partials summed in split order by splitk's reduction kernel, which
applies the scale and the bias.

Why: past 64 rows decode_mma writes each converted step to shared memory for the MMA (0.67-0.85x
bf16 at 128 rows on an H200). Served here (session 50, H200, µs at 8192^2 / 4096 x 14336 /
14336 x 4096, 128 rows): int8 49.6 / 40.8 / 42.0 against decode_mma's 52.1 / 51.3 / 47.0, int4
55.2 / 50.6 / 49.6 against 62.6 / 62.7 / 56.3. A TMA box that runs past x's last row loads
slowly, so below MIN_ROWS decode_mma keeps the 64-row tile's rows; the wide tile (WIDE_TILE,
session 55) reads x half as often and takes int8 and e4m3 from 65 rows where it fills a wave
(W4A8 at 65-95 rows; its 64-row tile reads x by masked loads: W4A8_X_DESC). Measurements and
what lost: bench/NOTES.md sessions 49, 50, 55, 58 and 59.
``AOQ_WT_ROWS=0`` turns it off; ``AOQ_WT_ROWS_DESC=R`` loads x by masked loads below R rows
on the 64-row tile (A/B runs).
"""

from __future__ import annotations

import functools
import os

import torch
import triton
import triton.language as tl
from aoq.kernels import splitk
from aoq.kernels._common import INTERPRET, WeightFormat, backend_of
from aoq.kernels._launch import launch, scratch_allocator
from aoq.kernels.decode_mma_tiles import _sm90

ENABLED = os.environ.get("AOQ_WT_ROWS", "1") != "0"
"""Serve MIN_ROWS..ROWS rows here (off: decode_mma keeps them; A/B runs, bisecting)."""
ROWS = 128
BLOCK_N = 64
BLOCK_K = 128
STAGES = 3
PER_SM = 2
"""Programs an SM the K split aims at (3 stages of a 64 x 128 code step and a 128 x 128 bf16
x step take 112 KB of shared memory on sm90, int4's 104 KB)."""
TILE: dict[int, dict[str, int]] = {}
"""A probe's tile by the kernel's WFMT (0 per-channel, 1 int4, 2 W4A8): ``step`` (codes a
step, BLOCK_K; 64: half of int4's group, half the shared memory), ``per_sm`` (PER_SM),
``stages`` (STAGES), ``bn`` (BLOCK_N; 128 with ``warps`` 8: one wgmma's 64 rows a warp group,
x read from L2 once every 128 rows of W instead of 64; where N is not a multiple of it, 64),
``rows`` (x's rows a program where M fits them: 64, the MMA's N, for rows below 65).
Empty: every format at BLOCK_K and PER_SM, as timed (bench/rows_ab.py ``--tile``). Why a probe:
wt_rows_mx's 64-code steps at four programs an SM ran NVFP4 at 128 rows 28 % faster than at
two (bench/NOTES.md session 54); int4 and W4A8 here hold 104-109 KB, two programs an SM."""
MIN_ROWS = {WeightFormat.INT8: 112, WeightFormat.FP8: 112, WeightFormat.UINT4: 96}
"""The fewest rows served on the 64-row tile, by format: where every goal shape ran faster
than decode_mma. Per-channel codes from 65 rows on the wide tile where it fills a wave."""
WIDE_N = 128
WIDE_TILE = {"bn": WIDE_N, "warps": 8, "per_sm": 1}
"""The wide tile: 128 rows of W a program on two warp groups, so x is read from L2 once every
128 rows of W instead of 64 and a descriptor box past x's last row costs half as much; one
program an SM (W4A8: 160 registers; int8 / e4m3: 128 KB of shared memory). H200, µs at 8192^2
/ 4096 x 14336 / 14336 x 4096: int8 at 65-96 rows 44.6-42.8 / 48.3-48.6 / 37.1-38.0 against
decode_mma's 48.5-49.6 / 48.3-49.4 / 43.4-45.1; W4A8 at 65 rows 54.7 / 54.6 / 51.2 against
the 64-row tile's 67.5 / 64.3 / 61.3. int4, MX fp4 and NVFP4 lost (bench/NOTES.md, session
55)."""
WIDE_ROWS = {0: MIN_ROWS[WeightFormat.INT8] - 1, 2: 95}
"""The wide tile by WFMT, from 65 rows up to these where it fills a wave (:func:`wide`): 4096
x 14336 (112 programs on 132 SMs) ran e4m3 23-26 % slower there than decode_mma. W4A8 took
it at 96-128 rows too while ptxas serialized the 64-row tile's wgmma (session 55); with
splitk.k_range's NONEMPTY the 64-row tile ran 96-128 rows as fast or faster on an H200 (two
passes, µs, wide / 64-row: 8192^2 57.2 / 62.4 at 96, 58.3 / 53.6 at 112, 58.7 / 58.8 at 128;
4096 x 14336 within 1.3 either way; 14336 x 4096 53.6 / 48.5, 54.2 / 50.9, 54.7 / 50.8;
bench/NOTES.md session 56), and the wide tile still won below 96 rows (8192^2 at 65 / 80:
56.4 / 57.4 against 80.2 / 73.0, x by masked loads there)."""
W4A8_X_DESC = os.environ.get("AOQ_W4A8_X_DESC", "0") == "1"
"""W4A8 (WFMT 2) on the 64-row tile reads x by masked loads at every row count: with x through
its tensor descriptor from X_DESC_ROWS that tile's 3-stage loop raced on an H200 (session 58:
at 4096^2, 100 / 128 rows, K split 4, six calls of one input gave relative errors 0.00006 to
0.0101 against the reference, runs of eight columns wrong that moved from call to call;
conformance 9e9cc3, red; session 59: at every goal shape too, 0.0027-0.013 at 100 and 128
rows, K split by rule or 4). 1 or 2 stages or x by masked loads gave the reference every time,
the other formats' tiles the same bits every call. The wide tile (two warp groups, 65-95 rows)
reads x through its descriptor and gave one value near the reference on every call at those
shapes and rows (session 59, 0.00005-0.00015); it is 1-10 % faster there than the 64-row tile
by masked loads. ``AOQ_W4A8_X_DESC=1`` restores the descriptor on the 64-row tile to probe it."""
WIDE_ON = os.environ.get("AOQ_WT_ROWS_WIDE", "1") != "0"
"""Off: no wide tile (A/B runs): int8 / e4m3 below MIN_ROWS to decode_mma, W4A8 on 64 rows."""
WAVE_FILL = 0.9
"""The share of the SMs the wide tile's programs (one an SM) must fill (8192^2 and 14336 x
4096: 128 of 132; 4096 x 14336: 112, not)."""
X_DESC_ROWS = int(os.environ.get("AOQ_WT_ROWS_DESC", "96"))
"""On the 64-row tile, x through a tensor descriptor from this many rows, by masked loads
below (a box past x's last row loads slowly: W4A8 below 96 rows; the other formats are served
there from 96 or 112). The wide tile reads x through its descriptor at every row count."""
FORMATS = tuple(MIN_ROWS)
X_DTYPES = (torch.bfloat16, torch.float16)


@triton.jit
def _nearest_bf16(w):
    """float32 -> the nearest bf16 value (ties to even), as float32 (finite w)."""
    bits = w.to(tl.uint32, bitcast=True)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def x_descriptor(x_ptr, M, K, ROWS: tl.constexpr, BLOCK_K: tl.constexpr, X_DESC: tl.constexpr):
    """x's tensor descriptor (boxes of ROWS x BLOCK_K) where X_DESC, else x_ptr itself."""
    x_desc = x_ptr
    if X_DESC:
        x_desc = tl.make_tensor_descriptor(x_ptr, [M, K], [K, 1], [ROWS, BLOCK_K])
    return x_desc


@triton.jit
def x_step(x_desc, offs_m, M, K, k0, BLOCK_K: tl.constexpr, X_DESC: tl.constexpr):
    """x's step at k0 [ROWS, BLOCK_K] through its descriptor, or by masked loads where
    ``x_desc`` is x's pointer (rows past M as zeros either way)."""
    if X_DESC:
        xt = x_desc.load([0, k0])
    else:
        offs_k = k0 + tl.arange(0, BLOCK_K)
        xt = tl.load(x_desc + offs_m[:, None] * K + offs_k[None, :], mask=offs_m[:, None] < M,
                     other=0.0)  # fmt: skip
    return xt


@triton.jit
def store_rows(acc, b_ptr, y_ptr, p_ptr, offs_m, offs_n, nmask, M, N, pid_s,
               HAS_BIAS: tl.constexpr, SPLIT_K: tl.constexpr):  # fmt: skip
    """A program's sums acc [BLOCK_N, ROWS] (y^T's tile) out, rows of x past M and columns
    past N (``nmask``) not stored: SPLIT_K 1, plus the bias, cast into y [M, N]; else as
    float32 into the partials p[pid_s] (wt_rows_mx's and wt_rows_fp6's end)."""
    at = offs_m[None, :].to(tl.int64) * N + offs_n[:, None]
    mmask = (offs_m[None, :] < M) & nmask[:, None]
    if SPLIT_K == 1:
        if HAS_BIAS:
            acc = acc + tl.load(b_ptr + offs_n, mask=nmask, other=0).to(tl.float32)[:, None]
        tl.store(y_ptr + at, acc.to(y_ptr.dtype.element_ty), mask=mmask)
    else:
        tl.store(p_ptr + pid_s.to(tl.int64) * M * N + at, acc, mask=mmask)


@triton.jit
def _wt_rows_kernel(
    x_ptr, w_ptr, s_ptr, z_ptr, b_ptr, y_ptr, p_ptr, M, N, K, K_SPLIT,
    stride_sn, stride_sg, stride_zn, stride_zg,
    WFMT: tl.constexpr, TILED: tl.constexpr, ZW: tl.constexpr, HAS_BIAS: tl.constexpr,
    SPLIT_K: tl.constexpr, ROWS: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    STAGES: tl.constexpr, X_DESC: tl.constexpr = True, GROUP: tl.constexpr = 128,
    UPCAST: tl.constexpr = False, TRIGGER: tl.constexpr = False,
):  # fmt: skip
    """Program (n, s): rows n·BLOCK_N.. of W against all of x over K range s. SPLIT_K 1:
    y [M, N] scaled, biased and cast; else the float32 partial [M, N] into p[s].

    WFMT 0 (int8 / e4m3 codes [N, K]): the scale s [N] multiplies the sums at the end. WFMT 1
    (int4, groups of GROUP codes, packed two a byte low nibble first; a step BLOCK_K codes of
    one group): (q - z) exact in x's dtype on the MMA, each step's product times its group's
    scale s[n, g] (strides stride_sn, stride_sg; z alike, or with ZW int32 words of four
    groups, packing.pack_zero_words); TILED: the codes in packing.tile_uint4's order (tiles
    of BLOCK_N rows x GROUP / 2 bytes one after another along K), a tile or half of one a
    step. WFMT 2 (W4A8's int4 codes q + 8, packed as
    WFMT 1, in groups of GROUP, a power of two): each weight (q - 8) · s[n, g] in float32,
    rounded once to x's dtype (weight_dequant's values). X_DESC: x through a tensor
    descriptor, else by masked loads. UPCAST (the interpreter): float32 operands (its int8 ->
    bf16 gives NaN, its bf16 dots are not float32 sums)."""
    splitk.trigger(TRIGGER)
    pid_n = tl.program_id(0)
    pid_s = tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_m = tl.arange(0, ROWS)
    x_desc = x_descriptor(x_ptr, M, K, ROWS, BLOCK_K, X_DESC)
    if WFMT == 1 and TILED and BLOCK_N > 64:  # (TILE's ``bn``) the tiles as [N / 64, K /
        # GROUP, 64, GROUP / 2]: BLOCK_N / 64 tiles of one group a box
        w_desc = tl.make_tensor_descriptor(
            w_ptr, [N // 64, K // GROUP, 64, GROUP // 2], [32 * K, 32 * GROUP, GROUP // 2, 1],
            [BLOCK_N // 64, 1, 64, BLOCK_K // 2],
        )  # fmt: skip
    elif WFMT == 1 and TILED:  # the codes as rows of one tile row's bytes (GROUP / 2 of them)
        w_desc = tl.make_tensor_descriptor(
            w_ptr, [N * K // GROUP, GROUP // 2], [GROUP // 2, 1], [BLOCK_N, BLOCK_K // 2]
        )
    elif WFMT >= 1:
        w_desc = tl.make_tensor_descriptor(w_ptr, [N, K // 2], [K // 2, 1], [BLOCK_N, BLOCK_K // 2])
    else:
        w_desc = tl.make_tensor_descriptor(w_ptr, [N, K], [K, 1], [BLOCK_N, BLOCK_K])
    k_lo, k_hi = splitk.k_range(pid_s, K, K_SPLIT, SPLIT_K, True)
    acc = tl.zeros((BLOCK_N, ROWS), dtype=tl.float32)
    for k0 in tl.range(k_lo, k_hi, BLOCK_K, num_stages=STAGES):
        xt = x_step(x_desc, offs_m, M, K, k0, BLOCK_K, X_DESC)
        if UPCAST:
            xt = xt.to(tl.float32)
        if WFMT == 1:
            if TILED and BLOCK_N > 64:
                b = w_desc.load([pid_n * (BLOCK_N // 64), k0 // GROUP, 0, k0 % GROUP // 2])
                b = b.reshape(BLOCK_N, BLOCK_K // 2)
            elif TILED and BLOCK_K == GROUP:  # a step a tile
                b = w_desc.load([(pid_n * (K // GROUP) + k0 // GROUP) * BLOCK_N, 0])
            elif TILED:  # (TILE's step: BLOCK_K codes of the group's tile; the column an offset
                # in the tile spilled 3 registers on gfx942 where it is always 0)
                b = w_desc.load([(pid_n * (K // GROUP) + k0 // GROUP) * BLOCK_N, k0 % GROUP // 2])
            else:
                b = w_desc.load([pid_n * BLOCK_N, k0 // 2])
            g = k0 // GROUP
            sg = tl.load(s_ptr + offs_n * stride_sn + g * stride_sg).to(tl.float32)
            if ZW:  # the word's byte g % 4, loaded as a byte (a 4-byte load is pipelined
                # through shared memory, which left one program an SM: 92 against 51 µs)
                zb = z_ptr.to(tl.pointer_type(tl.uint8))
                z = tl.load(zb + (offs_n * stride_zn + (g // 4) * stride_zg) * 4 + g % 4)
                z = z.to(tl.int32)
            else:
                z = tl.load(z_ptr + offs_n * stride_zn + g * stride_zg).to(tl.int32)
            lo = (b & 15).to(tl.int32) - z[:, None]
            hi = (b >> 4).to(tl.int32) - z[:, None]
            w = tl.join(lo, hi).reshape(BLOCK_N, BLOCK_K).to(xt.dtype)
            acc += tl.dot(w, tl.trans(xt)) * sg[:, None]
        elif WFMT == 2:
            b = w_desc.load([pid_n * BLOCK_N, k0 // 2])
            lo = ((b & 15).to(tl.int32) - 8).to(tl.float32)
            hi = ((b >> 4).to(tl.int32) - 8).to(tl.float32)
            if GROUP >= BLOCK_K:  # the step inside one group: a column of scales
                sc = tl.load(s_ptr + offs_n * stride_sn + (k0 // GROUP) * stride_sg)
                w = tl.join(lo, hi).reshape(BLOCK_N, BLOCK_K) * sc[:, None]
            else:  # BLOCK_K / GROUP groups a step: a [BLOCK_N, groups] block, broadcast
                offs_g = k0 // GROUP + tl.arange(0, BLOCK_K // GROUP)
                sb = tl.load(s_ptr + offs_n[:, None] * stride_sn + offs_g[None, :] * stride_sg)
                w = tl.join(lo, hi).reshape(BLOCK_N, BLOCK_K // GROUP, GROUP) * sb[:, :, None]
                w = w.reshape(BLOCK_N, BLOCK_K)
            if UPCAST and x_ptr.dtype.element_ty == tl.bfloat16:
                w = _nearest_bf16(w)  # (the interpreter's own conversion truncates)
            elif UPCAST:
                w = w.to(x_ptr.dtype.element_ty).to(tl.float32)
            else:
                w = w.to(x_ptr.dtype.element_ty)
            acc = tl.dot(w, tl.trans(xt), acc)
        else:
            w = w_desc.load([pid_n * BLOCK_N, k0])
            if UPCAST:
                w = w.to(tl.float32)
            acc = tl.dot(w.to(tl.bfloat16).to(xt.dtype), tl.trans(xt), acc)
    at = offs_m[None, :].to(tl.int64) * N + offs_n[:, None]
    mmask = offs_m[None, :] < M
    if SPLIT_K == 1:
        if WFMT == 0:
            acc = acc * tl.load(s_ptr + offs_n)[:, None]
        if HAS_BIAS:
            acc = acc + tl.load(b_ptr + offs_n).to(tl.float32)[:, None]
        tl.store(y_ptr + at, acc.to(y_ptr.dtype.element_ty), mask=mmask)
    else:
        tl.store(p_ptr + pid_s.to(tl.int64) * M * N + at, acc, mask=mmask)


@functools.lru_cache(maxsize=1024)
def _fills_wave(device: torch.device, n: int, k: int) -> bool:
    """The wide tile's programs, K split for one an SM (splitk.plan), fill WAVE_FILL of the
    SMs; never under the interpreter (no SMs; its tests set this)."""
    if device.type != "cuda":
        return False
    index = device.index if device.index is not None else torch.cuda.current_device()
    progs = n // WIDE_N * splitk.splits(backend_of(device), device, n // WIDE_N, k, BLOCK_K, 1)
    return progs >= WAVE_FILL * splitk.sm_count(index)


def wide(m: int, n: int, k: int, wfmt: int, device: torch.device) -> bool:
    """The wide tile (WIDE_TILE) for m rows of x against [n, k] weights of the kernel's WFMT:
    65..WIDE_ROWS[wfmt] rows, N a multiple of WIDE_N, and a full wave, or W4A8 below
    X_DESC_ROWS (there the 64-row tile reads x by masked loads: 1-10 % slower at 65-95 rows,
    session 59). It reads x through its descriptor for every WFMT."""
    if not WIDE_ON or not 65 <= m <= WIDE_ROWS.get(wfmt, 0) or n % WIDE_N:
        return False
    return (wfmt == 2 and m < X_DESC_ROWS) or _fills_wave(device, n, k)


def _x_desc_ok(wfmt: int) -> bool:
    """Whether the 64-row tile of WFMT ``wfmt`` may read x through its descriptor (W4A8: only
    under W4A8_X_DESC; the wide tile always does)."""
    return wfmt != 2 or W4A8_X_DESC


def _rows(m: int, tile: dict[str, int]) -> int:
    """x's rows a program (the MMA's N): a probe tile's ``rows`` where m fits them, else ROWS."""
    return tile["rows"] if m <= tile.get("rows", 0) else ROWS


def _runs_on(device: torch.device) -> bool:
    """An NVIDIA sm90 GPU (wgmma, TMA), or the interpreter for CPU tensors."""
    if device.type != "cuda":
        return INTERPRET
    return _sm90(device.index if device.index is not None else -1)


def serves(
    x: torch.Tensor,
    qdata: torch.Tensor,
    groups: int,
    wfmt: WeightFormat,
    scale: torch.Tensor | None = None,
    zero: torch.Tensor | None = None,
) -> bool:
    """Unless AOQ_WT_ROWS=0: MIN_ROWS[format]..ROWS rows of contiguous bf16 / fp16 x (int8
    and e4m3 from 65 rows where :func:`wide` takes them) against
    per-channel int8 or e4m3 codes [N, K], or int4 codes with zero points in groups of
    BLOCK_K (scale and zero [N, G], any strides; zero as uint8 or as pack_zero_words'
    int32 words); N a multiple of BLOCK_N and K of BLOCK_K (the descriptors' 16-byte strides
    and whole steps), x and the codes at 16-byte aligned addresses (TMA's global
    addresses); on NVIDIA sm90 (wgmma, TMA) or under the interpreter."""
    if not ENABLED:  # (asked by every decode call: the cheapest test first)
        return False
    m, k = x.shape
    if wfmt not in FORMATS or x.dtype not in X_DTYPES:
        return False
    if wfmt is WeightFormat.UINT4:
        if groups * BLOCK_K != k or scale is None or zero is None or zero.dim() != 2:
            return False
    elif groups != 1:
        return False
    if not min(MIN_ROWS[wfmt], 65) <= m <= ROWS or not k or k % BLOCK_K or qdata.shape[0] % BLOCK_N:
        return False
    if m < MIN_ROWS[wfmt] and (wfmt is WeightFormat.UINT4 or not wide(m, qdata.shape[0], k, 0,
                                                                      x.device)):  # fmt: skip
        return False
    if not (x.is_contiguous() and qdata.is_contiguous()):
        return False
    if x.data_ptr() % 16 or qdata.data_ptr() % 16:
        return False
    return _runs_on(x.device)


def wt_rows(
    x: torch.Tensor,
    qdata: torch.Tensor,
    scale: torch.Tensor,
    zero: torch.Tensor | None,
    bias: torch.Tensor | None,
    y: torch.Tensor,
    split: int | None = None,
    tiled: bool = False,
) -> torch.Tensor:
    """y [M, N] = x Wᵀ + bias where :func:`serves` holds: W = qdata · scale [N] or [N, 1]
    (int8 / e4m3), or (q - zero) · scale by groups of BLOCK_K (int4; ``tiled``: codes in
    tile order). ``split``: force the K split (tests)."""
    int4 = qdata.dtype == torch.uint8
    s = scale if int4 else scale.reshape(-1)
    z = zero if zero is not None else s
    return _run(x, qdata, s, z, bias, y, split, int(int4), tiled and int4, BLOCK_K)


def _run(
    x: torch.Tensor,
    qdata: torch.Tensor,
    s: torch.Tensor,
    z: torch.Tensor,
    bias: torch.Tensor | None,
    y: torch.Tensor,
    split: int | None,
    wfmt: int,
    tiled: bool,
    group: int,
) -> torch.Tensor:
    """The kernel's launch (WFMT ``wfmt``: s and z [N] per channel, else [N, G] any strides)
    and the reduction of its K split."""
    m, k = x.shape
    n = qdata.shape[0]
    if not y.is_contiguous():  # (the kernel stores rows of N)
        raise ValueError(f"wt_rows writes a contiguous y, got strides {y.stride()}")
    scratch_allocator()  # (the first launch goes through Triton's own)
    tile = TILE.get(wfmt) or (WIDE_TILE if wide(m, n, k, wfmt, x.device) else {})
    bn = tile.get("bn", BLOCK_N) if n % tile.get("bn", BLOCK_N) == 0 else BLOCK_N
    n_prog = n // bn
    bk = tile.get("step", BLOCK_K)
    stages = tile.get("stages", STAGES)
    p = splitk.plan(y, backend_of(x.device), n_prog, k, bk, split,
                    per_sm=tile.get("per_sm", PER_SM), fused=False)  # fmt: skip
    sn, sg = (s.stride(0), s.stride(1)) if wfmt else (1, 0)
    zn, zg = (z.stride(0), z.stride(1)) if wfmt == 1 else (1, 0)
    launch(_wt_rows_kernel, (n_prog, p.split),
        x, qdata, s, z, bias if bias is not None else s, y, p.partials, m, n, k, p.k_split,
        sn, sg, zn, zg,
        WFMT=wfmt, TILED=tiled, ZW=z.dtype == torch.int32, HAS_BIAS=bias is not None,
        SPLIT_K=p.split, ROWS=_rows(m, tile), BLOCK_N=bn, BLOCK_K=bk, STAGES=stages,
        X_DESC=bn > BLOCK_N or (m >= X_DESC_ROWS and _x_desc_ok(wfmt)), GROUP=group,
        UPCAST=INTERPRET, TRIGGER=p.chain,
        num_warps=tile.get("warps", 4), num_stages=stages,
    )  # fmt: skip
    p.finish(y, col_scale=s if wfmt == 0 else None, bias=bias)
    return y
