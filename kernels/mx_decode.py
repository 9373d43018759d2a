"""Decode (M <= 16) linears on MX and NVFP4 weights without a dequantized copy: each step
dequantizes a [BLOCK_N, BLOCK_K] weight tile in registers (kernels/mx_dequant.dequant_tile,
the reference's float32 values, cast to x's dtype) and multiplies it on the matrix units
(x padded to 16 rows) with float32 accumulation; K split across programs (splitk.py).

The weights the MMA sees are exactly the emulated path's (``emulated.*_dequant_mm``:
dequantize to x's dtype, then one matmul): MX values are exact in bf16 and fp16 (a short
significand times a power of two) except where they leave the dtype's range, NVFP4 values
round once from float32 as there. Only the order of the float32 sums differs.

Why: the emulated path writes and reads back the whole weight in x's dtype every call (an
8192 x 8192 weight: 134 MB, about as much traffic as bf16's own GEMV, plus the dequantize
pass), where this kernel reads the packed codes once: fp4 4.25 bits an element with its
E8M0 scales, fp6 6.25, fp8 / int8 8.25, NVFP4 4.5.

Op: none of its own; dispatch's ``triton.mxwo.decode``, ``triton.mx.decode`` (activations
MX quantize-dequantized first by the Triton cast) and ``triton.nvfp4wo.decode`` call
:func:`mx_decode` directly on GPUs and under the interpreter.

Past 16 rows (sm90, session 51) only decode_mma's wider tiles serve (decode_mma_tiles
.ROWS_TILE: MX fp4, e4m3, e5m2 and int8 to 128 rows (int8 with fp16 x to 64), NVFP4 and fp6
to 64), and at 65-128 rows MX fp4 and NVFP4 go to kernels/wt_rows_mx.py first (session 54), on
the weight's group-major bytes: :func:`mma_rows` says where; this kernel's own tile holds 16.
"""

from __future__ import annotations

import os

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from aoq.kernels import _common, splitk, wt_rows_mx
from aoq.kernels import decode_mma as dm
from aoq.kernels import mx_steps as st
from aoq.kernels import nvfp4_act as na
from aoq.kernels._common import INTERPRET, WeightFormat, backend_of, out_dtype_for
from aoq.kernels._launch import launch
from aoq.kernels.mx_cast import has_fp8_cvt, mx_cast_triton
from aoq.kernels.mx_dequant import dequant_tile, elem_params
from aoq.kernels.mx_packed import in_x_dtype

from aoq.formats.mx import MXElem, ScaleRounding, mx_dequantize, unpack_mx_codes
from aoq.formats.nvfp4 import NVFP4_BLOCK, nvfp4_dequantize
from aoq.formats.packing import unpack_uint4

FP4 = WeightFormat.MX_FP4
DECODE_MMA_FORMATS = {
    MXElem.FP4_E2M1: FP4,
    MXElem.FP8_E4M3: WeightFormat.MX_FP8,
    MXElem.FP8_E5M2: WeightFormat.MX_FP8_E5M2,
    MXElem.FP6_E3M2: WeightFormat.MX_FP6_E3M2,
    MXElem.FP6_E2M3: WeightFormat.MX_FP6_E2M3,
    MXElem.INT8: WeightFormat.MX_INT8,
}
"""MX elements decode_mma serves, with bf16 or fp16 activations (its bf16-pair decode; fp16
rounds its pairs' values once more, as the emulated path's cast; int8: the codes' integers on
the MMA and each block's scale on its float32 sums, decode_mma_steps._post_scaled_step, taken
in session 36: H100 8192^2 M1 34.3 us against mx_decode's own tile's 39.8, bench/NOTES.md)."""
XMX = os.environ.get("AOQ_XMX", "0") == "1"
"""``AOQ_XMX=1``: the ``mx-int8`` config's decode (M <= 16, eager or in CUDA graphs, not under
torch.compile) runs :func:`mx_int8_xmx` in place of the activation's MX quantize-dequantize
and the bf16 decode (aoq/tensors/triton_linear_mx.py). Off: timed on an H100 in session 37
it was no faster (decode alone, M1 8192^2 / 4096x14336 / 14336x4096: 33.7 / 31.9 / 31.8 µs
against the bf16 decode's 33.7 / 32.3 / 29.7; M16 37.8 / 34.6 / 34.8 against 36.7 / 35.4 /
32.7; bench c39c2b end to end 36.7 µs at 8192^2 M1, as before), and its conformance (c17f5d,
30 cases) is green, so a run can still try it without a code change."""
ROW_CHUNK = tl.constexpr(2048)
"""Elements a step of the NVFP4 one-row amax reads."""


