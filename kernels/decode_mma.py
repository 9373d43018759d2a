"""Decode (M <= 16) weight-only linears on the matrix units, the codes dequantized to bf16
two at a time.

Why: at M = 1 the FMA GEMVs (gemv.py, weight_only.py) spend three to four instructions per
weight (unpack, to float, zero point, FMA): int4 at K = N = 8192 is ~67 M codes, which an
H200 (132 SMs x 128 lanes x 1.98 GHz) issues in ~8 us at full rate, the same time as the
DRAM floor of its 34 MB, so neither hides the other (run 7a7c17: 28 us). Here the matrix
unit does the multiply-adds (x padded to 16 rows; a tile's ROWS 8 pads M <= 8 to 8, the n
of mma.sync's m16n8k16, see TILE) and the dequantization works on 32-bit registers holding
two bf16 values, exactly (kernels/bf16_codes.py: int4 1.5 instructions a code, int8 2).
Each int4 group's scale multiplies that group's float32 product tile after its MMA, so the
weights are never rounded; int8's and fp8's per-channel scale multiplies the accumulator at
the end.

int4's tile (run of 2026-11-22, H200, M = 1 and 16, K x N 8192 x 8192 and 4096 x 14336:
24.2-25.0 us before, 20.2-20.9 after) changes three things that only paid together:

- ``WT``: the weights are the MMA's A operand and x^T its B (y^T = W x^T), on two warps so
  Triton keeps mma.sync (with four it picks wgmma, whose sums came out wrong: refused). The
  A fragments take the assembly's output registers as they are, where x's fragments as
  operand A were copied into register quads before every MMA: 3.1 instructions a code
  against 4.2 in the main loop.
- ``PREF``: a step's scales and zero points (one, two or four groups' worth) are loaded one
  step ahead. Loaded and used in the same step they stalled every step on DRAM latency
  (with none loaded at all, the kernel took 17.5 us). The codes and x loaded one step ahead
  by hand the same way (the pipeliner off or on) took 27-34 us: not done.
- Group-major scales and zero points ([G, N] storage, strides (1, N): aoq.tensors.int4
  builds them on CUDA), so those loads are coalesced. Row-major still works (the strides
  are arguments).

W4A8 (``WFMT`` 3, symmetric int4 in groups of 32, int8 activations) takes the same tile
and orientation at two groups a step (TILE), on the integer MMA (IMMA: each group's exact
int32 sums read back as float32 from IMMA_BASE's bits; zero points by a second dot of the
codes against z, read from the same bits, since session 51: at 64 rows 44.6-49.4 µs against
65.5-73.5 with x - z through bf16 pairs on an H200, bench/NOTES.md). Up to 16 rows it serves
W4A8 on ROCm and for groups other than 32 only: the rest on CUDA takes w4a8_mma.py
(int_act_mm.ROWS_MMA_FROM; zero points there since session 41, symmetric since 40); past 16
rows on sm90 it serves every W4A8 call up to 64 rows.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl
from aoq.kernels import decode_mma_sk, splitk
from aoq.kernels._common import (
    INTERPRET,
    WeightFormat,
    backend_of,
    epilogue,
    fp8_cvt,
    int4_cols,
    int4_rows,
    prefetch_l2,
)
from aoq.kernels._launch import launch
from aoq.kernels.bf16_codes import byte_codes
from aoq.kernels.decode_mma_fp6 import fp6_loop
from aoq.kernels.decode_mma_serves import (  # noqa: F401 (re-exported)
    BIG_MODE,
    FP6_FORMATS,
    FP6_STEP,
    MX_FORMATS,
    check_xmx,
    ptx_codes,
    serves,
)
from aoq.kernels.decode_mma_steps import _group_steps, _weights_mma
from aoq.kernels.decode_mma_tiles import (  # noqa: F401 (re-exported)
    ROWS_TILE,
    TILE,
    TILED_TILE,
    X_DTYPES,
    max_rows,
    rows_tile,
)
from aoq.kernels.decode_mma_wide import wide_serves
from triton.language.extra.cuda import gdc_wait
from triton.tools.tensor_descriptor import TensorDescriptor

from aoq.backends import Backend


@triton.jit
def _decode_mma_kernel(
    x_ptr, w_ptr, s_ptr, z_ptr, xs_ptr, xz_ptr, b_ptr, y_ptr, p_ptr, c_ptr,
    M, N, K, stride_sn, stride_sg, K_SPLIT, stride_xm, stride_wn, stride_ym,
    WFMT: tl.constexpr, GROUP_SIZE: tl.constexpr, GROUPS: tl.constexpr, XQ: tl.constexpr,
    XZ: tl.constexpr, STATIC: tl.constexpr, HAS_BIAS: tl.constexpr, SPLIT_K: tl.constexpr,
    TAIL: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, ASM: tl.constexpr,
    UPCAST: tl.constexpr, WT: tl.constexpr = False, PREF: tl.constexpr = False,
    BIG: tl.constexpr = 0, ROWS: tl.constexpr = 16, IMMA: tl.constexpr = False,
    LOOP_STAGES: tl.constexpr = 0, ZW: tl.constexpr = False, TILED: tl.constexpr = False,
    PDL: tl.constexpr = False, TRIGGER: tl.constexpr = False, ALIGNED: tl.constexpr = False,
    TILE_B: tl.constexpr = 64, TILE_R: tl.constexpr = 64, KINT: tl.constexpr = False,
    XQDQ: tl.constexpr = 0, A_SHIFT: tl.constexpr = 0, A_MIN_NORMAL: tl.constexpr = 0,
    A_MAX_NORMAL: tl.constexpr = 0, A_IS_INT: tl.constexpr = 0, A_HW_FP8: tl.constexpr = 0,
    A_FP8_TY: tl.constexpr = None, A_EMAX: tl.constexpr = 0, A_MAX_FRAC: tl.constexpr = 0,
    A_RCEIL: tl.constexpr = 0, ZMMA: tl.constexpr = False, NVX: tl.constexpr = False,
    POST: tl.constexpr = False, XMX: tl.constexpr = False, TMA: tl.constexpr = False,
    L2PRE: tl.constexpr = 0, CHAINS: tl.constexpr = 1, WIDE: tl.constexpr = False,
):  # fmt: skip
    """Program (n, s): outputs [ROWS, BLOCK_N] (x padded to ROWS rows: 16, or 8 for M <= 8,
    the n of NVIDIA's m16n8k16) over K range s. int4 (WFMT 1: zero points from
    z_ptr; 3: symmetric, q + 8 stored): GROUPS quantization groups a step; int8 (WFMT 0) and
    fp8 (2): per-channel scales. XQ: x holds int8 codes (W4A8), less the row's zero point
    xz (XZ: asymmetric activations; -255..255), exact in bf16, so a group's products sum
    exactly in float32; scaled by xs per row (STATIC: one scalar) at the end. MX (WFMT 4
    fp4, 5 fp8 e4m3, 6 fp6 e3m2, 7 fp6 e2m3, 8 fp8 e5m2): BIG 0 every block scale is at
    most 2**1 (e4m3: 2**7, e3m2: 2**3, e5m2: 2**15; one multiply), 1 some is above (a
    second multiply), 2 the host does not know: the int32 at z_ptr says. fp6:
    decode_mma_fp6.py's loop. MX int8 (10) without WIDE, and e4m3 under POST: each block's
    scale on its float32 product tile (decode_mma_steps._post_scaled_step; BIG unused); WIDE
    (decode_mma_wide.py): a step's blocks on one MMA; XMX (MX int8): x
    holds MX int8 codes and xs their E8M0 bytes [M, K / GROUP_SIZE], on the integer MMA
    (decode_mma_steps._int8_block_step).
    SPLIT_K > 1
    stores float32 partials, which the last program of the column tile (TAIL,
    splitk.finish) or splitk.reduce_partials sums, then applies int8's channel scale, xs
    and the bias. PDL: launched with programmatic dependent launch after the kernel that
    wrote x (and xs, xz), which it waits for before reading them. TRIGGER: splitk.trigger.
    ALIGNED (a probe, off in TILE until timed): row-major int4 / W4A8 / MX fp4 codes hinted
    one aligned run a group, so sm80-sm100 load them with 16-byte cp.async instead of two
    8-byte ones (bench/NOTES.md, session 24). TILE_B, TILE_R (TILED; probes): the tile's
    bytes a row and rows (aoq.formats.packing.tile_uint4; 64 x 64 as Int4Tensor ships; int8
    and fp8 byte codes in such tiles too, a probe: each K step inside one tile).
    KINT (TILE's, int4): split s takes K steps s, s + SPLIT_K, ... instead of one range.
    XQDQ (MX fp6 at M = 1): x's row is MX quantize-dequantized here (decode_mma_fp6.py), the
    A_* constants mx_decode.one_row_constexprs's. TMA (a probe; int4, TILED): ``w_ptr`` is
    a tensor descriptor over the tiled codes as rows of TILE_B bytes (decode_mma's ``TMA``),
    so the pipeliner copies each step's tile with the Hopper tensor-memory accelerator.
    L2PRE (a probe; int4, TILED, under PDL): the program's first L2PRE steps' code tiles are
    asked of L2 (prefetch.global.L2) before the wait, while the kernel before it finishes.
    WIDE (MX fp4 and fp8, NVFP4): a step's groups on one MMA (decode_mma_wide._wide_step)."""
    splitk.trigger(TRIGGER)
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_m = tl.arange(0, ROWS)
    nmask = offs_n < N
    mmask = offs_m < M
    xrows = x_ptr + offs_m.to(tl.int64)[:, None] * stride_xm
    acc = tl.zeros((ROWS, BLOCK_N), dtype=tl.float32)
    acc_t = tl.zeros((BLOCK_N, ROWS), dtype=tl.float32)  # WT: the weights are the MMA's A
    k_lo = pid_k * K_SPLIT
    k_hi = tl.minimum(K, k_lo + K_SPLIT)
    KSTEP: tl.constexpr = SPLIT_K * BLOCK_K if KINT else BLOCK_K
    if KINT:  # split s takes steps s, s + SPLIT_K, ...: the splits read side by side
        k_lo = pid_k * BLOCK_K
        k_hi = K
    if L2PRE > 0:  # (probe) the first steps' tiles asked of L2 before the wait
        tl.static_assert(WFMT == 1 and TILED and BLOCK_N == TILE_R, "L2PRE: int4 tiles")
        band = w_ptr + pid_n.to(tl.int64) * (TILE_R * K // 2)
        for i in tl.static_range(L2PRE):
            kb = (k_lo + i * KSTEP) // 2
            tile = band + (kb // TILE_B) * (TILE_R * TILE_B)
            tile = tl.where(k_lo + i * KSTEP < k_hi, tile, band)  # past the range: a line held
            prefetch_l2(tile + tl.arange(0, TILE_R * TILE_B // 128) * 128)
    if PDL:
        gdc_wait()
    if WFMT == 6 or WFMT == 7:  # MX fp6 (decode_mma_fp6.py): WT only
        tl.static_assert(WT, "MX fp6: the weights are the MMA's A operand")
        acc_t = fp6_loop(acc_t, x_ptr, xrows, w_ptr, s_ptr, z_ptr, offs_n, nmask, mmask, k_lo,
                         k_hi, stride_wn, stride_sn, stride_sg, WFMT == 6, GROUP_SIZE, BLOCK_K,
                         ASM, UPCAST, BIG, XQDQ, A_SHIFT, A_MIN_NORMAL, A_MAX_NORMAL, A_IS_INT,
                         A_HW_FP8, A_FP8_TY, A_EMAX, A_MAX_FRAC, A_RCEIL)  # fmt: skip
    elif WFMT == 1 or WFMT >= 3:
        per_byte: tl.constexpr = 1 if WFMT == 5 or WFMT == 8 or WFMT == 10 else 2  # codes
        if TMA:  # the descriptor's first row of this column tile's band
            wrows = w_ptr
            trow = pid_n * (K // 2 // TILE_B * TILE_R)
        else:
            wrows = (
                w_ptr
                + int4_rows(offs_n, stride_wn, K, TILED, TILE_B, TILE_R)[:, None]
                + tl.arange(0, (BLOCK_K if WIDE else GROUP_SIZE) // per_byte)[None, :]
            )
            trow = 0
        srow = offs_n.to(tl.int64) * stride_sn
        xsrows = xs_ptr + offs_m * (K // GROUP_SIZE)  # XMX: x's block scale bytes
        xz = tl.zeros((ROWS, 1), tl.int32)
        if XZ:
            xz = tl.load(xz_ptr + offs_m, mask=mmask, other=0)[:, None]
        big = BIG == 1
        if BIG == 2:  # one uniform branch per program: ~7 us of 31 at 8192^2 (in the loop 10)
            big = tl.load(z_ptr) != 0  # int32: some block scale of the weight is above 2**1
        if big:
            acc, acc_t = _group_steps(
                acc, acc_t, xrows, wrows, s_ptr, z_ptr, srow, nmask, mmask, xz, xsrows, k_lo, k_hi,
                stride_sg, WFMT, GROUP_SIZE, GROUPS, XQ, XZ, BLOCK_K, ASM, UPCAST, WT, PREF, True,
                IMMA, LOOP_STAGES, ZW, TILED, ALIGNED, TILE_B, TILE_R, KSTEP, ZMMA, NVX, POST, XMX,
                TMA, trow, CHAINS, WIDE,
            )  # fmt: skip
        else:
            acc, acc_t = _group_steps(
                acc, acc_t, xrows, wrows, s_ptr, z_ptr, srow, nmask, mmask, xz, xsrows, k_lo, k_hi,
                stride_sg, WFMT, GROUP_SIZE, GROUPS, XQ, XZ, BLOCK_K, ASM, UPCAST, WT, PREF, False,
                IMMA, LOOP_STAGES, ZW, TILED, ALIGNED, TILE_B, TILE_R, KSTEP, ZMMA, NVX, POST, XMX,
                TMA, trow, CHAINS, WIDE,
            )  # fmt: skip
    else:
        if WFMT == 2:  # float8 codes read as their bytes (the conversion is ours)
            w_ptr = w_ptr.to(tl.pointer_type(tl.uint8))
        offs_k0 = tl.arange(0, BLOCK_K)
        if TILED:  # (probe) byte codes in tile_uint4's tiles, a step inside one tile
            tl.static_assert(BLOCK_K <= TILE_B, "TILED byte codes: a step within a tile")
        wrows = (
            w_ptr
            + int4_rows(offs_n, stride_wn, K, TILED, TILE_B, TILE_R, 1)[:, None]
            + offs_k0[None, :]
        )
        for k0 in range(k_lo, k_hi, KSTEP):
            xt = tl.load(xrows + (k0 + offs_k0)[None, :], mask=mmask[:, None], other=0.0)
            q = tl.load(wrows + int4_cols(k0, TILED, BLOCK_K, TILE_B, TILE_R),
                        mask=nmask[:, None], other=0)  # fmt: skip
            acc, acc_t = _weights_mma(acc, acc_t, byte_codes(q, WFMT, ASM), xt, UPCAST, WT)
    if WT:
        acc = tl.trans(acc_t)
    if WFMT == 9 and NVX:  # the sums of v * e4m3 * 2**-8 x: times the tensor scale * 2**8
        acc = acc * (tl.load(z_ptr) * 256.0)
    if SPLIT_K > 1:
        part_ptrs = p_ptr + pid_k.to(tl.int64) * M * N + offs_m.to(tl.int64)[:, None] * N
        tl.store(part_ptrs + offs_n[None, :], acc, mask=mmask[:, None] & nmask[None, :])
        if TAIL:
            splitk.finish(p_ptr, c_ptr, p_ptr, s_ptr, xs_ptr, b_ptr, y_ptr, M, N, stride_ym,
                          SPLIT_K, TAIL, BLOCK_N)  # fmt: skip
    else:
        epilogue(acc, s_ptr, xs_ptr, b_ptr, y_ptr, offs_m, offs_n, M, N, stride_ym,
                 WFMT == 0 or WFMT == 2, XQ, STATIC, HAS_BIAS)  # fmt: skip


XMX_STAGES8 = 2
"""XMX's pipeline depth where x pads to 8 rows: at 3 stages ptxas spilled 128 bytes on sm90
(71 registers); 2 stages: 64 registers, 18 KB of shared memory, 433 instructions a 64 x 128
step (``python -m bench.sass 'mx_int8.decode_mma_xmx*'``; 655 at 16 rows, 3 stages)."""


def _asm(x: torch.Tensor, wfmt: WeightFormat, backend: Backend) -> bool:
    """:func:`ptx_codes` for this launch (AMD and the interpreter: the float path)."""
    if backend is not Backend.CUDA:
        return False
    fp16 = x.dtype == torch.float16
    return ptx_codes(wfmt, fp16, fp16 and wfmt is WeightFormat.FP8 and fp8_cvt(x.device))


def _tma_codes(
    qdata: torch.Tensor,
    cfg: dict,
    wfmt: WeightFormat,
    tiled: bool,
    bn: int,
    gs: int,
    backend: Backend,
) -> Any:
    """``qdata``, or under the tile's ``TMA`` (a probe: int4 codes in tile order, a program's
    BLOCK_N rows one band of tiles, CUDA or the interpreter) a tensor descriptor over them
    as rows of TILE_B bytes whose block is one group of a tile's rows."""
    if not cfg.get("TMA"):
        return qdata
    tb, tr = cfg.get("TILE_B", 64), cfg.get("TILE_R", 64)
    if wfmt is not WeightFormat.UINT4 or not tiled or bn != tr or backend is Backend.ROCM:
        raise ValueError("TMA: int4 codes in tile order, BLOCK_N one band (TILE_R), on CUDA")
    if gs // 2 > tb or tb % (gs // 2) or not qdata.is_contiguous():
        raise ValueError(f"TMA: a group ({gs // 2} bytes) within a {tb}-byte tile row")
    flat = qdata.view(torch.uint8).reshape(-1, tb)
    return TensorDescriptor(flat, list(flat.shape), [tb, 1], [tr, gs // 2])


def _launch_through_triton(kernel: Any, grid: tuple, *args: Any, **consts: Any) -> None:
    """``kernel[grid](...)``: for arguments that _launch's bound launches do not key (a
    tensor descriptor)."""
    kernel[grid](*args, **consts)


def decode_mma(
    x: torch.Tensor,
    qdata: torch.Tensor,
    scale: torch.Tensor,
    zero: torch.Tensor | None,
    bias: torch.Tensor | None,
    y: torch.Tensor,
    groups: int,
    wfmt: WeightFormat,
    split: int | None,
    x_scale: torch.Tensor | None = None,
    tile: dict | None = None,
    x_zero: torch.Tensor | None = None,
    tiled: bool = False,
    pdl: bool = False,
    x_qdq: dict | None = None,
    x_block_scale: torch.Tensor | None = None,
) -> None:
    """Launch the kernel (the caller checked :func:`serves`): y = x W^T (+ bias), W from
    ``qdata`` (uint8 int4 pairs, int8 or float8 e4m3fn) with ``scale`` [N, groups] (and ``zero`` for
    UINT4; MX_FP4: uint8 E8M0 bytes, ``zero`` the weight's BIG flag, :data:`BIG_MODE`);
    INT4_SYM takes int8 ``x``, its ``x_scale`` ([M] or [] static) and, for asymmetric
    activations, ``x_zero`` (int32 [M]). ``split``
    forces split-K; ``tile`` overrides TILE (benchmarks), and its ``ROWS`` (16, or 8 for
    M <= 8) the rows x is padded to (by default 8 at M <= 8 where TILE says ``rows8``; past
    16 rows ROWS_TILE's 32 or 64, int4 / int8 / e4m3 weight-only).
    ``tiled``: int4 codes in aoq.formats.packing.tile_uint4's order (TILED_TILE). ``pdl``:
    programmatic dependent launch after the kernel that wrote x (the caller checked the GPU
    has it: _common.pdl). ``x_qdq`` (MX fp6, one row of x, blocks of at most FP6_STEP):
    mx_decode.one_row_constexprs's XQDQ constants, x quantize-dequantized in the kernel.
    ``x_block_scale`` (XMX: MX int8 weights, ``x`` int8 MX codes, y bf16 or fp16): x's E8M0
    bytes, uint8 [M, groups] contiguous (kernels/mx_cast.mx_cast_triton's scale)."""
    m, k = x.shape
    n = qdata.shape[0]
    cfg = {**TILE[wfmt], **(TILED_TILE if tiled else {}), **rows_tile(wfmt, m), **(tile or {})}
    cfg["TILED"] = tiled
    bn = cfg.pop("BLOCK_N")
    want = cfg.pop("STEP_K")
    dev_step = cfg.pop("STEP_K_DEV", None)  # (the step where MX's BIG flag is on the device)
    if dev_step and wfmt in MX_FORMATS and zero is not None and BIG_MODE.get(zero.numel()) == 2:
        want = dev_step
    per_sm = cfg.pop("per_sm", 4)
    exact = cfg.pop("exact", False)
    backend = backend_of(x.device)
    asm = cfg.pop("ASM", _asm(x, wfmt, backend))  # (a tile key for probes)
    rows8 = cfg.pop("rows8", False) and m <= 8 and backend is not Backend.ROCM
    cfg.setdefault("ROWS", 8 if rows8 else 16)
    at8 = cfg.pop("at8", {})  # TILE's keys where x pads to 8 rows (a probe's tile wins)
    if cfg["ROWS"] == 8:
        cfg.update({key: v for key, v in at8.items() if key not in (tile or {})})
        want = cfg.pop("STEP_K", want)  # (at8's step: NVFP4's)
    if x_block_scale is not None and cfg["ROWS"] == 8 and "num_stages" not in (tile or {}):
        cfg["num_stages"] = XMX_STAGES8
    if cfg["ROWS"] not in (8, 16, 32, 64, 128, 256) or m > cfg["ROWS"]:
        raise ValueError(f"ROWS={cfg['ROWS']}: x pads to 8, 16, ... 256 rows, at least its {m}")
    cfg["IMMA"] = cfg.get("IMMA", False) and wfmt is WeightFormat.INT4_SYM
    cfg["ZW"] = wfmt is WeightFormat.UINT4 and zero is not None and zero.dtype == torch.int32
    # NVX (NVFP4, bf16 x): steps exact in bf16, the tensor scale on the sums (nvfp4_codes)
    cfg["NVX"] = cfg.get("NVX", False) and wfmt is WeightFormat.NVFP4 and x.dtype == torch.bfloat16
    # POST (MX fp8 e4m3): each block's scale on its float32 product tile (MX int8 off WIDE)
    cfg["POST"] = cfg.get("POST", False) and wfmt is WeightFormat.MX_FP8
    if cfg.get("WT") and cfg["num_warps"] >= 4:
        raise ValueError(
            "WT (the weights as the MMA's A operand) needs fewer than 4 warps: with 4, Triton "
            "3.6 picks wgmma, whose sums came out wrong (H200, BLOCK_N 128)"
        )
    per_channel = wfmt in (WeightFormat.INT8, WeightFormat.FP8)
    gs = 16 if per_channel else k // groups
    if x_qdq is not None:
        if wfmt not in FP6_FORMATS or m != 1 or gs > FP6_STEP:
            raise ValueError(f"x_qdq: MX fp6 weights, one row of x, blocks <= {FP6_STEP}")
        cfg.update(x_qdq)
    if wfmt is WeightFormat.NVFP4:  # its group: two blocks of 16 (an MMA's K a nibble half)
        gs = 32
    bk = splitk.k_step(k, FP6_STEP if wfmt in FP6_FORMATS else gs, want)
    cfg["PREF"] = cfg.get("PREF", False) and bk // gs in (1, 2, 4)
    wide = wide_serves(wfmt, bk // gs, x.dtype, tiled, cfg["POST"])
    cfg["WIDE"] = cfg.get("WIDE", False) and wide
    n_prog = triton.cdiv(n, bn)
    w_arg = _tma_codes(qdata, cfg, wfmt, tiled, bn, gs, backend)
    # stream-K (decode_mma_sk.py): int4, a split not forced, the codes not a descriptor
    sk = cfg.pop("SK", False) and not cfg.get("TMA")
    if sk and wfmt is WeightFormat.UINT4 and split is None and zero is not None:
        programs = decode_mma_sk.wave_programs(sk, backend, y.device, n_prog, k, bk, per_sm, exact)
        if programs:
            decode_mma_sk.decode_mma_sk(x, qdata, scale, zero, bias, y, programs, cfg, gs, bn,
                                        bk, asm, pdl)  # fmt: skip
            return
    p = splitk.plan(y, backend, n_prog, k, bk, split, per_sm=per_sm, exact=exact)
    xq = x_scale is not None
    cfg["XMX"] = x_block_scale is not None
    check_xmx(wfmt, x, xq, x_block_scale, groups)
    if wfmt in MX_FORMATS:
        if zero is None or zero.numel() not in BIG_MODE:
            raise ValueError("MX weights take their BIG flag as zero (see serves)")
        cfg["BIG"] = BIG_MODE[zero.numel()]
        zero = zero if cfg["BIG"] == 2 else None  # (an empty tensor may have no address)
    epi = dict(col_scale=scale if per_channel else None, row_scale=x_scale, bias=bias)
    run = launch if w_arg is qdata else _launch_through_triton
    run(_decode_mma_kernel, (n_prog, p.split),
        x, w_arg, scale, zero if zero is not None else scale,
        x_scale if xq else (x_block_scale if cfg["XMX"] else scale),
        x_zero if x_zero is not None else scale,
        bias if bias is not None else scale, y, p.partials,
        p.counter_arg(),
        m, n, k, scale.stride(0) if scale.dim() == 2 else 1,
        scale.stride(1) if scale.dim() == 2 else 1, p.k_split, x.stride(0), qdata.stride(0),
        y.stride(0),
        WFMT=int(wfmt), GROUP_SIZE=gs, GROUPS=bk // gs, XQ=xq, XZ=x_zero is not None,
        STATIC=x_scale is not None and x_scale.dim() == 0, HAS_BIAS=bias is not None,
        SPLIT_K=p.split, TAIL=p.tail(splitk.epilogue_bits(**epi)), BLOCK_N=bn, BLOCK_K=bk,
        ASM=asm, UPCAST=INTERPRET, PDL=pdl, launch_pdl=pdl,
        TRIGGER=p.chain, **cfg,
    )  # fmt: skip
    p.finish(y, **epi)
