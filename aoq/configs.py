"""Inference configs (frozen dataclasses, names as in torchao) and the handler registry.

One scheme = one config + one registered ``(module, config) -> module`` handler;
``quantize_`` looks the handler up by the config's type. Configs serialize to JSON
(``to_dict`` / ``config_from_dict``) for checkpoint metadata, with a version per class.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

import torch
from torch import nn

from aoq.backends import fp8_e4m3_dtype
from aoq.formats.affine import check_group_size
from aoq.formats.float8 import Granularity
from aoq.tensors import ActQuant, Float8Tensor, Int4Tensor, Int8Tensor, Int32Bias, QuantizedWeight


class AOQConfig:
    """Base of every config. Subclasses are frozen dataclasses registered with @register_config."""

    version: ClassVar[int] = 1

    @property
    def id(self) -> str:
        """Short readable name used in provenance and matrix ids, e.g. ``int4wo-g128``."""
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        args = dataclasses.asdict(self)  # type: ignore[call-overload]
        return {"name": type(self).__name__, "version": self.version, "args": args}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)


CONFIGS: dict[str, type[AOQConfig]] = {}
Handler = Callable[[nn.Module, Any], nn.Module]
_HANDLERS: dict[type[AOQConfig], Handler] = {}
C = TypeVar("C", bound=type)


def register_config(cls: C) -> C:
    CONFIGS[cls.__name__] = cls
    return cls


def register_handler(config_cls: type[AOQConfig]) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        _HANDLERS[config_cls] = fn
        return fn

    return register


def config_from_dict(d: dict[str, Any]) -> AOQConfig:
    """Inverse of ``to_dict``; unknown names and newer versions are clear errors."""
    name = d.get("name")
    cls = CONFIGS.get(str(name))
    if cls is None:
        raise ValueError(f"unknown aoq config {name!r}; known: {sorted(CONFIGS)}")
    version = d.get("version")
    if not isinstance(version, int) or version > cls.version or version < 1:
        raise ValueError(
            f"{name} version {version!r} is not supported by this aoq (reads 1..{cls.version}); "
            "upgrade aoq to load this checkpoint"
        )
    return cls(**d.get("args", {}))


# --- validation helpers --------------------------------------------------------------------


def _check_act_scale(act_scale: float | None) -> None:
    if act_scale is not None and not (
        isinstance(act_scale, (int, float)) and math.isfinite(act_scale) and act_scale > 0
    ):
        raise ValueError(f"act_scale={act_scale!r} must be a finite positive float (or None)")


def _check_group(group_size: int | None, allow_none: bool) -> None:
    if group_size is None and allow_none:
        return
    if not isinstance(group_size, int) or group_size <= 0 or group_size % 2:
        raise ValueError(f"group_size={group_size!r} must be a positive even int")


# --- configs -------------------------------------------------------------------------------


@register_config
@dataclasses.dataclass(frozen=True)
class Int8WeightOnlyConfig(AOQConfig):
    """int8 symmetric weights per output channel (or per group of ``group_size`` along K)."""

    group_size: int | None = None

    def __post_init__(self) -> None:
        _check_group(self.group_size, allow_none=True)

    @property
    def id(self) -> str:
        return "int8wo" if self.group_size is None else f"int8wo-g{self.group_size}"


@register_config
@dataclasses.dataclass(frozen=True)
class Int8DynamicActivationInt8WeightConfig(AOQConfig):
    """W8A8: int8 per-token activations x int8 per-channel weights. ``act_scale`` makes the
    activation quantization static (one scale, zero point 0; bias stored as int32)."""

    act_scale: float | None = None

    def __post_init__(self) -> None:
        _check_act_scale(self.act_scale)

    @property
    def id(self) -> str:
        return "w8a8" if self.act_scale is None else "w8a8-static"


@register_config
@dataclasses.dataclass(frozen=True)
class Int4WeightOnlyConfig(AOQConfig):
    """W4A16: uint4 asymmetric weights with a scale and zero point per group along K."""

    group_size: int = 128

    def __post_init__(self) -> None:
        _check_group(self.group_size, allow_none=False)

    @property
    def id(self) -> str:
        return f"int4wo-g{self.group_size}"


@register_config
@dataclasses.dataclass(frozen=True)
class Int8DynamicActivationInt4WeightConfig(AOQConfig):
    """W4A8: int8 per-token activations (symmetric or asymmetric) x int4 symmetric groupwise
    weights. ``act_scale`` makes activations static (symmetric only)."""

    group_size: int = 32
    act_mapping: str = "symmetric"
    act_scale: float | None = None

    def __post_init__(self) -> None:
        _check_group(self.group_size, allow_none=False)
        _check_act_scale(self.act_scale)
        if self.act_mapping not in ("symmetric", "asymmetric"):
            raise ValueError(
                f"act_mapping={self.act_mapping!r}; expected 'symmetric' or 'asymmetric'"
            )
        if self.act_scale is not None and self.act_mapping != "symmetric":
            raise ValueError("a static act_scale needs act_mapping='symmetric' (zero point 0)")

    @property
    def id(self) -> str:
        suffix = "-static" if self.act_scale is not None else ""
        suffix += "-asym" if self.act_mapping == "asymmetric" else ""
        return f"w4a8-g{self.group_size}{suffix}"


@register_config
@dataclasses.dataclass(frozen=True)
class Float8WeightOnlyConfig(AOQConfig):
    """float8 e4m3 weights (e4m3fnuz where the arch needs it), one scale per output channel."""

    @property
    def id(self) -> str:
        return "fp8wo"


@register_config
@dataclasses.dataclass(frozen=True)
class Float8DynamicActivationFloat8WeightConfig(AOQConfig):
    """fp8 x fp8 with scales per row (token / output channel) or per tensor.

    ``fast_accum``: the BLAS GEMM (``torch._scaled_mm``, which serves prefill on CUDA) may
    sum with the tensor cores' own accumulation instead of promoting to float32 as it goes
    (``use_fast_accum``; torchao's default for this config). It is used for bfloat16 outputs
    only, whose rounding (~1.7e-3 relative) it adds to: on an H100 the whole output's
    relative error against the float64 product went 1.7e-3 -> 2.1e-3 / 2.6e-3 / 3.3e-3 at
    K 4096 / 8192 / 14336, for 9-14 % less GEMM time at M 4096 (bench.fp8_prefill,
    bench/NOTES.md session 25). float16 and float32 outputs, the Triton kernels and the CPU
    keep their exact float32 sums. Off by default: the error grows with K."""

    granularity: str = "row"
    fast_accum: bool = False

    def __post_init__(self) -> None:
        if self.granularity not in ("row", "tensor"):
            raise ValueError(f"granularity={self.granularity!r}; expected 'row' or 'tensor'")
        if not isinstance(self.fast_accum, bool):
            raise ValueError(f"fast_accum={self.fast_accum!r} must be a bool")

    @property
    def id(self) -> str:
        return f"fp8-{self.granularity}" + ("-fast" if self.fast_accum else "")


# --- handlers ------------------------------------------------------------------------------


def _float_weight(module: nn.Module, config: AOQConfig) -> torch.Tensor:
    if not isinstance(module, nn.Linear):
        raise TypeError(f"{config.id} quantizes nn.Linear, got {type(module).__name__}")
    w = module.weight
    if isinstance(w, QuantizedWeight):
        raise ValueError(f"this Linear is already quantized ({w.config_id})")
    if w.device.type == "meta":
        raise ValueError(
            "cannot quantize weights on the meta device; load a quantized checkpoint into a meta "
            "model with load_state_dict(assign=True) or aoq.load_pretrained instead"
        )
    if not w.dtype.is_floating_point:
        raise TypeError(f"weight dtype {w.dtype} is not floating point")
    return w.detach()


def _set(module: nn.Module, weight: QuantizedWeight, act_scale: float | None) -> nn.Module:
    module.weight = nn.Parameter(weight, requires_grad=False)
    bias = module.bias
    if act_scale is not None and isinstance(bias, torch.Tensor):
        module.bias = nn.Parameter(Int32Bias.from_float(bias.detach(), weight), False)
    return module


def _act_scale_tensor(act_scale: float | None, device: torch.device) -> torch.Tensor | None:
    return (
        None if act_scale is None else torch.tensor(act_scale, dtype=torch.float32, device=device)
    )


@register_handler(Int8WeightOnlyConfig)
def _int8wo(module: nn.Module, config: Int8WeightOnlyConfig) -> nn.Module:
    w = _float_weight(module, config)
    if config.group_size is not None:
        check_group_size(w.shape[1], config.group_size)
    t = Int8Tensor.from_float(w, config.group_size, ActQuant.NONE, config.id, config.to_json())
    return _set(module, t, None)


@register_handler(Int8DynamicActivationInt8WeightConfig)
def _w8a8(module: nn.Module, config: Int8DynamicActivationInt8WeightConfig) -> nn.Module:
    w = _float_weight(module, config)
    static = config.act_scale is not None
    act = ActQuant.INT8_STATIC if static else ActQuant.INT8_DYNAMIC
    t = Int8Tensor.from_float(
        w, None, act, config.id, config.to_json(), _act_scale_tensor(config.act_scale, w.device)
    )
    return _set(module, t, config.act_scale)


@register_handler(Int4WeightOnlyConfig)
def _int4wo(module: nn.Module, config: Int4WeightOnlyConfig) -> nn.Module:
    w = _float_weight(module, config)
    check_group_size(w.shape[1], config.group_size)
    # on a GPU, in whole tiles: the codes in tile order (aoq.tensors.int4's packing attr)
    packing = "tiled" if Int4Tensor.tiles(w, config.group_size, ActQuant.NONE) else "plain"
    t = Int4Tensor.from_float(
        w, config.group_size, ActQuant.NONE, config.id, config.to_json(), packing=packing
    )
    return _set(module, t, None)


@register_handler(Int8DynamicActivationInt4WeightConfig)
def _w4a8(module: nn.Module, config: Int8DynamicActivationInt4WeightConfig) -> nn.Module:
    w = _float_weight(module, config)
    check_group_size(w.shape[1], config.group_size)
    if config.act_scale is not None:
        act = ActQuant.INT8_STATIC
    elif config.act_mapping == "asymmetric":
        act = ActQuant.INT8_DYNAMIC_ASYM
    else:
        act = ActQuant.INT8_DYNAMIC
    t = Int4Tensor.from_float(
        w,
        config.group_size,
        act,
        config.id,
        config.to_json(),
        _act_scale_tensor(config.act_scale, w.device),
    )
    return _set(module, t, config.act_scale)


@register_handler(Float8WeightOnlyConfig)
def _fp8wo(module: nn.Module, config: Float8WeightOnlyConfig) -> nn.Module:
    w = _float_weight(module, config)
    t = Float8Tensor.from_float(
        w, Granularity.ROW, ActQuant.NONE, fp8_e4m3_dtype(w.device), config.id, config.to_json()
    )
    return _set(module, t, None)


@register_handler(Float8DynamicActivationFloat8WeightConfig)
def _fp8(module: nn.Module, config: Float8DynamicActivationFloat8WeightConfig) -> nn.Module:
    w = _float_weight(module, config)
    granularity = Granularity(config.granularity)
    act = ActQuant.FP8_ROW if granularity is Granularity.ROW else ActQuant.FP8_TENSOR
    t = Float8Tensor.from_float(
        w, granularity, act, fp8_e4m3_dtype(w.device), config.id, config.to_json(),
        fast_accum=config.fast_accum,
    )  # fmt: skip
    return _set(module, t, None)


# --- the entry point -----------------------------------------------------------------------


def _default_filter(module: nn.Module, fqn: str) -> bool:
    return isinstance(module, nn.Linear) and not isinstance(module.weight, QuantizedWeight)


def quantize_(
    model: nn.Module,
    config: AOQConfig,
    filter_fn: Callable[[nn.Module, str], bool] | None = None,
) -> nn.Module:
    """Quantize, in place, every module that ``filter_fn(module, fqn)`` selects (default: every
    float nn.Linear) with ``config``. Returns the model."""
    handler = _HANDLERS.get(type(config))
    if handler is None:
        raise TypeError(
            f"no handler for {type(config).__name__}; registered: "
            f"{sorted(c.__name__ for c in _HANDLERS)}"
        )
    keep = filter_fn or _default_filter
    targets = [(fqn, m) for fqn, m in model.named_modules() if keep(m, fqn)]
    for fqn, module in targets:
        new = handler(module, config)
        if new is not module:
            _replace(model, fqn, new)
    return model


def _replace(model: nn.Module, fqn: str, new: nn.Module) -> None:
    parent_name, _, child = fqn.rpartition(".")
    parent = model.get_submodule(parent_name) if parent_name else model
    setattr(parent, child, new)


# MX, NVFP4 and MX-training configs live in aoq/mx_configs.py (imported last: they build on
# the registry above) and are re-exported here, so ``from aoq.configs import ...`` finds all.
from aoq.mx_configs import (  # noqa: E402
    MXDynamicActivationMXWeightConfig,
    MXTrainingConfig,
    MXWeightOnlyConfig,
    NVFP4Config,
)

__all__ = [
    "CONFIGS",
    "AOQConfig",
    "Float8DynamicActivationFloat8WeightConfig",
    "Float8WeightOnlyConfig",
    "Int4WeightOnlyConfig",
    "Int8DynamicActivationInt4WeightConfig",
    "Int8DynamicActivationInt8WeightConfig",
    "Int8WeightOnlyConfig",
    "MXDynamicActivationMXWeightConfig",
    "MXTrainingConfig",
    "MXWeightOnlyConfig",
    "NVFP4Config",
    "config_from_dict",
    "quantize_",
    "register_config",
    "register_handler",
]
