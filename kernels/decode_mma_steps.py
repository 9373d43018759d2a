"""decode_mma.py's main loop for the grouped weight formats (int4, W4A8, MX fp4 and fp8),
step by step: a step's scales and zero points (loaded one step ahead under PREF), its codes
assembled into bf16 pairs (bf16_codes.py), and the MMAs in either orientation (WT: the
weights as operand A). Split from the kernel file to keep each file readable; the kernel
and its launcher are in decode_mma.py."""

from __future__ import annotations

import triton
import triton.language as tl
from aoq.kernels._common import int4_cols, mma
from aoq.kernels.bf16_codes import (
    byte_codes,
    fp4_codes,
    int4_codes,
    mxfp8_codes,
    nibble_bytes,
)
from aoq.kernels.decode_mma_wide import _weights_mma, _wide_step  # noqa: F401 (re-exported)
from aoq.kernels.int4_zmma import int4_base_codes
from aoq.kernels.mx_dequant import e8m0_value
from aoq.kernels.nvfp4_codes import NVX_STEP, block_scales, nvfp4_codes, nvfp4_exact_codes

IMMA_BASE = tl.constexpr(0x49400000)
IMMA_BASE_VALUE = tl.constexpr(786432.0)
"""W4A8's integer MMA starts each group's int32 sums from the bits of the float32 1.5 * 2**19
(786432.0), whose ulp is 1/16: the MMA adds 16 S (S = Σ q x, |S| <= 256 * 8 * 128 = 2**18
for groups up to 256), so the bits read as a float32 are 786432 + S exactly (2**20 at the one
extreme, the next binade's first value). Less 786432.0 that is S, exact: no shift and no
int-to-float conversion (a conversion issues at a fraction of the float32 add and FMA rate:
the CUDA guide's throughput table), for every element of the [BLOCK_N, ROWS] tile every
group. The group's scale then multiplies S exactly as the shifted, converted int32 did, so
the bits are unchanged."""


