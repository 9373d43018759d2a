"""int8 symmetric weights: weight-only (W8A16) and W8A8.

Fields:
    qdata      int8    [N, K]      codes in [-127, 127]
    scale      float32 [N, G]      G = K // group_size (G = 1: per output channel)
    act_scale  float32 []          only for ActQuant.INT8_STATIC (the calibrated scale)
Attrs: act (ActQuant.NONE | INT8_DYNAMIC | INT8_STATIC), config_id, config_json.
"""

from __future__ import annotations

import torch
from torch._subclasses.fake_tensor import is_fake

from aoq.dispatch import Scheme, kernel
from aoq.formats import affine
from aoq.formats import linear as ref
from aoq.tensors import cpu_ops
from aoq.tensors.activation import quantize_int8_activation, split_bias
from aoq.tensors.base import ActQuant, QuantizedWeight, check_act

CPU_FLOAT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)


class Int8Tensor(QuantizedWeight):
    tensor_fields = ("qdata", "scale")
    optional_fields = ("act_scale",)
    attr_fields = ("act", "config_id", "config_json")

    qdata: torch.Tensor
    scale: torch.Tensor
    act_scale: torch.Tensor | None

    @classmethod
    def from_float(
        cls,
        w: torch.Tensor,
        group_size: int | None,
        act: ActQuant,
        config_id: str,
        config_json: str,
        act_scale: torch.Tensor | None = None,
    ) -> Int8Tensor:
        q, s = affine.quantize_int8_symmetric(w, group_size)
        return cls(
            w.shape,
            w.dtype,
            qdata=q,
            scale=s,
            act_scale=act_scale,
            act=act,
            config_id=config_id,
            config_json=config_json,
        )

    def build_derived(self) -> dict[str, torch.Tensor]:
        """Weight-only on CPU: per-channel scales in the model dtype for _weight_int8pack_mm."""
        weight_only = self.act is ActQuant.NONE and self.scale.shape[-1] == 1
        if self.qdata.device.type != "cpu" or not weight_only or self.dtype not in CPU_FLOAT_DTYPES:
            return {}
        return {"int8pack_scale": self.scale[:, 0].to(self.dtype)}

    @property
    def scheme(self) -> Scheme:
        return Scheme.INT8_WEIGHT_ONLY if self.act is ActQuant.NONE else Scheme.INT8_INT8

    def validate(self) -> None:
        n, k = self.shape
        groups = self.scale.shape[-1] if self.scale.dim() == 2 else 0
        if groups == 0 or k % groups:
            raise ValueError(f"Int8Tensor.scale {tuple(self.scale.shape)} does not divide K={k}")
        self._expect("qdata", (torch.int8,), (n, k))
        self._expect("scale", (torch.float32,), (n, groups))
        check_act(self, (ActQuant.NONE, ActQuant.INT8_DYNAMIC, ActQuant.INT8_STATIC))

    def dequantize(self, dtype: torch.dtype | None = None) -> torch.Tensor:  # type: ignore[override]
        return affine.dequantize_symmetric(self.qdata, self.scale).to(dtype or self.dtype)


# --- weight-only ---------------------------------------------------------------------------


@kernel("reference.int8_weight_only")
def _int8wo_reference(x: torch.Tensor, w: Int8Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    fb, _ = split_bias(bias, static=False)
    return ref.weight_only_linear(x, affine.dequantize_symmetric(w.qdata, w.scale), fb)


def _traced(t: torch.Tensor) -> bool:
    """A fake tensor (torch.compile's tracing: no address; ``is_compiling`` is not set while
    torch 2.11's dynamo runs a node on fake tensors) or a compiled region."""
    return torch.compiler.is_compiling() or is_fake(t)


def _int8pack_check(x: torch.Tensor, w: Int8Tensor, bias: torch.Tensor | None) -> str | None:
    if x.dtype not in CPU_FLOAT_DTYPES:
        return f"{x.dtype} input (the op takes bf16, fp16 or fp32)"
    if w.scale.shape[-1] != 1:
        return "groupwise scales (the op takes one scale per output channel)"
    if x.dtype == torch.bfloat16 and w.shape[1] % 16:
        return f"bf16 input with K={w.shape[1]} not a multiple of 16 (the op crashes there)"
    if not _traced(w.qdata) and w.qdata.data_ptr() % 64:
        return "weight storage is not 64-byte aligned (the op would read out of bounds)"
    if x.dtype != w.dtype or "int8pack_scale" not in w.derived():
        return f"{x.dtype} input but the scales were prepared for the model dtype {w.dtype}"
    return None


@kernel("aten._weight_int8pack_mm", _int8pack_check)
def _int8wo_cpu(x: torch.Tensor, w: Int8Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    fb, _ = split_bias(bias, static=False)
    y = cpu_ops.weight_int8pack_mm(x, w.qdata, w.derived()["int8pack_scale"])
    return y if fb is None else y + fb.to(y.dtype)


# --- W8A8 ----------------------------------------------------------------------------------


@kernel("reference.int8_int8")
def _w8a8_reference(x: torch.Tensor, w: Int8Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    static = w.act is ActQuant.INT8_STATIC
    xq, xs, xz = quantize_int8_activation(x, w.act, w.act_scale)
    fb, ib = split_bias(bias, static)
    return ref.int_act_linear(xq, xs, xz, w.qdata, w.scale, x.dtype, bias=fb, bias_int=ib)


def _int_mm_check(x: torch.Tensor, w: Int8Tensor, bias: torch.Tensor | None) -> str | None:
    if w.scale.shape[-1] != 1:
        return "groupwise weight scales (one int32 accumulator per output needs per-channel)"
    return None


@kernel("aten._int_mm", _int_mm_check)
def _w8a8_cpu(x: torch.Tensor, w: Int8Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    static = w.act is ActQuant.INT8_STATIC
    xq, xs, _ = quantize_int8_activation(x, w.act, w.act_scale)
    fb, ib = split_bias(bias, static)
    acc = torch._int_mm(xq, w.qdata.t())
    if ib is not None:
        acc = acc + ib
    ct = ref.compute_dtype(x)
    scale = w.scale[:, 0].to(ct)
    y = acc.to(ct) * scale
    y = y * (xs.to(ct).unsqueeze(-1) if xs.dim() else xs.to(ct))
    if fb is not None:
        y = y + fb.to(ct)
    return y.to(x.dtype)