@triton.jit
def _mx_decode_kernel(
    x_ptr, q_ptr, s_ptr, ts_ptr, b_ptr, y_ptr, p_ptr, c_ptr,
    M, N, K, K_SPLIT, stride_xm, stride_qn, stride_sn, stride_ym,
    BITS: tl.constexpr, EBITS: tl.constexpr, MBITS: tl.constexpr, BIAS: tl.constexpr,
    NAN: tl.constexpr, NVFP4: tl.constexpr, BS: tl.constexpr, HAS_BIAS: tl.constexpr,
    SPLIT_K: tl.constexpr, TAIL: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    UPCAST: tl.constexpr, XQDQ: tl.constexpr = 0, A_SHIFT: tl.constexpr = 0,
    A_MIN_NORMAL: tl.constexpr = 0, A_MAX_NORMAL: tl.constexpr = 0, A_IS_INT: tl.constexpr = 0,
    A_HW_FP8: tl.constexpr = 0, A_FP8_TY: tl.constexpr = None, A_EMAX: tl.constexpr = 0,
    A_MAX_FRAC: tl.constexpr = 0, A_RCEIL: tl.constexpr = 0, E2M1: tl.constexpr = 0,
    E4M3: tl.constexpr = 0, FP4_SHIFT: tl.constexpr = 0, FP4_MIN_NORMAL: tl.constexpr = 0,
    E4M3_SHIFT: tl.constexpr = 0, E4M3_MIN_NORMAL: tl.constexpr = 0,
    TRIGGER: tl.constexpr = False,
):  # fmt: skip
    """Program (n, s): outputs [16, BLOCK_N] over K range s (K_SPLIT long, a multiple of
    BLOCK_K). SPLIT_K > 1 stores float32 partials for the column tile's last program (TAIL,
    splitk.finish) or splitk.reduce_partials (which add the bias); else the bias is added
    here. XQDQ (M = 1): x's one row is quantize-dequantized here, step by step, to the
    values the activation kernel would have stored: 1 MX (blocks of BS, the A_ element
    constants of mx_steps.elem_constants), 2 NVFP4 (the row's tensor scale first; the format
    constants of nvfp4_act.QDQ_CONSTS). TRIGGER: splitk.trigger."""
    splitk.trigger(TRIGGER)
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_m = tl.arange(0, 16)
    mmask = offs_m < M
    nmask = (offs_n < N)[:, None]
    xrows = x_ptr + offs_m.to(tl.int64)[:, None] * stride_xm
    rows = q_ptr + offs_n.to(tl.int64)[:, None] * stride_qn
    s_rows = s_ptr + offs_n.to(tl.int64)[:, None] * stride_sn
    acc = tl.zeros((16, BLOCK_N), dtype=tl.float32)
    k_lo = pid_k * K_SPLIT
    if XQDQ == 2:
        x_ts = na.tensor_scale(na.amax_bits_of(x_ptr, 0, K, K, ROW_CHUNK), E2M1, E4M3)
    for k0 in range(k_lo, tl.minimum(K, k_lo + K_SPLIT), BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        if XQDQ:  # row 0 the qdq of x's row, the rest zeros (as the masked load's)
            xr = tl.load(x_ptr + offs_k, mask=offs_k < K, other=0.0).to(tl.float32)
            xr = tl.reshape(xr, (BLOCK_K // BS, BS))
            if XQDQ == 1:
                shared, ok = st.shared_exp(st.amax_bits(xr, 1), A_EMAX, A_MAX_FRAC, A_RCEIL)
                xr = st.qdq(xr, st.exp2i(-shared, not A_IS_INT)[:, None],
                            st.exp2i(shared, False)[:, None], ok[:, None], A_SHIFT, A_MIN_NORMAL,
                            A_MAX_NORMAL, A_IS_INT, A_HW_FP8, A_FP8_TY)  # fmt: skip
            else:
                xr = na.qdq_blocks(xr, x_ts, E2M1, E4M3, FP4_SHIFT, FP4_MIN_NORMAL, E4M3_SHIFT,
                                   E4M3_MIN_NORMAL)  # fmt: skip
            xr = in_x_dtype(tl.reshape(xr, (BLOCK_K,)), x_ptr.dtype.element_ty, UPCAST)
            xt = tl.where((offs_m == 0)[:, None], xr[None, :], tl.zeros((16, BLOCK_K), xr.dtype))
        else:
            xt = tl.load(xrows + offs_k[None, :], mask=mmask[:, None] & (offs_k < K)[None, :],
                         other=0.0)  # fmt: skip
        w = dequant_tile(rows, s_rows, ts_ptr, nmask, k0, K, BITS, EBITS, MBITS, BIAS, NAN,
                         NVFP4, BS, BLOCK_N, BLOCK_K)  # fmt: skip
        if UPCAST:  # the interpreter: float32 operands (its low-precision dot is not exact)
            w = in_x_dtype(w, x_ptr.dtype.element_ty, UPCAST)
            acc = tl.dot(xt.to(tl.float32), tl.trans(w), acc, input_precision="ieee")
        else:
            w = w.to(x_ptr.dtype.element_ty)  # the emulated path's weights
            acc = tl.dot(xt, tl.trans(w), acc)
    omask = mmask[:, None] & (offs_n < N)[None, :]
    if SPLIT_K > 1:
        part = p_ptr + pid_k.to(tl.int64) * M * N + offs_m.to(tl.int64)[:, None] * N
        tl.store(part + offs_n[None, :], acc, mask=omask)
        if TAIL:
            splitk.finish(p_ptr, c_ptr, p_ptr, p_ptr, p_ptr, b_ptr, y_ptr, M, N, stride_ym,
                          SPLIT_K, TAIL, BLOCK_N)  # fmt: skip
    else:
        if HAS_BIAS:
            acc += tl.load(b_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)[None, :]
        y = y_ptr + offs_m.to(tl.int64)[:, None] * stride_ym + offs_n[None, :]
        tl.store(y, acc.to(y_ptr.dtype.element_ty), mask=omask)


TILE = {"BLOCK_N": 64, "BLOCK_K": 128, "num_warps": 4, "num_stages": 4, "per_sm": 8}
"""Outputs per program, K per step (at least one block), warps, pipeline depth, split-K
target of programs per SM (splitk.split_k). Session 10 (H200, graph replays, M 1 and 16 at
8192 x 8192 and 4096 x 14336; fp4, fp8_e4m3, int8, NVFP4): the best or within 1.5 us of the
best of five tiles everywhere (fp4 M1: 45.9 / 41.4 us, fp8 57.3 / 51.5, int8 38.7 / 34.3,
NVFP4 45.1 / 40.3). A CUDA-core GEMV for M = 1 (blocks as [rows, blocks, units], no
interleaving, eight tiles) lost to it on every format but fp8 at one tile (fp4 93-131 us,
NVFP4 103-223, fp8 50.6-105, int8 42-89) and was dropped."""
MAX_BLOCK = 256
"""Block sizes the kernel takes: powers of two from 16 up to this (whole blocks a step)."""
X_DTYPES = (torch.bfloat16, torch.float16)


def serves(x: torch.Tensor, qdata: torch.Tensor, block_size: int, rows: int = 16) -> str | None:
    """None when the kernel takes the call, else why not: M <= ``rows`` rows (16; past it
    :func:`mma_rows`'s) of bf16 / fp16 with unit stride, contiguous packed codes, a
    power-of-two block size in [16, MAX_BLOCK]."""
    m = x.shape[0]
    bs = block_size
    if x.dtype not in X_DTYPES:
        return f"{x.dtype} activations (the MX decode kernel multiplies bf16 or fp16)"
    most = max(rows, 16)
    if m > most or x.stride(-1) != 1:
        hint = " (past 16: decode_mma on sm90, group-major bytes)" if m > 16 else ""
        return f"M={m} > {most} or strided rows{hint}"
    if not qdata.is_contiguous():
        return "non-contiguous codes"
    if bs & (bs - 1) or not 16 <= bs <= MAX_BLOCK:
        return f"block_size={bs} (the MX decode kernel takes powers of two from 16 to {MAX_BLOCK})"
    return None


def mma_rows(
    x: torch.Tensor,
    qdata: torch.Tensor,
    gm: torch.Tensor | None,
    zero: torch.Tensor | None,
    block_size: int,
    wfmt: WeightFormat | None,
) -> int:
    """The most rows of ``x`` the decode takes: past 16 (this kernel's tile), ``x``'s own where
    wt_rows_mx or decode_mma serves it (decode_mma_tiles.ROWS_TILE: 17-128 rows of bf16 / fp16
    x on sm90) on the weight's group-major bytes ``gm`` (a view with strides (1, N)) in
    ``wfmt``, with ``zero`` its BIG flag (MX) or tensor scale (NVFP4); else 16."""
    m, k = x.shape
    if m <= 16 or gm is None or zero is None or wfmt is None:
        return 16
    s = gm.view(torch.uint8)
    if wt_rows_mx.serves(x, qdata, s, zero, block_size, wfmt):
        return m
    return m if dm.serves(x, qdata, k // block_size, wfmt, s, zero) else 16


def fp6_refusal(
    x: torch.Tensor,
    qdata: torch.Tensor,
    gm: torch.Tensor | None,
    flag: torch.Tensor | None,
    block_size: int,
    elem: MXElem,
) -> str | None:
    """None when decode_mma's fp6 loop (to 64 rows) or wt_rows_fp6 (65-128, sm90) takes the
    call (bf16 / fp16 x on CUDA, the weight's group-major bytes ``gm`` and BIG flag, K a
    multiple of decode_mma.FP6_STEP), else why not. This kernel's own tile would be slower
    than the emulated path (dispatch.py), which then serves the call as a recorded fallback."""
    k = x.shape[1]
    if gm is None or flag is None:
        return "MX fp6: no group-major scale bytes (the bf16-pair decode is CUDA's, bf16 / fp16 x)"
    wfmt = DECODE_MMA_FORMATS[elem]
    if not dm.serves(x, qdata, k // block_size, wfmt, gm, flag) and not wt_rows_mx.serves(
        x, qdata, gm.view(torch.uint8), flag, block_size, wfmt
    ):
        return f"MX fp6: no decode serves M={x.shape[0]}, K={k}, {x.dtype} x (K a multiple of 128)"
    return None


def mx_decode_triton(
    x: torch.Tensor,
    qdata: torch.Tensor,
    scale: torch.Tensor,
    tensor_scale: torch.Tensor | None,
    elem: str,
    block_size: int,
    bias: torch.Tensor | None,
    split: int | None = None,
    one_row: str | None = None,
    *,
    big_scales: torch.Tensor | None = None,
) -> torch.Tensor:
    """Triton launcher of ``aoq::mx_decode``: y = x · dequant(W)ᵀ (+ bias) in x's dtype (the
    caller checked :func:`serves`); ``elem`` an MXElem value. MX:
    ``scale`` E8M0 [N, K / block_size]; NVFP4 (``tensor_scale`` given): e4m3 [N, K / 16] and
    elem fp4_e2m1. ``split`` forces the split-K (tests).

    ``big_scales`` (aoq.tensors.mx.big_scale_flag; ``scale`` then its group-major bytes, a
    view with strides (1, N)): bf16 or fp16 x and fp4, fp6 or fp8 codes go to decode_mma's
    bf16-pair decode (WFMT 4 to 8: the same weights, in about half the time, bench/NOTES.md
    sessions 16, 17 and 31), int8 codes to its post-scaled loop (WFMT 10, session 36);
    anything it does not serve reads the bytes row-major here (fp6 too, though the dispatch
    keeps it off: :func:`fp6_refusal`). NVFP4
    weights whose bytes come group-major (``scale`` a view with strides (1, N): the
    weight's derived ``scale_gm``) go to decode_mma's WFMT 9 (kernels/nvfp4_codes.py).

    ``one_row`` (x one row): the kernel quantize-dequantizes x itself (XQDQ), in one launch,
    to the values of the activation kernel: MX weights name the activation's scale rounding
    (``mx_cast.mx_qdq_gpu(x, elem, block_size, 1, one_row)``), NVFP4 weights "nvfp4"
    (``nvfp4_act.nvfp4_qdq_triton(x)``). The two launches' bits. This kernel's tile does it,
    except for MX fp6 with group-major bytes: decode_mma's fp6 loop rounds x itself."""
    act: dict[str, object] = {}
    if one_row is not None:
        if x.shape[0] != 1:
            raise ValueError(f"one_row takes one row of x, got {tuple(x.shape)}")
        act = one_row_constexprs(elem, one_row, tensor_scale is not None, has_fp8_cvt(x.device))
    m, k = x.shape
    n = qdata.shape[0]
    nvfp4 = tensor_scale is not None
    elem = MXElem(elem)
    if qdata.shape[1] * 8 != k * elem.spec.bits:
        raise ValueError(f"codes {tuple(qdata.shape)} do not hold K={k} {elem.value} elements")
    s = scale.view(torch.uint8)
    # group-major bytes (strides (1, N)): MX with its BIG flag, NVFP4 by its strides
    gm = big_scales is not None or (nvfp4 and s.dim() == 2 and s.stride(0) == 1 and n > 1)
    bs = NVFP4_BLOCK if nvfp4 else block_size
    if s.shape != (n, k // bs) or not (gm or s.is_contiguous()):
        raise ValueError(f"scale {tuple(s.shape)}: expected contiguous ({n}, {k // bs})")
    backend = backend_of(x.device)
    y = torch.empty((m, n), dtype=out_dtype_for(x.dtype), device=x.device)
    if m == 0 or n == 0:
        return y.to(x.dtype)
    wfmt = WeightFormat.NVFP4 if nvfp4 else DECODE_MMA_FORMATS.get(elem)
    zero = tensor_scale if nvfp4 else big_scales  # NVFP4's where MX passes the BIG flag
    if gm and one_row is None and wt_rows_mx.takes(x, qdata, s, zero, bs, wfmt):
        return wt_rows_mx.wt_rows_mx(x, qdata, s, zero, bias, y, wfmt, split).to(x.dtype)
    if gm and wfmt is not None and dm.serves(x, qdata, k // bs, wfmt, s, zero):
        pdl = _common.decode_pdl(x.device)  # (it waits before reading x)
        if one_row is None:
            dm.decode_mma(x, qdata, s, zero, bias, y, k // bs, wfmt, split, pdl=pdl)
            return y.to(x.dtype)
        if wfmt in dm.FP6_FORMATS and bs <= dm.FP6_STEP:  # fp6 rounds x in its own loop
            dm.decode_mma(x, qdata, s, zero, bias, y, k // bs, wfmt, split, x_qdq=act, pdl=pdl)
            return y.to(x.dtype)
    if m > 16:  # (the dispatch asks mma_rows first)
        raise ValueError(f"M={m}: past 16 rows only wt_rows_mx / decode_mma serve MX / NVFP4")
    s = s.contiguous()  # group-major bytes decode_mma did not take: a row-major copy
    ebits, mbits, bias_e, nan = elem_params(elem)
    ts = tensor_scale if tensor_scale is not None else s
    fmt = dict(BITS=elem.spec.bits, EBITS=ebits, MBITS=mbits, BIAS=bias_e, NAN=nan, NVFP4=nvfp4,
               BS=bs, HAS_BIAS=bias is not None)  # fmt: skip
    cfg = dict(TILE)
    bn = cfg.pop("BLOCK_N")
    bk = max(cfg.pop("BLOCK_K"), block_size)
    per_sm = cfg.pop("per_sm")
    n_prog = triton.cdiv(n, bn)
    p = splitk.plan(y, backend, n_prog, k, bk, split, per_sm=per_sm)
    launch(_mx_decode_kernel, (n_prog, p.split),
        x, qdata, s, ts, bias if bias is not None else s, y, p.partials, p.counter_arg(),
        m, n, k, p.k_split, x.stride(0), qdata.stride(0), s.stride(0), y.stride(0),
        SPLIT_K=p.split, TAIL=p.tail(splitk.epilogue_bits(bias=bias)), BLOCK_N=bn, BLOCK_K=bk,
        UPCAST=INTERPRET, TRIGGER=p.chain, **fmt, **cfg, **act,
    )  # fmt: skip
    p.finish(y, bias=bias)
    return y.to(x.dtype)


def mx_int8_xmx(
    x: torch.Tensor,
    qdata: torch.Tensor,
    scale_gm: torch.Tensor,
    big_scales: torch.Tensor,
    block_size: int,
    bias: torch.Tensor | None,
    scale_rounding: str,
    split: int | None = None,
    tile: dict | None = None,
) -> torch.Tensor:
    """MX int8 weights and activations (the ``mx-int8`` config) on decode_mma's integer MMA
    (XMX; timed in session 37, no faster, so only under AOQ_XMX): x (bf16 or fp16, M <= 16)
    cast to MX int8 codes and E8M0 bytes along K (mx_cast_triton, the activation
    kernel's rounding ``scale_rounding``), then each block's int32 sums times both powers
    of two (decode_mma_steps._int8_block_step): the emulated path's product (x
    quantize-dequantized, then x W^T in float32) up to float32 summation order, without the
    weights' conversion to bf16. ``scale_gm``: the weight's group-major bytes (a view with
    strides (1, N)); ``big_scales``: its BIG flag."""
    m, k = x.shape
    codes, xs = mx_cast_triton(x, MXElem.INT8, block_size, 1, scale_rounding)
    assert xs is not None  # (not a qdq cast)
    y = torch.empty((m, qdata.shape[0]), dtype=out_dtype_for(x.dtype), device=x.device)
    dm.decode_mma(codes.view(torch.int8), qdata, scale_gm.view(torch.uint8), big_scales, bias,
                  y, k // block_size, WeightFormat.MX_INT8, split, tile=tile,
                  x_block_scale=xs)  # fmt: skip
    return y.to(x.dtype)


def one_row_constexprs(elem: str, one_row: str, nvfp4: bool, hw_fp8: bool) -> dict[str, object]:
    """The kernel's XQDQ constexprs for :func:`mx_decode_triton`'s ``one_row`` (also its
    compile-target specs'); ``hw_fp8``: fp8 elements through the float8 conversion."""
    if nvfp4:
        if one_row != "nvfp4":
            raise ValueError(f"NVFP4 weights take one_row='nvfp4', got {one_row!r}")
        return {"XQDQ": 2, **{c: v for c, v in na.QDQ_CONSTS.items() if c != "BS"}}
    e = MXElem(elem)
    hw = hw_fp8 and e in st.FP8_TY
    c = st.elem_constants(e, ScaleRounding(one_row), hw)
    return {"XQDQ": 1, "A_SHIFT": c["SHIFT"], "A_MIN_NORMAL": c["MIN_NORMAL_BITS"],
            "A_MAX_NORMAL": c["MAX_NORMAL"], "A_IS_INT": c["IS_INT"], "A_HW_FP8": hw,
            "A_FP8_TY": c["FP8_TY"], "A_EMAX": c["EMAX"], "A_MAX_FRAC": c["MAX_FRAC"],
            "A_RCEIL": c["RCEIL"]}  # fmt: skip


# --- torch.library ----------------------------------------------------------------------------


@torch.library.custom_op("aoq::mx_decode", mutates_args=(), device_types="cpu")
def mx_decode(
    x: torch.Tensor,
    qdata: torch.Tensor,
    scale: torch.Tensor,
    tensor_scale: torch.Tensor | None,
    elem: str,
    block_size: int,
    bias: torch.Tensor | None,
    big_scales: torch.Tensor | None = None,
) -> torch.Tensor:
    """Reference on CPU: the emulated path (the weight dequantized to x's dtype by
    aoq.formats, one matmul). ``scale``: the block scales' bytes (uint8); ``big_scales``:
    see :func:`mx_decode_triton` (the reference has no use for it)."""
    e = MXElem(elem)
    if tensor_scale is not None:
        block = scale.view(torch.float8_e4m3fn)
        w = nvfp4_dequantize(unpack_uint4(qdata), block, tensor_scale, NVFP4_BLOCK, x.dtype)
    else:
        w = mx_dequantize(unpack_mx_codes(qdata, e), scale, e, block_size, 1, x.dtype)
    return F.linear(x, w, bias.to(x.dtype) if bias is not None else None)


@mx_decode.register_fake
def _(x, qdata, scale, tensor_scale, elem, block_size, bias, big_scales=None):  # type: ignore[no-untyped-def]
    return x.new_empty((x.shape[0], qdata.shape[0]))


@mx_decode.register_kernel("cuda")
def _(x, qdata, scale, tensor_scale, elem, block_size, bias, big_scales=None):  # type: ignore[no-untyped-def]
    return mx_decode_triton(x, qdata, scale, tensor_scale, elem, block_size, bias,
                            big_scales=big_scales)  # fmt: skip
