"""What every kernel family shares: the interpreter switch, the strategy enum, dtype maps and
the small ``@triton.jit`` helpers whose rounding must match aoq.formats bit for bit.

The interpreter is chosen when a kernel is *defined* (``triton.jit`` reads TRITON_INTERPRET at
decoration time), so ``INTERPRET`` is read once, at import, and launchers refuse CPU tensors
when the kernels were defined for a GPU: set TRITON_INTERPRET=1 before importing aoq.kernels.
"""

from __future__ import annotations

import enum
import functools
import os

import torch
import triton
import triton.language as tl

from aoq.backends import Backend

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"


def _check_interpreter_numpy() -> None:
    """triton 3.6's interpreter turns run-time loop bounds into ints with ``int(array([k]))``,
    which numpy >= 2.4 rejects, so every kernel with a run-time loop bound fails
    (triton-lang/triton#9171, fixed by #9172 after 3.6). aoq pins numpy < 2.4 for the
    interpreter rather than patching triton; say so clearly instead of failing deep inside."""
    import numpy as np

    try:
        int(np.array([1]))  # type: ignore[call-overload]
    except TypeError:
        raise ImportError(
            f"TRITON_INTERPRET=1 with numpy {np.__version__} and triton {triton.__version__}: "
            "this triton's interpreter fails on numpy >= 2.4 (triton-lang/triton#9171); "
            "install numpy<2.4 (requirements-dev.txt pins it) or a triton with the fix"
        ) from None


if INTERPRET:
    _check_interpreter_numpy()
TINY = float(torch.finfo(torch.float32).tiny)
TINY_F32: tl.constexpr = tl.constexpr(TINY)
"""TINY as a kernel constant (kernels read only constexpr globals)."""
FLOAT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)


class Strategy(enum.IntEnum):
    """How a matmul kernel walks its output (an int in op schemas; never a string)."""

    DECODE = 0
    """Small M, memory bound: many narrow programs along N, long K tiles with wide loads.
    M == 1 runs as a GEMV (FMA into a [BLOCK_N, BLOCK_K] register tile, one reduction at the
    end); 2 <= M <= 16 pads M to one 16-row tile for the matrix units."""
    PREFILL = 1
    """Large M, compute bound: square output tiles, the weight dequantized in the main loop."""


class WeightFormat(enum.IntEnum):
    """Weight codes a kernel reads (a constexpr, so each format compiles its own branch)."""

    INT8 = 0
    """int8 symmetric codes [N, K]; scale [N, G]."""
    UINT4 = 1
    """two uint4 codes per byte [N, K // 2], low nibble first; scale and zero point [N, G]."""
    FP8 = 2
    """float8 codes [N, K]; one scale per output channel."""
    INT4_SYM = 3
    """two int4 codes per byte, each nibble holding q + 8 (W4A8); scale [N, G]."""
    MX_FP4 = 4
    """two MX fp4 (e2m1) codes per byte, low nibble first; E8M0 scale bytes [N, G]."""
    MX_FP8 = 5
    """MX fp8 e4m3 codes [N, K] (uint8 bits); E8M0 scale bytes [N, G]."""
    MX_FP6_E3M2 = 6
    """MX fp6 e3m2 codes, four in three little-endian bytes [N, 3 K / 4]; E8M0 bytes [N, G]."""
    MX_FP6_E2M3 = 7
    """MX fp6 e2m3 codes, packed as MX_FP6_E3M2."""
    MX_FP8_E5M2 = 8
    """MX fp8 e5m2 codes [N, K] (uint8 bits); E8M0 scale bytes [N, G]."""
    NVFP4 = 9
    """NVFP4 fp4 e2m1 codes, two a byte, low nibble first; e4m3 bytes [N, K / 16] and a
    float32 tensor scale (decode_mma's group: two blocks)."""
    MX_INT8 = 10
    """MX int8 codes [N, K] (int8 bits as uint8; value code * 2^-6); E8M0 scale bytes [N, G]."""


