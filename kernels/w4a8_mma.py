"""W4A8 decode from int_act_mm.ROWS_MMA_FROM rows to 16 (int8 activations, symmetric or with
zero points) on row-major codes: each program reads BLOCK_N rows GROUPS groups at a time
(GROUPS x 16 contiguous bytes of every row a step), and the step's groups run on the integer
MMA as one batched dot.

Why (bench/NOTES.md, session 40): decode_mma's W4A8 branch reads 64 rows x two groups a step,
32 bytes of each row 4 KB apart, and ran W4A8 at M 16 at 60 % of a bare read of its bytes
on an H100. Session 27 found the cost is where the reads fall in DRAM, not the sectors: the
same bytes as one 1 KB run a group read 18 % faster, but that layout cost the M = 1 GEMV as
much. Reading the row-major codes GEMV-like instead (16 rows x 128 bytes a step, one warp a
program) took the decode kernel from 26.5 / 23.8 / 24.1 us to 21.2 / 17.8 / 20.6 at
8192^2 / 4096 x 14336 / 14336 x 4096, M 16 (x quantized; with its split's reduction), and
the bench's W4A8 M16 from 28.4 / 25.1 / 27.0 to 23.4 / 20.0 / 23.2 (1.7x to 2.0-2.2x bf16),
with the packing the GEMV wants left as it is.

The arithmetic is decode_mma's IMMA path (decode_mma_steps): the stored codes q + 8 become
16 q as int8 (bf16_codes.nibble_bytes), each group's int32 sums start from IMMA_BASE's bits
and read back as float32 exactly, times the group's scale. The step's GROUPS groups are a
batched [GROUPS, BLOCK_N, 32] x [GROUPS, 32, ROWS] dot, one mma.sync a group (one warp keeps
the groups in each thread: with two or more warps Triton spread them over the warps and
summed them through shared memory). The groups' scaled sums add to the accumulator as one
sum a step, so the bits differ from decode_mma's (one group at a time) by float rounding,
and depend on the split, like every split decode. Deterministic: the split comes from the
shape (splitk.py).

Zero points (asymmetric activations): x - z takes 9 bits, no int8 operand, but Σ q (x - z) =
Σ q x - z Σ q, and z fits int8. A second dot of the same codes against z down every column
([GROUPS, 32, ROWS], built once) starts from the same IMMA_BASE bits, so the two results'
float32 readings differ by exactly the group's integer sum: one subtraction, no conversion,
and twice the MMAs (the loop is bound by its loads, not the matrix units).

Symmetric x keeps one float32 accumulator a group (GACC), summed over the groups after the
loop: with one accumulator, ptxas scaled each group's sums as soon as its MMA returned
(an MMA, a wait, two FMAs, 428 instructions a step on sm90) and the zero-point loop, which
subtracts two MMAs' results, ran faster with twice the MMAs; with GACC the step's MMAs issue
ahead (395 instructions, 186 registers). Kernel alone, µs at 8192^2 / 4096 x 14336 / 14336 x
4096 (H100, session 41): M 16 21.5 / 18.3 / 20.9 -> 21.0 / 18.0 / 19.3, M 4 21.8 / 17.2 /
19.3 -> 20.1 / 16.9 / 17.8. The zero-point loop gains nothing from it (255 registers).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from aoq.kernels import splitk
from aoq.kernels._common import INTERPRET, backend_of, epilogue
from aoq.kernels._launch import launch
from aoq.kernels.bf16_codes import nibble_bytes
from aoq.kernels.decode_mma_steps import IMMA_BASE, IMMA_BASE_VALUE
from triton.language.extra.cuda import gdc_wait

from aoq.backends import Backend

TILE = {"BLOCK_N": 16, "STEP_K": 256, "num_warps": 1, "num_stages": 3, "per_sm": 8}
"""Rows a program, codes a step (eight groups of 32), warps, pipeline depth, split-K programs
an SM. H100, decode kernel alone, M 16, µs at 8192^2 / 4096 x 14336 / 14336 x 4096 (a probe
of this loop, partials unreduced, session 40; ``python -m bench.decode_rows --formats
w4a8rows`` times the kernel itself): this tile 20.1 / 18.5 / 19.2; 32 rows 20.8 / 18.5 /
19.6; four groups a step 22.5 / 19.3 / 20.8; sixteen 22.9-24.6 / 19.3-21.6 / 20.1-24.5; 5
stages 26.2 / 19.0 / 26.1; 2 stages 20.2 / 22.0 / 19.2; per_sm 12 20.6 / 18.4 / 19.9; 64
rows on one warp 23.3 / 20.9 / 21.6. With GACC (session 41, activation kernel + decode, M
16): per_sm 10 and 12 within 0.1 us, per_sm 6 +1.0 to +3.0, 4 stages +0.9 to +2.0, 2 stages
+2.8 to +4.1."""
MAX_ROWS = 16
"""The most activation rows (x pads to 8 or 16 rows: the n of mma.sync's m16n8k32)."""
GROUP_SIZE = 32
"""The group W4A8 quantizes in (one integer MMA's K)."""
PDL_ROWS = 4
"""Up to this many rows, or where K is not split, the activation kernel lets this kernel
(launched with programmatic dependent launch: the caller's ``pdl``) start at once; above it,
where K is split, only after its programs' stores (:func:`late_trigger`). Activation kernel
+ decode, graph replays, M 16, µs at 8192^2 / 14336 x 4096 (both split; session 43,
bench/NOTES.md): H100 plain launch 22.9-23.1 / 21.8-21.9, placed at once 24.2-24.6 /
22.8, placed late (the activation kernel itself under PDL) 22.6-22.8 / 21.3-21.5; H200
20.3-20.4 / 19.1, 22.5-22.7 / 21.1-21.3, 19.7-19.8 / 17.9-18.0. Unsplit (4096 x 14336): H100
at once 18.5, late 18.7, plain 19.1; H200 hosts differ (at once 16.3 against plain 17.8 on
one, 17.6 against 16.7 on another)."""


@triton.jit
def _w4a8_mma_kernel(
    x_ptr, w_ptr, s_ptr, xs_ptr, xz_ptr, b_ptr, y_ptr, p_ptr, c_ptr,
    M, N, K, stride_sn, stride_sg, K_SPLIT, stride_xm, stride_wn, stride_ym,
    ASYM: tl.constexpr, STATIC: tl.constexpr, HAS_BIAS: tl.constexpr, SPLIT_K: tl.constexpr,
    TAIL: tl.constexpr, BLOCK_N: tl.constexpr, GROUPS: tl.constexpr, ROWS: tl.constexpr,
    ASM: tl.constexpr, STAGES: tl.constexpr = 3, PDL: tl.constexpr = False,
    TRIGGER: tl.constexpr = False, GACC: tl.constexpr = False,
):  # fmt: skip
    """Program (n, s): y^T [BLOCK_N, ROWS] over K range s (x's int8 codes [M, K], its scale
    xs [M] or one scalar (STATIC), its zero points xz int32 [M] with ASYM; codes uint8 [N,
    K / 2], q + 8 two a byte, low nibble first; scales float32 [N, K / 32] at strides
    (stride_sn, stride_sg)). Rows past N read row N - 1 and rows of x past M read zeros (and
    zero points), so the loop has no masks; a step's GROUPS groups lie inside K (the
    launcher's step divides K). SPLIT_K > 1 stores float32 partials that the column tile's
    last program (TAIL: splitk.finish) or splitk.reduce_partials sums; xs and the bias come
    after the sum. PDL: launched with programmatic dependent launch after the kernel that
    wrote x, xs and xz, which it waits for before reading them. TRIGGER: splitk.trigger.
    STAGES: the loop's pipeline depth (the launch's num_stages). GACC: one float32
    accumulator a group, summed over the groups after the loop (the launcher's choice for
    symmetric x: ptxas then issues a step's MMAs ahead of their scaling)."""
    splitk.trigger(TRIGGER)
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rows_n = tl.minimum(offs_n, N - 1)
    offs_m = tl.arange(0, ROWS)
    mmask = offs_m < M
    STEP: tl.constexpr = GROUPS * 32
    k_lo, k_hi = splitk.k_range(pid_k, K, K_SPLIT, SPLIT_K)
    wrow = w_ptr + rows_n.to(tl.int64)[:, None] * stride_wn
    offs_b = tl.arange(0, STEP // 2)
    offs_k = tl.arange(0, STEP)
    offs_g = tl.arange(0, GROUPS)
    acc = tl.zeros((BLOCK_N, ROWS), dtype=tl.float32)
    acc3 = tl.zeros((GROUPS, BLOCK_N, ROWS) if GACC else (1, 1, 1), dtype=tl.float32)
    if PDL:
        gdc_wait()
    if ASYM:  # every group's B operand of z's row products: z [ROWS] down each column
        xz = tl.load(xz_ptr + offs_m, mask=mmask, other=0).to(tl.int8)
        zg = tl.broadcast_to(xz[None, None, :], (GROUPS, 32, ROWS))
    # the loop's own num_stages: with only the launch's, Triton 3.6 pipelined the codes and x
    # but loaded the scales in the step that uses them (ld.global, a DRAM latency a step:
    # 21.3 us against 18.4 at 4096 x 14336, M 16, H100, session 40)
    for k0 in tl.range(k_lo, k_hi, STEP, num_stages=STAGES):
        # [BLOCK_N, STEP / 2] code bytes, [ROWS, STEP] int8 x, [GROUPS, BLOCK_N] scales
        b = tl.load(wrow + (k0 // 2 + offs_b)[None, :], eviction_policy="evict_first")
        xt = tl.load(x_ptr + offs_m[:, None] * stride_xm + (k0 + offs_k)[None, :],
                     mask=mmask[:, None], other=0)  # fmt: skip
        s = tl.load(s_ptr + (k0 // 32 + offs_g)[:, None] * stride_sg + rows_n[None, :] * stride_sn)
        lo, hi = nibble_bytes(b, ASM)  # byte j of a row: codes 2j, 2j + 1
        w = tl.reshape(tl.join(lo, hi), (BLOCK_N, GROUPS, 32))
        w = tl.permute(w, (1, 0, 2))  # [GROUPS, BLOCK_N, 32]
        xg = tl.permute(tl.reshape(xt, (ROWS, GROUPS, 32)), (1, 2, 0))  # [GROUPS, 32, ROWS]
        base = tl.full((GROUPS, BLOCK_N, ROWS), IMMA_BASE, tl.int32)
        part = tl.dot(w, xg, base, out_dtype=tl.int32)
        if ASYM:  # Σ q (x - z) = Σ q x - z Σ q: both read from the same base, exact
            pz = tl.dot(w, zg, base, out_dtype=tl.int32)
            sums = part.to(tl.float32, bitcast=True) - pz.to(tl.float32, bitcast=True)
        else:
            sums = part.to(tl.float32, bitcast=True) - IMMA_BASE_VALUE  # each group's Σ q x
        if GACC:
            acc3 += sums * s[:, :, None]
        else:
            acc += tl.sum(sums * s[:, :, None], axis=0)
    if GACC:
        acc = tl.sum(acc3, axis=0)
    acc = tl.trans(acc)  # [ROWS, BLOCK_N]
    if SPLIT_K > 1:
        part_ptrs = p_ptr + pid_k.to(tl.int64) * M * N + offs_m.to(tl.int64)[:, None] * N
        tl.store(part_ptrs + offs_n[None, :], acc, mask=mmask[:, None] & (offs_n < N)[None, :])
        if TAIL:
            splitk.finish(p_ptr, c_ptr, p_ptr, s_ptr, xs_ptr, b_ptr, y_ptr, M, N, stride_ym,
                          SPLIT_K, TAIL, BLOCK_N)  # fmt: skip
    else:
        epilogue(acc, s_ptr, xs_ptr, b_ptr, y_ptr, offs_m, offs_n, M, N, stride_ym, False, True,
                 STATIC, HAS_BIAS)  # fmt: skip


def serves(xq: torch.Tensor, wq: torch.Tensor, w_scale: torch.Tensor) -> bool:
    """W4A8 at 2..MAX_ROWS rows on CUDA or the interpreter (zero points, if any, the
    caller's int32 [M]): int8 codes of x with unit inner stride, contiguous packed codes uint8
    [N, K / 2], float32 scales [N, K / 32] (any strides), K a multiple of 32."""
    m, k = xq.shape
    if backend_of(xq.device) is Backend.ROCM or not 2 <= m <= MAX_ROWS:
        return False
    return (
        xq.dtype == torch.int8
        and xq.stride(1) == 1
        and wq.dtype == torch.uint8
        and wq.is_contiguous()
        and wq.shape[1] * 2 == k
        and k % GROUP_SIZE == 0
        and w_scale.dtype == torch.float32
        and tuple(w_scale.shape) == (wq.shape[0], k // GROUP_SIZE)
    )


def late_trigger(m: int, n: int, k: int, device: torch.device) -> bool:
    """Whether the activation kernel before this kernel, launched with PDL at ``m`` rows of x
    [m, k] against n output columns, should let it start only as it ends (act_quant's
    ``late``): more than PDL_ROWS rows where TILE splits K."""
    if m <= PDL_ROWS:
        return False
    step = splitk.k_step(k, GROUP_SIZE, TILE["STEP_K"])
    n_prog = triton.cdiv(n, TILE["BLOCK_N"])
    return splitk.splits(backend_of(device), device, n_prog, k, step, TILE["per_sm"]) > 1


def w4a8_mma(
    xq: torch.Tensor,
    x_scale: torch.Tensor,
    wq: torch.Tensor,
    w_scale: torch.Tensor,
    bias: torch.Tensor | None,
    y: torch.Tensor,
    split: int | None = None,
    tile: dict | None = None,
    pdl: bool = False,
    x_zero: torch.Tensor | None = None,
) -> torch.Tensor:
    """y [M, N] = (xq [M, K] · W^T) * x_scale (+ bias), W symmetric int4 in groups of 32
    (the caller checked :func:`serves`). ``split`` forces split-K (tests), ``tile`` overrides
    TILE's keys (probes); ``pdl``: programmatic dependent launch after the activation kernel
    (the caller checked the GPU has it: _common.pdl, and launched that kernel with
    :func:`late_trigger`'s ``late``). ``x_zero``: int32 [M] zero points of
    asymmetric activations (each group's sum less z times its codes' sum, exact)."""
    m, k = xq.shape
    n = wq.shape[0]
    cfg = {"GACC": x_zero is None, **TILE, **(tile or {})}
    bn = cfg.pop("BLOCK_N")
    step = splitk.k_step(k, GROUP_SIZE, cfg.pop("STEP_K"))
    per_sm = cfg.pop("per_sm")
    n_prog = triton.cdiv(n, bn)
    p = splitk.plan(y, backend_of(xq.device), n_prog, k, step, split, per_sm=per_sm)
    epi = dict(row_scale=x_scale, bias=bias)
    launch(_w4a8_mma_kernel, (n_prog, p.split),
        xq, wq, w_scale, x_scale, x_zero if x_zero is not None else x_scale,
        bias if bias is not None else w_scale, y, p.partials, p.counter_arg(), m, n, k,
        w_scale.stride(0), w_scale.stride(1), p.k_split, xq.stride(0), wq.stride(0), y.stride(0),
        ASYM=x_zero is not None, STATIC=x_scale.dim() == 0, HAS_BIAS=bias is not None,
        SPLIT_K=p.split, TAIL=p.tail(splitk.epilogue_bits(**epi)), BLOCK_N=bn,
        GROUPS=step // GROUP_SIZE, ROWS=8 if m <= 8 else 16, ASM=not INTERPRET,
        STAGES=cfg["num_stages"], PDL=pdl, launch_pdl=pdl, TRIGGER=p.chain, **cfg,
    )  # fmt: skip
    p.finish(y, **epi)
    return y