@triton.jit
def _group_params(s_ptr, z_ptr, srow, nmask, k0, k_hi, stride_sg, WFMT: tl.constexpr,
                  GROUP_SIZE: tl.constexpr, ZW: tl.constexpr = False,
                  NVX: tl.constexpr = False):  # fmt: skip
    """Scales [BLOCK_N] (WFMT 4: E8M0 bytes as int32) and zero points (WFMT 1; 3: 8) of the
    group at k0 (``srow``: each row's offset; ``stride_sg``: the groups' stride, 1 or N);
    zeros from k_hi on."""
    m = nmask & (k0 < k_hi)
    g = (k0 // GROUP_SIZE) * stride_sg  # < 2**31: the scale tensor has fewer elements
    if WFMT == 9:  # NVFP4: the group's two blocks of 16, their float32 steps as (s, z)
        g = (k0 // 16) * stride_sg
        ts = NVX_STEP if NVX else tl.load(z_ptr)  # NVX: the tensor scale at the end
        s = block_scales(tl.load(s_ptr + srow + g, mask=m, other=0).to(tl.int32), ts)
        z = block_scales(tl.load(s_ptr + srow + g + stride_sg, mask=m, other=0).to(tl.int32), ts)
    else:
        s = tl.load(s_ptr + srow + g, mask=m, other=0)
        if WFMT == 1 and ZW:  # int32 words of four groups' zero points, a byte each
            w = tl.load(z_ptr + srow + (k0 // GROUP_SIZE // 4) * stride_sg, mask=m, other=0)
            z = (w >> ((k0 // GROUP_SIZE) % 4 * 8)) & 0xFF
        elif WFMT == 1:
            z = tl.load(z_ptr + srow + g, mask=m, other=0).to(tl.int32)
        else:
            z = tl.full(srow.shape, 8, tl.int32)
        if WFMT >= 4:  # E8M0 bytes
            s = s.to(tl.int32)
    return s, z


@triton.jit
def _step_params(s_ptr, z_ptr, srow, nmask, k0, k_hi, stride_sg, WFMT: tl.constexpr,
                 GROUP_SIZE: tl.constexpr, GROUPS: tl.constexpr,
                 ZW: tl.constexpr = False, NVX: tl.constexpr = False):  # fmt: skip
    """The scales and zero points of the step at k0, for PREF: GROUPS (1, 2 or 4) pairs,
    returned as four (a step of fewer groups repeats its first; nothing reads the copies)."""
    s0, z0 = _group_params(
        s_ptr, z_ptr, srow, nmask, k0, k_hi, stride_sg, WFMT, GROUP_SIZE, ZW, NVX
    )
    s1, z1, s2, z2, s3, z3 = s0, z0, s0, z0, s0, z0
    if GROUPS > 1:
        s1, z1 = _group_params(s_ptr, z_ptr, srow, nmask, k0 + GROUP_SIZE, k_hi, stride_sg,
                               WFMT, GROUP_SIZE, ZW, NVX)  # fmt: skip
    if GROUPS > 2:
        s2, z2 = _group_params(s_ptr, z_ptr, srow, nmask, k0 + 2 * GROUP_SIZE, k_hi,
                               stride_sg, WFMT, GROUP_SIZE, ZW, NVX)  # fmt: skip
        s3, z3 = _group_params(s_ptr, z_ptr, srow, nmask, k0 + 3 * GROUP_SIZE, k_hi,
                               stride_sg, WFMT, GROUP_SIZE, ZW, NVX)  # fmt: skip
    return s0, z0, s1, z1, s2, z2, s3, z3


@triton.jit
def _post_scaled_step(acc, acc_t, xt, b, s_cur, WFMT: tl.constexpr, ASM: tl.constexpr,
                      UPCAST: tl.constexpr, WT: tl.constexpr):  # fmt: skip
    """One block of MX 8-bit codes ``b`` (WFMT 5: e4m3 bits; 10: int8) with the block's scale
    on its float32 product tile, as int4's groups: the codes' own values (exact in bf16 and
    fp16: e4m3's, and int8's integers, its 2**-6 moved into the scale) on the MMA from zero,
    then times 2**(b - 127) (int8: 2**(b - 133); NaN for byte 255) in float32. The MMA sees
    each weight's value apart from a power of two, where the emulated path rounds the
    product to x's dtype first: the same weights wherever that product is a bf16 or fp16
    value in range (one-hot tests; the sums then differ only in float32 order), closer to
    the float64 oracle where it is not."""
    if WFMT == 10:  # int8 bits read from uint8 storage (the float path converts by type)
        b = b.to(tl.int8, bitcast=True)
    w = byte_codes(b, 2 if WFMT == 5 else 0, ASM)  # PTX: bf16, cast to fp16 below exactly
    if not UPCAST:
        w = w.to(xt.dtype)
    sf = e8m0_value(s_cur)
    if WFMT == 10:
        sf = sf * 0.015625  # (a power of two: exact, down to 2**-133)
    if WT:
        part = mma(w, tl.trans(xt), tl.zeros(acc_t.shape, dtype=tl.float32), UPCAST, "ieee")
        acc_t += part * sf[:, None]
    else:
        part = mma(xt, tl.trans(w), tl.zeros(acc.shape, dtype=tl.float32), UPCAST, "ieee")
        acc += part * sf[None, :]
    return acc, acc_t


INT8_BASE = tl.constexpr(0x4B400000)
INT8_BASE_VALUE = tl.constexpr(12582912.0)
"""XMX's integer MMA starts each block's int32 sums from the bits of the float32 1.5 * 2**23
(ulp 1): a block of int8 codes sums to |S| <= 256 * 128 * 128 = 2**22, so the bits read as a
float32 are 12582912 + S exactly (2**23 and 2**24 at the extremes, each its binade's first
value); less 12582912.0 that is S, without an int-to-float conversion (as IMMA_BASE)."""


@triton.jit
def _int8_block_step(acc, acc_t, xt, b, s_cur, xb, UPCAST: tl.constexpr, WT: tl.constexpr):
    """One block of MX int8 weight codes ``b`` (uint8 storage) against MX int8 activation
    codes ``xt`` (int8, XMX) whose block scale bytes are ``xb`` [ROWS]: the integer MMA
    sums the block exactly (INT8_BASE), then times 2**(sw - 133) and 2**(sx - 133) in float32,
    in that order (byte 255 on either side: NaN). The emulated path's x and weights are
    these codes times their powers of two, exact in bf16: the same block sums, the float32
    sums over blocks differing only in order (while the products are float32 normals)."""
    w = b.to(tl.int8, bitcast=True)
    sw = e8m0_value(s_cur) * 0.015625  # (powers of two: exact, down to 2**-133)
    sx = e8m0_value(xb.to(tl.int32)) * 0.015625
    if WT:
        part = mma(w, tl.trans(xt), tl.full(acc_t.shape, INT8_BASE, tl.int32), UPCAST, "ieee")
        acc_t += (part.to(tl.float32, bitcast=True) - INT8_BASE_VALUE) * sw[:, None] * sx[None, :]
    else:
        part = mma(xt, tl.trans(w), tl.full(acc.shape, INT8_BASE, tl.int32), UPCAST, "ieee")
        acc += (part.to(tl.float32, bitcast=True) - INT8_BASE_VALUE) * sw[None, :] * sx[:, None]
    return acc, acc_t


@triton.jit
def _nibble_step(acc, acc_t, xt, b, s_cur, z_cur, WFMT: tl.constexpr,
                 GROUP_SIZE: tl.constexpr, BIG: tl.constexpr, ASM: tl.constexpr,
                 UPCAST: tl.constexpr, WT: tl.constexpr, IMMA: tl.constexpr,
                 ZMMA: tl.constexpr = False, NVX: tl.constexpr = False,
                 CHAINS: tl.constexpr = 1, XZ: tl.constexpr = False, zop=None):  # fmt: skip
    """One group of two codes a byte. int4 sums the group apart and scales it; MX fp4 has
    the scale in the codes' values. IMMA (W4A8, int8 x): 16 q as int8 in k order on the
    integer MMA, its sums read back as float32 (IMMA_BASE: the same integers the bf16 path
    sums, exactly); with zero points (XZ) Σ q (x - z) = Σ q x - z Σ q, the second sum a dot
    of the same codes against ``zop`` (z down every column, int8, built once), both read
    from IMMA_BASE's bits, so their difference is exact (as w4a8_mma's). Otherwise bf16
    pairs, the low nibbles meeting x's even columns, the high ones its odd."""
    if IMMA:
        tl.static_assert(GROUP_SIZE <= 256, "IMMA_BASE holds the sums of groups up to 256")
        lo, hi = nibble_bytes(b, ASM)
        w = tl.reshape(tl.join(lo, hi), (b.shape[0], GROUP_SIZE))  # byte j: k = 2j, 2j + 1
        if WT:
            base = tl.full(acc_t.shape, IMMA_BASE, tl.int32)
            part = mma(w, tl.trans(xt), base, UPCAST, "ieee").to(tl.float32, bitcast=True)
            if XZ:
                part -= mma(w, zop, base, UPCAST, "ieee").to(tl.float32, bitcast=True)
            else:
                part -= IMMA_BASE_VALUE
            acc_t += part * s_cur[:, None]
        else:
            base = tl.full(acc.shape, IMMA_BASE, tl.int32)
            part = mma(xt, tl.trans(w), base, UPCAST, "ieee").to(tl.float32, bitcast=True)
            if XZ:
                part -= mma(zop, tl.trans(w), base, UPCAST, "ieee").to(tl.float32, bitcast=True)
            else:
                part -= IMMA_BASE_VALUE
            acc += part * s_cur[None, :]
    else:
        acc, acc_t = _pair_step(acc, acc_t, xt, b, s_cur, z_cur, WFMT, GROUP_SIZE, BIG, ASM,
                                UPCAST, WT, ZMMA, NVX, CHAINS)  # fmt: skip
    return acc, acc_t


@triton.jit
def _pair_step(acc, acc_t, xt, b, s_cur, z_cur, WFMT: tl.constexpr, GROUP_SIZE: tl.constexpr,
               BIG: tl.constexpr, ASM: tl.constexpr, UPCAST: tl.constexpr,
               WT: tl.constexpr, ZMMA: tl.constexpr = False,
               NVX: tl.constexpr = False, CHAINS: tl.constexpr = 1):  # fmt: skip
    """_nibble_step on bf16 pairs: the low nibbles of bytes ``b`` meet x's even columns,
    the high ones its odd columns. ZMMA (int4, WT): the codes as base + q and the zero
    point as a third operand, -(base + z) on every column (int4_zmma.int4_base_codes).
    CHAINS 2 (a probe; int4, WT, not ZMMA): the low and high nibbles' MMAs as two chains of
    their own, each scaled into the accumulator (half the dependent MMAs a group; another
    float32 order)."""
    xe, xo = tl.split(tl.reshape(xt, (xt.shape[0], GROUP_SIZE // 2, 2)))
    if WFMT == 9:  # NVFP4: s_cur, z_cur the two blocks' steps, rounded in float32
        # each byte column's block's step by a select (nvfp4_codes.py: a join and a reshape
        # of the two gave rows the next row's steps on an H100)
        half = tl.arange(0, GROUP_SIZE // 2)[None, :] < GROUP_SIZE // 4
        d = tl.where(half, s_cur[:, None], z_cur[:, None])
        if NVX:  # the steps e4m3 * 2**118: the codes' values exact (nvfp4_exact_codes)
            lo, hi = nvfp4_exact_codes(b, d, ASM)
        else:
            lo, hi = nvfp4_codes(b, d, ASM, xt.dtype == tl.float16)
    elif WFMT == 4:
        sbb = tl.broadcast_to(s_cur[:, None], b.shape)
        lo, hi = fp4_codes(b, sbb, BIG, ASM, xt.dtype == tl.float16)
    elif ZMMA:
        tl.static_assert(WFMT == 1 and WT, "ZMMA: int4 weight-only, the weights as operand A")
        lo, hi, zt = int4_base_codes(b, z_cur, ASM, xt.dtype == tl.float16)
        if not UPCAST:
            zt = zt.to(xt.dtype)
    else:
        lo, hi = int4_codes(b, z_cur, ASM, xt.dtype == tl.float16)
    if not UPCAST:
        lo, hi = lo.to(xt.dtype), hi.to(xt.dtype)
    if (WFMT == 4 or WFMT == 9) and WT:
        acc_t = mma(lo, tl.trans(xe), acc_t, UPCAST, "ieee")
        acc_t = mma(hi, tl.trans(xo), acc_t, UPCAST, "ieee")
    elif WFMT == 4 or WFMT == 9:
        acc = mma(xe, tl.trans(lo), acc, UPCAST, "ieee")
        acc = mma(xo, tl.trans(hi), acc, UPCAST, "ieee")
    elif WT and CHAINS == 2 and not ZMMA:  # (each chain scaled apart: Triton folds a dot
        # from zero added to another dot into one chain)
        plo = mma(lo, tl.trans(xe), tl.zeros(acc_t.shape, dtype=tl.float32), UPCAST, "ieee")
        phi = mma(hi, tl.trans(xo), tl.zeros(acc_t.shape, dtype=tl.float32), UPCAST, "ieee")
        acc_t += plo * s_cur[:, None]
        acc_t += phi * s_cur[:, None]
    elif WT:
        part = mma(lo, tl.trans(xe), tl.zeros(acc_t.shape, dtype=tl.float32), UPCAST, "ieee")
        part = mma(hi, tl.trans(xo), part, UPCAST, "ieee")
        if ZMMA == 1:
            part = mma(zt, tl.trans(xe), part, UPCAST, "ieee")
            part = mma(zt, tl.trans(xo), part, UPCAST, "ieee")
        elif ZMMA == 2:  # (probe) a chain of its own, added once
            zpart = mma(zt, tl.trans(xe), tl.zeros(acc_t.shape, dtype=tl.float32), UPCAST,
                        "ieee")  # fmt: skip
            part += mma(zt, tl.trans(xo), zpart, UPCAST, "ieee")
        acc_t += part * s_cur[:, None]
    else:
        part = mma(xe, tl.trans(lo), tl.zeros(acc.shape, dtype=tl.float32), UPCAST, "ieee")
        part = mma(xo, tl.trans(hi), part, UPCAST, "ieee")
        acc += part * s_cur[None, :]
    return acc, acc_t


@triton.jit
def _group_steps(
    acc, acc_t, xrows, wrows, s_ptr, z_ptr, srow, nmask, mmask, xz, xsrows, k_lo, k_hi, stride_sg,
    WFMT: tl.constexpr, GROUP_SIZE: tl.constexpr, GROUPS: tl.constexpr, XQ: tl.constexpr,
    XZ: tl.constexpr, BLOCK_K: tl.constexpr, ASM: tl.constexpr, UPCAST: tl.constexpr,
    WT: tl.constexpr, PREF: tl.constexpr, BIG: tl.constexpr, IMMA: tl.constexpr = False,
    LOOP_STAGES: tl.constexpr = 0, ZW: tl.constexpr = False, TILED: tl.constexpr = False,
    ALIGNED: tl.constexpr = False, TILE_B: tl.constexpr = 64, TILE_R: tl.constexpr = 64,
    KSTEP: tl.constexpr = 0, ZMMA: tl.constexpr = False, NVX: tl.constexpr = False,
    POST: tl.constexpr = False, XMX: tl.constexpr = False, TMA: tl.constexpr = False, trow=0,
    CHAINS: tl.constexpr = 1, WIDE: tl.constexpr = False,
):  # fmt: skip
    """The main loop of the grouped formats (int4, W4A8, MX) over K range [k_lo, k_hi):
    (acc, acc_t) plus this range's products. ``wrows``: each row's first code byte plus the
    group's byte offsets; ``srow``: each row's scale offset; BIG: MX fp4's second multiply.
    POST (MX fp8 e4m3; MX int8 always): the block scale on the product tile
    (:func:`_post_scaled_step`). XMX (MX int8): x holds MX int8 codes, ``xsrows`` each
    row's first block scale byte (:func:`_int8_block_step`). TMA (a probe; int4, TILED):
    ``wrows`` is a tensor descriptor over the tiled codes as rows of TILE_B bytes and
    ``trow`` the program's first row there (decode_mma's ``TMA``). WIDE (MX fp4 and fp8,
    NVFP4; ``wrows`` a step's bytes wide): :func:`_wide_step`."""
    if WIDE:
        tl.static_assert(WFMT >= 4 and WFMT != 6 and WFMT != 7, "WIDE: MX (not fp6), NVFP4")
        tl.static_assert(not (POST or TILED or XMX) and GROUPS <= 4, "WIDE: row-major codes")
    offs_g = tl.arange(0, GROUP_SIZE)
    zop = None
    if IMMA and XZ:  # the zero points' operand: z [ROWS] down each of the group's columns
        z8 = xz.to(tl.int8)  # [ROWS, 1]; z is an int8 value
        if WT:
            zop = tl.broadcast_to(tl.trans(z8), (GROUP_SIZE, z8.shape[0]))
        else:
            zop = tl.broadcast_to(z8, (z8.shape[0], GROUP_SIZE))
    if PREF:  # a step's scales and zero points are loaded one step ahead
        tl.static_assert(GROUPS == 1 or GROUPS == 2 or GROUPS == 4, "PREF: 1, 2, 4 groups")
        s0n, z0n, s1n, z1n, s2n, z2n, s3n, z3n = _step_params(
            s_ptr, z_ptr, srow, nmask, k_lo, k_hi, stride_sg, WFMT, GROUP_SIZE, GROUPS, ZW, NVX
        )
    kstep: tl.constexpr = KSTEP if KSTEP else BLOCK_K  # (KINT: a split's steps interleaved)
    for k0 in tl.range(k_lo, k_hi, kstep,
                       num_stages=LOOP_STAGES if LOOP_STAGES > 0 else None):  # fmt: skip
        if PREF:
            s0, z0, s1, z1, s2, z2, s3, z3 = s0n, z0n, s1n, z1n, s2n, z2n, s3n, z3n
            s0n, z0n, s1n, z1n, s2n, z2n, s3n, z3n = _step_params(
                s_ptr, z_ptr, srow, nmask, k0 + kstep, k_hi, stride_sg, WFMT, GROUP_SIZE,
                GROUPS, ZW, NVX,
            )  # fmt: skip
        if WIDE:
            if not PREF:
                s0, z0, s1, z1, s2, z2, s3, z3 = _step_params(
                    s_ptr, z_ptr, srow, nmask, k0, k_hi, stride_sg, WFMT, GROUP_SIZE, GROUPS,
                    ZW, NVX,
                )  # fmt: skip
            acc, acc_t = _wide_step(acc, acc_t, xrows, wrows, nmask, mmask, k0, s0, z0, s1, z1,
                                    s2, z2, s3, z3, WFMT, GROUP_SIZE, GROUPS, BLOCK_K, BIG, ASM,
                                    UPCAST, WT, NVX)  # fmt: skip
        for j in tl.static_range(0 if WIDE else GROUPS):
            kg = k0 + j * GROUP_SIZE
            if not PREF:
                s_cur, z_cur = _group_params(s_ptr, z_ptr, srow, nmask, kg, k_hi, stride_sg,
                                             WFMT, GROUP_SIZE, ZW, NVX)  # fmt: skip
            elif j == 0:
                s_cur, z_cur = s0, z0
            elif j == 1:
                s_cur, z_cur = s1, z1
            elif j == 2:
                s_cur, z_cur = s2, z2
            else:
                s_cur, z_cur = s3, z3
            xt = tl.load(xrows + (kg + offs_g)[None, :], mask=mmask[:, None], other=0)
            if XZ and not IMMA:  # (IMMA: a second dot against zop instead)
                xt = xt.to(tl.int32) - xz
            if XQ and not IMMA:  # (the interpreter's int8 -> bf16 conversion is not exact)
                xt = xt.to(tl.float32 if UPCAST else tl.bfloat16)
            if WFMT == 10 and XMX:  # MX int8 x MX int8: the integer MMA, both scales after
                b = tl.load(wrows + kg, mask=nmask[:, None], other=0)
                xb = tl.load(xsrows + kg // GROUP_SIZE, mask=mmask, other=127)
                acc, acc_t = _int8_block_step(acc, acc_t, xt, b, s_cur, xb, UPCAST, WT)
            elif WFMT == 10 or ((WFMT == 5) and POST):  # a byte a code, scaled after the MMA
                b = tl.load(wrows + kg, mask=nmask[:, None], other=0)
                acc, acc_t = _post_scaled_step(acc, acc_t, xt, b, s_cur, WFMT, ASM, UPCAST, WT)
            elif WFMT == 5 or WFMT == 8:  # MX fp8: a byte a code, the block scale in the values
                b = tl.load(wrows + kg, mask=nmask[:, None], other=0)
                sbb = tl.broadcast_to(s_cur[:, None], b.shape)
                w = mxfp8_codes(b, sbb, BIG, ASM, xt.dtype == tl.float16, WFMT == 8)
                acc, acc_t = _weights_mma(acc, acc_t, w, xt, UPCAST, WT)
            else:
                kb = kg // 2
                if ALIGNED and not TILED:  # (probe: decode_mma.TILE's ALIGNED, off)
                    # kg is a multiple of the group (every K range starts at a multiple of
                    # the step), so the group's codes are one run aligned to its length:
                    # sm90 then loads them 16 bytes at a time (cp.async 0x10, not two 0x8)
                    kb = tl.multiple_of(kb, GROUP_SIZE // 2)
                if TMA:  # the group's bytes of the step's tile (out of range rows: zeros)
                    tl.static_assert(WFMT == 1 and TILED, "TMA: int4 codes in tile order")
                    b = wrows.load([trow + (kb // TILE_B) * TILE_R, kb % TILE_B])
                else:
                    wp = wrows + int4_cols(kb, TILED, GROUP_SIZE // 2, TILE_B, TILE_R)
                    b = tl.load(wp, mask=nmask[:, None], other=0)
                acc, acc_t = _nibble_step(acc, acc_t, xt, b, s_cur, z_cur,
                                          WFMT, GROUP_SIZE, BIG, ASM, UPCAST, WT,
                                          IMMA, ZMMA, NVX, CHAINS, XZ, zop)  # fmt: skip
    return acc, acc_t
