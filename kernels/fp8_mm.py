"""float8 x float8 linears (activations and weights in e4m3, scaled per row or per tensor).

Math (aoq.formats.linear.fp8_act_linear): y = (xq @ wqᵀ) · xs · wsᵀ (+ b), float32 products
and sums, cast to the output dtype. Two implementations:

- ``fp8_mm_triton``: a Triton GEMM. fp8 MMA where the target has one (sm89+, gfx942 FNUZ,
  gfx950 OCP), with the Hopper accumulator promoted to float32 once per K tile (its native
  fp8 accumulation keeps ~14 bits). Where the output is float32 both operands widen to bf16
  first (exactly: e4m3 fits in bf16), so the sum is a true float32 sum.
- ``scaled_mm``: torch._scaled_mm (cuBLASLt / hipBLASLt). Row-wise scaling there outputs
  bf16, and fp16 where this torch and BLAS have it (``rowwise_output``: probed once per
  device); other output dtypes run it with unit scales into float32 and scale after.

Op (namespace ``aoq``): ``fp8_mm``; CPU runs the reference.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from aoq.kernels import _common, mid_rows, splitk
from aoq.kernels import mx_steps as st
from aoq.kernels._common import (
    FLOAT_DTYPES,
    INTERPRET,
    Strategy,
    backend_of,
    check_2d,
    m_bucket,
    out_dtype_for,
)
from aoq.kernels._launch import launch
from aoq.kernels.act_one_row import one_row_scale, quantize_one_row
from aoq.kernels.configs import autotune, decode_tile, mm_configs
from triton.language.extra.cuda import gdc_wait

from aoq.formats import float8
from aoq.formats import linear as ref
from aoq.formats.mx import MXElem, ScaleRounding

_E4M3 = st.elem_constants(MXElem.FP8_E4M3, ScaleRounding.FLOOR, False)
INTERPRET_FLAG = tl.constexpr(INTERPRET)


@triton.jit
def _fp8_mm_kernel(
    x_ptr, xs_ptr, w_ptr, ws_ptr, b_ptr, y_ptr, p_ptr, c_ptr,
    M, N, K, K_SPLIT, stride_xm, stride_wn, stride_ym, M_KEY,
    X_ROW: tl.constexpr, W_ROW: tl.constexpr, HAS_BIAS: tl.constexpr, WIDEN: tl.constexpr,
    SPLIT_K: tl.constexpr, TAIL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr, XQ: tl.constexpr = 0, QMAX: tl.constexpr = 1.0,
    E4M3_SHIFT: tl.constexpr = 0, E4M3_MIN_NORMAL: tl.constexpr = 0, PDL: tl.constexpr = False,
    TRIGGER: tl.constexpr = False, AHEAD: tl.constexpr = False,
):  # fmt: skip
    """Program (n, m, s) covers K range s (K_SPLIT long; the whole of K when SPLIT_K == 1).
    With SPLIT_K > 1 it stores its float32 partial, and the column tile's last program
    (TAIL, splitk.finish) or splitk.reduce_partials sums the partials in order, scales and
    adds the bias. XQ (M = 1): x is the float activation row, quantized here (1: per row,
    2: per tensor; QMAX the float8 maximum) with the scale written to xs_ptr, bit for bit
    quantize_fp8_act_triton's codes and scale. PDL: launched with programmatic dependent
    launch after the kernel that wrote x and xs, which it waits for before reading anything.
    TRIGGER: splitk.trigger. AHEAD (split decode with PDL, not XQ, WIDEN 0): the first step's
    weights are loaded before the wait (they are not the previous kernel's output) and that
    step is done before the loop: they stream while the activation kernel still runs."""
    splitk.trigger(TRIGGER)
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mmask = offs_m < M
    nmask = offs_n < N
    x_rows = x_ptr + offs_m.to(tl.int64)[:, None] * stride_xm
    w_cols = w_ptr + offs_n.to(tl.int64)[None, :] * stride_wn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    k_lo, k_hi = splitk.k_range(tl.program_id(2), K, K_SPLIT, SPLIT_K)
    if AHEAD:  # the first step's weights, before the wait
        wt, offs_k, kmask = splitk.first_step(w_cols, k_lo, K, nmask, BLOCK_K)
    if PDL:
        gdc_wait()
    if XQ:
        xs, xz = one_row_scale(x_ptr, xs_ptr, xs_ptr, K, 3, False, XQ == 2, QMAX, 2048)
    if AHEAD:
        xt = tl.load(x_rows + offs_k[None, :], mask=mmask[:, None] & kmask[None, :], other=0.0)
        acc = tl.dot(xt, wt, acc, max_num_imprecise_acc=BLOCK_K)
    for k0 in range(k_lo + (BLOCK_K if AHEAD else 0), k_hi, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        kmask = offs_k < K
        xt = tl.load(x_rows + offs_k[None, :], mask=mmask[:, None] & kmask[None, :], other=0.0)
        if XQ and INTERPRET_FLAG:  # its float8 casts do not carry a rounding into the
            # exponent (124.3 -> 64): the e4m3fn grid's values by arithmetic, kept in float32
            xt = quantize_one_row(xt, xs, xz, tl.float32, 3, QMAX)
            xt = st.on_grid(xt, E4M3_SHIFT, E4M3_MIN_NORMAL, QMAX, False)
        elif XQ:
            xt = quantize_one_row(xt, xs, xz, w_ptr.dtype.element_ty, 3, QMAX)
        # [BLOCK_K, BLOCK_N], transposed by the pointers (K-major B operand, no shuffle)
        wt = tl.load(w_cols + offs_k[:, None], mask=kmask[:, None] & nmask[None, :], other=0.0)
        if WIDEN == 2:  # interpreter: float32 operands
            acc = tl.dot(xt.to(tl.float32), wt.to(tl.float32), acc, input_precision="ieee")
        elif WIDEN == 1:  # float32 output: exact bf16 operands, float32 accumulation
            acc = tl.dot(xt.to(tl.bfloat16), wt.to(tl.bfloat16), acc)
        else:
            acc = tl.dot(xt, wt, acc, max_num_imprecise_acc=BLOCK_K)
    if SPLIT_K > 1:
        part = p_ptr + tl.program_id(2).to(tl.int64) * M * N + offs_m.to(tl.int64)[:, None] * N
        tl.store(part + offs_n[None, :], acc, mask=mmask[:, None] & nmask[None, :])
        if TAIL:
            splitk.finish(p_ptr, c_ptr, p_ptr, ws_ptr, xs_ptr, b_ptr, y_ptr, M, N, stride_ym,
                          SPLIT_K, TAIL, BLOCK_N)  # fmt: skip
        return
    if X_ROW:
        acc = acc * tl.load(xs_ptr + offs_m, mask=mmask, other=0.0)[:, None]
    else:
        acc = acc * tl.load(xs_ptr)
    if W_ROW:
        acc = acc * tl.load(ws_ptr + offs_n, mask=nmask, other=0.0)[None, :]
    else:
        acc = acc * tl.load(ws_ptr)
    if HAS_BIAS:
        acc = acc + tl.load(b_ptr + offs_n, mask=nmask, other=0.0).to(tl.float32)[None, :]
    y_ptrs = y_ptr + offs_m.to(tl.int64)[:, None] * stride_ym + offs_n[None, :]
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=mmask[:, None] & nmask[None, :])


DECODE_PER_SM = 4
"""Split-K target of decode programs per SM (splitk.split_k). Session 9, H200, fp8-row with
its act quant, graph replays, splits 1-16 forced at BLOCK_N 32/64/128: the best split was 4
at K = N = 8192 (22.6 us; 8: 27.1), 2-4 at 4096 x 14336 (21.0-21.2), 8 at 14336 x 4096 (21.6;
16: 25.8) and at 4096 x 4096 (10.8): what 4 programs an SM gives on each. BLOCK_N 64 was
within 0.5 us of the best BLOCK_N at every shape's best split."""


_TUNED: dict[tuple, object] = {}


def _tuned(strategy: Strategy, device: torch.device):
    backend = backend_of(device)
    key = (backend, strategy)
    if key not in _TUNED:
        _TUNED[key] = autotune(
            _fp8_mm_kernel,
            mm_configs(backend, strategy, gemv=False, int_dot=True),
            ["M_KEY", "N", "K", "X_ROW", "W_ROW", "WIDEN"],
        )
    return _TUNED[key]


def _check(xq: torch.Tensor, wq: torch.Tensor, out_dtype: torch.dtype) -> None:
    check_2d("xq", xq, float8.FP8_DTYPES)
    check_2d("wq", wq, (xq.dtype,))
    if xq.shape[1] != wq.shape[1]:
        raise ValueError(f"xq {tuple(xq.shape)} and wq {tuple(wq.shape)} disagree on K")
    if out_dtype not in FLOAT_DTYPES:
        raise ValueError(f"out_dtype={out_dtype}; expected one of {FLOAT_DTYPES}")


def fp8_mm_triton(
    xq: torch.Tensor,
    x_scale: torch.Tensor,
    wq: torch.Tensor,
    w_scale: torch.Tensor,
    bias: torch.Tensor | None,
    out_dtype: torch.dtype,
    strategy: int,
    split: int | None = None,
    pdl: bool = False,
) -> torch.Tensor:
    """Triton launcher of ``aoq::fp8_mm``. x_scale [M, 1] (per row) or [1] (per tensor);
    w_scale [N, 1] or [1]. Decode (M <= 16) runs a tile chosen by rule with K split across
    programs (splitk.py; ``split`` forces it, for tests); prefill is autotuned, but at 17-256
    rows a tile by rule, K split where the tiles leave SMs idle (mid_rows.py). ``pdl``: the
    decode kernel launches with programmatic dependent launch (as int_act_mm_triton's)."""
    _check(xq, wq, out_dtype)
    backend_of(xq.device)  # (raises for a device no backend serves)
    m, k = xq.shape
    n = wq.shape[0]
    y = torch.empty((m, n), dtype=out_dtype_for(out_dtype), device=xq.device)
    if m == 0:
        return y.to(out_dtype)
    widen = 2 if INTERPRET else (1 if out_dtype == torch.float32 else 0)
    xs, ws = x_scale.contiguous(), w_scale.contiguous()
    flags = dict(X_ROW=xs.dim() == 2, W_ROW=ws.dim() == 2, HAS_BIAS=bias is not None, WIDEN=widen)
    b = bias if bias is not None else ws
    if Strategy(strategy) is Strategy.DECODE and m <= 16:
        _decode(xq, xs, wq, ws, bias, y, flags, split, 0, pdl)
        return y.to(out_dtype)

    def split_launch(grid: tuple[int, int, int], p: splitk.Plan, cfg: dict) -> None:
        launch(_fp8_mm_kernel, grid, xq, xs, wq, ws, b, y, p.partials, p.partials, m, n, k,
               p.k_split, xq.stride(0), wq.stride(0), y.stride(0), m_bucket(m), SPLIT_K=p.split,
               TAIL=0, TRIGGER=p.chain, **flags, **cfg)  # fmt: skip

    # 17-256 rows: the rule's tile (the same bits in every process), K split where the tiles
    # leave SMs idle (mid_rows.py)
    epi = dict(col_scale=ws.squeeze(-1), row_scale=xs.squeeze(-1), bias=bias)
    if Strategy(strategy) is Strategy.PREFILL and mid_rows.run(
        y, backend_of(xq.device), k, 0, split, split_launch, rule_tile=True, **epi
    ):
        return y.to(out_dtype)

    def grid(meta: dict) -> tuple[int, int]:
        return (triton.cdiv(n, meta["BLOCK_N"]), triton.cdiv(m, meta["BLOCK_M"]))

    launch(_tuned(Strategy(strategy), xq.device), grid,
        xq, xs, wq, ws, b, y, y, y, m, n, k, k, xq.stride(0), wq.stride(0), y.stride(0),
        m_bucket(m), SPLIT_K=1, TAIL=0, **flags,
    )  # fmt: skip
    return y.to(out_dtype)


def _decode(
    x: torch.Tensor,
    xs: torch.Tensor,
    wq: torch.Tensor,
    ws: torch.Tensor,
    bias: torch.Tensor | None,
    y: torch.Tensor,
    flags: dict,
    split: int | None,
    xq_mode: int,
    pdl: bool = False,
) -> None:
    """The decode launch: a tile by rule, K split across programs (``xq_mode``: the
    kernel's XQ, x then being the float row it quantizes into ``xs``; ``pdl``: programmatic
    dependent launch)."""
    backend = backend_of(x.device)
    m, k = x.shape
    n = wq.shape[0]
    # without a split, N / BLOCK_N programs stream all of K each: 64 programs for
    # N = 4096 left an H200 at 34 us for K = 14336 (fp8wo's split decode: 19.5)
    cfg = decode_tile(backend, 16, int4=False, group_size=0)
    cfg["BLOCK_K"] = max(32, cfg["BLOCK_K"])  # one fp8 MMA K step
    n_prog = triton.cdiv(n, cfg["BLOCK_N"])
    p = splitk.plan(y, backend, n_prog, k, cfg["BLOCK_K"], split, per_sm=DECODE_PER_SM)
    # [N, 1] / [M, 1] scales as vectors, [1] ones as scalars
    epi = dict(col_scale=ws.squeeze(-1), row_scale=xs.squeeze(-1), bias=bias)
    b = bias if bias is not None else ws
    launch(_fp8_mm_kernel, (n_prog, 1, p.split),
        x, xs, wq, ws, b, y, p.partials, p.counter_arg(), m, n, k, p.k_split, x.stride(0),
        wq.stride(0), y.stride(0), m_bucket(m), SPLIT_K=p.split,
        TAIL=p.tail(splitk.epilogue_bits(**epi)), XQ=xq_mode,
        QMAX=float8.fp8_max(wq.dtype) if xq_mode else 1.0,
        E4M3_SHIFT=_E4M3["SHIFT"] if INTERPRET and xq_mode else 0,
        E4M3_MIN_NORMAL=_E4M3["MIN_NORMAL_BITS"] if INTERPRET and xq_mode else 0, **flags, **cfg,
        PDL=pdl, launch_pdl=pdl, TRIGGER=p.chain,
        AHEAD=pdl and not xq_mode and flags["WIDEN"] == 0 and _common.PDL_AHEAD,
    )  # fmt: skip
    p.finish(y, **epi)


def fp8_linear_one_row(
    x: torch.Tensor,
    per_row: bool,
    wq: torch.Tensor,
    w_scale: torch.Tensor,
    bias: torch.Tensor | None,
    out_dtype: torch.dtype,
    split: int | None = None,
) -> torch.Tensor:
    """x [1, K] float -> quantize_fp8_act_triton(x, per_row) then fp8_mm_triton at decode, in
    one launch with the same bits: the decode kernel quantizes x's tiles itself (eager M = 1:
    one launch less, ~4 us of host time; no float8 copy of x)."""
    check_2d("x", x, FLOAT_DTYPES)
    if x.shape[0] != 1 or x.stride(1) != 1:
        raise ValueError(f"x {tuple(x.shape)}: one contiguous row expected")
    check_2d("wq", wq, float8.FP8_DTYPES)
    if INTERPRET and wq.dtype != torch.float8_e4m3fn:
        raise ValueError(f"{wq.dtype}: under the interpreter x is rounded on e4m3fn's grid only")
    if out_dtype not in FLOAT_DTYPES:
        raise ValueError(f"out_dtype={out_dtype}; expected one of {FLOAT_DTYPES}")
    n = wq.shape[0]
    y = torch.empty((1, n), dtype=out_dtype_for(out_dtype), device=x.device)
    xs = torch.empty((1, 1) if per_row else (1,), dtype=torch.float32, device=x.device)
    widen = 2 if INTERPRET else (1 if out_dtype == torch.float32 else 0)
    ws = w_scale.contiguous()
    flags = dict(X_ROW=per_row, W_ROW=ws.dim() == 2, HAS_BIAS=bias is not None, WIDEN=widen)
    _decode(x, xs, wq, ws, bias, y, flags, split, 1 if per_row else 2)
    return y.to(out_dtype)


_ROWWISE_OUTPUT: dict[tuple[str, int | None, torch.dtype, torch.dtype], bool] = {}


def rowwise_output(device: torch.device, dtype: torch.dtype, fp8: torch.dtype) -> bool:
    """Whether torch._scaled_mm on ``device`` takes row-wise scales of ``fp8`` operands with a
    ``dtype`` output.
    bf16 always. fp16 came with cuBLAS 12.9's row-wise path and torch 2.10's CUTLASS one
    (torch 2.11 + CUDA 13 has it); without it, fp16 ran unit scales into float32 and three
    more passes in torch: 0.63x bf16 at M 2048, K = N = 4096 on an H100 (bench run a858d0).
    Probed once per device with a 16 x 32 x 16 product with a bias, never while a CUDA graph
    is captured or torch.compile traces (those take the unit-scale path until an eager call
    probed)."""
    if dtype == torch.bfloat16:
        return True
    key = (device.type, device.index, dtype, fp8)
    known = _ROWWISE_OUTPUT.get(key)
    if known is not None:
        return known
    if torch.compiler.is_compiling() or (
        device.type == "cuda" and torch.cuda.is_current_stream_capturing()
    ):
        return False
    a = torch.zeros(16, 32, device=device).to(fp8)
    ones = torch.ones(16, 1, device=device)
    bias = torch.zeros(16, dtype=dtype, device=device)
    try:
        torch._scaled_mm(a, a.t(), scale_a=ones, scale_b=ones.t(), bias=bias, out_dtype=dtype)
        _ROWWISE_OUTPUT[key] = True
    except RuntimeError:
        _ROWWISE_OUTPUT[key] = False
    return _ROWWISE_OUTPUT[key]


def scaled_mm(
    xq: torch.Tensor,
    x_scale: torch.Tensor,
    wq: torch.Tensor,
    w_scale: torch.Tensor,
    bias: torch.Tensor | None,
    out_dtype: torch.dtype,
    fast_accum: bool = False,
) -> torch.Tensor:
    """The same product through torch._scaled_mm (needs K and N multiples of 16).
    ``fast_accum``: ``use_fast_accum`` for a bfloat16 output (the config's permission; other
    outputs keep the promoted float32 sums, see Float8DynamicActivationFloat8WeightConfig)."""
    _check(xq, wq, out_dtype)
    row = x_scale.dim() == 2
    if not row or (out_dtype != torch.float32 and rowwise_output(xq.device, out_dtype, wq.dtype)):
        sa = x_scale.reshape(-1, 1) if row else x_scale.reshape(())
        sb = w_scale.reshape(1, -1) if row else w_scale.reshape(())
        b = bias.to(out_dtype) if bias is not None and out_dtype != torch.float32 else None
        fast = fast_accum and out_dtype == torch.bfloat16
        y = torch._scaled_mm(xq, wq.t(), scale_a=sa, scale_b=sb, bias=b, out_dtype=out_dtype,
                             use_fast_accum=fast)  # fmt: skip
        if bias is not None and b is None:
            y = y + bias.to(torch.float32)
        return y
    one = torch.ones((), dtype=torch.float32, device=xq.device)
    y = torch._scaled_mm(xq, wq.t(), scale_a=one, scale_b=one, out_dtype=torch.float32)
    y = y * x_scale.reshape(-1, 1) * w_scale.reshape(1, -1)
    if bias is not None:
        y = y + bias.to(torch.float32)
    return y.to(out_dtype)


# --- torch.library ----------------------------------------------------------------------------


@torch.library.custom_op("aoq::fp8_mm", mutates_args=(), device_types="cpu")
def fp8_mm(
    xq: torch.Tensor,
    x_scale: torch.Tensor,
    wq: torch.Tensor,
    w_scale: torch.Tensor,
    bias: torch.Tensor | None,
    out_dtype: torch.dtype,
    strategy: int,
) -> torch.Tensor:
    """Reference (aoq.formats.linear.fp8_act_linear) on CPU."""
    return ref.fp8_act_linear(xq, x_scale, wq, w_scale, out_dtype, bias)


@fp8_mm.register_fake
def _(xq, x_scale, wq, w_scale, bias, out_dtype, strategy):  # type: ignore[no-untyped-def]
    return xq.new_empty((xq.shape[0], wq.shape[0]), dtype=out_dtype)


fp8_mm.register_kernel("cuda")(fp8_mm_triton)
