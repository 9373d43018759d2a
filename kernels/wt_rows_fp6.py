"""MX fp6 weights (e3m2 / e2m3, blocks of 32) at 65-128 rows on sm90: wt_rows' tile for
decode_mma_fp6's codes, x through tensor descriptors.

A program takes BLOCK_N rows of W against all ROWS rows of x, as kernels/wt_rows.py. A step of
BLOCK_K codes loads each 16-code unit's three int32 words (by pointer loads: a unit's 12 bytes
are no TMA box) and decodes them where wgmma reads its register operand (FRAG, the default:
:func:`_frag_step`). In that layout lane l of a warp holds columns 2 (l % 4) + {0, 1, 8, 9}
of every 16, for rows r and r + 8; so column 64 s + 16 j + 8 h + 2 q + e holds code 4 j + 2 h
+ e of the step's unit 4 s + q, every thread decodes whole units of its own rows
(fp6_codes.fp6_pairs: a pair of codes an instance), and the operand is built by broadcasts,
joins and a reshape, which Triton 3.6 carries the MMA's layout back through to the loads. x
comes permuted once a call to match (:func:`permute_x_frag`), one [ROWS, BLOCK_K] box a step.

The probe ``TILE["frag"] = False`` keeps session 55's steps: fp6_codes.fp6_word_codes' four
tensors o_t (column c: code 16 (c // 4) + 4 t + c % 4), x permuted by :func:`permute_x`, four
K = 32 MMAs a step. Triton moved those operands to wgmma through shared memory, two bytes a
store (64 STS.U16 a thread a step; FRAG: none), and sm100's compile aborted on them.

The block's power of two is in the weights' values (fp6_codes: one fma.rn.bf16x2 by 2**(b -
bias), BIG's second multiply where the weight's flag says a block may need it), so the
float32 accumulator needs no per-block scaling, as in decode_mma_fp6.

Why: past 64 rows sm90's MX fp6 ran the emulated path (a Triton dequantization to bf16, then
the BLAS matmul): 146-166 µs at 128 rows of 8192^2 / 4096 x 14336 on an H200, 0.24-0.25x
bf16 (bench/NOTES.md session 51); decode_mma's fp6 loop at 128 rows spilled 1056 bytes and
ran 280-302 µs. H200, µs at 128 rows of 8192^2 / 4096 x 14336 / 14336 x 4096 (bench.rows_ab):
session 55's steps 145.6-146.8 / 138.2-139.6 / 130.8-131.1, FRAG 127.8-129.3 / 124.2-125.8 /
115.4-116.2, and with splitk.k_range's NONEMPTY (ptxas had serialized the loop's wgmma, its
C7515 note) 124.6 / 114.3 / 112.1 (session 56; MX fp4 on wt_rows_mx: 45-49), and with each
unit's scale byte by its own load (SU_LOAD) 98.4 / 97.3 / 87.9-88.7 (session 57).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from aoq.kernels import splitk, wt_rows
from aoq.kernels._common import INTERPRET, WeightFormat, backend_of, block_columns, mma
from aoq.kernels._launch import launch, scratch_allocator
from aoq.kernels.decode_mma_fp6 import _step_scales
from aoq.kernels.decode_mma_serves import BIG_MODE
from aoq.kernels.fp6_codes import fp6_pairs, fp6_word_codes

ROWS = wt_rows.ROWS
BLOCK_N = wt_rows.BLOCK_N
BLOCK_K = 128
"""Codes a step (eight units; decode_mma_fp6's steps: 64-code ones came out wrong on an H100)."""
STAGES = 3
"""Pipeline stages: with SU_LOAD, 3 stages (112 KB of shared memory on sm90, two programs an
SM) ran 3-7 % faster than 2 on an H200 (128 rows: 98.3 / 98.8 / 88.6 -> 95.0 / 91.9 / 86.3 µs,
mxwo-fp6_e3m2; three programs an SM at 2 stages timed the same as two, session 57)."""
PER_SM = 2
"""Two programs an SM (the K split's aim)."""
FORMATS = (WeightFormat.MX_FP6_E3M2, WeightFormat.MX_FP6_E2M3)
FRAG = True
"""Decode into wgmma's register layout (:func:`_frag_step`); the probe ``TILE["frag"]``
overrides it."""
SU_LOAD = True
"""FRAG's scale bytes: each unit's by a load of its own (:func:`_frag_step`), not
block_columns' join; ``TILE["su_load"]`` overrides it. H200, µs at 128 rows of 8192^2 /
4096 x 14336 / 14336 x 4096, mxwo-fp6_e3m2 (bench.rows_ab, two passes, session 57): 124.1-124.2
/ 113.2-114.0 / 110.8-112.0 -> 98.4 / 97.3 / 87.9-88.7; mx-fp6_e2m3 127.9 / 115.7-115.8 /
114.5-114.6 -> 101.3 / 99.6-100.3 / 91.1-92.1."""
TILE: dict[str, int] = {}
"""A probe's overrides: ``per_sm``, ``stages``, ``frag``, ``su_load`` (:func:`_frag_step`)
(bench/rows_ab.py ``--fp6-tile``)."""


@triton.jit
def _wt_rows_fp6_kernel(
    x_ptr, w_ptr, s_ptr, z_ptr, b_ptr, y_ptr, p_ptr, M, N, K, K_SPLIT, stride_wn,
    E3M2: tl.constexpr, HAS_BIAS: tl.constexpr, SPLIT_K: tl.constexpr, ROWS: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, STAGES: tl.constexpr, BIG: tl.constexpr,
    ASM: tl.constexpr, UPCAST: tl.constexpr = False, TRIGGER: tl.constexpr = False,
    FRAG: tl.constexpr = False, SU_LOAD: tl.constexpr = False,
):  # fmt: skip
    """Program (n, s): rows n·BLOCK_N.. of W against all of x (permuted by
    :func:`permute_x_frag`, or :func:`permute_x` without FRAG) over K range s. SPLIT_K 1: y
    [M, N] (+ bias), cast; else the float32 partial into p[s]. s_ptr: the group-major E8M0
    bytes (s[g, n] at g N + n); BIG 1: the second multiply. x through its descriptor: one
    [ROWS, BLOCK_K] box a step (FRAG), else four [ROWS, BLOCK_K / 4]."""
    splitk.trigger(TRIGGER)
    pid_n = tl.program_id(0)
    pid_s = tl.program_id(1)
    C4: tl.constexpr = BLOCK_K // 4
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_m = tl.arange(0, ROWS)
    nmask = offs_n < N
    F16: tl.constexpr = x_ptr.dtype.element_ty == tl.float16
    x_desc = wt_rows.x_descriptor(x_ptr, M, K, ROWS, BLOCK_K if FRAG else C4, True)
    C: tl.constexpr = BLOCK_K // 16  # units a step
    unit = tl.arange(0, C)
    words = w_ptr.to(tl.pointer_type(tl.int32))
    wrow0 = words + offs_n.to(tl.int64) * (stride_wn // 4)
    wrow = wrow0[:, None]
    s_rows = s_ptr + offs_n.to(tl.int64)
    k_lo, k_hi = splitk.k_range(pid_s, K, K_SPLIT, SPLIT_K, True)
    acc = tl.zeros((BLOCK_N, ROWS), dtype=tl.float32)
    for k0 in tl.range(k_lo, k_hi, BLOCK_K, num_stages=STAGES):
        if FRAG:
            xt = wt_rows.x_step(x_desc, offs_m, M, K, k0, BLOCK_K, True)
            w = _frag_step(wrow0, s_rows, nmask, k0, k_hi, N, E3M2, BIG, ASM, F16,
                           BLOCK_N, BLOCK_K, SU_LOAD)  # fmt: skip
            if not UPCAST:
                w = w.to(x_ptr.dtype.element_ty)
            acc = mma(w, tl.trans(xt), acc, UPCAST, "ieee")
        else:
            n0, n1, n2, n3 = _step_scales(s_rows, nmask, k0, k_hi, N, 32, BLOCK_K // 32)
            su = block_columns(n0, n1, n2, n3, C, BLOCK_K // 32)  # each unit's block byte
            wp = wrow + ((k0 // 16 + unit) * 3)[None, :]
            w0 = tl.load(wp, mask=nmask[:, None], other=0)
            w1 = tl.load(wp + 1, mask=nmask[:, None], other=0)
            w2 = tl.load(wp + 2, mask=nmask[:, None], other=0)
            o0, o1, o2, o3 = fp6_word_codes(w0, w1, w2, su, E3M2, BIG, ASM, F16)
            x0 = wt_rows.x_step(x_desc, offs_m, M, K, k0, C4, True)
            x1 = wt_rows.x_step(x_desc, offs_m, M, K, k0 + C4, C4, True)
            x2 = wt_rows.x_step(x_desc, offs_m, M, K, k0 + 2 * C4, C4, True)
            x3 = wt_rows.x_step(x_desc, offs_m, M, K, k0 + 3 * C4, C4, True)
            if not UPCAST:
                o0, o1 = o0.to(x_ptr.dtype.element_ty), o1.to(x_ptr.dtype.element_ty)
                o2, o3 = o2.to(x_ptr.dtype.element_ty), o3.to(x_ptr.dtype.element_ty)
            acc = mma(o0, tl.trans(x0), acc, UPCAST, "ieee")
            acc = mma(o1, tl.trans(x1), acc, UPCAST, "ieee")
            acc = mma(o2, tl.trans(x2), acc, UPCAST, "ieee")
            acc = mma(o3, tl.trans(x3), acc, UPCAST, "ieee")
    wt_rows.store_rows(acc, b_ptr, y_ptr, p_ptr, offs_m, offs_n, nmask, M, N, pid_s, HAS_BIAS,
                       SPLIT_K)  # fmt: skip


@triton.jit
def _frag_step(wrow, s_rows, nmask, k0, k_hi, N, E3M2: tl.constexpr, BIG: tl.constexpr,
               ASM: tl.constexpr, F16: tl.constexpr, BLOCK_N: tl.constexpr,
               BLOCK_K: tl.constexpr, SU_LOAD: tl.constexpr = False):  # fmt: skip
    """A step's decoded weights [BLOCK_N, BLOCK_K] (FRAG): column 64 s + 16 j + 8 h + 2 q + e
    holds code 2 (2 j + h) + e of the step's unit 4 s + q. In wgmma's register layout for A
    (lane l: columns 2 (l % 4) + {0, 1, 8, 9} of each 16) each thread then holds whole units
    of its two rows, and the operand is built without a transpose: the units' words [R, S, 4]
    broadcast over (j, h) and decoded a pair an instance, the pairs joined last (Triton 3.6
    carries the MMA's layout back through joins, reshapes and broadcasts to the loads, not
    through a transpose: bench/NOTES.md session 56). x comes permuted to match
    (:func:`permute_x_frag`). SU_LOAD (the default, :data:`SU_LOAD`): each unit's scale
    byte by a load of its own [R, S, 4] (each block's byte twice) in place of
    block_columns' join, which Triton converts through shared memory: sm90 loop 506 -> 467
    instructions, its STS and BAR gone, 20-22 % faster at 128 rows on an H200."""
    S: tl.constexpr = BLOCK_K // 64
    C: tl.constexpr = BLOCK_K // 16
    unit = tl.reshape(tl.arange(0, C), (S, 4))  # 4 s + q
    wp = wrow[:, None, None] + ((k0 // 16 + unit) * 3)[None, :, :]
    nm = nmask[:, None, None]
    w0 = tl.load(wp, mask=nm, other=0)[:, :, None, None, None, :]
    w1 = tl.load(wp + 1, mask=nm, other=0)[:, :, None, None, None, :]
    w2 = tl.load(wp + 2, mask=nm, other=0)[:, :, None, None, None, :]
    if SU_LOAD:  # each unit's E8M0 byte loaded where its unit is decoded (two units a block)
        sp = s_rows[:, None, None] + ((k0 // 32 + unit // 2) * N)[None, :, :]
        su = tl.load(sp, mask=nm & (k0 < k_hi), other=0).to(tl.int32)
    else:
        n0, n1, n2, n3 = _step_scales(s_rows, nmask, k0, k_hi, N, 32, BLOCK_K // 32)
        su = tl.reshape(block_columns(n0, n1, n2, n3, C, BLOCK_K // 32), (BLOCK_N, S, 4))
    su = su[:, :, None, None, None, :]
    jh = tl.arange(0, 2)[:, None, None]
    jl = tl.arange(0, 2)[None, :, None]
    h = tl.arange(0, 2)[None, None, :]
    i = (4 * jh + 2 * jl + h)[None, None, :, :, :, None]  # the pair 2 j + h
    shape: tl.constexpr = (BLOCK_N, S, 2, 2, 2, 4)
    lo, hi = fp6_pairs(tl.broadcast_to(w0, shape), tl.broadcast_to(w1, shape),
                       tl.broadcast_to(w2, shape), tl.broadcast_to(su, shape),
                       tl.broadcast_to(i, shape), E3M2, BIG, ASM, F16)  # fmt: skip
    return tl.reshape(tl.join(lo, hi), (BLOCK_N, BLOCK_K))


@triton.jit
def _permute_x_frag_kernel(x_ptr, y_ptr, K, stride_xm, BLOCK: tl.constexpr):
    """Program (m, b): y[m, o] = x[m, src(o)] for BLOCK columns o of row m, y contiguous:
    o = 64 c + 16 j + 8 h + 2 q + e reads src = 64 c + 16 q + 4 j + 2 h + e
    (:func:`permute_x_frag`'s map)."""
    m = tl.program_id(0).to(tl.int64)
    o = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    c = o % 64
    src = o - c + 16 * ((c // 2) % 4) + 4 * (c // 16) + 2 * ((c // 8) % 2) + c % 2
    ok = o < K
    tl.store(y_ptr + m * K + o, tl.load(x_ptr + m * stride_xm + src, mask=ok), mask=ok)


PERMUTE_BLOCK = 1024


def permuted_x_frag(x: torch.Tensor) -> torch.Tensor:
    """:func:`permute_x_frag` by a Triton kernel through ``launch``, so that an eager plan
    (aoq/plans.py) records it: torch's copy is an aten op, which kept every eager MX fp6 call
    at 65-128 rows off its plan (H200, 4096^2 M 128: 180-250 µs a call against 32-35 as a
    graph replay, session 57)."""
    m, k = x.shape
    if x.stride(1) != 1:
        x = x.contiguous()
    y = torch.empty((m, k), dtype=x.dtype, device=x.device)
    if m and k:
        launch(_permute_x_frag_kernel, (m, triton.cdiv(k, PERMUTE_BLOCK)), x, y, k, x.stride(0),
               BLOCK=PERMUTE_BLOCK, num_warps=4)  # fmt: skip
    return y


def permute_x_frag(x: torch.Tensor) -> torch.Tensor:
    """x [M, K] for :func:`_frag_step`'s columns: in each 64 columns, 16 q + 4 j + 2 h + e (unit
    q's code 4 j + 2 h + e) moves to 16 j + 8 h + 2 q + e."""
    m, k = x.shape
    chunks = x.reshape(m, k // 64, 4, 4, 2, 2)  # [m, chunk, q, j, h, e]
    return chunks.permute(0, 1, 3, 4, 2, 5).contiguous().reshape(m, k)


def permute_x(x: torch.Tensor) -> torch.Tensor:
    """x [M, K] with each step's BLOCK_K columns in the order (t, unit, i): column 16 u + 4 t
    + i of a step moves to t C4 + 4 u + i (the columns o_t meets, one box each)."""
    m, k = x.shape
    steps = x.reshape(m, k // BLOCK_K, BLOCK_K // 16, 4, 4)
    return steps.transpose(2, 3).contiguous().reshape(m, k)


def wt_rows_fp6(
    x: torch.Tensor,
    qdata: torch.Tensor,
    scale: torch.Tensor,
    zero: torch.Tensor,
    bias: torch.Tensor | None,
    y: torch.Tensor,
    wfmt: WeightFormat,
    split: int | None = None,
) -> torch.Tensor:
    """y [M, N] = x Wᵀ + bias where wt_rows_mx.serves holds for MX fp6 (``scale`` the
    group-major bytes, ``zero`` the BIG flag; y float32 under the interpreter: the tests'
    exact comparison); ``split`` forces the K split (tests)."""
    if not y.is_contiguous():
        raise ValueError(f"wt_rows_fp6 writes a contiguous y, got strides {y.stride()}")
    m, k = x.shape
    n = qdata.shape[0]
    frag = bool(TILE.get("frag", FRAG))
    xp = permuted_x_frag(x) if frag else permute_x(x.contiguous())
    scratch_allocator()
    n_prog = triton.cdiv(n, BLOCK_N)
    stages = TILE.get("stages", STAGES)
    p = splitk.plan(y, backend_of(x.device), n_prog, k, BLOCK_K, split,
                    per_sm=TILE.get("per_sm", PER_SM), fused=False)  # fmt: skip
    s = scale.view(torch.uint8)
    launch(_wt_rows_fp6_kernel, (n_prog, p.split),
        xp, qdata, s, s, bias if bias is not None else s, y, p.partials, m, n, k, p.k_split,
        qdata.stride(0),
        E3M2=wfmt is WeightFormat.MX_FP6_E3M2, HAS_BIAS=bias is not None, SPLIT_K=p.split,
        ROWS=ROWS, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, STAGES=stages,
        BIG=min(BIG_MODE[zero.numel()], 1), ASM=not INTERPRET, UPCAST=INTERPRET,
        TRIGGER=p.chain, FRAG=frag, SU_LOAD=bool(TILE.get("su_load", SU_LOAD)), num_warps=4,
        num_stages=stages,
    )  # fmt: skip
    p.finish(y, bias=bias)
    return y
