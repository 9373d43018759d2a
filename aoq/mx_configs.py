"""MX (OCP v1.0), NVFP4 and MX-training configs, registered in the aoq.configs registry."""

from __future__ import annotations

import dataclasses
from typing import Any

from torch import nn

from aoq.configs import AOQConfig, _float_weight, _set, register_config, register_handler
from aoq.formats.mx import MXElem, ScaleRounding, parse_choice
from aoq.tensors import ActQuant
from aoq.tensors.mx import MXWeight
from aoq.tensors.nvfp4 import NVFP4Tensor

# --- MX (OCP v1.0) and NVFP4 ---------------------------------------------------------------


def _check_mx(config: Any) -> None:
    """Validate elem / grad_elem / block_size / scale_rounding; store the choices by value
    (an MXElem or ScaleRounding is accepted at this public edge)."""
    object.__setattr__(config, "elem", parse_choice(MXElem, config.elem, "MX element").value)
    if getattr(config, "grad_elem", None) is not None:
        grad = parse_choice(MXElem, config.grad_elem, "MX element").value
        object.__setattr__(config, "grad_elem", grad)
    rule = parse_choice(ScaleRounding, config.scale_rounding, "scale_rounding").value
    object.__setattr__(config, "scale_rounding", rule)
    bs = config.block_size
    if not isinstance(bs, int) or isinstance(bs, bool) or bs <= 0:
        raise ValueError(f"block_size={bs!r} must be a positive int (the MX spec uses 32)")


def _mx_id(prefix: str, elem: str, block_size: int, rule: str, default_rule: str = "floor") -> str:
    block = "" if block_size == 32 else f"-b{block_size}"
    return f"{prefix}-{elem}{block}" + ("" if rule == default_rule else f"-{rule}")


@register_config
@dataclasses.dataclass(frozen=True)
class MXWeightOnlyConfig(AOQConfig):
    """MX weights: ``elem`` codes (fp8_e4m3 fp8_e5m2 fp6_e2m3 fp6_e3m2 fp4_e2m1 int8) with one
    E8M0 scale per ``block_size`` elements along K; activations stay float. ``scale_rounding``:
    "floor" (the OCP spec) or "rceil" (never saturates a block's max: fp8_e4m3 weights of a
    default-init Linear(1024, 1024) go from 26 to 32 dB SQNR)."""

    elem: str = "fp8_e4m3"
    block_size: int = 32
    scale_rounding: str = "floor"

    def __post_init__(self) -> None:
        _check_mx(self)

    @property
    def id(self) -> str:
        return _mx_id("mxwo", self.elem, self.block_size, self.scale_rounding)


@register_config
@dataclasses.dataclass(frozen=True)
class MXDynamicActivationMXWeightConfig(AOQConfig):
    """MX weights as MXWeightOnlyConfig, and activations MX-quantized along K at run time with
    the same element format, block size and scale rule."""

    elem: str = "fp8_e4m3"
    block_size: int = 32
    scale_rounding: str = "floor"

    def __post_init__(self) -> None:
        _check_mx(self)

    @property
    def id(self) -> str:
        return _mx_id("mx", self.elem, self.block_size, self.scale_rounding)


@register_config
@dataclasses.dataclass(frozen=True)
class NVFP4Config(AOQConfig):
    """NVFP4 weights: fp4 e2m1, one e4m3 scale per 16 along K, one float32 tensor scale.
    ``dynamic=True`` also quantizes activations to NVFP4 at run time (their tensor scale from
    their own amax); ``dynamic=False`` is weight-only (W4A16 with NVFP4 weights): a static
    activation scale would clip whatever calibration did not see, and the weight alone already
    gives the 4x memory saving."""

    dynamic: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.dynamic, bool):
            raise ValueError(f"dynamic={self.dynamic!r} must be True or False")

    @property
    def id(self) -> str:
        return "nvfp4" if self.dynamic else "nvfp4wo"


@register_config
@dataclasses.dataclass(frozen=True)
class MXTrainingConfig(AOQConfig):
    """MX training (aoq.training): nn.Linear -> MXLinear whose three GEMMs each quantize both
    operands along their own reduction axis (six casts). ``elem`` for x and W, ``grad_elem``
    for the output gradient (None: the same as elem; e.g. fp8_e5m2 for its wider range).

    ``scale_rounding`` defaults to "rceil", not the spec's "floor": FLOOR maps a block's amax
    into [2^emax, 2^(emax+1)) and saturates everything above max_elem (e4m3: (448, 512) -> 448,
    up to 12.5% off). A cross-entropy gradient's largest entry, (1 - p) / batch, sits just
    under a power of two on nearly every row, so FLOOR shrinks it ~10% every step; in
    aoq.testing.convergence MXFP8 training with FLOOR diverges, with RCEIL it tracks float."""

    elem: str = "fp8_e4m3"
    grad_elem: str | None = None
    block_size: int = 32
    scale_rounding: str = "rceil"

    def __post_init__(self) -> None:
        _check_mx(self)

    @property
    def id(self) -> str:
        grad = "" if self.grad_elem in (None, self.elem) else f"-g{self.grad_elem}"
        return _mx_id("mxtrain", self.elem + grad, self.block_size, self.scale_rounding, "rceil")


def _mx_weight(
    module: nn.Module, config: MXWeightOnlyConfig | MXDynamicActivationMXWeightConfig
) -> nn.Module:
    w = _float_weight(module, config)
    is_wo = isinstance(config, MXWeightOnlyConfig)
    t = MXWeight.from_weight(
        w,
        MXElem(config.elem),
        config.block_size,
        ScaleRounding(config.scale_rounding),
        ActQuant.NONE if is_wo else ActQuant.MX_DYNAMIC,
        config.id,
        config.to_json(),
    )
    return _set(module, t, None)


register_handler(MXWeightOnlyConfig)(_mx_weight)
register_handler(MXDynamicActivationMXWeightConfig)(_mx_weight)


@register_handler(NVFP4Config)
def _nvfp4(module: nn.Module, config: NVFP4Config) -> nn.Module:
    w = _float_weight(module, config)
    act = ActQuant.NVFP4_DYNAMIC if config.dynamic else ActQuant.NONE
    return _set(module, NVFP4Tensor.from_float(w, act, config.id, config.to_json()), None)
