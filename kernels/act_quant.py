"""Activation quantization: int8 per token (symmetric, asymmetric, static) and float8 per row
or per tensor. One pass over x for the per-token modes (the row is read once into registers
when it fits, else twice: amax, then codes); per-tensor float8 adds a row-amax pass.

Bit-exact with aoq.formats: every division is an IEEE division (``tl.div_rn``, as
aoq.formats.arith.true_div), rounding is half to even (``rne``), and the clamps come first
so that the rounding sees the same values::

    int8 sym    s = max(amax / 127, TINY)                 q = clamp(rne(x / s), -127, 127)
    int8 asym   s = max((hi - lo) / 255, TINY)            z = clamp(rne(-lo / s - 128), -128, 127)
                q = clamp(rne(x / s) + z, -128, 127)      (lo = min(min x, 0), hi = max(max x, 0))
    int8 static q = clamp(rne(x / act_scale), -127, 127)
    fp8         s = max(amax / FMAX, TINY)                q = cast_rne(clamp(x / s, -FMAX, FMAX))

Ops (namespace ``aoq``): ``quantize_int8_act(x, mode, act_scale) -> (q, scale, zero)`` and
``quantize_fp8_act(x, per_row, fp8_dtype) -> (q, scale)``; CPU runs the reference.
"""

from __future__ import annotations

import enum
import os

import torch
import triton
import triton.language as tl
from aoq.kernels._common import (
    FLOAT_DTYPES,
    INTERPRET,
    TINY,
    TINY_F32,
    backend_of,
    check_2d,
    out_dtype_for,
    pdl,
    rne,
)
from aoq.kernels._launch import launch
from aoq.kernels.act_amax import _row_amax_kernel, _tensor_scale_kernel
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

from aoq.formats import affine, float8

INTERPRET_FLAG = tl.constexpr(INTERPRET)  # kernels read globals only as constexprs
ACT_PDL = os.environ.get("AOQ_ACT_PDL", "1") != "0"
"""Decode's activation kernel takes programmatic dependent launch where :func:`_act_pdl` says:
placed while the kernel before it finishes, it waits for it (``griddepcontrol.wait``) before
reading or writing anything, so the bits are the plain launch's. ``AOQ_ACT_PDL=0``: plain."""
ACT_PDL_ROWS = 4
"""The most rows of x whose activation kernel takes PDL when it triggers the decode at its
start: 0.1-0.9 µs less a call at M 1 for W4A8, W8A8 and fp8 row on an H100 and an H200, 0-0.4
at M 4, slower at M 16 where K is split (bench/NOTES.md, session 42). With ``late`` (the
decode placed as this kernel ends) it takes PDL at any rows (session 43)."""


def _act_pdl(x: torch.Tensor, trigger: bool, late: bool = False) -> bool:
    """Whether this activation launch (int8 of every mode, fp8 per row) takes PDL: ACT_PDL on,
    the decode after it takes PDL (``trigger``), at most ACT_PDL_ROWS rows unless ``late``, and
    the GPU has it."""
    return ACT_PDL and trigger and (late or x.shape[0] <= ACT_PDL_ROWS) and pdl(x.device)


class ActMode(enum.IntEnum):
    """Activation quantization of one launch (an int in the op schema)."""

    INT8_SYM = 0
    INT8_ASYM = 1
    INT8_STATIC = 2
    FP8 = 3
    """float8 with the scale computed per row (or given, for the per-tensor second pass)."""


@triton.jit
def _scale_zero(lo, hi, MODE: tl.constexpr, QMAX: tl.constexpr):
    """Per-row (scale, zero point as float) from the row's min/max (both clamped through 0)."""
    if MODE == 1:
        s = tl.maximum(tl.div_rn(hi - lo, 255.0), TINY_F32)
        z = tl.minimum(tl.maximum(rne(tl.div_rn(-lo, s) - 128.0), -128.0), 127.0)
    else:
        s = tl.maximum(tl.div_rn(tl.maximum(hi, -lo), QMAX), TINY_F32)
        z = tl.zeros_like(s)
    return s, z


