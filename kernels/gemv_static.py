"""The M = 1 weight-only GEMV for per-channel byte codes (int8, fp8 e4m3) with K compiled in,
the structure Inductor gives torchao's compiled decode; served where it beats decode_mma.

Why (bench/NOTES.md, sessions 29-30): with a static K the loop over K unrolls completely and
ptxas issues several steps' loads before the first multiply waits on them (6-10 on sm90),
where a runtime trip count gets one step in flight. One program takes ``BLOCK_N`` rows over
all of K: no split, no partials, one launch. Codes load ``evict_first``, x ``evict_last``;
int8 codes become floats by _common.int8_float (an int-to-float conversion runs at a quarter
of the FMA rate); float32 products sum across the [BLOCK_N, BLOCK_K] register tile, one
cross-lane sum at the end, then the channel scale and the bias.

Where it serves: measured on an H100 (3.35 TB/s), STATIC_TILE ran 3-7 % under decode_mma at
K x N 8192^2, 4096 x 14336 and 14336 x 4096 (int8 25.4 / 22.7 / 22.6 µs against 27.2 / 23.9
/ 24.3; fp8 25.2 / 22.3 / 23.7 against 26.7 / 23.8 / 24.4); on an H200 (4.8 TB/s) no tile of
it beat decode_mma beyond 1-3 % (session 29), and static_tile's int8 ran 23.7 / 21.2 / 20.0
against 20.5 / 18.3 / 18.5 µs there (fp8 within 1 %: session 30). So the rule is sm90 with
DRAM under MAX_DRAM_BANDWIDTH (the device's own memory clock and bus width), CUDA only;
other GPUs keep decode_mma (none of them was timed). One compile per K (at most MAX_K).
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl
from aoq.kernels._common import WeightFormat, int8_float
from aoq.kernels._launch import launch
from triton.language.extra.cuda import gdc_wait

STATIC_TILE = {"BLOCK_N": 2, "BLOCK_K": 512, "num_warps": 2}
"""Rows a program, codes a step, warps: the H100's best single tile over the three shapes
(bench.decode_rows ``STATIC``, session 30). A rule, not a timing autotune."""
WHOLE_ROW_K = (4096, 8192)
"""K that static_tile reads in one step (2 rows, K / 1024 warps): fp8 2-8 % faster than
STATIC_TILE there on the H100 (21.5 against 23.2 µs at 4096 x 14336, 24.2-24.8 against
25.3-25.4 at 8192^2), int8 within 1 %; at K 14336 one step loses 5-25 %."""
MAX_K = 32768
"""Longest K compiled in (the loop unrolls to K / BLOCK_K steps: 64 here)."""
MAX_DRAM_BANDWIDTH = 4.0e12
"""Bytes a second: the H100 (3.35e12 from its properties) is under it, the H200 (4.81e12) over."""
SERVES = (WeightFormat.INT8, WeightFormat.FP8)


@triton.jit
def _gemv_static_kernel(
    x_ptr, w_ptr, s_ptr, b_ptr, y_ptr, N, stride_wn,
    K: tl.constexpr, INT8: tl.constexpr, HAS_BIAS: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, PDL: tl.constexpr = False,
):  # fmt: skip
    """y[n] = s[n] * sum_k x[k] w[n, k] (+ b[n]) for this program's rows. Rows past N read
    row N - 1 (their stores are masked), so only a partial last K step has masked loads.
    PDL: launched with programmatic dependent launch, it waits for the kernel before it
    before reading anything."""
    if PDL:
        gdc_wait()
    offs_n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    rows_n = tl.minimum(offs_n, N - 1)
    rows = w_ptr + rows_n.to(tl.int64)[:, None] * stride_wn
    acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    for k0 in tl.static_range(0, K, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        if k0 + BLOCK_K <= K:
            w = tl.load(rows + offs_k[None, :], eviction_policy="evict_first")
            xv = tl.load(x_ptr + offs_k, eviction_policy="evict_last")
        else:  # the partial last step: masked lanes' codes could be any bits (an fp8 NaN)
            kmask = offs_k < K
            w = tl.load(rows + offs_k[None, :], mask=kmask[None, :], eviction_policy="evict_first")
            xv = tl.load(x_ptr + offs_k, mask=kmask, other=0, eviction_policy="evict_last")
        wf = int8_float(w) if INT8 else w.to(tl.float32)
        if k0 + BLOCK_K > K:
            wf = tl.where(kmask[None, :], wf, 0.0)
        acc += wf * xv.to(tl.float32)[None, :]
    y = tl.sum(acc, axis=1) * tl.load(s_ptr + rows_n).to(tl.float32)
    if HAS_BIAS:
        y += tl.load(b_ptr + rows_n).to(tl.float32)
    tl.store(y_ptr + offs_n, y.to(y_ptr.dtype.element_ty), mask=offs_n < N)


def static_tile(k: int) -> dict[str, int]:
    """The tile for K: the whole row in one step at WHOLE_ROW_K, else STATIC_TILE."""
    if k in WHOLE_ROW_K:
        return {"BLOCK_N": 2, "BLOCK_K": k, "num_warps": k // 1024}
    return dict(STATIC_TILE)


def dram_bandwidth(props: object) -> float | None:
    """Peak DRAM bytes a second from CUDA device properties (memory clock in kHz, double data
    rate, bus width in bits); None where torch does not report them."""
    clock = getattr(props, "memory_clock_rate", 0)
    bus = getattr(props, "memory_bus_width", 0)
    return 2 * clock * 1e3 * bus / 8 if clock and bus else None


@functools.cache
def _fast_on(index: int) -> bool:
    props = torch.cuda.get_device_properties(index)
    bandwidth = dram_bandwidth(props)
    sm90 = (props.major, props.minor) == (9, 0)
    return sm90 and bandwidth is not None and bandwidth < MAX_DRAM_BANDWIDTH


def fast_on(device: torch.device) -> bool:
    """Whether this GPU is one where the static GEMV beats decode_mma (see module)."""
    if device.type != "cuda" or torch.version.hip is not None:
        return False
    return _fast_on(device.index if device.index is not None else torch.cuda.current_device())


def serves(x: torch.Tensor, qdata: torch.Tensor, groups: int, wfmt: WeightFormat) -> bool:
    """One row of float activations, per-channel int8 / e4m3 codes with unit inner strides,
    K <= MAX_K, on a GPU where it is the faster decode (fast_on)."""
    m, k = x.shape
    if m != 1 or groups != 1 or wfmt not in SERVES or k > MAX_K:
        return False
    return x.stride(1) == 1 and qdata.stride(1) == 1 and fast_on(x.device)


def gemv_static(
    x: torch.Tensor,
    qdata: torch.Tensor,
    scale: torch.Tensor,
    bias: torch.Tensor | None,
    y: torch.Tensor,
    tile: dict | None = None,
    pdl: bool = False,
) -> torch.Tensor:
    """y [1, N] = x [1, K] codes [N, K]ᵀ x scale [N] (+ bias); ``tile`` overrides
    static_tile's keys (probes: bench.decode_rows' ``STATIC``). ``pdl``: launched with
    programmatic dependent launch (the caller checked the GPU has it: _common.pdl)."""
    n, k = qdata.shape
    if x.shape != (1, k) or scale.numel() != n or y.shape != (1, n):
        raise ValueError(f"gemv_static: x {tuple(x.shape)}, codes {tuple(qdata.shape)}, "
                         f"scale {tuple(scale.shape)}, y {tuple(y.shape)}: one row")  # fmt: skip
    if n == 0:
        return y
    cfg = {**static_tile(k), **(tile or {})}
    scale = scale.reshape(-1)
    launch(_gemv_static_kernel, (triton.cdiv(n, cfg["BLOCK_N"]),),
        x, qdata, scale, bias if bias is not None else scale, y, n, qdata.stride(0),
        K=k, INT8=qdata.dtype == torch.int8, HAS_BIAS=bias is not None, PDL=pdl,
        launch_pdl=pdl, **cfg,
    )  # fmt: skip
    return y
