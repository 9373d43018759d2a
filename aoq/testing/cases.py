"""The inference configs every test and matrix iterates over: one instance per registered
config with its defaults, plus the variants that take other code paths (per-tensor fp8,
static activations, asymmetric W4A8 activations). A new config joins by being registered;
a variant joins here."""

from __future__ import annotations

from aoq.configs import (
    CONFIGS,
    AOQConfig,
    Float8DynamicActivationFloat8WeightConfig,
    Int8DynamicActivationInt4WeightConfig,
    Int8DynamicActivationInt8WeightConfig,
)

# A static scale that suits unit-variance activations (absmax ~ 4-5 over 1k features).
STATIC_ACT_SCALE = 0.035

VARIANTS: tuple[AOQConfig, ...] = (
    Float8DynamicActivationFloat8WeightConfig(granularity="tensor"),
    Int8DynamicActivationInt8WeightConfig(act_scale=STATIC_ACT_SCALE),
    Int8DynamicActivationInt4WeightConfig(act_scale=STATIC_ACT_SCALE),
    Int8DynamicActivationInt4WeightConfig(act_mapping="asymmetric"),
)


def inference_configs() -> list[AOQConfig]:
    """Default instance of every registered inference config, then the variants."""
    defaults = [cls() for name, cls in sorted(CONFIGS.items()) if name != "MXTrainingConfig"]
    return defaults + list(VARIANTS)