def backend_of(device: torch.device) -> Backend:
    """The backend that runs a launch on ``device`` (refuses CPU tensors outside the
    interpreter, with the fix)."""
    if device.type == "cuda":
        return Backend.ROCM if torch.version.hip is not None else Backend.CUDA
    if INTERPRET:
        return Backend.INTERPRET
    raise RuntimeError(
        f"aoq.kernels got a {device.type} tensor but its kernels were compiled for GPUs; to "
        "run them on CPU set TRITON_INTERPRET=1 before aoq.kernels is first imported"
    )


PDL_AHEAD = os.environ.get("AOQ_PDL_AHEAD", "1") != "0"
"""A decode kernel launched with programmatic dependent launch after its activation kernel
loads its first step's weights before it waits (the weights are not that kernel's output);
``AOQ_PDL_AHEAD=0``: it reads nothing before the wait (A/B runs)."""


DECODE_PDL = os.environ.get("AOQ_DECODE_PDL", "1") != "0"
"""Weight-only and MX decode kernels (decode_mma, gemv_static) are launched with
programmatic dependent launch where the GPU has it (:func:`pdl`): their programs are placed
while the kernel before them on the stream finishes, and wait for it (``griddepcontrol.wait``)
before they read or write anything, so the result is the plain launch's. The kernel before
need not know of it (its programs' exits let this one launch). H100, decode alone as graph
replays of calls in turn (bench/NOTES.md, session 39): 0.1-0.9 µs less a call at M 1 for int4,
int8, fp8 and MX fp4 (M 16: within a few tenths either way); 0.1-0.7 µs in the bench of record;
on an H200 0-0.3 µs. ``AOQ_DECODE_PDL=0``: plain launches (A/B runs)."""


def decode_pdl(device: torch.device) -> bool:
    """Whether a weight-only or MX decode kernel on ``device`` launches with programmatic
    dependent launch (:data:`DECODE_PDL` and :func:`pdl`)."""
    return DECODE_PDL and pdl(device)


@triton.jit
def prefetch_l2(ptrs):
    """Ask L2 for the lines at ``ptrs`` (NVIDIA ``prefetch.global.L2``: nothing reaches
    registers). Not for the interpreter (its callers are CUDA-only probes)."""
    tl.inline_asm_elementwise("prefetch.global.L2 [$1]; mov.u32 $0, 0;", "=r,l", [ptrs],
                              dtype=tl.int32, is_pure=False, pack=1)  # fmt: skip


@functools.cache
def pdl(device: torch.device) -> bool:
    """Programmatic dependent launch (griddepcontrol): NVIDIA sm90 and later, not the
    interpreter or ROCm."""
    if device.type != "cuda" or torch.version.hip is not None:
        return False
    return torch.cuda.get_device_capability(device)[0] >= 9


@functools.cache
def fp8_cvt(device: torch.device) -> bool:
    """An NVIDIA GPU with float8 conversion instructions (sm89 and later)."""
    if device.type != "cuda" or torch.version.hip is not None:
        return False
    return torch.cuda.get_device_capability(device) >= (8, 9)


def dot_flags(dtype: torch.dtype) -> tuple[bool, str]:
    """(UPCAST, PRECISION) for a tl.dot on ``dtype`` operands. The interpreter computes bf16
    and fp16 dots wrongly, so it upcasts to float32. IEEE precision everywhere: float32
    operands then multiply in full float32 (a tf32 dot would be ~1e3x less accurate than
    torch's float32 matmul), bf16/fp16 ignore it, and every backend accepts it (AMD's CDNA2/4
    reject "tf32")."""
    return INTERPRET, "ieee"


def out_dtype_for(dtype: torch.dtype) -> torch.dtype:
    """The dtype a kernel stores: ``dtype`` on GPUs; float32 under the interpreter, whose
    float downcasts round half away from zero without carrying into the exponent (the
    launcher then casts with torch, which rounds to nearest even)."""
    return torch.float32 if INTERPRET else dtype


