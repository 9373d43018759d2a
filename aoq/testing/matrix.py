"""The conformance matrix: the one list of cases that the suite, its pytest entry, bench and
the reports iterate.

A case is config x dtype x backend x shape, id ``int4wo-g128/bf16/cuda/M1-K4096-N4096``;
``config/dtype/backend`` is a *cell* of the report's matrix and the shapes are its rows. The
configs come from ``aoq.testing.cases.inference_configs()`` (the registry plus variants), so a
config registered elsewhere (MX, NVFP4) joins here with no edit. Each cell also has one
model-level case, ``<config>/<dtype>/<backend>/model-minilm``.

Shapes are small (K, N a few hundred) so the CPU matrix stays fast; GPU backends add two
LLM-sized ones that exercise real tiling. Every shape kind a kernel may mishandle is present:
aligned, K or N not a multiple of 16, M = 1, M = 0, a 3-D input and a non-contiguous input.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import math
from collections.abc import Iterable, Sequence
from typing import Any

import torch

from aoq.configs import AOQConfig, config_from_dict
from aoq.testing.cases import inference_configs

BACKENDS = ("cpu", "cuda", "rocm", "interpret")
GPU_BACKENDS = ("cuda", "rocm")
DTYPES: dict[str, torch.dtype] = {
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
    "fp32": torch.float32,
}
MODEL_CASE = "model-minilm"
INJECTIONS = ("abort", "segfault", "hang", "raise", "tamper-bytes", "tamper-meta", "fresh-abort")
"""Test-only faults a case can carry (``--inject``): they prove the runner's isolation (of
workers, and of the fresh processes that check checkpoints: ``fresh-abort``) and that the
checkpoint checks catch a changed file. Never part of a real matrix."""


@dataclasses.dataclass(frozen=True)
class Shape:
    """The input of one case: x has shape ``(*lead, k)``; the layer is Linear(k, n)."""

    name: str
    kind: str
    """aligned | unaligned-K | unaligned-N | M1 | M0 | 3d | strided | large"""
    lead: tuple[int, ...]
    k: int
    n: int
    strided: bool = False
    """x is a transposed view (non-contiguous); results must not depend on the layout."""

    @property
    def m(self) -> int:
        return math.prod(self.lead)


def _shape(kind: str, lead: tuple[int, ...], k: int, n: int, strided: bool = False) -> Shape:
    m = "x".join(str(d) for d in lead)
    name = f"M{m}-K{k}-N{n}" + ("-strided" if strided else "")
    return Shape(name, kind, lead, k, n, strided)


SHAPES: tuple[Shape, ...] = (
    _shape("aligned", (32,), 256, 256),
    _shape("unaligned-K", (7,), 200, 256),
    _shape("unaligned-N", (7,), 256, 200),
    _shape("M1", (1,), 256, 256),
    _shape("M0", (0,), 256, 256),
    _shape("3d", (2, 5), 256, 256),
    _shape("strided", (9,), 256, 256, strided=True),
)
GPU_SHAPES: tuple[Shape, ...] = (
    _shape("large", (1,), 4096, 4096),
    _shape("large", (64,), 4096, 4096),
    _shape("large", (100,), 4096, 4096),
    _shape("large", (120,), 4096, 4096),
    _shape("large", (256,), 4096, 4096),
)
"""LLM-sized: decode (M 1), the batched decode between decode and prefill (M 64: x padded to
64 rows on sm90, kernels/decode_mma_tiles.ROWS_TILE, every weight-only, W4A8, MX and NVFP4
config on its 64-row tile; M 100: padded to 128 rows; int4 weight-only and W4A8 on
kernels/wt_rows.py, MX fp4 and NVFP4 on kernels/wt_rows_mx.py; M 120: int8 and e4m3
weight-only there too, its descriptor's box past x's last row) and the end of the Triton
prefill band (M 256)."""
QUICK_KINDS = ("aligned", "unaligned-N", "M1", "3d")
"""The CI subset: one case of each behaviour that differs cheaply (alignment, decode, batch
dims); M = 0, unaligned K and strided inputs run in the full matrix."""
COMPILE_KINDS = ("aligned", "3d", "strided", "large")
"""Shapes whose cases also run torch.compile (a compile costs 1-3 s on a CPU): each cell gets
its plain, batched and strided inputs compiled; the quick subset compiles the aligned one."""
QUICK_COMPILE_KINDS = ("aligned",)
INTERPRET_SHAPES: tuple[Shape, ...] = (
    _shape("aligned", (16,), 128, 64),
    _shape("M1", (1,), 128, 64),
    _shape("unaligned-N", (5,), 128, 40),
)
"""The Triton interpreter runs a kernel program by program in numpy: small shapes only."""


@dataclasses.dataclass(frozen=True)
class Case:
    """One case of the matrix. ``shape`` None is the model-level case of its cell."""

    config: AOQConfig
    dtype: str
    backend: str
    shape: Shape | None
    inject: str | None = None

    @property
    def cell(self) -> str:
        return f"{self.config.id}/{self.dtype}/{self.backend}"

    @property
    def shape_name(self) -> str:
        return self.shape.name if self.shape is not None else MODEL_CASE

    @property
    def id(self) -> str:
        suffix = f"+{self.inject}" if self.inject else ""
        return f"{self.cell}/{self.shape_name}{suffix}"

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]

    def to_json(self) -> dict[str, Any]:
        """Plain data for a worker process; ``from_json`` rebuilds the case there."""
        return {
            "config": self.config.to_dict(),
            "dtype": self.dtype,
            "backend": self.backend,
            "shape": dataclasses.asdict(self.shape) if self.shape is not None else None,
            "inject": self.inject,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Case:
        shape = d["shape"]
        if shape is not None:
            shape = Shape(**{**shape, "lead": tuple(shape["lead"])})
        return cls(config_from_dict(d["config"]), d["dtype"], d["backend"], shape, d["inject"])


def shapes_for(backend: str, quick: bool = False) -> tuple[Shape, ...]:
    if backend == "interpret":
        return INTERPRET_SHAPES[:2] if quick else INTERPRET_SHAPES
    if quick:
        return tuple(s for s in SHAPES if s.kind in QUICK_KINDS)
    return SHAPES + (GPU_SHAPES if backend in GPU_BACKENDS else ())


def dtypes_for(backend: str, quick: bool = False) -> tuple[str, ...]:
    if backend == "interpret" and quick:
        return ("bf16", "fp32")
    return tuple(DTYPES)


def with_model(backend: str, dtype: str, quick: bool = False) -> bool:
    """Model-level cases: every cell of the full matrix; bf16 cells of the quick CPU subset."""
    if backend == "interpret":
        return False
    return not quick or (backend == "cpu" and dtype == "bf16")


def compiles(shape: Shape, quick: bool = False) -> bool:
    """Whether a case of this shape also checks torch.compile parity."""
    return shape.kind in (QUICK_COMPILE_KINDS if quick else COMPILE_KINDS)


def cases(
    backend: str,
    quick: bool = False,
    configs: Sequence[AOQConfig] | None = None,
    only: Sequence[str] = (),
) -> list[Case]:
    """Every case of ``backend`` in a fixed order (config, dtype, shapes, then the model).

    ``only``: fnmatch patterns on the case id (any may match), e.g. ``int8wo/*`` or
    ``*/M1-*``.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend {backend!r} is not one of {BACKENDS}")
    configs = inference_configs() if configs is None else list(configs)
    ids = [c.id for c in configs]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise ValueError(f"config ids must be unique in the matrix; duplicated: {dupes}")
    out: list[Case] = []
    for config in configs:
        for dtype in dtypes_for(backend, quick):
            for shape in shapes_for(backend, quick):
                out.append(Case(config, dtype, backend, shape))
            if with_model(backend, dtype, quick):
                out.append(Case(config, dtype, backend, None))
    return select(out, only)


