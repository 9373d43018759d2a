"""The native MX GEMM: y = dequant(a) · dequant(b)ᵀ with E8M0 block scales along K, on the
block-scaled matrix instructions of the GPUs that have them, through ``tl.dot_scaled``.

    aoq::mx_mm(a, a_scale, b, b_scale, elem_a, elem_b, out_dtype) -> out_dtype [M, N]
        a        uint8 [M, K * bits / 8]  codes packed along K (aoq::mx_cast(x, .., dim=1))
        a_scale  uint8 [M, K / 32]        E8M0 bytes (0xFF: a NaN block)
        b        uint8 [N, K * bits / 8]  the weight's codes packed along K (MXTensor.qdata)
        b_scale  uint8 [N, K / 32]
    elements: fp8_e4m3, fp8_e5m2, fp4_e2m1 (tl.dot_scaled takes these; not fp6 or int8);
    blocks of 32 (OCP MX); products summed in float32.

Any strides: the backward GEMMs of MX training read their operands transposed (dim-0 casts).

What Triton 3.6 makes of tl.dot_scaled, per target (``python -m aoq.kernels.targets`` checks
it on every build; kernels/targets.py records the expectations):
    sm100   tcgen05.mma ... kind::mxf8f6f4 (fp8) / kind::mxf4 (fp4) .block_scale: native
    gfx950  v_mfma_scale_f32_*_f8f6f4: native
    sm89, sm90, sm80 (fp4 only; no fp8 there)   emulation: operands scaled and upcast to bf16,
            then mma.sync / wgmma bf16; the emulated path aoq already has is as good
    gfx90a, gfx942   no lowering ("LLVM ERROR: Unsupported DotScaleOp")
aoq runs this kernel only where the MMA is native (``native_mx_mm``); the op's CUDA
implementation elsewhere is the reference (dequantize, then one float32 matmul).

Interpreter: triton 3.6's interpreter has no tl.dot_scaled (its builder lacks the op and its
semantic layer fails on the format strings), so under TRITON_INTERPRET=1 the kernel takes its
DOT_SCALED=False branch, which dequantizes each tile in Triton (fp8 through the float8
types, fp4 nibbles by their formula, scales from their bits) and multiplies in float32: the
tiling, strides, packing and scale indexing are checked there; tl.dot_scaled itself only on a
GPU (sm89+: Triton's emulation; sm100: the hardware).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from aoq.kernels._common import FLOAT_DTYPES, INTERPRET, out_dtype_for
from aoq.kernels._launch import launch
from torch import Tensor

from aoq.formats.mx import MXElem, mx_dequantize, parse_choice, unpack_mx_codes

DOT_FORMATS = {MXElem.FP8_E4M3: "e4m3", MXElem.FP8_E5M2: "e5m2", MXElem.FP4_E2M1: "e2m1"}
NATIVE_ARCHS = {(10, 0), (10, 3)}
"""Compute capabilities whose MMA takes E8M0 block scales (B200 / GB200 sm100, B300 sm103)."""


def native_mx_mm(device: torch.device) -> bool:
    """Whether ``device`` has a block-scaled MMA that tl.dot_scaled uses (sm100-class)."""
    return (
        device.type == "cuda"
        and torch.version.hip is None
        and torch.cuda.get_device_capability(device) in NATIVE_ARCHS
    )


@triton.jit
def _dequant(codes, scale, FMT: tl.constexpr, ROWS: tl.constexpr, BLOCK_K: tl.constexpr):
    """Interpreter path: packed codes [ROWS, BLOCK_K / pack] uint8 and E8M0 bytes
    [ROWS, BLOCK_K / 32] -> float32 [ROWS, BLOCK_K]."""
    if FMT == "e2m1":
        c = tl.interleave(codes & 0xF, codes >> 4).to(tl.int32)  # low nibble first
        mag = c & 7  # 0 0.5 1 1.5 2 3 4 6: m < 2 -> m / 2, else (2 + m % 2) * 2^(m / 2 - 2)
        e = tl.maximum(mag >> 1, 1)
        v = ((mag & 1) + tl.where(mag >= 2, 2, 0)).to(tl.float32)
        v = v * ((e + 125) << 23).to(tl.float32, bitcast=True)  # * 2^(e - 2)
        v = tl.where((c & 8) != 0, -v, v)
    elif FMT == "e4m3":
        v = codes.to(tl.float8e4nv, bitcast=True).to(tl.float32)
    else:
        v = codes.to(tl.float8e5, bitcast=True).to(tl.float32)
    s = scale.to(tl.int32)
    sf = (tl.maximum(s, 1) << 23).to(tl.float32, bitcast=True)  # 2^(s - 127)
    sf = tl.where(s == 0, 5.877471754111438e-39, sf)  # 2^-127, a float32 subnormal
    sf = tl.where(s == 255, float("nan"), sf)
    v = tl.reshape(v, [ROWS, BLOCK_K // 32, 32]) * sf[:, :, None]
    return tl.reshape(v, [ROWS, BLOCK_K])


@triton.jit
def _mx_mm_kernel(
    a_ptr, as_ptr, b_ptr, bs_ptr, y_ptr,
    M, N, K,
    stride_am, stride_ak, stride_asm, stride_ask,
    stride_bn, stride_bk, stride_bsn, stride_bsk, stride_ym,
    FMT_A: tl.constexpr, FMT_B: tl.constexpr, DOT_SCALED: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    PA: tl.constexpr = 2 if FMT_A == "e2m1" else 1  # codes per byte along K
    PB: tl.constexpr = 2 if FMT_B == "e2m1" else 1
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mmask = (offs_m < M)[:, None]
    nmask = (offs_n < N)[None, :]
    a_rows = a_ptr + offs_m.to(tl.int64)[:, None] * stride_am
    b_cols = b_ptr + offs_n.to(tl.int64)[None, :] * stride_bn
    as_rows = as_ptr + offs_m.to(tl.int64)[:, None] * stride_asm
    bs_rows = bs_ptr + offs_n.to(tl.int64)[:, None] * stride_bsn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ka = k0 // PA + tl.arange(0, BLOCK_K // PA)
        a = tl.load(a_rows + ka[None, :] * stride_ak, mmask & (ka < K // PA)[None, :], other=0)
        kb = k0 // PB + tl.arange(0, BLOCK_K // PB)  # b as [K, N]: the dot's rhs
        b = tl.load(b_cols + kb[:, None] * stride_bk, (kb < K // PB)[:, None] & nmask, other=0)
        ks = k0 // 32 + tl.arange(0, BLOCK_K // 32)
        kmask = (ks < K // 32)[None, :]
        sa = tl.load(as_rows + ks[None, :] * stride_ask, mmask & kmask, other=127)
        sb = tl.load(bs_rows + ks[None, :] * stride_bsk, nmask.T & kmask, other=127)
        if DOT_SCALED:
            acc = tl.dot_scaled(a, sa, FMT_A, b, sb, FMT_B, acc)
        else:
            da = _dequant(a, sa, FMT_A, BLOCK_M, BLOCK_K)
            db = _dequant(tl.trans(b), sb, FMT_B, BLOCK_N, BLOCK_K)
            acc = tl.dot(da, tl.trans(db), acc, input_precision="ieee")
    y_ptrs = y_ptr + offs_m.to(tl.int64)[:, None] * stride_ym + offs_n[None, :]
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mmask & nmask)


def _check(a: Tensor, a_scale: Tensor, b: Tensor, b_scale: Tensor, ea: MXElem, eb: MXElem) -> int:
    """K, after checking every operand's shape and dtype against it."""
    for e in (ea, eb):
        if e not in DOT_FORMATS:
            raise ValueError(
                f"mx_mm multiplies {', '.join(m.value for m in DOT_FORMATS)} (what "
                f"tl.dot_scaled takes), got {e.value}; use the emulated MX GEMM for it"
            )
    k = a_scale.shape[-1] * 32 if a_scale.dim() == 2 else -1
    want = {
        "a": (a, (a.shape[0], k * ea.spec.bits // 8)),
        "a_scale": (a_scale, (a.shape[0], k // 32)),
        "b": (b, (b.shape[0], k * eb.spec.bits // 8)),
        "b_scale": (b_scale, (b.shape[0], k // 32)),
    }
    for name, (t, shape) in want.items():
        if t.dtype != torch.uint8 or t.dim() != 2 or tuple(t.shape) != shape:
            raise ValueError(
                f"mx_mm: {name} must be uint8 {list(shape)} for K={k} (codes packed along K, "
                f"E8M0 scale bytes per 32), got {t.dtype} {list(t.shape)}"
            )
    return k


def mx_mm_reference(
    a: Tensor, a_scale: Tensor, b: Tensor, b_scale: Tensor, elem_a: str, elem_b: str,
    out_dtype: torch.dtype,
) -> Tensor:  # fmt: skip
    """Dequantize both operands (float32, exact), one float32 matmul, cast."""
    ea, eb = parse_choice(MXElem, elem_a, "MX element"), parse_choice(MXElem, elem_b, "MX element")
    _check(a, a_scale, b, b_scale, ea, eb)
    da = mx_dequantize(unpack_mx_codes(a, ea), a_scale, ea, 32, 1)
    db = mx_dequantize(unpack_mx_codes(b, eb), b_scale, eb, 32, 1)
    return (da @ db.t()).to(out_dtype)


def mx_mm_triton(
    a: Tensor, a_scale: Tensor, b: Tensor, b_scale: Tensor, elem_a: str, elem_b: str,
    out_dtype: torch.dtype, native_only: bool = True,
) -> Tensor:  # fmt: skip
    """The Triton kernel. ``native_only`` (the default) refuses GPUs without a block-scaled
    MMA (there Triton would emulate, slower than aoq's own emulated GEMM); tests pass False
    to check Triton's emulation on sm89+ and the interpreter path."""
    ea, eb = parse_choice(MXElem, elem_a, "MX element"), parse_choice(MXElem, elem_b, "MX element")
    k = _check(a, a_scale, b, b_scale, ea, eb)
    if out_dtype not in FLOAT_DTYPES:
        raise ValueError(f"mx_mm outputs one of {FLOAT_DTYPES}, got {out_dtype}")
    if a.device.type == "cpu" and not INTERPRET:
        raise RuntimeError("mx_mm_triton runs on GPUs, or on CPU tensors with TRITON_INTERPRET=1")
    if native_only and not INTERPRET and not native_mx_mm(a.device):
        raise RuntimeError(
            f"{a.device} has no block-scaled MMA (sm100-class needed); call "
            "torch.ops.aoq.mx_mm (the reference there) or pass native_only=False"
        )
    m, n = a.shape[0], b.shape[0]
    y = torch.empty((m, n), dtype=out_dtype_for(out_dtype), device=a.device)
    if m and n:
        bm, bn, bk = (32, 32, 64) if INTERPRET else (128, 128, 128)
        grid = (triton.cdiv(n, bn), triton.cdiv(m, bm))
        launch(_mx_mm_kernel, grid,
            a, a_scale, b, b_scale, y, m, n, k,
            a.stride(0), a.stride(1), a_scale.stride(0), a_scale.stride(1),
            b.stride(0), b.stride(1), b_scale.stride(0), b_scale.stride(1), y.stride(0),
            FMT_A=DOT_FORMATS[ea], FMT_B=DOT_FORMATS[eb], DOT_SCALED=not INTERPRET,
            BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=4 if INTERPRET else 8, num_stages=3,
        )  # fmt: skip
    return y.to(out_dtype)


@torch.library.custom_op("aoq::mx_mm", mutates_args=())
def mx_mm(
    a: Tensor, a_scale: Tensor, b: Tensor, b_scale: Tensor, elem_a: str, elem_b: str,
    out_dtype: torch.dtype,
) -> Tensor:  # fmt: skip
    """dequant(a) · dequant(b)ᵀ of MX operands blocked along K (see the module docstring)."""
    return mx_mm_reference(a, a_scale, b, b_scale, elem_a, elem_b, out_dtype)


@mx_mm.register_fake
def _(a, a_scale, b, b_scale, elem_a, elem_b, out_dtype):  # type: ignore[no-untyped-def]
    ea, eb = parse_choice(MXElem, elem_a, "MX element"), parse_choice(MXElem, elem_b, "MX element")
    _check(a, a_scale, b, b_scale, ea, eb)
    return a.new_empty((a.shape[0], b.shape[0]), dtype=out_dtype)


@mx_mm.register_kernel("cuda")
def _(a, a_scale, b, b_scale, elem_a, elem_b, out_dtype):  # type: ignore[no-untyped-def]
    if native_mx_mm(a.device):
        return mx_mm_triton(a, a_scale, b, b_scale, elem_a, elem_b, out_dtype)
    return mx_mm_reference(a, a_scale, b, b_scale, elem_a, elem_b, out_dtype)
