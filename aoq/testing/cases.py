"""The inference configs every test and matrix iterates over: one instance per registered
config with its defaults, plus the variants that take other code paths (per-tensor fp8, fp8
with the GEMM's fast accumulation, static activations, asymmetric W4A8 activations, MX
element formats, NVFP4 weight-only). A new config joins by being registered; a variant joins
here."""

from __future__ import annotations

import torch

from aoq.configs import (
    CONFIGS,
    AOQConfig,
    Float8DynamicActivationFloat8WeightConfig,
    Int8DynamicActivationInt4WeightConfig,
    Int8DynamicActivationInt8WeightConfig,
    MXDynamicActivationMXWeightConfig,
    MXWeightOnlyConfig,
    NVFP4Config,
)

# A static scale that suits unit-variance activations (absmax ~ 4-5 over 1k features).
STATIC_ACT_SCALE = 0.035

VARIANTS: tuple[AOQConfig, ...] = (
    Float8DynamicActivationFloat8WeightConfig(granularity="tensor"),
    Float8DynamicActivationFloat8WeightConfig(fast_accum=True),
    Int8DynamicActivationInt8WeightConfig(act_scale=STATIC_ACT_SCALE),
    Int8DynamicActivationInt4WeightConfig(act_scale=STATIC_ACT_SCALE),
    Int8DynamicActivationInt4WeightConfig(act_mapping="asymmetric"),
    # MX: the sub-byte packings (fp4 nibbles, fp6 three-byte groups), the other 8-bit codes
    # (e5m2, int8), and NVFP4 weight-only
    MXWeightOnlyConfig(elem="fp4_e2m1"),
    MXWeightOnlyConfig(elem="fp6_e3m2"),
    MXDynamicActivationMXWeightConfig(elem="fp4_e2m1"),
    MXDynamicActivationMXWeightConfig(elem="fp6_e2m3"),
    MXDynamicActivationMXWeightConfig(elem="fp8_e5m2"),
    MXDynamicActivationMXWeightConfig(elem="int8"),
    NVFP4Config(dynamic=False),
)


MODEL_DTYPES: tuple[torch.dtype, ...] = (torch.bfloat16, torch.float16, torch.float32)
"""The model dtypes every config is proven for."""


def config_ids(configs: list[AOQConfig]) -> list[str]:
    """pytest ids: the configs' readable ids."""
    return [c.id for c in configs]


def inference_configs() -> list[AOQConfig]:
    """Default instance of every registered inference config, then the variants."""
    defaults = [cls() for name, cls in sorted(CONFIGS.items()) if name != "MXTrainingConfig"]
    return defaults + list(VARIANTS)
