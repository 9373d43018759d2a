"""NVFP4 linear weights: fp4 e2m1 codes, one float8 e4m3 scale per 16 elements along K and one
float32 scale per tensor (aoq.formats.nvfp4 is the recipe).

Fields:
    qdata         uint8          [N, K // 2]   two fp4 codes per byte along K, first element in
                                               the low nibble (aoq.formats.packing.pack_uint4)
    scale         float8_e4m3fn  [N, K // 16]  block scales (0x7F, NaN, marks a NaN/Inf block)
    tensor_scale  float32        []            amax(|W|) / (448 * 6), or 1.0 for an all-zero W
Attrs: act (NONE: weight-only; NVFP4_DYNAMIC: activations quantized to NVFP4 at run time, with
their own tensor scale from the activation's amax), config_id, config_json.

Like MX, NVFP4 has no GEMM here that we can verify (sm100 has one), so both schemes are
emulated: dequantize, quantize-dequantize the activations, one matmul in the input dtype. The
math runs behind two torch.library ops so that torch.compile sees one opaque call instead of
data-dependent Python: the reference on CPU, Triton on GPUs (kernels/mx_dequant.py,
kernels/nvfp4_act.py; bit for bit the reference). At decode M on GPUs the weight is
dequantized tile by tile inside kernels/mx_decode.py instead (aoq/tensors/triton_linear.py).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from aoq.dispatch import Scheme, kernel
from aoq.formats import linear as ref
from aoq.formats.nvfp4 import NVFP4_BLOCK, nvfp4_dequantize, nvfp4_quantize
from aoq.formats.packing import pack_uint4, unpack_uint4
from aoq.tensors.activation import split_bias
from aoq.tensors.base import ActQuant, QuantizedWeight, check_act

try:  # the Triton kernels (GPUs); without triton the ops run the reference everywhere
    from aoq.kernels import mx_dequant as _mxd
    from aoq.kernels import nvfp4_act as _act
except ImportError:
    _mxd = _act = None  # type: ignore[assignment]


@torch.library.custom_op("aoq::nvfp4_dequantize", mutates_args=())
def nvfp4_dequantize_op(
    qdata: Tensor, scale: Tensor, tensor_scale: Tensor, dtype: torch.dtype
) -> Tensor:
    """Packed NVFP4 [..., K // 2] and the e4m3 block scales' bytes (uint8: opcheck and fake
    tensors cannot compute on float8) -> values [..., K] in ``dtype`` (the reference; the
    Triton kernel on GPUs where it serves)."""
    return _nvfp4_dequantize_reference(qdata, scale, tensor_scale, dtype)


def _nvfp4_dequantize_reference(
    qdata: Tensor, scale: Tensor, tensor_scale: Tensor, dtype: torch.dtype
) -> Tensor:
    block_scale = scale.view(torch.float8_e4m3fn)
    return nvfp4_dequantize(unpack_uint4(qdata), block_scale, tensor_scale, NVFP4_BLOCK, dtype)


def _nvfp4_dequantize_gpu(
    qdata: Tensor, scale: Tensor, tensor_scale: Tensor, dtype: torch.dtype
) -> Tensor:
    """kernels/mx_dequant.py (bit for bit the reference) for 2-D weights."""
    if _mxd is not None and _mxd.serves(qdata, NVFP4_BLOCK, -1):
        return _mxd.nvfp4_dequantize_triton(qdata, scale, tensor_scale, dtype)
    return _nvfp4_dequantize_reference(qdata, scale, tensor_scale, dtype)


if _mxd is not None:
    nvfp4_dequantize_op.register_kernel("cuda")(_nvfp4_dequantize_gpu)


@nvfp4_dequantize_op.register_fake
def _(qdata: Tensor, scale: Tensor, tensor_scale: Tensor, dtype: torch.dtype) -> Tensor:
    return qdata.new_empty((*qdata.shape[:-1], 2 * qdata.shape[-1]), dtype=dtype)


@torch.library.custom_op("aoq::nvfp4_qdq", mutates_args=())
def nvfp4_qdq(x: Tensor) -> Tensor:
    """NVFP4 quantize-dequantize of x [..., K] with a tensor scale from x's own amax, in x's
    dtype: what dynamic NVFP4 activations contribute to a GEMM."""
    return _nvfp4_qdq_reference(x)


def _nvfp4_qdq_reference(x: Tensor) -> Tensor:
    codes, block_scale, ts = nvfp4_quantize(x)
    return nvfp4_dequantize(codes, block_scale, ts, NVFP4_BLOCK, x.dtype)


def nvfp4_qdq_gpu(x: Tensor) -> Tensor:
    """``aoq::nvfp4_qdq`` on a GPU: kernels/nvfp4_act.py (bit for bit the reference) where it
    serves, else the reference; the linears call it directly when eager (an op call costs
    host time, and aoq/plans.py replays only launches)."""
    if _act is not None and _act.serves(x):
        return _act.nvfp4_qdq_triton(x)
    return _nvfp4_qdq_reference(x)


if _act is not None:
    nvfp4_qdq.register_kernel("cuda")(nvfp4_qdq_gpu)


@nvfp4_qdq.register_fake
def _(x: Tensor) -> Tensor:
    return torch.empty_like(x, memory_format=torch.contiguous_format)


class NVFP4Tensor(QuantizedWeight):
    tensor_fields = ("qdata", "scale", "tensor_scale")
    attr_fields = ("act", "config_id", "config_json")

    qdata: Tensor
    scale: Tensor
    tensor_scale: Tensor

    @classmethod
    def from_float(cls, w: Tensor, act: ActQuant, config_id: str, config_json: str) -> NVFP4Tensor:
        codes, scale, ts = nvfp4_quantize(w)
        t = cls(
            w.shape,
            w.dtype,
            qdata=pack_uint4(codes),
            scale=scale,
            tensor_scale=ts,
            act=act,
            config_id=config_id,
            config_json=config_json,
        )
        t.validate()
        return t

    def validate(self) -> None:
        if self.dim() != 2 or self.shape[1] % NVFP4_BLOCK:
            raise ValueError(
                f"NVFP4Tensor: a linear weight [N, K] with K divisible by {NVFP4_BLOCK}; got "
                f"{tuple(self.shape)}"
            )
        n, k = self.shape
        self._expect("qdata", (torch.uint8,), (n, k // 2))
        self._expect("scale", (torch.float8_e4m3fn,), (n, k // NVFP4_BLOCK))
        self._expect("tensor_scale", (torch.float32,), ())
        check_act(self, (ActQuant.NONE, ActQuant.NVFP4_DYNAMIC))

    @property
    def scheme(self) -> Scheme:
        return Scheme.NVFP4_WEIGHT_ONLY if self.act is ActQuant.NONE else Scheme.NVFP4_NVFP4

    def dequantize(self, dtype: torch.dtype | None = None) -> Tensor:  # type: ignore[override]
        scale = self.scale.view(torch.uint8)
        return torch.ops.aoq.nvfp4_dequantize(
            self.qdata, scale, self.tensor_scale, dtype or self.dtype
        )

    def build_derived(self) -> dict[str, Tensor]:
        """CUDA: the e4m3 block bytes group-major, [K / 16, N] (``scale_gm``), for the bf16
        decode kernel (kernels/decode_mma.py, WFMT 9: a tile of rows' bytes of a block in one
        coalesced load); one byte per 8 bytes of codes (+12 % of the weight's memory)."""
        if self.qdata.device.type != "cuda":
            return {}
        return {"scale_gm": self.scale.view(torch.uint8).t().contiguous()}

    def quantize_activation(self, x: Tensor) -> Tensor:
        """x [M, K] -> NVFP4 quantize-dequantize (dynamic tensor scale), in x's dtype."""
        return torch.ops.aoq.nvfp4_qdq(x)


@kernel("reference.nvfp4_weight_only")
def _nvfp4wo_reference(x: Tensor, w: NVFP4Tensor, bias: Tensor | None) -> Tensor:
    fb, _ = split_bias(bias, static=False)
    return ref.weight_only_linear(x, w.dequantize(torch.float32), fb)


@kernel("reference.nvfp4_nvfp4")
def _nvfp4_reference(x: Tensor, w: NVFP4Tensor, bias: Tensor | None) -> Tensor:
    fb, _ = split_bias(bias, static=False)
    xq = w.quantize_activation(x.to(torch.float32))
    return ref.weight_only_linear(xq, w.dequantize(torch.float32), fb).to(x.dtype)


def _emulated(xq: Tensor, w: NVFP4Tensor, bias: Tensor | None) -> Tensor:
    fb, _ = split_bias(bias, static=False)
    return F.linear(xq, w.dequantize(xq.dtype), None if fb is None else fb.to(xq.dtype))


@kernel("emulated.nvfp4_dequant_mm")
def _nvfp4wo_emulated(x: Tensor, w: NVFP4Tensor, bias: Tensor | None) -> Tensor:
    """The weight dequantized to x's dtype, one matmul in x's dtype."""
    return _emulated(x, w, bias)


@kernel("emulated.nvfp4_qdq_mm")
def _nvfp4_emulated(x: Tensor, w: NVFP4Tensor, bias: Tensor | None) -> Tensor:
    """Activations NVFP4 quantize-dequantized (dynamic tensor scale), then as above."""
    return _emulated(w.quantize_activation(x), w, bias)
