"""The GPU (CUDA, ROCm) and interpreter kernel entries of every inference scheme (the MX and
NVFP4 decode entries: triton_linear_mx.py).

Each entry, ``fn(x2d, weight, bias) -> y2d``, is registered with ``dispatch.kernel(name,
check)`` and listed in the kernel table. Names say what runs: ``triton.<family>.decode`` /
``.prefill`` (Triton), ``cublas|hipblaslt.<family>.dequant_mm`` (a Triton dequantize, then
torch's BLAS matmul), ``cublas|hipblaslt.fp8.scaled_mm`` (torch._scaled_mm).

Eagerly a call goes straight to the Triton launcher (a torch.library op costs microseconds of
host time); under torch.compile through the ``torch.ops.aoq`` op, whose fake implementation
lets the compiler trace it. On CPU tensors (the interpret backend) the launchers run the same
kernels through Triton's interpreter.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from aoq.backends import Backend, platform_of
from aoq.dispatch import kernel
from aoq.tensors.activation import split_bias
from aoq.tensors.base import ActQuant
from aoq.tensors.float8 import Float8Tensor
from aoq.tensors.int4 import Int4Tensor
from aoq.tensors.int8 import Int8Tensor

try:  # the families register their torch.library ops (and the MX cast's CUDA implementation)
    import aoq.kernels._common  # noqa: F401
    import aoq.kernels.act_qdq  # noqa: F401
    import aoq.kernels.act_quant  # noqa: F401
    import aoq.kernels.decode_mma  # noqa: F401
    import aoq.kernels.fp8_mm  # noqa: F401
    import aoq.kernels.int_act_mm  # noqa: F401
    import aoq.kernels.mx_cast  # noqa: F401
    import aoq.kernels.mx_decode  # noqa: F401
    import aoq.kernels.w4a8_mma  # noqa: F401
    import aoq.kernels.weight_dequant  # noqa: F401
    import aoq.kernels.weight_only  # noqa: F401
    import aoq.kernels.wt_rows_w4a8  # noqa: F401 (and kernels/wt_rows.py, which it imports)
    from aoq import kernels as _k

    _IMPORT_ERROR: str | None = None
except ImportError as e:  # no triton: every GPU entry says why it cannot serve
    _k = None  # type: ignore[assignment]
    _IMPORT_ERROR = f"aoq.kernels unavailable ({e}); install triton"

FLOAT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
INT_ACT_MODE = {ActQuant.INT8_DYNAMIC: 0, ActQuant.INT8_DYNAMIC_ASYM: 1, ActQuant.INT8_STATIC: 2}
FP8_ARCHS = ("sm89", "sm90", "sm100", "sm103", "sm120", "gfx942", "gfx950")
"""Archs with float8 conversions and MMA (e4m3fnuz on gfx942, OCP e4m3fn elsewhere)."""


def _traced(*args: Any) -> bool:
    """Dynamo, or the fake / functional tensors AOT autograd passes (where is_compiling() can
    be False)."""
    return torch.compiler.is_compiling() or any(
        isinstance(a, torch.Tensor) and type(a) not in (torch.Tensor, torch.nn.Parameter)
        for a in args
    )


ONE_ROW_MAX_WEIGHT_BYTES = 32 << 20
"""Eager M = 1 calls whose weight is at most this many bytes quantize their activation row
inside the decode kernel (one launch instead of two: ~4 us less host time). Each program then
reads the whole row first: run e9764b (H200, graph replays) measured that prologue at 1-3.5 us
more device time than the separate activation kernel for fp8 and int8 W8A8 at 8192^2 and
4096 x 14336 (fp8-row 23.2 -> 25.8 us at 8192^2). A weight that streams in less time than a
call's host time (~15 us: 32 MB at 3 TB/s is ~11 us) leaves the host the bound, where the
launch saved wins; larger weights, and CUDA-graph capture (no host time to save), keep the
separate activation kernel."""


def _one_row_pays(x: torch.Tensor, w: Any) -> bool:
    """The activation quantization goes inside the decode kernel (ONE_ROW_MAX_WEIGHT_BYTES)."""
    if x.shape[0] != 1 or w.qdata.numel() * w.qdata.element_size() > ONE_ROW_MAX_WEIGHT_BYTES:
        return False
    return x.device.type != "cuda" or not torch.cuda.is_current_stream_capturing()


def _call(op: str, launcher: Callable[..., Any], *args: Any) -> Any:
    """Eager calls go straight to the launcher (less host overhead); any traced call goes
    through the opaque torch.library op."""
    if _traced(*args):
        # quantized linears are inference kernels: no autograd formula. Eagerly the launcher
        # already returns a result outside autograd; traced, an input that requires grad (a
        # float bias Parameter, when compiled without no_grad) would make AOT autograd trace
        # a backward that does not exist (H200: fp8-row compile parity), so inputs go in
        # detached, the same semantics as eager.
        detached = [a.detach() if isinstance(a, torch.Tensor) else a for a in args]
        return getattr(torch.ops.aoq, op)(*detached)
    return launcher(*args)


def _common(x: torch.Tensor, w: Any) -> str | None:
    if _k is None:
        return _IMPORT_ERROR
    if x.device.type == "cpu" and not _k._common.INTERPRET:
        return "aoq.kernels was imported without TRITON_INTERPRET=1 (set it before importing aoq)"
    if x.dtype not in FLOAT_DTYPES:
        return f"{x.dtype} input (the kernels take bf16, fp16 or fp32)"
    return None


def _fp8_arch(x: torch.Tensor, w: Float8Tensor) -> str | None:
    platform = platform_of(x.device)
    if platform.backend is not Backend.INTERPRET and platform.arch not in FP8_ARCHS:
        return f"{platform.arch} has no float8 instructions (needs one of {FP8_ARCHS})"
    native = torch.float8_e4m3fnuz if platform.arch == "gfx942" else torch.float8_e4m3fn
    if platform.backend is not Backend.INTERPRET and w.qdata.dtype != native:
        return f"{w.qdata.dtype} weights on {platform.arch}, whose float8 is {native}"
    return None


# --- weight-only ------------------------------------------------------------------------------


def _wo_parts(w: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    if isinstance(w, Int4Tensor):
        return w.qdata, w.scale, w.zero_point
    return w.qdata, w.scale, None


def _wo_check(x: torch.Tensor, w: Any, bias: Any) -> str | None:
    why = _common(x, w)
    if why is None and isinstance(w, Float8Tensor):
        why = _fp8_arch(x, w)
    return why


def _wo_decode_check(x: torch.Tensor, w: Any, bias: Any) -> str | None:
    """_wo_check, and past 16 rows that decode_mma takes them (weight_only.decodes)."""
    why = _wo_check(x, w, bias)
    if why is None and x.dim() == 2 and x.shape[0] > 16:
        q, s, z = _decode_parts(x, w)
        if not _k.weight_only.decodes(x, q, s, z, _tiled(w)):
            why = (
                f"{x.shape[0]} rows of {x.dtype}: past 16 rows the decode kernel takes int4, "
                "int8 and e4m3 weights with bf16 / fp16 x, on sm90 only"
            )
    return why


def _group_major(
    x: torch.Tensor, w: Any, wfmt: Any
) -> tuple[torch.Tensor, torch.Tensor | None] | None:
    """int4's group-major scales (and weight-only zero points) on CUDA, views [N, G] with
    strides (1, N), where decode_mma serves x in ``wfmt`` (UINT4, or INT4_SYM: W4A8); else
    None: the other kernels read them row-major (a view would be copied every call, 54c02e)."""
    d = w.derived() if isinstance(w, Int4Tensor) else {}
    if "scale_gm" not in d or x.dim() != 2:
        return None
    z = d.get("zero_gm", d.get("zero_gw"))
    s, z = d["scale_gm"].t(), z.t() if z is not None else None
    if (z is None) != (wfmt is _k._common.WeightFormat.INT4_SYM):
        return None
    return (s, z) if _k.decode_mma.serves(x, w.qdata, s.shape[1], wfmt, s, z, _tiled(w)) else None


def _tiled(w: Any) -> bool:
    """int4 codes in tile order (Int4Tensor.packing): the int4 weight-only kernels' flag."""
    return isinstance(w, Int4Tensor) and w.packing == "tiled"


