"""What bench times, per backend: the linear matrix, the quantize/cast kernels, the MX training
step and aoq's host overhead. Configs and dtypes come from the matrix source
(``aoq.testing.cases``: inference_configs, config_ids, MODEL_DTYPES).

Linear shapes are the projections of real LLMs: (K, N) in 4096x4096 (attention, 8B models),
4096x14336 and 14336x4096 (the Llama-3-8B MLP up/down), 8192x8192 (70B-class attention), at
decode M = 1, 4, 16 and prefill M = 2048, 4096. Every config runs in bf16 at every shape; fp16
and fp32 run the same kernels with another element type, so they are timed at one decode
and one prefill shape only (``OTHER_DTYPE_SHAPES``), which keeps a full GPU run within one
10-minute call. CPUs take the same (K, N) families at decode M plus a short prefill (M=128:
emulated formats run the reference math there, seconds per call at M=2048); ``quick`` is a
tiny subset for CI and laptops.

Test ids (``--only`` globs match them) are the row ids without the mode:
``int4wo-g128/bf16/cuda/M1-K4096-N4096/aoq``; the bf16 baseline of a shape is
``linear/bf16/cuda/M1-K4096-N4096/bf16``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from aoq.backends import fp8_e4m3_dtype
from aoq.configs import AOQConfig, MXTrainingConfig
from aoq.testing.benchrows import BenchCase
from aoq.testing.cases import MODEL_DTYPES, VARIANTS, config_ids, inference_configs
from aoq.testing.matrix import DTYPES, GPU_BACKENDS

DTYPE_NAMES = {v: k for k, v in DTYPES.items()}
GPU_KN = ((8192, 8192), (4096, 14336), (14336, 4096), (4096, 4096))
"""K x N on GPUs, issue 3's goal shapes first: a run its budget cuts short (run order:
linear_cases) loses the 4096^2 rows before any goal row (H100 run 55bb0c, cut at 1021 of
1592 cases when 8192^2 came last, had no 8192^2 row)."""
GPU_M = (1, 4, 16, 64, 128, 2048, 4096)
"""M on GPUs: decode (1, 4, 16), the rows between (64, 128: until session 44 no bench row
covered 17-2047 rows, where the weight-only prefill kernel read 0.16-0.89x bf16 on an H200
unseen; bench/NOTES.md sessions 44 and 45) and prefill (2048, 4096)."""
CPU_KN = ((4096, 4096), (4096, 14336))
CPU_M = (1, 4, 16, 128)
QUICK_GPU = ((1, 4096, 4096), (2048, 4096, 4096))
QUICK_CPU = ((1, 256, 256), (32, 256, 256))
SIDE_ORDER = {"bf16": 0, "torchao": 1, "torchao-compile": 2, "aoq": 3}


@dataclasses.dataclass(frozen=True)
class Shape:
    m: int
    k: int
    n: int

    @property
    def id(self) -> str:
        return f"M{self.m}-K{self.k}-N{self.n}"

    @property
    def flops(self) -> int:
        return 2 * self.m * self.k * self.n


OTHER_DTYPE_SHAPES = (Shape(1, 4096, 4096), Shape(2048, 4096, 4096))


def linear_shapes(backend: str, quick: bool) -> list[Shape]:
    if quick:
        return [Shape(*s) for s in (QUICK_GPU if backend in GPU_BACKENDS else QUICK_CPU)]
    kn, ms = (GPU_KN, GPU_M) if backend in GPU_BACKENDS else (CPU_KN, CPU_M)
    return [Shape(m, k, n) for k, n in kn for m in ms]


def dtypes_at(shape: Shape, backend: str, quick: bool) -> list[torch.dtype]:
    """bf16 everywhere; the other model dtypes at one decode and one prefill shape (GPUs) or
    one decode shape (CPUs); quick runs are bf16 only."""
    others = [d for d in MODEL_DTYPES if d is not torch.bfloat16]
    if quick:
        return [torch.bfloat16]
    subset = OTHER_DTYPE_SHAPES if backend in GPU_BACKENDS else OTHER_DTYPE_SHAPES[:1]
    return [torch.bfloat16] + (others if shape in subset else [])


@dataclasses.dataclass(frozen=True)
class Linear:
    """One cell side: ``config`` None is the bf16 F.linear baseline of (dtype, shape)."""

    config: AOQConfig | None
    dtype: torch.dtype
    shape: Shape
    backend: str
    side: str

    @property
    def config_id(self) -> str:
        return "linear" if self.config is None else config_ids([self.config])[0]

    @property
    def dtype_name(self) -> str:
        return DTYPE_NAMES[self.dtype]

    @property
    def group(self) -> tuple[str, str]:
        """Cells sharing one baseline."""
        return (self.dtype_name, self.shape.id)

    @property
    def key(self) -> str:
        """The cell, whichever side."""
        return f"{self.config_id}/{self.dtype_name}/{self.backend}/{self.shape.id}"

    @property
    def id(self) -> str:
        return f"{self.key}/{self.side}"

    @property
    def baseline_id(self) -> str:
        return dataclasses.replace(self, config=None, side="bf16").id

    def case(self, mode: str, side: str | None = None) -> BenchCase:
        return BenchCase(
            self.config_id, self.dtype_name, self.backend, self.shape.id, side or self.side, mode
        )


class Host(Linear):
    """A host-overhead test: rows ``check="host_overhead"``, ids prefixed ``host/``."""

    @property
    def id(self) -> str:
        return "host/" + super().id


def linear_cases(backend: str, quick: bool) -> list[Linear]:
    """Per (dtype, shape), bf16 first: the baseline, then per config its peers and aoq (the
    run order: what a budget cuts short is the end, fp16 / fp32 and, on GPUs, 4096^2)."""
    out = []
    shapes = linear_shapes(backend, quick)
    for dtype in MODEL_DTYPES:
        for shape in (s for s in shapes if dtype in dtypes_at(s, backend, quick)):
            out.append(Linear(None, dtype, shape, backend, "bf16"))
            for config in inference_configs():
                for side in ("torchao", "torchao-compile", "aoq"):
                    out.append(Linear(config, dtype, shape, backend, side))
    return out


def host_cases(backend: str, quick: bool = False) -> list[Host]:
    """aoq's eager host overhead per quantized linear, at M=1 in bf16: on a GPU Linear(1024,
    1024), whose kernels are all shorter than their launches (the GPU never makes the host
    wait); on a CPU Linear(128, 128), where the time includes the (small) math. Quick runs
    take the registered configs' defaults only, not the variants."""
    shape = Shape(1, 1024, 1024) if backend in GPU_BACKENDS else Shape(1, 128, 128)
    configs = inference_configs()
    if quick:
        configs = [c for c in configs if c not in VARIANTS]
    base = [Host(None, torch.bfloat16, shape, backend, "bf16")]
    return base + [Host(c, torch.bfloat16, shape, backend, "aoq") for c in configs]