def select(all_cases: Iterable[Case], only: Sequence[str]) -> list[Case]:
    """The cases whose id matches any of the fnmatch patterns (all when there are none)."""
    if not only:
        return list(all_cases)
    return [c for c in all_cases if any(fnmatch.fnmatchcase(c.id, p) for p in only)]


def parse_shard(text: str) -> tuple[int, int]:
    """``"2/4"`` -> (2, 4), with a clear error for anything else."""
    try:
        i, n = (int(p) for p in text.split("/"))
    except ValueError:
        raise ValueError(f"--shard {text!r}: expected i/n, e.g. 1/4") from None
    if not 1 <= i <= n:
        raise ValueError(f"--shard {text!r}: need 1 <= i <= n")
    return i, n


def shard(all_cases: Sequence[Case], i: int, n: int) -> list[Case]:
    """Shard i of n (1-based). Whole cells stay together, so a cell's fresh-process checks and
    its report row come from one machine; cells are dealt round robin."""
    cells = list(dict.fromkeys(c.cell for c in all_cases))
    mine = set(cells[i - 1 :: n])
    return [c for c in all_cases if c.cell in mine]


def inject(all_cases: Sequence[Case], kinds: Sequence[str]) -> list[Case]:
    """Test-only: a copy of the first case for each fault kind, carrying that fault."""
    bad = [k for k in kinds if k not in INJECTIONS]
    if bad:
        raise ValueError(f"unknown injection {bad}; known: {INJECTIONS}")
    first = next((c for c in all_cases if c.shape is not None), None)
    if first is None:
        raise ValueError("--inject needs at least one shape case in the selection")
    return list(all_cases) + [dataclasses.replace(first, inject=k) for k in kinds]