@triton.jit
def div_by_row(x, s, RECIP: tl.constexpr):
    """x / s rounded to nearest even (IEEE division) for x [BLOCK_M, BLOCK_K] float32 and
    s [BLOCK_M]. RECIP: by one division per row instead of one per element (a division is
    ~10 instructions and a branch; this is 3): y = RN(1/s), q = RN(x * y) is within an ulp
    of x / s, the residual x - s * q is exact in an FMA, and RN(q + residual * y) is the
    correctly rounded quotient (Markstein's theorem; quotients below 2^-126, where it does
    not hold, round to code 0 in int8 and float8 either way). Not under the interpreter,
    whose fma rounds twice."""
    if RECIP:
        y = tl.div_rn(1.0, s)[:, None]
        q = x * y
        return tl.fma(tl.fma(-s[:, None], q, x), y, q)
    return tl.div_rn(x, s[:, None])


@triton.jit
def _codes(x, s, z, q_dtype, MODE: tl.constexpr, QMAX: tl.constexpr):
    """x [BLOCK_M, BLOCK_K] -> codes, with s and z [BLOCK_M]."""
    v = div_by_row(x.to(tl.float32), s, not INTERPRET_FLAG)
    if MODE == 3:
        q = tl.minimum(tl.maximum(v, -QMAX), QMAX).to(q_dtype, fp_downcast_rounding="rtne")
    elif MODE == 1:
        v = rne(tl.minimum(tl.maximum(v, -512.0), 512.0)) + z[:, None]
        q = tl.minimum(tl.maximum(v, -128.0), 127.0).to(tl.int8)
    else:
        q = rne(tl.minimum(tl.maximum(v, -QMAX), QMAX)).to(tl.int8)
    return q


@triton.jit
def _stored(x, s, z, out_dtype, MODE: tl.constexpr, QMAX: tl.constexpr, QDQ: tl.constexpr):
    """What _act_quant_kernel stores: the codes, or (QDQ, int8 modes) their values in the
    output's dtype: (q - z) * s in float32, rounded once (kernels/act_qdq.py)."""
    if QDQ:
        q = _codes(x, s, z, tl.int8, MODE, QMAX).to(tl.float32)
        v = ((q - z[:, None]) * s[:, None]).to(out_dtype)
    else:
        v = _codes(x, s, z, out_dtype, MODE, QMAX)
    return v