# --- kernels that are not linears ---------------------------------------------------------------

KernelFn = Callable[[torch.Tensor], Any]


def _int8_act(mode: int) -> KernelFn:
    def run(x: torch.Tensor) -> Any:
        scale = torch.full((1,), 0.035, device=x.device) if mode == 2 else None
        return torch.ops.aoq.quantize_int8_act(x, mode, scale)

    return run


def _fp8_act(per_row: bool) -> KernelFn:
    return lambda x: torch.ops.aoq.quantize_fp8_act(x, per_row, fp8_e4m3_dtype(x.device))


def _mx(op: str, elem: str, dim: int, rule: str) -> KernelFn:
    return lambda x: getattr(torch.ops.aoq, op)(x, elem, 32, dim, rule)


# name -> (the op, a call on x, bytes written per element of x); x is read once (bf16: 2 B)
KERNELS: dict[str, tuple[str, KernelFn, float]] = {
    "act_quant.int8_row": ("aoq::quantize_int8_act", _int8_act(0), 1.0),
    "act_quant.int8_row_asym": ("aoq::quantize_int8_act", _int8_act(1), 1.0),
    "act_quant.int8_static": ("aoq::quantize_int8_act", _int8_act(2), 1.0),
    "act_quant.fp8_row": ("aoq::quantize_fp8_act", _fp8_act(True), 1.0),
    "act_quant.fp8_tensor": ("aoq::quantize_fp8_act", _fp8_act(False), 1.0),
    "mx_cast.dim0.fp8_e4m3": ("aoq::mx_cast", _mx("mx_cast", "fp8_e4m3", 0, "floor"), 1 + 1 / 32),
    "mx_cast.dim1.fp8_e4m3": ("aoq::mx_cast", _mx("mx_cast", "fp8_e4m3", 1, "floor"), 1 + 1 / 32),
    "mx_cast.dim1.fp4_e2m1": ("aoq::mx_cast", _mx("mx_cast", "fp4_e2m1", 1, "floor"), 0.5 + 1 / 32),
    "mx_qdq.dim0.fp8_e4m3": ("aoq::mx_qdq", _mx("mx_qdq", "fp8_e4m3", 0, "rceil"), 2.0),
    "mx_qdq.dim1.fp8_e4m3": ("aoq::mx_qdq", _mx("mx_qdq", "fp8_e4m3", 1, "rceil"), 2.0),
}
KERNEL_SHAPES = {"gpu": ((16, 4096), (2048, 4096), (8192, 8192)), "cpu": ((16, 4096), (256, 4096))}
QUICK_KERNEL_SHAPES = {"gpu": ((2048, 4096),), "cpu": ((32, 256),)}


