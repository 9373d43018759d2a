"""float8 weights: weight-only and fp8 x fp8 (per-row or per-tensor scaling).

Fields:
    qdata  float8_e4m3fn (e4m3fnuz on gfx942)  [N, K]
    scale  float32  [N, 1] (per output channel) or [1] (per tensor)
Attrs: act (ActQuant.NONE | FP8_ROW | FP8_TENSOR), config_id, config_json, fast_accum (the
config's: torch._scaled_mm may use the tensor cores' accumulation for bfloat16 outputs;
False in checkpoints written before it existed).
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable

import torch

from aoq.dispatch import Scheme, kernel
from aoq.dispatch_table import FP8_NARROW_N
from aoq.formats import float8
from aoq.formats import linear as ref
from aoq.formats.float8 import Granularity
from aoq.tensors.activation import split_bias
from aoq.tensors.base import ActQuant, QuantizedWeight, check_act

_FP8_NARROW = os.environ.get("AOQ_FP8_NARROW", "1") != "0"
"""The "row-narrow" variant (dispatch_table.FP8_NARROW_MAX_M), read at import; on since the
full cuda matrix 9e9cc3 ran with it (session 58: every fp8-row case green, its 100 / 120-row
ones on the Triton kernel); ``AOQ_FP8_NARROW=0`` turns it off."""


class Float8Tensor(QuantizedWeight):
    tensor_fields = ("qdata", "scale")
    attr_fields = ("act", "config_id", "config_json", "fast_accum")
    attr_defaults = {"fast_accum": False}

    qdata: torch.Tensor
    scale: torch.Tensor

    @classmethod
    def from_float(
        cls,
        w: torch.Tensor,
        granularity: Granularity,
        act: ActQuant,
        fp8_dtype: torch.dtype,
        config_id: str,
        config_json: str,
        fast_accum: bool = False,
    ) -> Float8Tensor:
        q, s = float8.quantize_fp8(w, granularity, fp8_dtype)
        return cls(
            w.shape,
            w.dtype,
            qdata=q,
            scale=s,
            act=act,
            config_id=config_id,
            config_json=config_json,
            fast_accum=fast_accum,
        )

    def validate(self) -> None:
        n, k = self.shape
        self._expect("qdata", float8.FP8_DTYPES, (n, k))
        shape = (n, 1) if self.scale.dim() == 2 else (1,)
        self._expect("scale", (torch.float32,), shape)
        check_act(self, (ActQuant.NONE, ActQuant.FP8_ROW, ActQuant.FP8_TENSOR))
        if not isinstance(self.fast_accum, bool) or (self.fast_accum and self.act is ActQuant.NONE):
            raise ValueError(
                f"Float8Tensor: fast_accum={self.fast_accum!r} (a bool, and only with fp8 "
                "activations: a weight-only product has no fp8 GEMM)"
            )

    @property
    def scheme(self) -> Scheme:
        return Scheme.FP8_WEIGHT_ONLY if self.act is ActQuant.NONE else Scheme.FP8_FP8

    @property
    def dispatch_variant(self) -> str | None:
        """ "tensor" for per-tensor activation scales (dispatch.VARIANT_BY_M); unless
        ``AOQ_FP8_NARROW=0``, "row-narrow" for row scales without fast accumulation and N <=
        dispatch_table.FP8_NARROW_N (the Triton kernel to 128 rows on sm90); else None."""
        if self.act is ActQuant.FP8_TENSOR:
            return "tensor"
        narrow = self.act is ActQuant.FP8_ROW and not self.fast_accum and _FP8_NARROW
        return "row-narrow" if narrow and self._size[0] <= FP8_NARROW_N else None

    @property
    def act_granularity(self) -> Granularity:
        return Granularity.TENSOR if self.act is ActQuant.FP8_TENSOR else Granularity.ROW

    def dequantize(self, dtype: torch.dtype | None = None) -> torch.Tensor:  # type: ignore[override]
        return float8.dequantize_fp8(self.qdata, self.scale).to(dtype or self.dtype)


# --- weight-only ---------------------------------------------------------------------------


@kernel("reference.fp8_weight_only")
def _fp8wo_reference(x: torch.Tensor, w: Float8Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    fb, _ = split_bias(bias, static=False)
    return ref.weight_only_linear(x, w.dequantize(torch.float32), fb)


@kernel("cpu.fp8_weight_only_mm")
def _fp8wo_cpu(x: torch.Tensor, w: Float8Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """fp8 codes widen exactly to float32; the scale is applied to the N outputs, not the
    N x K weight."""
    fb, _ = split_bias(bias, static=False)
    ct = ref.compute_dtype(x)
    y = (x.to(ct) @ w.qdata.to(ct).t()) * w.scale.to(ct).reshape(1, -1)
    if fb is not None:
        y = y + fb.to(ct)
    return y.to(x.dtype)


# --- fp8 x fp8 -----------------------------------------------------------------------------


def _quantize_act(x: torch.Tensor, w: Float8Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return float8.quantize_fp8(x, w.act_granularity, w.qdata.dtype)


@kernel("reference.fp8_fp8")
def _fp8_reference(x: torch.Tensor, w: Float8Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    fb, _ = split_bias(bias, static=False)
    xq, xs = _quantize_act(x, w)
    return ref.fp8_act_linear(xq, xs, w.qdata, w.scale, x.dtype, bias=fb)


@functools.lru_cache(maxsize=1)
def _cpu_rowwise_scaled_mm() -> bool:
    """Whether this torch's CPU _scaled_mm takes row-wise scales (2.13 does; 2.11's oneDNN
    path asserts per-tensor scales only)."""
    a = torch.zeros(16, 16).to(torch.float8_e4m3fn)
    try:
        torch._scaled_mm(
            a, a.t(), scale_a=torch.ones(16, 1), scale_b=torch.ones(1, 16), out_dtype=torch.float32
        )
        return True
    except RuntimeError:
        return False


SLOW_MS = 100.0
"""A CPU fp8 _scaled_mm of 64x512x512 (34 MFLOP) slower than this is an unvectorized path:
vectorized it takes ~1 ms; torch 2.11's oneDNN fallback on the H200 hosts' CPUs ran ~30
MFLOP/s (over 150 s for one 256x4096x4096 product on a thread; conformance run 8bd743 hung
its checks on it). An absolute bar, 100x above the fast path, so a loaded machine's timing
noise cannot flip the decision."""


def _best_ms(fn: Callable[[], object], reps: int = 5) -> float:
    """The fastest of up to ``reps`` calls, stopping at the first under SLOW_MS: a fast path
    answers in one call; a slow verdict needs every call slow (one call descheduled on a
    loaded machine flipped it once: a CPU test run beside an AOT compile of every kernel)."""
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, (time.perf_counter() - t0) * 1e3)
        if best < SLOW_MS:
            break
    return best


@functools.lru_cache(maxsize=1)
def _cpu_scaled_mm_slow() -> str | None:
    """Why this torch's CPU fp8 _scaled_mm is not worth calling here, or None: timed once per
    process on one small product. TEST-ONLY, never for production: ``AOQ_TEST_CPU_FP8_MS``
    replaces the measured time (so a test can run a slow host's conformance on a fast one)."""
    forced = os.environ.get("AOQ_TEST_CPU_FP8_MS")
    if forced:  # TEST-ONLY: what a slow (or fast) host measures, for end-to-end tests
        ms, how = float(forced), " (AOQ_TEST_CPU_FP8_MS)"
    else:
        a8 = torch.randn(64, 512).to(torch.float8_e4m3fn)
        b8 = torch.randn(512, 512).to(torch.float8_e4m3fn)
        one = torch.ones(())
        ms = _best_ms(
            lambda: torch._scaled_mm(a8, b8.t(), scale_a=one, scale_b=one, out_dtype=torch.float32)
        )
        how = ""
    if ms > SLOW_MS:
        return (
            f"torch {torch.__version__}'s CPU fp8 _scaled_mm is unvectorized on this CPU "
            f"({ms:.0f} ms for 64x512x512{how}; a vectorized one takes ~1 ms)"
        )
    return None


def _scaled_mm_check(x: torch.Tensor, w: Float8Tensor, bias: torch.Tensor | None) -> str | None:
    if w.qdata.dtype != torch.float8_e4m3fn:
        return f"{w.qdata.dtype} weights (the CPU op takes float8_e4m3fn)"
    if w.act is ActQuant.FP8_ROW and not _cpu_rowwise_scaled_mm():
        return f"torch {torch.__version__}'s CPU _scaled_mm takes per-tensor scales only"
    return _cpu_scaled_mm_slow()


@kernel("aten._scaled_mm", _scaled_mm_check)
def _fp8_cpu(x: torch.Tensor, w: Float8Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    fb, _ = split_bias(bias, static=False)
    xq, xs = _quantize_act(x, w)
    if w.act is ActQuant.FP8_ROW:
        scale_a, scale_b = xs.reshape(-1, 1), w.scale.reshape(1, -1)
    else:
        scale_a, scale_b = xs.reshape(()), w.scale.reshape(())
    y = torch._scaled_mm(xq, w.qdata.t(), scale_a=scale_a, scale_b=scale_b, out_dtype=torch.float32)
    if fb is not None:
        y = y + fb.to(torch.float32)
    return y.to(x.dtype)