@triton.jit
def _act_quant_kernel(
    x_ptr, q_ptr, s_ptr, z_ptr, given_ptr, M, K, stride_xm, stride_qm,
    MODE: tl.constexpr, GIVEN: tl.constexpr, QMAX: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr, ONE_TILE: tl.constexpr,
    REVERSE: tl.constexpr = False, QDQ: tl.constexpr = False, TRIGGER: tl.constexpr = False,
    PDL: tl.constexpr = False, LATE: tl.constexpr = False,
):  # fmt: skip
    """Quantize BLOCK_M rows. GIVEN: the scale is the float32 scalar at given_ptr (static
    int8, or the per-tensor float8 scale from the amax pass). ONE_TILE: K <= BLOCK_K, the
    rows are read once and kept in registers. REVERSE: the last rows first (the per-tensor
    second pass: the amax pass read them last, so part of them is still in L2). QDQ: the
    codes' values in q's dtype instead of the codes. TRIGGER (sm90 and later): let a kernel
    launched after this one with programmatic dependent launch start now (it waits for this
    one's results with griddepcontrol.wait; _common.pdl says which GPUs have it); LATE: only
    after this program's stores are issued. PDL: this one was launched that way (ACT_PDL),
    and waits for the kernel before it first."""
    if TRIGGER and not LATE:
        gdc_launch_dependents()
    if PDL:  # launched with programmatic dependent launch: the kernel before it first
        gdc_wait()
    pid = tl.program_id(0)
    if REVERSE:
        pid = tl.num_programs(0) - 1 - pid
    offs_m = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    mmask = offs_m < M
    x_rows = x_ptr + offs_m.to(tl.int64)[:, None] * stride_xm
    q_rows = q_ptr + offs_m.to(tl.int64)[:, None] * stride_qm
    q_dtype = q_ptr.dtype.element_ty
    if ONE_TILE:
        offs_k = tl.arange(0, BLOCK_K)
        mask = mmask[:, None] & (offs_k < K)[None, :]
        x = tl.load(x_rows + offs_k[None, :], mask=mask, other=0.0).to(tl.float32)
        if GIVEN:
            s = tl.zeros((BLOCK_M,), tl.float32) + tl.load(given_ptr)
            z = tl.zeros((BLOCK_M,), tl.float32)
        elif MODE == 1:
            lo = tl.minimum(tl.min(x, axis=1), 0.0)
            hi = tl.maximum(tl.max(x, axis=1), 0.0)
            s, z = _scale_zero(lo, hi, MODE, QMAX)
        else:  # symmetric: one reduction, max |x| = max(max x, -min x)
            hi = tl.max(tl.abs(x), axis=1)
            s, z = _scale_zero(-hi, hi, MODE, QMAX)
        tl.store(q_rows + offs_k[None, :], _stored(x, s, z, q_dtype, MODE, QMAX, QDQ), mask=mask)
    else:
        if GIVEN:
            s = tl.zeros((BLOCK_M,), tl.float32) + tl.load(given_ptr)
            z = tl.zeros((BLOCK_M,), tl.float32)
        else:
            # element-wise extremes, reduced once after the loop: reducing every tile into
            # a loop-carried row value crashed Triton 3.6 for float32 x (asymmetric, K past
            # one tile: TritonGPUOptimizeThreadLocality, "loopResult.hasOneUse()")
            lo = tl.zeros((BLOCK_M, BLOCK_K), tl.float32)
            hi = tl.zeros((BLOCK_M, BLOCK_K), tl.float32)
            for k0 in range(0, K, BLOCK_K):
                offs_k = k0 + tl.arange(0, BLOCK_K)
                mask = mmask[:, None] & (offs_k < K)[None, :]
                x = tl.load(x_rows + offs_k[None, :], mask=mask, other=0.0).to(tl.float32)
                lo = tl.minimum(lo, x)
                hi = tl.maximum(hi, x)
            s, z = _scale_zero(tl.min(lo, axis=1), tl.max(hi, axis=1), MODE, QMAX)
        for k0 in range(0, K, BLOCK_K):
            offs_k = k0 + tl.arange(0, BLOCK_K)
            mask = mmask[:, None] & (offs_k < K)[None, :]
            x = tl.load(x_rows + offs_k[None, :], mask=mask, other=0.0)
            tl.store(
                q_rows + offs_k[None, :], _stored(x, s, z, q_dtype, MODE, QMAX, QDQ), mask=mask
            )
    if not GIVEN:
        tl.store(s_ptr + offs_m, s, mask=mmask)
    elif MODE == 2 and tl.program_id(0) == 0:  # static int8: the scale, copied (never an alias)
        tl.store(s_ptr, tl.load(given_ptr))
    if MODE != 3:  # int8: every row's zero point (0 unless asymmetric), so no zeroed buffer
        tl.store(z_ptr + offs_m, z.to(tl.int32), mask=mmask)
    if TRIGGER and LATE:  # (before the program exits: 0.05-0.3 µs sooner, session 43)
        gdc_launch_dependents()


ONE_ROW_CAP = 16384
"""Features a program keeps in registers when there are many rows (64 a thread: 4 warps up
to 8192, 8 warps up to 16384). With 8192, a row of 14336 was read twice (two 8192-wide
tiles, amax then codes): fp8 per-row at M 4096, K 14336 took 77 us on an H100, 176 MB of
traffic at 2.3 TB/s against 2.7-2.9 TB/s at K 4096 and 8192 (bench.fp8_prefill, session
25)."""
FEW_ROWS = 16
"""Up to this many rows (decode), a row of up to 65536 features is read once: 64 values a
thread on up to 32 warps. One program a row cannot hide the latency of a second pass:
at M = 1, K = 14336 (two 8192-wide tiles read twice) the launch took ~6 us of a W4A8 decode
against ~2.5 at K = 8192 (H200, session 9)."""


