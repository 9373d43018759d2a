"""What every run measures beside aoq: the ceilings of the machine, the roofline floor of a
row, and the peer library (torchao, where installed).

Ceilings (``ceiling/<name>`` rows, once per run): ``copy_GBps`` (a device copy, bytes read +
written: the bandwidth ceiling), ``<dtype>_TFLOPs`` (a dense GEMM in each model dtype of the
run and fp32: the compute ceilings), ``fp8_TFLOPs`` (torch._scaled_mm) and ``int8_TOPs``
(torch._int_mm) where the device has them (else a skip row). A row's floor is
max(bytes moved / copy bandwidth, flops / the fastest ceiling that may bound its math, see
``peaks``); its ``roofline`` is floor / p50 (1.0 = on the roofline).

torchao: the same scheme through ``torchao.quantization`` (eager, and torch.compile with
dynamic=False); aoq is compared with the faster of the two. Compilation costs seconds per
shape, so it is timed only where it can be faster and the budget allows (``compile_skip``).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Mapping
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn

import aoq
from aoq.backends import fp8_e4m3_dtype
from aoq.configs import AOQConfig
from aoq.dispatch import Scheme
from aoq.testing import goals
from aoq.testing.benchrows import summarize
from bench.cases import Linear
from bench.timing import Rotation, Timed

INT8_SCHEMES = (Scheme.INT8_INT8, Scheme.INT8_INT4)
FP8_SCHEMES = (Scheme.FP8_FP8,)
COMPILE_M = (1, 2048)


def ceiling_ops(device: torch.device, dtypes: list[str], quick: bool) -> dict[str, Any]:
    """name -> (op, units of work per call): bytes for copy, flops for GEMMs."""
    gpu = device.type == "cuda"
    s = 8192 if gpu else (256 if quick else 1024)
    nbytes = (1 << 30) if gpu else ((16 << 20) if quick else (256 << 20))
    src = torch.empty(nbytes // 2, dtype=torch.bfloat16, device=device).normal_()
    dst = torch.empty_like(src)
    ops: dict[str, Any] = {"copy_GBps": (lambda: dst.copy_(src), 2 * nbytes)}
    names = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
    for name in dtypes:
        a = torch.randn(s, s, device=device, dtype=names[name])
        b = torch.randn(s, s, device=device, dtype=names[name])
        ops[f"{name}_TFLOPs"] = (lambda a=a, b=b: a @ b, 2 * s**3)
    x = torch.randn(s, s, device=device)
    fp8 = fp8_e4m3_dtype(device)
    xf, yf = x.to(fp8), x.t().contiguous().to(fp8)
    one = torch.ones((), device=device)
    ops["fp8_TFLOPs"] = (
        lambda: torch._scaled_mm(xf, yf.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16),
        2 * s**3,
    )
    xi = x.clamp(-100, 100).to(torch.int8)
    ops["int8_TOPs"] = (lambda: torch._int_mm(xi, xi.t()), 2 * s**3)
    return ops


def ceiling_value(name: str, work: int, p50_us: float) -> float:
    """GB/s for copy (bytes / µs / 1e3), TFLOP/s (TOP/s) for GEMMs (flops / µs / 1e6)."""
    return work / p50_us / (1e3 if name == "copy_GBps" else 1e6)


@functools.cache
def scheme_of(config: AOQConfig) -> Scheme:
    """The math a config performs (from a tiny CPU layer; cached per config)."""
    layer = nn.Linear(256, 256, bias=False)
    aoq.quantize_(layer, config)
    return cast(Any, layer.weight).scheme


def peaks(config: AOQConfig | None, dtype_name: str) -> tuple[str, ...]:
    """The ceilings that may bound the math: int8 or fp8 GEMMs where activations are
    quantized to them, and GEMMs in the model dtype and fp32 (weight-only and emulated
    formats compute in one of those; on some CPUs fp32 is the fastest). The floor takes the
    fastest, so no kernel can beat it."""
    scheme = scheme_of(config) if config is not None else None
    fast: tuple[str, ...] = ("int8_TOPs",) if scheme in INT8_SCHEMES else ()
    fast += ("fp8_TFLOPs",) if scheme in FP8_SCHEMES else ()
    return (*fast, f"{dtype_name}_TFLOPs", "fp32_TFLOPs")


def tensor_bytes(t: torch.Tensor) -> int:
    """Bytes of a tensor, or of a tensor subclass's inner tensors (aoq's or torchao's)."""
    if hasattr(t, "__tensor_flatten__") and type(t) is not torch.Tensor:
        names, _ = t.__tensor_flatten__()
        return sum(tensor_bytes(getattr(t, n)) for n in names)
    return t.numel() * t.element_size()


