"""Static activation scales: ``aoq.calibrate(model, batches)``.

Runs the batches through a model whose linears were quantized with a dynamic int8-activation
config (W8A8, or W4A8 with symmetric activations), records each linear's input absmax, and
turns each into the static form: act_scale = max(absmax / 127, TINY), zero point 0, and the
bias stored as int32 in units of act_scale x weight_scale.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

import torch
from torch import nn

from aoq.configs import config_from_dict
from aoq.formats.affine import INT8_MAX, TINY
from aoq.tensors import ActQuant, Int32Bias, QuantizedWeight


def _run(model: nn.Module, batch: Any) -> None:
    if isinstance(batch, dict):
        model(**batch)
    elif isinstance(batch, (tuple, list)):
        model(*batch)
    else:
        model(batch)


def make_static(module: nn.Linear, act_scale: float) -> None:
    """Switch one dynamic int8-activation linear to static with ``act_scale``."""
    w = module.weight
    if not isinstance(w, QuantizedWeight) or w.act is not ActQuant.INT8_DYNAMIC:
        raise ValueError(
            "make_static needs a linear quantized with dynamic symmetric int8 activations"
        )
    config = dataclasses.replace(config_from_dict_json(w.config_json), act_scale=act_scale)
    scale = torch.tensor(act_scale, dtype=torch.float32, device=w.qdata.device)  # type: ignore[attr-defined]
    static = w.replace(
        act=ActQuant.INT8_STATIC, act_scale=scale, config_id=config.id, config_json=config.to_json()
    )
    module.weight = nn.Parameter(static, requires_grad=False)
    if module.bias is not None:
        bias = module.bias.detach()
        if isinstance(bias, Int32Bias):
            bias = bias.dequantize(torch.float32).to(bias.dtype)
        module.bias = nn.Parameter(Int32Bias.from_float(bias, static), requires_grad=False)


def config_from_dict_json(text: str) -> Any:
    import json

    return config_from_dict(json.loads(text))


@torch.no_grad()
def calibrate(model: nn.Module, batches: Iterable[Any]) -> dict[str, float]:
    """Observe activations over ``batches`` and make every dynamic int8-activation linear
    static. Returns {module name: act_scale}."""
    targets = {
        name: m
        for name, m in model.named_modules()
        if isinstance(m, nn.Linear)
        and isinstance(m.weight, QuantizedWeight)
        and m.weight.act is ActQuant.INT8_DYNAMIC
    }
    if not targets:
        raise ValueError(
            "calibrate found no linear with dynamic symmetric int8 activations; quantize "
            "first with Int8DynamicActivationInt8WeightConfig() or "
            "Int8DynamicActivationInt4WeightConfig()"
        )
    amax: dict[str, float] = dict.fromkeys(targets, 0.0)

    def observer(name: str) -> Any:
        def hook(_m: nn.Module, args: tuple[Any, ...]) -> None:
            x = args[0]
            if x.numel():
                amax[name] = max(amax[name], float(x.detach().abs().amax().to(torch.float32)))

        return hook

    handles = [m.register_forward_pre_hook(observer(n)) for n, m in targets.items()]
    try:
        seen = 0
        for batch in batches:
            _run(model, batch)
            seen += 1
    finally:
        for h in handles:
            h.remove()
    if seen == 0:
        raise ValueError("calibrate got no batches")
    scales = {n: max(a / INT8_MAX, TINY) for n, a in amax.items()}
    for name, module in targets.items():
        make_static(module, scales[name])  # type: ignore[arg-type]
    return scales
