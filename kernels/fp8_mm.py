"""float8 x float8 linears (activations and weights in e4m3, scaled per row or per tensor).

Math (aoq.formats.linear.fp8_act_linear): y = (xq @ wqᵀ) · xs · wsᵀ (+ b), float32 products
and sums, cast to the output dtype. Two implementations:

- ``fp8_mm_triton``: a Triton GEMM. fp8 MMA where the target has one (sm89+, gfx942 FNUZ,
  gfx950 OCP), with the Hopper accumulator promoted to float32 once per K tile (its native
  fp8 accumulation keeps ~14 bits). Where the output is float32 both operands widen to bf16
  first (exactly: e4m3 fits in bf16), so the sum is a true float32 sum.
- ``scaled_mm``: torch._scaled_mm (cuBLASLt / hipBLASLt). Row-wise scaling there outputs
  bf16 only, so other output dtypes run it with unit scales into float32 and scale after.

Op (namespace ``aoq``): ``fp8_mm``; CPU runs the reference.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from aoq.kernels import splitk
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
from aoq.kernels.configs import autotune, decode_tile, mm_configs

from aoq.formats import float8
from aoq.formats import linear as ref


@triton.jit
def _fp8_mm_kernel(
    x_ptr, xs_ptr, w_ptr, ws_ptr, b_ptr, y_ptr, p_ptr, c_ptr,
    M, N, K, K_SPLIT, stride_xm, stride_wn, stride_ym, M_KEY,
    X_ROW: tl.constexpr, W_ROW: tl.constexpr, HAS_BIAS: tl.constexpr, WIDEN: tl.constexpr,
    SPLIT_K: tl.constexpr, TAIL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):  # fmt: skip
    """Program (n, m, s) covers K range s (K_SPLIT long; the whole of K when SPLIT_K == 1).
    With SPLIT_K > 1 it stores its float32 partial, and the column tile's last program
    (TAIL, splitk.finish) or splitk.reduce_partials sums the partials in order, scales and
    adds the bias."""
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mmask = offs_m < M
    nmask = offs_n < N
    x_rows = x_ptr + offs_m.to(tl.int64)[:, None] * stride_xm
    w_cols = w_ptr + offs_n.to(tl.int64)[None, :] * stride_wn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    k_lo = 0
    k_hi = K
    if SPLIT_K > 1:  # prefill keeps the plain 0..K loop (the pipeliner's best case)
        k_lo = tl.program_id(2) * K_SPLIT
        k_hi = tl.minimum(K, k_lo + K_SPLIT)
    for k0 in range(k_lo, k_hi, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        kmask = offs_k < K
        xt = tl.load(x_rows + offs_k[None, :], mask=mmask[:, None] & kmask[None, :], other=0.0)
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
) -> torch.Tensor:
    """Triton launcher of ``aoq::fp8_mm``. x_scale [M, 1] (per row) or [1] (per tensor);
    w_scale [N, 1] or [1]. Decode (M <= 16) runs a tile chosen by rule with K split across
    programs (splitk.py; ``split`` forces it, for tests); prefill is autotuned."""
    _check(xq, wq, out_dtype)
    backend = backend_of(xq.device)
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
        # without a split, N / BLOCK_N programs stream all of K each: 64 programs for
        # N = 4096 left an H200 at 34 us for K = 14336 (fp8wo's split decode: 19.5)
        cfg = decode_tile(backend, 16, int4=False, group_size=0)
        cfg["BLOCK_K"] = max(32, cfg["BLOCK_K"])  # one fp8 MMA K step
        n_prog = triton.cdiv(n, cfg["BLOCK_N"])
        p = splitk.plan(y, backend, n_prog, k, cfg["BLOCK_K"], split, per_sm=DECODE_PER_SM)
        # [N, 1] / [M, 1] scales as vectors, [1] ones as scalars
        epi = dict(col_scale=ws.squeeze(-1), row_scale=xs.squeeze(-1), bias=bias)
        launch(_fp8_mm_kernel, (n_prog, 1, p.split),
            xq, xs, wq, ws, b, y, p.partials, p.counter_arg(), m, n, k, p.k_split, xq.stride(0),
            wq.stride(0), y.stride(0), m_bucket(m), SPLIT_K=p.split,
            TAIL=p.tail(splitk.epilogue_bits(**epi)), **flags, **cfg,
        )  # fmt: skip
        p.finish(y, **epi)
        return y.to(out_dtype)

    def grid(meta: dict) -> tuple[int, int]:
        return (triton.cdiv(n, meta["BLOCK_N"]), triton.cdiv(m, meta["BLOCK_M"]))

    launch(_tuned(Strategy(strategy), xq.device), grid,
        xq, xs, wq, ws, b, y, y, y, m, n, k, k, xq.stride(0), wq.stride(0), y.stride(0),
        m_bucket(m), SPLIT_K=1, TAIL=0, **flags,
    )  # fmt: skip
    return y.to(out_dtype)


def scaled_mm(
    xq: torch.Tensor,
    x_scale: torch.Tensor,
    wq: torch.Tensor,
    w_scale: torch.Tensor,
    bias: torch.Tensor | None,
    out_dtype: torch.dtype,
) -> torch.Tensor:
    """The same product through torch._scaled_mm (needs K and N multiples of 16)."""
    _check(xq, wq, out_dtype)
    row = x_scale.dim() == 2
    if out_dtype == torch.bfloat16 or not row:
        sa = x_scale.reshape(-1, 1) if row else x_scale.reshape(())
        sb = w_scale.reshape(1, -1) if row else w_scale.reshape(())
        b = bias.to(out_dtype) if bias is not None and out_dtype != torch.float32 else None
        y = torch._scaled_mm(xq, wq.t(), scale_a=sa, scale_b=sb, bias=b, out_dtype=out_dtype)
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