def _decode_parts(
    x: torch.Tensor, w: Any
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """_wo_parts, with int4's group-major scales and zero points where decode_mma serves x."""
    gm = _group_major(x, w, _k._common.WeightFormat.UINT4)
    return (w.qdata, *gm) if gm is not None else _wo_parts(w)


def _weight_only(strategy: int) -> Callable[..., torch.Tensor]:
    def fn(x: torch.Tensor, w: Any, bias: Any) -> torch.Tensor:
        fb, _ = split_bias(bias, static=False)
        q, s, z = _decode_parts(x, w) if strategy == 0 else _wo_parts(w)
        return _call("weight_only_mm", _k.weight_only.weight_only_mm_triton,
                     x, q, s, z, fb, strategy, _tiled(w))  # fmt: skip

    return fn


def _dequant_mm(x: torch.Tensor, w: Any, bias: Any) -> torch.Tensor:
    """Dequantize W to x's dtype (one Triton pass), then torch's matmul (cuBLAS/hipBLASLt)."""
    fb, _ = split_bias(bias, static=False)
    q, s, z = _wo_parts(w)
    wd = _call("dequantize_weight", _k.weight_dequant.dequantize_weight_triton,
               q, s, z, x.shape[1], x.dtype, _tiled(w))  # fmt: skip
    return F.linear(x, wd, None if fb is None else fb.to(x.dtype))


def _blas_check(x: torch.Tensor, w: Any, bias: Any) -> str | None:
    return _wo_check(x, w, bias) or (
        None if x.device.type == "cuda" else "BLAS paths serve GPU tensors only"
    )


for _fam in ("int8wo", "int4wo", "fp8wo"):
    kernel(f"triton.{_fam}.decode", _wo_decode_check)(_weight_only(0))
    kernel(f"triton.{_fam}.prefill", _wo_check)(_weight_only(1))
    for _blas in ("cublas", "hipblaslt"):
        kernel(f"{_blas}.{_fam}.dequant_mm", _blas_check)(_dequant_mm)


# --- W8A8 / W4A8 ------------------------------------------------------------------------------


def _int_act_check(x: torch.Tensor, w: Any, bias: Any) -> str | None:
    why = _common(x, w)
    if why is not None:
        return why
    groups = w.scale.shape[-1]
    if isinstance(w, Int8Tensor) and groups != 1:
        return "groupwise int8 weights (the W8A8 kernel keeps one int32 accumulator per output)"
    if isinstance(w, Int4Tensor):
        gs = w.group_size
        if gs < 32 or gs & (gs - 1):
            return f"group_size={gs} (the W4A8 kernel takes powers of two >= 32)"
    return None


def _pdl(strategy: int, x: torch.Tensor, w: Any, bias_int: Any = None) -> bool:
    """The decode kernel starts while the activation kernel runs (PDL, sm90+, eager and CUDA
    graphs, not traced): M <= int_act_mm.PDL_ROWS; W4A8 up to its GEMV's rows and wherever
    w4a8_mma serves (groups of 32, no int32 bias), placed as :func:`_late` says."""
    ia, wm = _k.int_act_mm, _k.w4a8_mma
    most = ia.PDL_ROWS
    if isinstance(w, Int4Tensor):
        most = wm.MAX_ROWS if _rows_mma(w, bias_int) else max(most, ia.GEMV_ROWS)
    rows = strategy == 0 and x.shape[0] <= most
    return rows and not _traced(x, w.qdata) and _k._common.pdl(x.device)


def _rows_mma(w: Any, bias_int: Any) -> bool:
    """W4A8 weights whose decode w4a8_mma may serve (by rows: int_act_mm.ROWS_MMA_FROM on)."""
    ok = isinstance(w, Int4Tensor) and _k.int_act_mm.ROWS_MMA and bias_int is None
    return ok and w.group_size == _k.w4a8_mma.GROUP_SIZE


def _late(x: torch.Tensor, w: Any, bias_int: Any = None) -> bool:
    """The activation kernel lets the decode start only as it ends (act_quant's ``late``):
    where w4a8_mma serves and its late_trigger says so (K split, past its PDL_ROWS rows)."""
    m, k = x.shape
    rows = _k.int_act_mm.ROWS_MMA_FROM <= m <= _k.w4a8_mma.MAX_ROWS
    return (
        rows
        and _rows_mma(w, bias_int)
        and _k.w4a8_mma.late_trigger(m, w.qdata.shape[0], k, x.device)
    )


def _int_act(strategy: int) -> Callable[..., torch.Tensor]:
    def fn(x: torch.Tensor, w: Any, bias: Any) -> torch.Tensor:
        static = w.act is ActQuant.INT8_STATIC
        mode = INT_ACT_MODE[w.act]
        ia = _k.int_act_mm
        one_row = strategy == 0 and not _traced(x, w.qdata) and _one_row_pays(x, w)
        if one_row and ia.one_row_serves(x, w.qdata, w.scale):
            # eager M = 1, a small weight: the decode kernel quantizes x itself (one launch,
            # the same bits)
            fb, ib = split_bias(bias, static)
            return ia.int_act_linear_one_row(x, mode, w.act_scale, w.qdata, w.scale, fb, ib,
                                             x.dtype)  # fmt: skip
        fb, ib = split_bias(bias, static)
        quantize, mm = _k.act_quant.quantize_int8_act_triton, ia.int_act_mm_triton
        if _pdl(strategy, x, w, ib):
            quantize = functools.partial(quantize, trigger=True, late=_late(x, w, ib))
            mm = functools.partial(mm, pdl=True)
        xq, xs, xz = _call("quantize_int8_act", quantize, x, mode, w.act_scale)
        zero = xz if w.act is ActQuant.INT8_DYNAMIC_ASYM else None
        ws = _w4a8_decode_scale(xq, w, ib) if strategy == 0 else w.scale
        return _call("int_act_mm", mm, xq, xs, zero, w.qdata, ws, fb, ib, x.dtype, strategy)

    return fn


def _w4a8_decode_scale(xq: torch.Tensor, w: Any, bias_int: Any) -> torch.Tensor:
    """W4A8's group-major scales where int_act_mm hands the call to the matrix units (no int32
    bias, from int_act_mm.ROWS_MMA_FROM rows), else row-major (the GEMV reads either)."""
    ia = _k.int_act_mm
    if bias_int is not None or xq.shape[0] < min(ia.ROWS_MMA_FROM, ia.GEMV_ROWS + 1):
        return w.scale
    gm = _group_major(xq, w, _k._common.WeightFormat.INT4_SYM)
    return gm[0] if gm is not None else w.scale


def _int_act_decode_check(x: torch.Tensor, w: Any, bias: Any) -> str | None:
    """_int_act_check, and past 16 rows of W4A8 that decode_mma takes them (int_act_mm; an
    int32 bias, which it leaves, runs on the prefill tiles there)."""
    why = _int_act_check(x, w, bias)
    m = x.shape[0] if x.dim() == 2 else 0
    if why is None and m > 16 and isinstance(w, Int4Tensor):
        most = _k.decode_mma.max_rows(_k._common.WeightFormat.INT4_SYM, x.device)
        if m > most or w.group_size > 256:
            why = f"{m} rows: past 16 rows W4A8's decode kernel takes {most}, groups <= 256"
    return why


for _fam in ("w8a8", "w4a8"):
    kernel(f"triton.{_fam}.decode", _int_act_decode_check)(_int_act(0))
    kernel(f"triton.{_fam}.prefill", _int_act_check)(_int_act(1))


def _w4a8_dequant_mm(x: torch.Tensor, w: Any, bias: Any) -> torch.Tensor:
    """W4A8 at large M: activation codes (never in memory: kernels/act_qdq.py) and weight
    dequantized exactly in float32, cast once to x's dtype, then torch's matmul: ~M·K + N·K
    writes and the BLAS rate, where the Triton kernel's group flushes ran 0.2x bf16 (bbd8a5)."""
    xd = _call("qdq_int8_act", _k.act_qdq.qdq_int8_act_triton, x, INT_ACT_MODE[w.act],
               w.act_scale)  # fmt: skip
    eight = torch.full(w.scale.shape, 8, dtype=torch.uint8, device=x.device)  # q + 8 codes
    wd = _call("dequantize_weight", _k.weight_dequant.dequantize_weight_triton,
               w.qdata, w.scale, eight, x.shape[1], x.dtype)  # fmt: skip
    fb, _ = split_bias(bias, static=False)  # an Int32Bias is used dequantized here
    return F.linear(xd, wd, None if fb is None else fb.to(x.dtype))


def _w4a8_blas_check(x: torch.Tensor, w: Any, bias: Any) -> str | None:
    why = _int_act_check(x, w, bias)
    if why is None and not isinstance(w, Int4Tensor):
        why = "W8A8 keeps one exact int32 accumulator: the Triton kernel serves it"
    return why or (None if x.device.type == "cuda" else "BLAS paths serve GPU tensors only")


for _blas in ("cublas", "hipblaslt"):
    kernel(f"{_blas}.w4a8.dequant_mm", _w4a8_blas_check)(_w4a8_dequant_mm)


# --- float8 x float8 --------------------------------------------------------------------------


def _fp8_quantize(
    x: torch.Tensor, w: Float8Tensor, trigger: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    per_row = w.act is ActQuant.FP8_ROW
    quantize = _k.act_quant.quantize_fp8_act_triton
    if trigger:
        quantize = functools.partial(quantize, trigger=True)
    return _call("quantize_fp8_act", quantize, x, per_row, w.qdata.dtype)


def _fp8_check(x: torch.Tensor, w: Float8Tensor, bias: Any) -> str | None:
    return _common(x, w) or _fp8_arch(x, w)


def _fp8_one_row(x: torch.Tensor, w: Float8Tensor) -> bool:
    """fp8_mm.fp8_linear_one_row takes it: one contiguous row, K > 0 (e4m3fn only under the
    interpreter, whose float8 rounding it replaces by e4m3fn's grid)."""
    if x.shape[0] != 1 or x.shape[1] == 0 or x.stride(1) != 1:
        return False
    return x.device.type == "cuda" or w.qdata.dtype == torch.float8_e4m3fn


def _fp8_triton(strategy: int) -> Callable[..., torch.Tensor]:
    def fn(x: torch.Tensor, w: Float8Tensor, bias: Any) -> torch.Tensor:
        fb, _ = split_bias(bias, static=False)
        one_row = strategy == 0 and not _traced(x, w.qdata) and _one_row_pays(x, w)
        if one_row and _fp8_one_row(x, w):
            # eager M = 1, a small weight: the decode kernel quantizes x itself (one launch,
            # the same bits)
            per_row = w.act is ActQuant.FP8_ROW
            return _k.fp8_mm.fp8_linear_one_row(x, per_row, w.qdata, w.scale, fb, x.dtype)
        pdl = _pdl(strategy, x, w)
        xq, xs = _fp8_quantize(x, w, pdl)
        mm = _k.fp8_mm.fp8_mm_triton
        if pdl:
            mm = functools.partial(mm, pdl=True)
        return _call("fp8_mm", mm, xq, xs, w.qdata, w.scale, fb, x.dtype, strategy)

    return fn


def _scaled_mm_check(x: torch.Tensor, w: Float8Tensor, bias: Any) -> str | None:
    why = _fp8_check(x, w, bias)
    if why is None and x.device.type != "cuda":
        why = "torch._scaled_mm serves GPU tensors only"
    n, k = w._size
    if why is None and (k % 16 or n % 16):
        why = f"K={k}, N={n}: torch._scaled_mm needs multiples of 16"
    if why is None and x.dtype == torch.float32:
        why = (
            "float32 output: cuBLAS's fp8 accumulation is ~1e-4 off a float32 sum; the Triton "
            "kernel widens to exact bf16 operands instead"
        )
    return why


@kernel("cublas.fp8.scaled_mm", _scaled_mm_check)
@kernel("hipblaslt.fp8.scaled_mm", _scaled_mm_check)
def _fp8_scaled_mm(x: torch.Tensor, w: Float8Tensor, bias: Any) -> torch.Tensor:
    fb, _ = split_bias(bias, static=False)
    xq, xs = _fp8_quantize(x, w)
    return _k.fp8_mm.scaled_mm(xq, xs, w.qdata, w.scale, fb, x.dtype, w.fast_accum)


kernel("triton.fp8.decode", _fp8_check)(_fp8_triton(0))
kernel("triton.fp8.prefill", _fp8_check)(_fp8_triton(1))