@dataclasses.dataclass(frozen=True)
class Kernel:
    name: str
    m: int
    k: int
    backend: str

    @property
    def shape(self) -> str:
        return f"M{self.m}-K{self.k}"

    @property
    def id(self) -> str:
        return f"{self.name}/bf16/{self.backend}/{self.shape}/aoq"

    def case(self, mode: str) -> BenchCase:
        return BenchCase(self.name, "bf16", self.backend, self.shape, "aoq", mode)

    @property
    def nbytes(self) -> int:
        return int(self.m * self.k * (2 + KERNELS[self.name][2]))


def kernel_cases(backend: str, quick: bool) -> list[Kernel]:
    where = "gpu" if backend in GPU_BACKENDS else "cpu"
    shapes = (QUICK_KERNEL_SHAPES if quick else KERNEL_SHAPES)[where]
    return [Kernel(name, m, k, backend) for m, k in shapes for name in KERNELS]


# --- the MX training step -------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Training:
    """fwd+bwd (and optionally AdamW) of a K -> H -> K MLP (GELU, no bias) at M rows, bf16:
    plain (``side="bf16"``) or MX training (``side="aoq"``, six casts, emulated GEMMs)."""

    elem: str
    adamw: bool
    m: int
    k: int
    h: int
    backend: str
    side: str

    @property
    def config(self) -> MXTrainingConfig:
        return MXTrainingConfig(self.elem)

    @property
    def name(self) -> str:
        return self.config.id + ("+adamw" if self.adamw else "")

    @property
    def shape(self) -> str:
        return f"M{self.m}-K{self.k}-H{self.h}"

    @property
    def id(self) -> str:
        return f"{self.name}/bf16/{self.backend}/{self.shape}/{self.side}"

    @property
    def baseline_id(self) -> str:
        return dataclasses.replace(self, side="bf16").id

    def case(self, mode: str, side: str | None = None) -> BenchCase:
        return BenchCase(self.name, "bf16", self.backend, self.shape, side or self.side, mode)


def training_cases(backend: str, quick: bool) -> list[Training]:
    if backend in GPU_BACKENDS:
        size = (2048, 4096, 4096) if quick else (8192, 4096, 14336)
    else:
        size = (32, 64, 128) if quick else (256, 1024, 4096)
    variants = (False,) if quick else (False, True)
    return [
        Training("fp8_e4m3", adamw, *size, backend, side)
        for adamw in variants
        for side in ("bf16", "aoq")
    ]