def check_2d(name: str, t: torch.Tensor, dtypes: tuple[torch.dtype, ...]) -> None:
    if t.dim() != 2 or not t.is_contiguous() or t.dtype not in dtypes:
        raise ValueError(
            f"{name}: expected a contiguous 2-D tensor of {dtypes}, got {tuple(t.shape)} "
            f"{t.dtype} (contiguous={t.is_contiguous()}); call .contiguous() or cast it"
        )


def m_bucket(m: int) -> int:
    """Autotuning key for M: powers of two up to 16, then 64, 256, 1024 and "more"."""
    for b in (1, 2, 4, 8, 16, 64, 256, 1024):
        if m <= b:
            return b
    return 4096


# --- jit helpers ----------------------------------------------------------------------------


@triton.jit
def rne(v):
    """Round half to even for |v| < 2**22 (callers clamp first): adding 1.5 * 2**23 leaves no
    fraction bits, so the float32 add itself rounds to nearest even (torch.round's rule).
    Portable (no libdevice) and the interpreter computes it the same way."""
    return (v + 12582912.0) - 12582912.0


MAGIC: tl.constexpr = tl.constexpr(8388608.0)
"""2**23: the float32 whose bits are 0x4B000000 (its unit in the last place is 1)."""


@triton.jit
def exact_float(v, OFFSET: tl.constexpr):
    """2**23 + v + OFFSET as float32, for int32 v with 0 <= v + OFFSET < 2**23, by writing the
    integer into the mantissa of 2**23 (one integer add and a bitcast) instead of an
    int-to-float conversion: NVIDIA SMs convert at a quarter of the FMA rate (16/clk/SM),
    which caps a decode GEMV near the DRAM floor. Callers subtract 2**23 + OFFSET (exact)."""
    return (v + (0x4B000000 + OFFSET)).to(tl.float32, bitcast=True)


@triton.jit
def int8_float(q):
    """int8 codes as float32, exactly, without an int-to-float conversion (exact_float)."""
    return exact_float(q.to(tl.int32), 128) - (MAGIC + 128.0)


