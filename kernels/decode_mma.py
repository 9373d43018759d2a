"""Decode (M <= 16) weight-only linears on the matrix units, the codes dequantized to bf16
two at a time.

Why: at M = 1 the FMA GEMVs (gemv.py, weight_only.py) spend three to four instructions per
weight (unpack, to float, zero point, FMA): int4 at K = N = 8192 is ~67 M codes, which an
H200 (132 SMs x 128 lanes x 1.98 GHz) issues in ~8 us at full rate, the same time as the
DRAM floor of its 34 MB, so neither hides the other (run 7a7c17: 28 us). Here the matrix
unit does the multiply-adds (x padded to 16 rows: the MMA's minimum, free at this size) and
the dequantization works on 32-bit registers holding two bf16 values:

- int4 (``WFMT`` 1): a byte's two nibbles are the consecutive codes k = 2j, 2j + 1, i.e. one
  bf16x2 register of the MMA's B operand. ``prmt`` spreads two bytes to the halves of a
  word, ``lop3`` ORs each nibble into the mantissa of bf16 128.0 (0x4300: 128 + q, exact),
  and one ``fma.rn.bf16x2`` subtracts 128 + z: q - z, an exact small integer. 1.5
  instructions a code. Each group's scale multiplies that group's float32 product tile
  after its MMA, so the weights are never rounded: (q - z) and x are exact in bf16 and the
  MMA accumulates their products in float32.
- int8 (``WFMT`` 0): ``prmt`` spreads two codes to the low bytes of a word's halves; one
  ``lop3`` writes each code's low seven bits into the mantissa of bf16 128.0 (128 + (q & 127)),
  another its sign bit into the mantissa of bf16 -128.0 (-128 or -256), and one
  ``fma.rn.bf16x2`` adds the two: q exactly. 2 instructions a code (an earlier float32 route,
  ``prmt`` into 2**23 and ``cvt`` to bf16, took 2.75 and ran 4-7 % slower: run of 2026-11-21,
  H200). The per-channel scale multiplies the accumulator once, at the end.
- fp8 e4m3fn (``WFMT`` 2, CUDA): ``prmt`` puts each code in the low byte of a half with its
  sign copied into the byte above; a shift by 4 and a mask leave sign, exponent and mantissa
  where bf16 keeps them, i.e. the bf16 of exponent e - 127 (subnormal codes included), and
  one multiply by 2**120 moves the exponent bias to e4m3's 7: exact for every finite code.
  The two NaN codes come out as 480; ``aoq.formats.float8.quantize_fp8`` writes them only in
  a row whose amax, hence scale, is NaN or infinite, so that output is not finite either way
  (the reference's NaN; here NaN, or +-inf for a row holding an infinite weight). Per-channel
  scale as int8. (The FMA GEMV of weight_only.py took 24.7 us at K = N = 8192;
  this kernel 21.1.)

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
and orientation at two groups a step (TILE): x's codes, less the row's zero point for
asymmetric activations (at most 255 in magnitude), are exact in bf16.

Under the interpreter (no inline assembly) the same values come from plain integer and
float32 arithmetic, and the dot upcasts to float32 (the interpreter's bf16 dot is wrong).
The low nibbles meet the even activations and the high nibbles the odd ones: x's tile is
split in two by a reshape, so the codes are never interleaved.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from aoq.kernels import splitk
from aoq.kernels._common import INTERPRET, WeightFormat, backend_of, epilogue, mma
from aoq.kernels._launch import launch

from aoq.backends import Backend

_INT4_ASM = tl.constexpr("""{
.reg .b32 t0, t1, u0, u1, one;
mov.b32 one, 0x3F803F80;
prmt.b32 t0, $4, 0, 0x4140;
prmt.b32 t1, $4, 0, 0x4342;
lop3.b32 u0, t0, 0x000F000F, 0x43004300, 0xea;
lop3.b32 u1, t1, 0x000F000F, 0x43004300, 0xea;
fma.rn.bf16x2 $0, u0, one, $5;
fma.rn.bf16x2 $1, u1, one, $5;
shr.b32 t0, t0, 4;
shr.b32 t1, t1, 4;
lop3.b32 u0, t0, 0x000F000F, 0x43004300, 0xea;
lop3.b32 u1, t1, 0x000F000F, 0x43004300, 0xea;
fma.rn.bf16x2 $2, u0, one, $5;
fma.rn.bf16x2 $3, u1, one, $5;
}""")
"""Four bytes ($4) -> low nibbles (two words, $0 $1) and high nibbles ($2 $3), each code
minus 128 + z ($5: -(128 + z) in both halves)."""

_INT8_ASM = tl.constexpr("""{
.reg .b32 h0, h1, m0, m1, c0, c1, one;
mov.b32 one, 0x3F803F80;
prmt.b32 h0, $2, 0, 0x4140;
prmt.b32 h1, $2, 0, 0x4342;
lop3.b32 m0, h0, 0x007F007F, 0x43004300, 0xea;
lop3.b32 m1, h1, 0x007F007F, 0x43004300, 0xea;
lop3.b32 c0, h0, 0x00800080, 0xC300C300, 0xea;
lop3.b32 c1, h1, 0x00800080, 0xC300C300, 0xea;
fma.rn.bf16x2 $0, m0, one, c0;
fma.rn.bf16x2 $1, m1, one, c1;
}""")
"""Four int8 codes ($2) -> four bf16 (two words, the first code in the low half)."""

_FP8_ASM = tl.constexpr("""{
.reg .b32 h0, h1, big, nz;
mov.b32 big, 0x7B807B80;
mov.b32 nz, 0x80008000;
prmt.b32 h0, $2, 0, 0x9180;
prmt.b32 h1, $2, 0, 0xB3A2;
shl.b32 h0, h0, 4;
shl.b32 h1, h1, 4;
and.b32 h0, h0, 0x87F087F0;
and.b32 h1, h1, 0x87F087F0;
fma.rn.bf16x2 $0, h0, big, nz;
fma.rn.bf16x2 $1, h1, big, nz;
}""")
"""Four float8 e4m3fn codes ($2) -> four bf16 (big: 2**120 in both halves; nz: -0.0)."""


@triton.jit
def _int4_codes(b, z, ASM: tl.constexpr):
    """uint8 [R, C] bytes, int32 [R] zero points -> (q_lo - z, q_hi - z) as [R, C] tensors:
    bf16 from the assembly; float32 under the interpreter."""
    if ASM:
        zb = tl.broadcast_to((-128.0 - z.to(tl.float32)).to(tl.bfloat16)[:, None], b.shape)
        lo, hi = tl.inline_asm_elementwise(
            _INT4_ASM, "=r,=r,=r,=r,r,r,r", [b, zb], dtype=(tl.bfloat16, tl.bfloat16),
            is_pure=True, pack=4,
        )  # fmt: skip
    else:
        p = b.to(tl.int32)
        zf = z.to(tl.float32)[:, None]
        lo = (p & 0xF).to(tl.float32) - zf  # small integers: exact in bf16 too
        hi = (p >> 4).to(tl.float32) - zf
    return lo, hi


@triton.jit
def _byte_codes(q, WFMT: tl.constexpr, ASM: tl.constexpr):
    """[R, C] int8 codes (WFMT 0) or float8 e4m3fn bits as uint8 (WFMT 2) -> their values:
    bf16 from the assembly; float32 under the interpreter."""
    if ASM:
        w = tl.inline_asm_elementwise(
            _FP8_ASM if WFMT == 2 else _INT8_ASM, "=r,=r,r", [q], dtype=tl.bfloat16,
            is_pure=True, pack=4,
        )  # fmt: skip
    elif WFMT == 2:
        w = q.to(tl.float8e4nv, bitcast=True).to(tl.float32)
    else:
        w = q.to(tl.float32)
    return w


@triton.jit
def _group_params(s_ptr, z_ptr, srow, nmask, k0, k_hi, stride_sg, WFMT: tl.constexpr,
                  GROUP_SIZE: tl.constexpr):  # fmt: skip
    """Scales [BLOCK_N] and zero points (WFMT 1; 3: 8) of the group at k0 (``srow``: each
    row's offset; ``stride_sg``: the groups' stride, 1 or N); zeros from k_hi on."""
    m = nmask & (k0 < k_hi)
    g = (k0 // GROUP_SIZE) * stride_sg  # < 2**31: the scale tensor has fewer elements
    s = tl.load(s_ptr + srow + g, mask=m, other=0.0)
    if WFMT == 1:
        z = tl.load(z_ptr + srow + g, mask=m, other=0).to(tl.int32)
    else:
        z = tl.full(srow.shape, 8, tl.int32)
    return s, z


@triton.jit
def _step_params(s_ptr, z_ptr, srow, nmask, k0, k_hi, stride_sg, WFMT: tl.constexpr,
                 GROUP_SIZE: tl.constexpr, GROUPS: tl.constexpr):  # fmt: skip
    """The scales and zero points of the step at k0, for PREF: GROUPS (1, 2 or 4) pairs,
    returned as four (a step of fewer groups repeats its first; nothing reads the copies)."""
    s0, z0 = _group_params(s_ptr, z_ptr, srow, nmask, k0, k_hi, stride_sg, WFMT, GROUP_SIZE)
    s1, z1, s2, z2, s3, z3 = s0, z0, s0, z0, s0, z0
    if GROUPS > 1:
        s1, z1 = _group_params(s_ptr, z_ptr, srow, nmask, k0 + GROUP_SIZE, k_hi, stride_sg,
                               WFMT, GROUP_SIZE)  # fmt: skip
    if GROUPS > 2:
        s2, z2 = _group_params(s_ptr, z_ptr, srow, nmask, k0 + 2 * GROUP_SIZE, k_hi,
                               stride_sg, WFMT, GROUP_SIZE)  # fmt: skip
        s3, z3 = _group_params(s_ptr, z_ptr, srow, nmask, k0 + 3 * GROUP_SIZE, k_hi,
                               stride_sg, WFMT, GROUP_SIZE)  # fmt: skip
    return s0, z0, s1, z1, s2, z2, s3, z3


@triton.jit
def _decode_mma_kernel(
    x_ptr, w_ptr, s_ptr, z_ptr, xs_ptr, xz_ptr, b_ptr, y_ptr, p_ptr, c_ptr,
    M, N, K, stride_sn, stride_sg, K_SPLIT, stride_xm, stride_wn, stride_ym,
    WFMT: tl.constexpr, GROUP_SIZE: tl.constexpr, GROUPS: tl.constexpr, XQ: tl.constexpr,
    XZ: tl.constexpr, STATIC: tl.constexpr, HAS_BIAS: tl.constexpr, SPLIT_K: tl.constexpr,
    TAIL: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, ASM: tl.constexpr,
    UPCAST: tl.constexpr, WT: tl.constexpr = False, PREF: tl.constexpr = False,
):  # fmt: skip
    """Program (n, s): outputs [16, BLOCK_N] over K range s. int4 (WFMT 1: zero points from
    z_ptr; 3: symmetric, q + 8 stored): GROUPS quantization groups a step; int8 (WFMT 0) and
    fp8 (2): per-channel scales. XQ: x holds int8 codes (W4A8), less the row's zero point
    xz (XZ: asymmetric activations; -255..255), exact in bf16, so a group's products sum
    exactly in float32; scaled by xs per row (STATIC: one scalar) at the end. SPLIT_K > 1
    stores float32 partials, which the last program of the column tile (TAIL,
    splitk.finish) or splitk.reduce_partials sums, then applies int8's channel scale, xs
    and the bias."""
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_m = tl.arange(0, 16)
    nmask = offs_n < N
    mmask = offs_m < M
    xrows = x_ptr + offs_m.to(tl.int64)[:, None] * stride_xm
    acc = tl.zeros((16, BLOCK_N), dtype=tl.float32)
    acc_t = tl.zeros((BLOCK_N, 16), dtype=tl.float32)  # WT: the weights are the MMA's A
    k_lo = pid_k * K_SPLIT
    k_hi = tl.minimum(K, k_lo + K_SPLIT)
    if WFMT == 1 or WFMT == 3:
        offs_g = tl.arange(0, GROUP_SIZE)
        wrows = (
            w_ptr
            + offs_n.to(tl.int64)[:, None] * stride_wn
            + tl.arange(0, GROUP_SIZE // 2)[None, :]
        )
        srow = offs_n.to(tl.int64) * stride_sn
        if XZ:
            xz = tl.load(xz_ptr + offs_m, mask=mmask, other=0)[:, None]
        if PREF:  # a step's scales and zero points are loaded one step ahead
            tl.static_assert(GROUPS == 1 or GROUPS == 2 or GROUPS == 4, "PREF: 1, 2, 4 groups")
            s0n, z0n, s1n, z1n, s2n, z2n, s3n, z3n = _step_params(
                s_ptr, z_ptr, srow, nmask, k_lo, k_hi, stride_sg, WFMT, GROUP_SIZE, GROUPS
            )
        for k0 in range(k_lo, k_hi, BLOCK_K):
            if PREF:
                s0, z0, s1, z1, s2, z2, s3, z3 = s0n, z0n, s1n, z1n, s2n, z2n, s3n, z3n
                s0n, z0n, s1n, z1n, s2n, z2n, s3n, z3n = _step_params(
                    s_ptr, z_ptr, srow, nmask, k0 + BLOCK_K, k_hi, stride_sg, WFMT, GROUP_SIZE,
                    GROUPS,
                )  # fmt: skip
            for j in tl.static_range(GROUPS):
                kg = k0 + j * GROUP_SIZE
                if not PREF:
                    s_cur, z_cur = _group_params(s_ptr, z_ptr, srow, nmask, kg, k_hi, stride_sg,
                                                 WFMT, GROUP_SIZE)  # fmt: skip
                elif j == 0:
                    s_cur, z_cur = s0, z0
                elif j == 1:
                    s_cur, z_cur = s1, z1
                elif j == 2:
                    s_cur, z_cur = s2, z2
                else:
                    s_cur, z_cur = s3, z3
                xt = tl.load(xrows + (kg + offs_g)[None, :], mask=mmask[:, None], other=0)
                if XZ:
                    xt = xt.to(tl.int32) - xz
                if XQ:  # (the interpreter's int8 -> bf16 conversion is not exact)
                    xt = xt.to(tl.float32 if UPCAST else tl.bfloat16)
                xe, xo = tl.split(tl.reshape(xt, (16, GROUP_SIZE // 2, 2)))
                b = tl.load(wrows + kg // 2, mask=nmask[:, None], other=0)
                lo, hi = _int4_codes(b, z_cur, ASM)
                if not UPCAST:
                    lo, hi = lo.to(tl.bfloat16), hi.to(tl.bfloat16)
                if WT:
                    part = mma(lo, tl.trans(xe), tl.zeros((BLOCK_N, 16), dtype=tl.float32),
                               UPCAST, "ieee")  # fmt: skip
                    part = mma(hi, tl.trans(xo), part, UPCAST, "ieee")
                    acc_t += part * s_cur[:, None]
                else:
                    part = mma(xe, tl.trans(lo), tl.zeros((16, BLOCK_N), dtype=tl.float32),
                               UPCAST, "ieee")  # fmt: skip
                    part = mma(xo, tl.trans(hi), part, UPCAST, "ieee")
                    acc += part * s_cur[None, :]
    else:
        if WFMT == 2:  # float8 codes read as their bytes (the conversion is ours)
            w_ptr = w_ptr.to(tl.pointer_type(tl.uint8))
        offs_k0 = tl.arange(0, BLOCK_K)
        wrows = w_ptr + offs_n.to(tl.int64)[:, None] * stride_wn + offs_k0[None, :]
        for k0 in range(k_lo, k_hi, BLOCK_K):
            xt = tl.load(xrows + (k0 + offs_k0)[None, :], mask=mmask[:, None], other=0.0)
            q = tl.load(wrows + k0, mask=nmask[:, None], other=0)
            w = _byte_codes(q, WFMT, ASM)
            if not UPCAST:
                w = w.to(tl.bfloat16)
            if WT:
                acc_t = mma(w, tl.trans(xt), acc_t, UPCAST, "ieee")
            else:
                acc = mma(xt, tl.trans(w), acc, UPCAST, "ieee")
    if WT:
        acc = tl.trans(acc_t)
    if SPLIT_K > 1:
        part_ptrs = p_ptr + pid_k.to(tl.int64) * M * N + offs_m.to(tl.int64)[:, None] * N
        tl.store(part_ptrs + offs_n[None, :], acc, mask=mmask[:, None] & nmask[None, :])
        if TAIL:
            splitk.finish(p_ptr, c_ptr, p_ptr, s_ptr, xs_ptr, b_ptr, y_ptr, M, N, stride_ym,
                          SPLIT_K, TAIL, BLOCK_N)  # fmt: skip
    else:
        epilogue(acc, s_ptr, xs_ptr, b_ptr, y_ptr, offs_m, offs_n, M, N, stride_ym,
                 WFMT == 0 or WFMT == 2, XQ, STATIC, HAS_BIAS)  # fmt: skip


TILE = {
    WeightFormat.UINT4: {"BLOCK_N": 64, "STEP_K": 128, "num_warps": 2, "num_stages": 3,
                         "per_sm": 7, "WT": True, "PREF": True},
    WeightFormat.INT4_SYM: {"BLOCK_N": 64, "STEP_K": 64, "num_warps": 2, "num_stages": 3,
                            "per_sm": 10, "WT": True, "PREF": True},
    WeightFormat.INT8: {"BLOCK_N": 32, "STEP_K": 256, "num_warps": 2, "num_stages": 4,
                        "per_sm": 4, "WT": True},
    WeightFormat.FP8: {"BLOCK_N": 64, "STEP_K": 128, "num_warps": 2, "num_stages": 4,
                       "per_sm": 4, "WT": True},
}  # fmt: skip
"""Per weight format: outputs per program (BLOCK_N), K per loop step (int4: whole groups, at
least one), warps, pipeline depth, split-K programs per SM (splitk.split_k), orientation
(WT), scale prefetch (PREF). H200 graph replays at M 1 and 16 over 8192^2, 4096 x 14336,
14336 x 4096 (bench/NOTES.md, sessions 14 and 15; W4A8 at M 16, x quantized):
- UINT4: 20.2-20.9 us against 24.2-25.0 (4 warps, x as operand A); part-group steps lost.
- INT4_SYM (W4A8, 2 <= M <= 16, groups of 32): two groups a step from group-major scales,
  23.3-25.2 us against 35.3-38.2 (session 9's 128 x 128, 4 warps); row-major scales
  34.1-36.7; other tiles slower.
- INT8 / FP8: 19.3-21.2 / 19.4-21.0 us at M 1 against 19.5-21.3 / 19.4-21.2 (64 x 128 or
  64 x 256 on 4 warps); M 16 19.4-22.7 / 20.4-22.6 against 20.9-23.2 / 21.2-22.8."""


def serves(
    x: torch.Tensor,
    qdata: torch.Tensor,
    groups: int,
    wfmt: WeightFormat,
    scale: torch.Tensor | None = None,
    zero: torch.Tensor | None = None,
) -> bool:
    """M <= 16 rows of bf16 activations (int8 codes for W4A8's symmetric int4), contiguous;
    int4 groups of 32..256 (powers of two; aoq.tensors.int4.DECODE_MMA_GROUPS mirrors them);
    per-channel int8 or float8 e4m3fn with K a multiple of 16 (fp8 on CUDA, where its
    conversion is assembly, and the interpreter). int4 scales [N, G] (and zero points, with
    the same strides) row-major or group-major."""
    if scale is not None and scale.dim() == 2 and scale.shape[1] > 1:
        if scale.stride() not in ((scale.shape[1], 1), (1, scale.shape[0])):
            return False
        if zero is not None and zero.stride() != scale.stride():
            return False
    m, k = x.shape
    xq = wfmt is WeightFormat.INT4_SYM
    if x.dtype != (torch.int8 if xq else torch.bfloat16) or m > 16:
        return False
    if not (qdata.is_contiguous() and x.stride(1) == 1):
        return False
    if wfmt in (WeightFormat.UINT4, WeightFormat.INT4_SYM):
        return k // groups in (32, 64, 128, 256) and k % groups == 0
    if wfmt is WeightFormat.FP8:
        if qdata.dtype != torch.float8_e4m3fn or backend_of(x.device) is Backend.ROCM:
            return False
    elif wfmt is not WeightFormat.INT8:
        return False
    return groups == 1 and k % 16 == 0


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
) -> None:
    """Launch the kernel (the caller checked :func:`serves`): y = x W^T (+ bias), W from
    ``qdata`` (uint8 int4 pairs, int8 or float8 e4m3fn) with ``scale`` [N, groups] (and ``zero`` for
    UINT4); INT4_SYM takes int8 ``x``, its ``x_scale`` ([M] or [] static) and, for asymmetric
    activations, ``x_zero`` (int32 [M]). ``split``
    forces split-K; ``tile`` overrides TILE (benchmarks)."""
    m, k = x.shape
    n = qdata.shape[0]
    cfg = {**TILE[wfmt], **(tile or {})}
    bn = cfg.pop("BLOCK_N")
    want = cfg.pop("STEP_K")
    per_sm = cfg.pop("per_sm", 4)
    if cfg.get("WT") and cfg["num_warps"] >= 4:
        raise ValueError(
            "WT (the weights as the MMA's A operand) needs fewer than 4 warps: with 4, Triton "
            "3.6 picks wgmma, whose sums came out wrong (H200, BLOCK_N 128)"
        )
    per_channel = wfmt in (WeightFormat.INT8, WeightFormat.FP8)
    gs = 16 if per_channel else k // groups
    bk = splitk.k_step(k, gs, want)
    cfg["PREF"] = cfg.get("PREF", False) and bk // gs in (1, 2, 4)
    backend = backend_of(x.device)
    n_prog = triton.cdiv(n, bn)
    p = splitk.plan(y, backend, n_prog, k, bk, split, per_sm=per_sm)
    xq = x_scale is not None
    epi = dict(col_scale=scale if per_channel else None, row_scale=x_scale, bias=bias)
    launch(_decode_mma_kernel, (n_prog, p.split),
        x, qdata, scale, zero if zero is not None else scale,
        x_scale if xq else scale, x_zero if x_zero is not None else scale,
        bias if bias is not None else scale, y, p.partials,
        p.counter_arg(),
        m, n, k, scale.stride(0) if scale.dim() == 2 else 1,
        scale.stride(1) if scale.dim() == 2 else 1, p.k_split, x.stride(0), qdata.stride(0),
        y.stride(0),
        WFMT=int(wfmt), GROUP_SIZE=gs, GROUPS=bk // gs, XQ=xq, XZ=x_zero is not None,
        STATIC=x_scale is not None and x_scale.dim() == 0, HAS_BIAS=bias is not None,
        SPLIT_K=p.split, TAIL=p.tail(splitk.epilogue_bits(**epi)), BLOCK_N=bn, BLOCK_K=bk,
        ASM=backend is Backend.CUDA, UPCAST=INTERPRET, **cfg,
    )  # fmt: skip
    p.finish(y, **epi)