def floor_us(
    ceil: dict[str, float], peak_names: tuple[str, ...], nbytes: int, flops: int
) -> float | None:
    """max(bytes / copy bandwidth, flops / the fastest of ``peak_names``) in µs; None when a
    ceiling it needs was not measured."""
    bw = ceil.get("copy_GBps")
    rate = max((ceil[p] for p in peak_names if ceil.get(p)), default=None)
    if not bw or (flops and not rate):
        return None
    return max(nbytes / bw / 1e3, flops / rate / 1e6 if rate else 0.0)


def _elt(cell: Linear) -> int:
    return torch.empty((), dtype=cell.dtype).element_size()


def dense_bytes(cell: Linear) -> int:
    """The weight's bytes unquantized, in the model dtype."""
    return cell.shape.n * cell.shape.k * _elt(cell)


def linear_bytes(cell: Linear, weight_bytes: int) -> int:
    """Bytes one call moves at least: the weight as stored, x read, y written."""
    s = cell.shape
    return weight_bytes + (s.m * s.k + s.m * s.n) * _elt(cell)


def linear_rotation(
    weights: list[torch.Tensor], xs: list[torch.Tensor], fn: Any = None
) -> Rotation:
    """F.linear (or ``fn(x, w)``) over paired copies."""
    f = fn or F.linear
    return Rotation([functools.partial(f, x, w) for x, w in zip(xs, weights, strict=True)])


def rates(timed: Mapping[str, Timed | Exception]) -> dict[str, float]:
    """p50 µs of each mode that was timed."""
    return {
        mode: summarize(t.samples_us)["p50_us"] for mode, t in timed.items() if isinstance(t, Timed)
    }


# --- torchao ----------------------------------------------------------------------------------


def torchao_version() -> str | None:
    try:
        import torchao
    except ImportError:
        return None
    return str(getattr(torchao, "__version__", "unknown"))


def torchao_config(config_id: str) -> Any:
    """torchao's config for the same scheme; KeyError where torchao has none mapped here."""
    from torchao.quantization import (
        Float8DynamicActivationFloat8WeightConfig,
        Float8MMConfig,
        Float8WeightOnlyConfig,
        Int4WeightOnlyConfig,
        Int8DynamicActivationInt8WeightConfig,
        Int8WeightOnlyConfig,
        PerRow,
        PerTensor,
    )

    makers: dict[str, Callable[[], Any]] = {  # the keys are TORCHAO_CONFIGS
        "int8wo": Int8WeightOnlyConfig,
        "w8a8": Int8DynamicActivationInt8WeightConfig,
        # PLAIN int4 needs fbgemm-gpu-genai; tile_packed_to_4d is tinygemm (in torch itself)
        "int4wo-g128": lambda: Int4WeightOnlyConfig(
            group_size=128, int4_packing_format="tile_packed_to_4d"
        ),
        "fp8wo": Float8WeightOnlyConfig,
        # the same accumulation on both sides: torchao's fp8 default is use_fast_accum=True
        # (aoq's fp8-row-fast); aoq's fp8-row / fp8-tensor keep float32 sums
        "fp8-row": lambda: Float8DynamicActivationFloat8WeightConfig(
            granularity=PerRow(), mm_config=Float8MMConfig(use_fast_accum=False)
        ),
        "fp8-row-fast": lambda: Float8DynamicActivationFloat8WeightConfig(granularity=PerRow()),
        "fp8-tensor": lambda: Float8DynamicActivationFloat8WeightConfig(
            granularity=PerTensor(), mm_config=Float8MMConfig(use_fast_accum=False)
        ),
    }
    return makers[config_id]()


