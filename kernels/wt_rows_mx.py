"""MX fp4 and NVFP4 weights at 65-128 rows of x on sm90 (the kernel also takes MX e4m3, e5m2
and int8 with bf16 x, not served: MIN_ROWS): wt_rows.py's tile (the weights as wgmma's
register operand, x and the codes through tensor descriptors) with decode_mma's WIDE decode
(decode_mma_wide.wide_bytes / wide_nibbles, each code times its own step:
kernels/mx_el_codes.py), the emulated path's weights in x's dtype.

Orientation as wt_rows: a program takes BLOCK_N rows of W (the MMA's M side) against all ROWS
rows of x (its N side); a step's codes arrive in shared memory by TMA, are decoded with their
blocks' scales into x's dtype in registers and go to wgmma as its A operand; x^T is the B
operand from shared memory. The scales are the weight's group-major bytes (s[n, g] at g·N +
n: one 64-byte load a block and program), as decode_mma reads them. Steps of two or four
blocks (TILE's ``step``; block_columns spreads at most four vectors: NVFP4's steps are 64
codes). NVFP4 with bf16 x takes decode_mma's exact steps (NVX: the tensor scale times 2**8 on
the float32 sums). MX's BIG flag read on the device (its length 1) takes the second multiply
everywhere (correct for every scale), not a branch: two pipelined loops would double the
shared memory a program holds.

Why: past 64 rows decode_mma's WIDE tiles put x on the MMA's A side and write each decoded
step to shared memory for its B operand; at 128 rows MX fp4 ran at 0.57-0.60x bf16 there, and
NVFP4 had no decode tile past 64 rows (the emulated path: 0.40-0.45x; bench run 5bc7bc).
H200, ``python -m bench.rows_ab --configs mxwo-fp4_e2m1,nvfp4wo`` (session 54), µs at 8192^2
/ 4096 x 14336 / 14336 x 4096, this kernel against the path it replaces: MX fp4 at 65 rows
54.6 / 53.5 / 49.2 against 63.6 / 61.4 / 59.1, at 128 49.9 / 48.5 / 45.4 against 65.2 /
61.6 / 60.5; NVFP4 at 65 rows 66.6 / 65.3 / 60.2 against 89.5 / 80.0 / 81.9, at 128 61.2 /
59.3 / 55.0 against 91.3 / 81.0 / 84.9. ``AOQ_WT_ROWS=0`` turns it off with wt_rows.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from aoq.kernels import splitk, wt_rows, wt_rows_fp6
from aoq.kernels._common import INTERPRET, WeightFormat, backend_of, mma
from aoq.kernels._launch import launch, scratch_allocator
from aoq.kernels.decode_mma_serves import BIG_MODE
from aoq.kernels.decode_mma_steps import _step_params
from aoq.kernels.decode_mma_wide import wide_bytes, wide_nibbles

ROWS = wt_rows.ROWS
BLOCK_N = wt_rows.BLOCK_N
STAGES = wt_rows.STAGES
TILE: dict[WeightFormat, dict[str, int]] = {
    WeightFormat.MX_FP4: {"step": 64, "per_sm": 4},
    WeightFormat.NVFP4: {"per_sm": 4},
}
"""Per format, what differs from wt_rows' tile: ``per_sm`` (the K split's aim, wt_rows.PER_SM),
``stages`` (STAGES), ``step`` (codes a step, :func:`step_k`: four blocks, or two), ``bn`` and
``warps`` (BLOCK_N and the warps), ``rows`` (probes as wt_rows.TILE's) and ``cvt``
(MX 8-bit with bf16 x: the kernel's CVT, a probe that did not win); a probe's overrides go
here (bench/rows_ab.py ``--mx-tile``). 64-code steps take 53 KB of
shared memory at 3 stages, so four programs fit an SM where 128-code steps fit two: MX fp4 at
128 rows 49.9 / 48.5 / 45.4 µs against 52.9 / 48.4 / 47.2 at 8192^2 / 4096 x 14336 / 14336 x
4096, NVFP4 61.2 / 59.3 / 55.0 against 83.3 / 76.4 / 73.7 (its steps were 64 codes already);
MX e4m3 and int8 lost 16-35 % on them (H200, session 54)."""
X_DESC_ROWS = {WeightFormat.NVFP4: 80}
"""x through its descriptor from this many rows, by format (else wt_rows.X_DESC_ROWS): NVFP4
at 80 rows 59.9 / 63.0 / 53.5 µs through it, 66.8 / 65.4 / 60.4 by masked loads; at 65 the
descriptor won two shapes of three, and lost the third by 14 % (H200, session 54)."""
MIN_ROWS = {
    WeightFormat.MX_FP4: 65,
    WeightFormat.NVFP4: 65,
    WeightFormat.MX_FP8: ROWS + 1,
    WeightFormat.MX_FP8_E5M2: ROWS + 1,
    WeightFormat.MX_INT8: ROWS + 1,
    WeightFormat.MX_FP6_E3M2: 65,
    WeightFormat.MX_FP6_E2M3: 65,
}
"""The fewest rows served, by format (ROWS + 1: none). MX fp4 and NVFP4 from 65, where every
shape timed ran faster than decode_mma's tile (MX fp4) or the emulated path (NVFP4, which
had no decode tile past 64); MX e4m3 and int8 not served: within -3 to +7 % of decode_mma's
WIDE tiles at 112-128 rows, slower below (H200, bench/NOTES.md session 54). The kernel takes
them for probes (bench/rows_ab.py serves every format from 65). MX fp6 from 65 on its own
kernel, kernels/wt_rows_fp6.py (session 55)."""
BITS = {WeightFormat.MX_FP4: 4, WeightFormat.NVFP4: 4, WeightFormat.MX_FP6_E3M2: 6,
        WeightFormat.MX_FP6_E2M3: 6}  # fmt: skip
"""Bits a code by format where not 8 (the codes' [N, K·bits / 8] shape)."""
X_DTYPES = {WeightFormat.MX_INT8: (torch.bfloat16,)}
"""x's dtypes by format where not bf16 and fp16 (MX int8's steps are bf16 values)."""


def step_k(wfmt: WeightFormat) -> int:
    """Codes a step: TILE's ``step``, else four blocks (MX: 128; NVFP4: 64, two of
    decode_mma's groups of 32); MX fp6 wt_rows_fp6.BLOCK_K."""
    if wfmt in wt_rows_fp6.FORMATS:
        return wt_rows_fp6.BLOCK_K
    return TILE.get(wfmt, {}).get("step", 64 if wfmt is WeightFormat.NVFP4 else 128)


@triton.jit
def _wt_rows_mx_kernel(
    x_ptr, w_ptr, s_ptr, z_ptr, b_ptr, y_ptr, p_ptr, M, N, K, K_SPLIT,
    WFMT: tl.constexpr, GROUP_SIZE: tl.constexpr, HAS_BIAS: tl.constexpr,
    SPLIT_K: tl.constexpr, ROWS: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    STAGES: tl.constexpr, BIG: tl.constexpr, ASM: tl.constexpr, NVX: tl.constexpr = False,
    X_DESC: tl.constexpr = True, UPCAST: tl.constexpr = False, TRIGGER: tl.constexpr = False,
    CVT: tl.constexpr = False,
):  # fmt: skip
    """Program (n, s): rows n·BLOCK_N.. of W against all of x over K range s. SPLIT_K 1: y
    [M, N] (+ bias), cast; else the float32 partial [M, N] into p[s]. WFMT: decode_mma's (4
    MX fp4, 5 e4m3, 8 e5m2, 10 int8; 9 NVFP4, ``z_ptr`` its float32 tensor scale); s_ptr the
    group-major scale bytes; BIG (MX): the second multiply (decode_mma_wide). X_DESC: x
    through a tensor descriptor, else by masked loads. UPCAST: the interpreter. CVT (MX 8-bit,
    bf16 x): decode_mma_wide.wide_bytes' hardware conversion."""
    splitk.trigger(TRIGGER)
    pid_n = tl.program_id(0)
    pid_s = tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_m = tl.arange(0, ROWS)
    nmask = offs_n < N
    srow = offs_n.to(tl.int64)  # group-major: s[n, g] at g * N + n
    BYTES: tl.constexpr = WFMT == 5 or WFMT == 8 or WFMT == 10
    CB: tl.constexpr = BLOCK_K if BYTES else BLOCK_K // 2  # a step's code bytes a row
    x_desc = wt_rows.x_descriptor(x_ptr, M, K, ROWS, BLOCK_K, X_DESC)
    kb = K if BYTES else K // 2
    w_desc = tl.make_tensor_descriptor(w_ptr, [N, kb], [kb, 1], [BLOCK_N, CB])
    k_lo, k_hi = splitk.k_range(pid_s, K, K_SPLIT, SPLIT_K, True)
    acc = tl.zeros((BLOCK_N, ROWS), dtype=tl.float32)
    for k0 in tl.range(k_lo, k_hi, BLOCK_K, num_stages=STAGES):
        xt = wt_rows.x_step(x_desc, offs_m, M, K, k0, BLOCK_K, X_DESC)
        b = w_desc.load([pid_n * BLOCK_N, k0 // (BLOCK_K // CB)])
        s0, z0, s1, z1, s2, z2, s3, z3 = _step_params(
            s_ptr, z_ptr, srow, nmask, k0, k_hi, N, WFMT, GROUP_SIZE, BLOCK_K // GROUP_SIZE,
            False, NVX,
        )  # fmt: skip
        if BYTES:
            w = wide_bytes(b, s0, s1, s2, s3, WFMT, BLOCK_K // GROUP_SIZE, BLOCK_K, BIG, ASM,
                           xt.dtype == tl.float16, True, CVT)  # fmt: skip
        else:
            lo, hi = wide_nibbles(b, s0, z0, s1, z1, s2, z2, s3, z3, WFMT,
                                  BLOCK_K // GROUP_SIZE, CB, BIG, ASM, xt.dtype == tl.float16,
                                  NVX, True)  # fmt: skip
            w = tl.join(lo, hi).reshape(BLOCK_N, BLOCK_K)
        if not UPCAST:
            w = w.to(x_ptr.dtype.element_ty)
        acc = mma(w, tl.trans(xt), acc, UPCAST, "ieee")
    if WFMT == 9 and NVX:  # the sums of v * e4m3 * 2**-8 x: times the tensor scale * 2**8
        acc = acc * (tl.load(z_ptr) * 256.0)
    # (codes past N: TMA's zeros, not stored)
    wt_rows.store_rows(acc, b_ptr, y_ptr, p_ptr, offs_m, offs_n, nmask, M, N, pid_s, HAS_BIAS,
                       SPLIT_K)  # fmt: skip


def serves(
    x: torch.Tensor,
    qdata: torch.Tensor,
    scale: torch.Tensor,
    zero: torch.Tensor | None,
    block_size: int,
    wfmt: WeightFormat | None,
) -> bool:
    """Unless AOQ_WT_ROWS=0: MIN_ROWS[format]..ROWS rows of contiguous bf16 / fp16 x (MX int8:
    bf16) against contiguous codes [N, K·bits / 8] in a format of MIN_ROWS (MX fp6 on
    kernels/wt_rows_fp6.py), MX in blocks of 32
    with the weight's BIG flag as ``zero`` (decode_mma_serves.BIG_MODE), NVFP4 with its
    float32 tensor scale as ``zero``; ``scale`` the group-major bytes (a view with strides
    (1, N)); K a multiple of the step, codes 16-byte aligned by their storage
    offset (TMA; the dispatch asks of fake tensors under torch.compile); on NVIDIA sm90 or
    under the interpreter."""
    if not wt_rows.ENABLED or wfmt not in MIN_ROWS or x.dim() != 2:
        return False
    m, k = x.shape
    n = qdata.shape[0]
    if x.dtype not in X_DTYPES.get(wfmt, wt_rows.X_DTYPES) or not MIN_ROWS[wfmt] <= m <= ROWS:
        return False
    nv = wfmt is WeightFormat.NVFP4
    if block_size != (16 if nv else 32) or not k or k % step_k(wfmt) or not n:
        return False
    if qdata.dim() != 2 or qdata.shape[1] * 8 != k * BITS.get(wfmt, 8):
        return False
    if zero is None or zero.dtype != (torch.float32 if nv else torch.int32):
        return False
    if zero.numel() != 1 if nv else zero.numel() not in BIG_MODE:
        return False
    if scale.shape != (n, k // block_size) or scale.stride() != (1, n):
        return False
    if not (x.is_contiguous() and qdata.is_contiguous()) or qdata.storage_offset() % 16:
        return False
    if x.storage_offset() * x.element_size() % 16:
        return False
    return wt_rows._runs_on(x.device)


def takes(
    x: torch.Tensor,
    qdata: torch.Tensor,
    scale: torch.Tensor,
    zero: torch.Tensor | None,
    block_size: int,
    wfmt: WeightFormat | None,
) -> bool:
    """:func:`serves`, and x and the codes at 16-byte aligned addresses (TMA's): the launcher's
    test of real tensors (mx_decode.mx_decode_triton)."""
    ok = serves(x, qdata, scale, zero, block_size, wfmt)
    return ok and x.data_ptr() % 16 == 0 and qdata.data_ptr() % 16 == 0


def wt_rows_mx(
    x: torch.Tensor,
    qdata: torch.Tensor,
    scale: torch.Tensor,
    zero: torch.Tensor,
    bias: torch.Tensor | None,
    y: torch.Tensor,
    wfmt: WeightFormat,
    split: int | None = None,
    nvx: bool | None = None,
) -> torch.Tensor:
    """y [M, N] = x dequant(W)ᵀ + bias where :func:`serves` holds (``scale`` the group-major
    bytes, ``zero`` the BIG flag or NVFP4's tensor scale); ``split`` forces the K split,
    ``nvx`` NVFP4's exact steps (default: with bf16 x)."""
    if wfmt in wt_rows_fp6.FORMATS:
        return wt_rows_fp6.wt_rows_fp6(x, qdata, scale, zero, bias, y, wfmt, split)
    if not y.is_contiguous():
        raise ValueError(f"wt_rows_mx writes a contiguous y, got strides {y.stride()}")
    if x.data_ptr() % 16 or qdata.data_ptr() % 16:
        raise ValueError("wt_rows_mx takes x and codes at 16-byte aligned addresses (TMA)")
    m, k = x.shape
    n = qdata.shape[0]
    bk = step_k(wfmt)
    nv = wfmt is WeightFormat.NVFP4
    scratch_allocator()
    tile = TILE.get(wfmt, {})
    bn = tile.get("bn", BLOCK_N)
    n_prog = triton.cdiv(n, bn)
    per_sm, stages = tile.get("per_sm", wt_rows.PER_SM), tile.get("stages", STAGES)
    p = splitk.plan(y, backend_of(x.device), n_prog, k, bk, split, per_sm=per_sm, fused=False)
    big = 0 if nv else min(BIG_MODE[zero.numel()], 1)  # (on the device: the second multiply)
    nvx = (x.dtype == torch.bfloat16) if nvx is None else nvx
    s = scale.view(torch.uint8)
    launch(_wt_rows_mx_kernel, (n_prog, p.split),
        x, qdata, s, zero if nv else s, bias if bias is not None else s, y, p.partials,
        m, n, k, p.k_split,
        WFMT=int(wfmt), GROUP_SIZE=32, HAS_BIAS=bias is not None, SPLIT_K=p.split,
        ROWS=wt_rows._rows(m, tile),
        BLOCK_N=bn, BLOCK_K=bk, STAGES=stages, BIG=big, ASM=not INTERPRET,
        NVX=nv and nvx, X_DESC=m >= X_DESC_ROWS.get(wfmt, wt_rows.X_DESC_ROWS),
        UPCAST=INTERPRET, TRIGGER=p.chain, CVT=bool(tile.get("cvt", False)),
        num_warps=tile.get("warps", 4), num_stages=stages,
    )  # fmt: skip
    p.finish(y, bias=bias)
    return y