@triton.jit
def block_columns(s0, s1, s2, s3, W: tl.constexpr, NB: tl.constexpr):
    """Per-block vectors [R] of NB (1, 2 or 4) consecutive blocks -> [R, W], column c holding
    block c // (W / NB)'s value (s1-s3 unused below NB). A join and a broadcast, which take
    the layout of what uses them: a gathered 2-D load of the same values imposes its own,
    and Triton then moves every decoded weight through shared memory to the MMA's layout
    (session 31, sm90 TTGIR). Not at NB 2 over W 16: there Triton 3.6 gave rows the next
    row's values on an H100 while the interpreter was right (NVFP4's steps, session 32; MX
    fp6's 64-code steps, the same shape, decoded wrong in session 31). NB 2 over 32 columns
    and NB 4 over 32 are right on the GPU, bit for bit (tests/kernels/test_decode_mma_fp6.py;
    NB 4 over 32, 64 and 128 in decode_mma's WIDE steps too, test_decode_mma_mx.py and
    _nvfp4.py on an H200, session 52)."""
    tl.static_assert(not (NB == 2 and W == 16), "block_columns: NB 2 over W 16 miscompiles")
    R: tl.constexpr = s0.shape[0]
    if NB == 1:
        out = tl.broadcast_to(s0[:, None], (R, W))
    else:
        if NB == 2:
            v = tl.join(s0, s1)  # [R, 2]: block b at [:, b]
        else:
            v = tl.reshape(tl.join(tl.join(s0, s2), tl.join(s1, s3)), (R, 4))
        out = tl.reshape(tl.broadcast_to(v[:, :, None], (R, NB, W // NB)), (R, W))
    return out


@triton.jit
def block_columns8(s0, s1, s2, s3, s4, s5, s6, s7, W: tl.constexpr):
    """:func:`block_columns` over eight consecutive blocks (NVFP4's 128-code steps: eight
    blocks of 16 codes, 8 bytes each): nested joins whose flat order is s0 .. s7."""
    R: tl.constexpr = s0.shape[0]
    v = tl.join(
        tl.join(tl.join(s0, s4), tl.join(s2, s6)), tl.join(tl.join(s1, s5), tl.join(s3, s7))
    )
    v = tl.reshape(v, (R, 8))
    return tl.reshape(tl.broadcast_to(v[:, :, None], (R, 8, W // 8)), (R, W))


@triton.jit
def mma(a, b, acc, UPCAST: tl.constexpr, PRECISION: tl.constexpr):
    """acc + a @ b; under the interpreter float operands go through float32 (its bf16 dot is
    wrong) and integer operands stay int8 (its int8 dot is exact)."""
    if UPCAST and a.dtype.is_floating():
        a = a.to(tl.float32)
        b = b.to(tl.float32)
    return tl.dot(a, b, acc, input_precision=PRECISION, out_dtype=acc.dtype)


@triton.jit
def epilogue(acc, s_ptr, xs_ptr, b_ptr, y_ptr, offs_m, offs_n, M, N, stride_ym,
             COL_SCALE: tl.constexpr, ROW_SCALE: tl.constexpr, STATIC: tl.constexpr,
             HAS_BIAS: tl.constexpr):  # fmt: skip
    """Store float32 acc [BM, BN] as y = acc * s[n] * xs[m] (xs: one scalar if STATIC) + b[n],
    in that order (the reference's), cast to y's dtype."""
    nmask = offs_n < N
    mmask = offs_m < M
    if COL_SCALE:
        acc = acc * tl.load(s_ptr + offs_n, mask=nmask, other=0.0)[None, :]
    if ROW_SCALE:
        if STATIC:
            acc = acc * tl.load(xs_ptr)
        else:
            acc = acc * tl.load(xs_ptr + offs_m, mask=mmask, other=0.0)[:, None]
    if HAS_BIAS:
        acc = acc + tl.load(b_ptr + offs_n, mask=nmask, other=0.0).to(tl.float32)[None, :]
    y_ptrs = y_ptr + offs_m.to(tl.int64)[:, None] * stride_ym + offs_n[None, :]
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=mmask[:, None] & nmask[None, :])


@triton.jit
def unpack_nibbles(packed):
    """uint8 [R, C] -> int32 [R, 2C]: low nibble first (aoq.formats.packing)."""
    p = packed.to(tl.int32)
    return tl.interleave(p & 0xF, p >> 4)


@triton.jit
def int4_rows(
    offs_n, stride_wn, K, TILED: tl.constexpr, RB: tl.constexpr = 64, TR: tl.constexpr = 64,
    PER_BYTE: tl.constexpr = 2,
):  # fmt: skip
    """int64 [BLOCK_N]: where each row's codes start, in bytes: the row-major packing's
    n * stride, or for TILED (aoq.formats.packing.tile_uint4: tiles of TR rows x RB bytes,
    64 x 64 as Int4Tensor ships them) the row's band plus its RB-byte run in the band's
    first tile. PER_BYTE: codes a byte (int4 2; byte codes 1: a row is K bytes). Add
    :func:`int4_cols`."""
    if TILED:
        n = offs_n.to(tl.int64)
        return (n // TR) * (TR * K // PER_BYTE) + (n % TR) * RB
    else:
        return offs_n.to(tl.int64) * stride_wn


@triton.jit
def int4_cols(
    cb, TILED: tl.constexpr, RUN: tl.constexpr = 1, RB: tl.constexpr = 64, TR: tl.constexpr = 64
):
    """Byte column(s) ``cb`` of a row, as offsets from :func:`int4_rows`: the tiled
    packing's tile (TR x RB bytes each) and place in its RB-byte run. A scalar ``cb`` that
    starts a run of RUN <= RB bytes (a multiple of RUN; RUN divides RB) stays one contiguous
    run, which the hint lets the compiler load 16 bytes at a time."""
    if TILED:
        return (cb // RB) * (TR * RB) + tl.multiple_of(cb % RB, RUN)
    else:
        return cb