def torchao_weight(weight: torch.Tensor, config_id: str) -> torch.Tensor:
    """``weight`` (N, K) quantized by torchao (raises where torchao does not serve it)."""
    import torchao.quantization as tq

    n, k = weight.shape
    layer = nn.Linear(k, n, bias=False, device=weight.device, dtype=weight.dtype)
    with torch.no_grad():
        layer.weight.copy_(weight)
    tq.quantize_(layer, torchao_config(config_id))
    return layer.weight


TORCHAO_CONFIGS = (
    "int8wo", "w8a8", "int4wo-g128", "fp8wo", "fp8-row", "fp8-row-fast", "fp8-tensor",
)  # fmt: skip
"""The aoq configs whose scheme torchao_config maps."""


def copy_of(t: torch.Tensor, make: Callable[[], torch.Tensor]) -> torch.Tensor:
    """A copy with storage of its own: deepcopy (fast), or ``make()`` where the tensor
    subclass does not support it."""
    try:
        return copy.deepcopy(t)
    except Exception:  # noqa: BLE001 - a peer's subclass without __deepcopy__ support
        return make()


COMPILE_NEVER = {
    "int4wo-g128": "torchao's int4 (tinygemm) is one kernel in eager: compile cannot be faster",
}


def goal_compile(cell: Linear) -> bool:
    """Whether ``cell`` is a torch.compile side behind a decode goal against torchao
    (aoq.testing.goals: M = 1 at the large shapes, at least 1.3x torchao's faster side) that
    is timed at all. Those cells are planned before any other compile and before ordinary
    tests (BenchSession.affords_compile), so a full run's budget does not leave a goal against
    eager torchao only."""
    return (
        cell.side == "torchao-compile"
        and (cell.config_id, cell.shape.id) in goals.peer_cells()
        and cell.config_id in TORCHAO_CONFIGS
        and compile_skip(cell, quick=False) is None
    )


def peer_skip(cell: Linear, quick: bool, torchao: str | None) -> str | None:
    """Why a torchao side is not timed for this cell, known before running it (or None)."""
    if torchao is None:
        return "torchao is not installed (or --no-torchao)"
    if cell.config_id not in TORCHAO_CONFIGS:
        return f"no torchao counterpart of {cell.config_id} is mapped"
    return compile_skip(cell, quick) if cell.side == "torchao-compile" else None


def compile_skip(cell: Linear, quick: bool) -> str | None:
    """Why torchao-compile is not timed for this cell, or None. One compile per (config,
    shape) costs seconds: bf16 at one decode and one prefill M, where compile can fuse."""
    if quick:
        return "torch.compile is not timed in --quick runs"
    if cell.config_id in COMPILE_NEVER:
        return COMPILE_NEVER[cell.config_id]
    if cell.dtype_name != "bf16" or cell.shape.m not in COMPILE_M:
        return f"torchao-compile is timed in bf16 at M in {COMPILE_M} only (compile budget)"
    return None


def _linear(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return F.linear(x, w)


def compiled_linear() -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """A fresh torch.compile(F.linear, dynamic=False). Dynamo's caches are reset first: every
    cell compiles the same code object, and past its recompile limit dynamo would fall back
    to eager without a word. Tensors, not modules, are the inputs, so the rotation's copies
    share one graph."""
    torch._dynamo.reset()
    return torch.compile(_linear, dynamic=False)
