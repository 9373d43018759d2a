"""aoq: PyTorch quantization under a cross-hardware conformance matrix.

Public API (see the README): quantize_, the configs, calibrate, save_pretrained /
load_pretrained, trace_kernels, strict, FallbackError; aoq.mx (to_mx, MXTensor);
aoq.training (MXLinear, swapped in by quantize_ with MXTrainingConfig). Importing aoq
registers its tensor classes as torch.load safe globals and its kernels in the dispatch
table; nothing else.
"""

from aoq import dispatch, mx, training
from aoq.calibration import calibrate
from aoq.configs import (
    AOQConfig,
    Float8DynamicActivationFloat8WeightConfig,
    Float8WeightOnlyConfig,
    Int4WeightOnlyConfig,
    Int8DynamicActivationInt4WeightConfig,
    Int8DynamicActivationInt8WeightConfig,
    Int8WeightOnlyConfig,
    MXDynamicActivationMXWeightConfig,
    MXTrainingConfig,
    MXWeightOnlyConfig,
    NVFP4Config,
    quantize_,
)
from aoq.dispatch import FallbackError, strict, trace_kernels
from aoq.serialization import (
    CheckpointError,
    load_pretrained,
    register_safe_globals,
    save_pretrained,
)

register_safe_globals()

__version__ = "0.1.0"

__all__ = [
    "AOQConfig",
    "CheckpointError",
    "FallbackError",
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
    "calibrate",
    "dispatch",
    "load_pretrained",
    "mx",
    "quantize_",
    "save_pretrained",
    "strict",
    "trace_kernels",
    "training",
]
