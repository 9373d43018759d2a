"""MX training: ``aoq.quantize_(model, aoq.MXTrainingConfig(...))`` swaps every nn.Linear for
an ``MXLinear`` whose three GEMMs each quantize both operands along their own reduction axis
(six casts). Parameters stay plain float master weights; state_dict keys are unchanged."""

from aoq.training.linear import MXLinear, mx_linear, mx_qdq_padded

__all__ = ["MXLinear", "mx_linear", "mx_qdq_padded"]