def _blocks(m: int, k: int) -> tuple[int, int, int]:
    """(BLOCK_M, BLOCK_K, num_warps): a whole row per step up to ONE_ROW_CAP features (read
    once, kept in registers; more for FEW_ROWS), and at least ~4096 elements per program
    for wide rows of short K. 4 warps (up to 64 values a thread) for many rows: at
    8192 x 8192 on an H200, 8 warps took 6 % (int8 symmetric) and 9 % (asymmetric) longer,
    16 warps 13 % and 17 % (session 7 probe)."""
    cap = 1 << 16 if m <= FEW_ROWS else ONE_ROW_CAP
    bk = min(triton.next_power_of_2(max(k, 16)), cap)
    bm = max(1, min(4096 // bk, triton.next_power_of_2(max(m, 1))))
    return bm, bk, max(4, bk // 2048)


def quantize_int8_act_triton(
    x: torch.Tensor,
    mode: int,
    act_scale: torch.Tensor | None,
    trigger: bool = False,
    late: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Triton launcher of ``aoq::quantize_int8_act``: (q int8 [M, K], scale float32 [M] (a
    0-d copy of act_scale when static), zero int32 [M] (zeros unless asymmetric)).
    ``trigger``: the next kernel, launched with programmatic dependent launch, may start at
    once (the caller checked the GPU has it: _common.pdl); with ``late``, only as this
    kernel's programs end (w4a8_mma.late_trigger says where that is faster)."""
    check_2d("x", x, FLOAT_DTYPES)
    backend_of(x.device)
    m, k = x.shape
    amode = ActMode(mode)
    q = torch.empty((m, k), dtype=torch.int8, device=x.device)
    zero = torch.empty(m, dtype=torch.int32, device=x.device)  # the kernel writes every row's
    static = amode is ActMode.INT8_STATIC
    if static and (act_scale is None or act_scale.numel() != 1):
        raise ValueError("static int8 activations need a one-element float32 act_scale")
    given = act_scale.to(torch.float32) if static else None  # type: ignore[union-attr]
    # static: a 0-d copy of act_scale (written by the kernel; never an alias)
    scale = torch.empty(() if static else m, dtype=torch.float32, device=x.device)
    if m == 0 or k == 0:
        if given is not None:
            scale.copy_(given.reshape(()))
        return q, scale, zero.zero_()
    bm, bk, warps = _blocks(m, k)
    wait = _act_pdl(x, trigger, late)
    launch(_act_quant_kernel, (triton.cdiv(m, bm),),
        x, q, scale, zero, given if given is not None else scale, m, k, x.stride(0), q.stride(0),
        MODE=int(amode), GIVEN=static, QMAX=127.0,
        BLOCK_M=bm, BLOCK_K=bk, ONE_TILE=k <= bk, num_warps=warps, TRIGGER=trigger, LATE=late,
        PDL=wait, launch_pdl=wait,
    )  # fmt: skip
    return q, scale, zero


def quantize_fp8_act_triton(
    x: torch.Tensor, per_row: bool, fp8_dtype: torch.dtype, trigger: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Triton launcher of ``aoq::quantize_fp8_act``: (q [M, K] fp8, scale [M, 1] or [1]).
    ``trigger``: as quantize_int8_act_triton's (on the codes' launch, the last)."""
    check_2d("x", x, FLOAT_DTYPES)
    backend_of(x.device)
    fmax = float8.fp8_max(fp8_dtype)
    m, k = x.shape
    q = torch.empty((m, k), dtype=out_dtype_for(fp8_dtype), device=x.device)
    bm, bk, warps = _blocks(m, k)
    grid = (triton.cdiv(m, bm),)
    if per_row:
        scale = torch.empty((m, 1), dtype=torch.float32, device=x.device)
        if m and k:
            wait = _act_pdl(x, trigger)
            launch(_act_quant_kernel, grid,
                x, q, scale, scale, scale, m, k, x.stride(0), q.stride(0),
                MODE=int(ActMode.FP8), GIVEN=False, QMAX=fmax,
                BLOCK_M=bm, BLOCK_K=bk, ONE_TILE=k <= bk, num_warps=warps, TRIGGER=trigger,
                PDL=wait, launch_pdl=wait,
            )  # fmt: skip
        elif m:
            scale.fill_(TINY)
        return q.to(fp8_dtype), scale
    scale = torch.empty(1, dtype=torch.float32, device=x.device)
    if not (m and k):
        return q.to(fp8_dtype), scale.fill_(TINY)
    # row maxima, their maximum as the scale (one program), the codes: three launches and
    # fresh buffers only, so eager decode calls replay as a plan (aoq/plans.py); two when
    # one program holds every row (M = 1 at decode): it writes the scale itself
    if grid == (1,):
        launch(_row_amax_kernel, grid, x, scale, m, k, x.stride(0),
               BLOCK_M=bm, BLOCK_K=bk, QMAX=fmax, SCALE=True, num_warps=warps)  # fmt: skip
    else:
        amax = torch.empty(m, dtype=torch.float32, device=x.device)
        launch(_row_amax_kernel, grid, x, amax, m, k, x.stride(0),
               BLOCK_M=bm, BLOCK_K=bk, num_warps=warps)  # fmt: skip
        launch(_tensor_scale_kernel, (1,), amax, scale, m, QMAX=fmax, BLOCK=1024, num_warps=4)
    launch(_act_quant_kernel, grid,
        x, q, scale, scale, scale, m, k, x.stride(0), q.stride(0),
        MODE=int(ActMode.FP8), GIVEN=True, QMAX=fmax,
        BLOCK_M=bm, BLOCK_K=bk, ONE_TILE=k <= bk, REVERSE=True, num_warps=warps,
        TRIGGER=trigger,
    )  # fmt: skip
    return q.to(fp8_dtype), scale


# --- torch.library ----------------------------------------------------------------------------


@torch.library.custom_op("aoq::quantize_int8_act", mutates_args=(), device_types="cpu")
def quantize_int8_act(
    x: torch.Tensor, mode: int, act_scale: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Reference (aoq.formats.affine) on CPU; see quantize_int8_act_triton for the outputs."""
    amode = ActMode(mode)
    if amode is ActMode.INT8_SYM:
        q, s = affine.quantize_per_token_int8(x)
        return q, s, torch.zeros(x.shape[0], dtype=torch.int32)
    if amode is ActMode.INT8_ASYM:
        return affine.quantize_per_token_int8_asymmetric(x)
    if amode is ActMode.INT8_STATIC and act_scale is not None:
        scale = act_scale.reshape(()).to(torch.float32, copy=True)  # never an alias
        q = affine.quantize_static_int8(x, scale)
        return q, scale.clone(), torch.zeros(x.shape[0], dtype=torch.int32)
    raise ValueError(f"mode={mode} ({amode.name}) needs {'an act_scale' if mode == 2 else 'int8'}")


@quantize_int8_act.register_fake
def _(x, mode, act_scale):  # type: ignore[no-untyped-def]
    m = x.shape[0]
    scale = (
        x.new_empty((), dtype=torch.float32)
        if mode == 2
        else x.new_empty((m,), dtype=torch.float32)
    )
    return x.new_empty(x.shape, dtype=torch.int8), scale, x.new_empty((m,), dtype=torch.int32)


quantize_int8_act.register_kernel("cuda")(quantize_int8_act_triton)


@torch.library.custom_op("aoq::quantize_fp8_act", mutates_args=(), device_types="cpu")
def quantize_fp8_act(
    x: torch.Tensor, per_row: bool, fp8_dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """Reference (aoq.formats.float8.quantize_fp8) on CPU."""
    g = float8.Granularity.ROW if per_row else float8.Granularity.TENSOR
    return float8.quantize_fp8(x, g, fp8_dtype)


@quantize_fp8_act.register_fake
def _(x, per_row, fp8_dtype):  # type: ignore[no-untyped-def]
    shape = (x.shape[0], 1) if per_row else (1,)
    return x.new_empty(x.shape, dtype=fp8_dtype), x.new_empty(shape, dtype=torch.float32)


quantize_fp8_act.register_kernel("cuda")(quantize_fp8_act_triton)
