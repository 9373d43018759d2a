"""MX tensors (OCP Microscaling v1.0): ``MXTensor`` for any shape and axis (``aoq.mx.to_mx``)
and ``MXWeight``, the [N, K] linear weight of MXWeightOnlyConfig and
MXDynamicActivationMXWeightConfig, blocked along K.

Fields (n = shape[axis], bits = 8, 6 or 4 by element format):
    qdata  uint8           shape with n -> n * bits // 8: element codes packed along ``axis``
                           fp8 / int8: one byte each (the fp8 bits, int8 two's complement)
                           fp4: two codes per byte, first element in the low nibble
                           fp6: four codes in three bytes, little-endian (aoq.formats.packing)
    scale  float8_e8m0fnu  shape with n -> n // block_size: one E8M0 scale per block,
                           2^(byte - 127); byte 0xFF marks a NaN/Inf block (dequantizes to NaN)
Attrs: elem (MXElem), block_size (int), axis (int, >= 0), scale_rounding (ScaleRounding);
MXWeight adds act (NONE or MX_DYNAMIC), config_id, config_json.

Why float8_e8m0fnu for the scale and not a uint8 biased exponent: it is E8M0 by name (a reader
of a checkpoint sees what the bytes are), torch >= 2.7 and safetensors >= 0.6 store it, and it
is the dtype torch._scaled_mm takes for MX block scales on the GPUs that have a native MX
GEMM. The math reads it as its uint8 bytes (aoq.formats.mx.e8m0_to_float32).

No GPU here has an MX GEMM we can verify (sm100 has one; we cannot run sm100), so MX linears
are *emulated* on every backend: dequantize the weight (and quantize-dequantize the activations
with the MX cast kernel) in the input dtype, then one ordinary matmul. That is the intended
kernel, named ``emulated.*`` in the dispatch table, not a fallback.
"""

from __future__ import annotations

from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor
from torch._subclasses.fake_tensor import is_fake

from aoq.dispatch import Scheme, kernel
from aoq.formats import linear as ref
from aoq.formats.mx import (
    MXElem,
    ScaleRounding,
    mx_dequantize,
    mx_quantize,
    pack_mx_codes,
    parse_choice,
    unpack_mx_codes,
)
from aoq.kernels import mx_ops  # noqa: F401  (defines aoq::mx_cast / aoq::mx_qdq)
from aoq.tensors.activation import split_bias
from aoq.tensors.base import ActQuant, AoqTensor, QuantizedWeight, check_act

try:  # the Triton dequantization (GPUs); without triton the ops run the reference everywhere
    from aoq.kernels import mx_dequant as _mxd
except ImportError:
    _mxd = None  # type: ignore[assignment]

E8M0 = torch.float8_e8m0fnu
DECODE_MMA_BLOCKS = (32, 64, 128, 256)
"""Block sizes the bf16 decode kernel takes (kernels/decode_mma.serves, its MX formats)."""
BIG_LIMIT = {MXElem.FP4_E2M1: 128, MXElem.FP8_E4M3: 134, MXElem.FP6_E3M2: 130,
             MXElem.FP6_E2M3: 128, MXElem.FP8_E5M2: 142, MXElem.INT8: 255}  # fmt: skip
"""Elements the bf16 decode kernel takes, with the largest E8M0 byte its one multiply holds
(kernels/bf16_codes.py, kernels/fp6_codes.py: 2**(b - bias) a bf16); int8 255: its scale
goes on the float32 sums after the MMA, one path for every byte."""


def big_scale_flag(scale_bytes: Tensor, limit: int = 128) -> Tensor:
    """The BIG flag of MX's bf16 decode (kernels/decode_mma.py, WFMT 4 and 5): whether some
    E8M0 byte is above ``limit`` (fp4 128: a scale above 2**1; fp8 134; or NaN), whose blocks
    take a second multiply. Its length says who knows the answer (decode_mma.BIG_MODE): [0]
    no such byte and [2] some, looked up here once (one host sync), so the kernel is compiled
    with one path; [1] the answer on the device, which the kernel reads and branches on once a
    program (8192^2 on an H200: 31.5 against 24 us), for when the host may not look: while
    a CUDA graph is captured, or on fake tensors (torch.compile's tracing)."""
    flag = (scale_bytes > limit).any().to(torch.int32).reshape(1)
    if not _may_look(scale_bytes):
        return flag
    return flag.new_empty(2 if flag.item() else 0)


def _may_look(t: Tensor) -> bool:
    """Whether the host may read ``t``'s values: not while a CUDA graph is being captured
    (a sync), nor for fake tensors."""
    return not ((t.is_cuda and torch.cuda.is_current_stream_capturing()) or is_fake(t))


def _packed_len(n: int, elem: MXElem) -> int:
    return n * elem.spec.bits // 8


@torch.library.custom_op("aoq::mx_dequantize", mutates_args=())
def mx_dequantize_op(
    qdata: Tensor, scale: Tensor, elem: str, block_size: int, axis: int, dtype: torch.dtype
) -> Tensor:
    """Packed codes + E8M0 scale bytes (uint8: opcheck and fake tensors cannot compute on
    float8_e8m0fnu) -> values in ``dtype`` (the reference, on any device; the Triton kernel
    on GPUs where it serves). An op, so that torch.compile sees the data-dependent unpacking
    as one call."""
    return _mx_dequantize_reference(qdata, scale, elem, block_size, axis, dtype)


def _mx_dequantize_reference(
    qdata: Tensor, scale: Tensor, elem: str, block_size: int, axis: int, dtype: torch.dtype
) -> Tensor:
    e = MXElem(elem)
    codes = unpack_mx_codes(qdata.movedim(axis, -1), e).movedim(-1, axis)
    return mx_dequantize(codes, scale, e, block_size, axis, dtype)


def _mx_dequantize_gpu(
    qdata: Tensor, scale: Tensor, elem: str, block_size: int, axis: int, dtype: torch.dtype
) -> Tensor:
    """kernels/mx_dequant.py (bit for bit the reference) for 2-D codes blocked along their
    last dim in power-of-two blocks; the reference otherwise."""
    if _mxd is not None and _mxd.serves(qdata, block_size, axis):
        return _mxd.mx_dequantize_triton(qdata, scale, MXElem(elem), block_size, dtype)
    return _mx_dequantize_reference(qdata, scale, elem, block_size, axis, dtype)


if _mxd is not None:
    mx_dequantize_op.register_kernel("cuda")(_mx_dequantize_gpu)


@mx_dequantize_op.register_fake
def _(qdata: Tensor, scale: Tensor, elem: str, block_size: int, axis: int, dtype: torch.dtype):
    shape = list(qdata.shape)
    shape[axis] = shape[axis] * 8 // MXElem(elem).spec.bits
    return qdata.new_empty(shape, dtype=dtype)


class MXTensor(AoqTensor):
    tensor_fields: ClassVar[tuple[str, ...]] = ("qdata", "scale")
    attr_fields: ClassVar[tuple[str, ...]] = ("elem", "block_size", "axis", "scale_rounding")

    qdata: Tensor
    scale: Tensor
    elem: MXElem
    block_size: int
    axis: int
    scale_rounding: ScaleRounding

    @classmethod
    def _parts(
        cls, x: Tensor, elem: MXElem, block_size: int, axis: int, rule: ScaleRounding
    ) -> dict[str, object]:
        codes, scale = mx_quantize(x, elem, block_size, axis, rule)
        qdata = pack_mx_codes(codes.movedim(axis, -1), elem).movedim(-1, axis).contiguous()
        return {
            "qdata": qdata,
            "scale": scale.view(E8M0),
            "elem": elem,
            "block_size": block_size,
            "axis": axis % x.dim(),
            "scale_rounding": rule,
        }

    @classmethod
    def from_float(
        cls,
        x: Tensor,
        elem: MXElem,
        block_size: int = 32,
        axis: int = -1,
        scale_rounding: ScaleRounding = ScaleRounding.FLOOR,
    ) -> MXTensor:
        t = cls(x.shape, x.dtype, **cls._parts(x, elem, block_size, axis, scale_rounding))
        t.validate()
        return t

    def validate(self) -> None:
        name = type(self).__name__
        if not isinstance(self.elem, MXElem) or not isinstance(self.scale_rounding, ScaleRounding):
            raise ValueError(f"{name}: elem / scale_rounding must be MXElem / ScaleRounding")
        shape, axis, bs = tuple(self.shape), self.axis, self.block_size
        if not (isinstance(axis, int) and 0 <= axis < len(shape)):
            raise ValueError(f"{name}: axis={axis!r} is not a dim of shape {shape}")
        n = shape[axis]
        if not isinstance(bs, int) or bs <= 0 or n % bs or (n * self.elem.spec.bits) % 8:
            raise ValueError(f"{name}: block_size={bs!r} does not fit size {n} along axis {axis}")
        packed = list(shape)
        packed[axis] = _packed_len(n, self.elem)
        self._expect("qdata", (torch.uint8,), tuple(packed))
        scales = list(shape)
        scales[axis] = n // bs
        self._expect("scale", (E8M0,), tuple(scales))

    def codes(self) -> Tensor:
        """Unpacked codes in the nominal shape (dtype ``elem.codes_dtype``)."""
        u = unpack_mx_codes(self.qdata.movedim(self.axis, -1), self.elem)
        return u.movedim(-1, self.axis)

    def dequantize(self, dtype: torch.dtype | None = torch.float32) -> Tensor:  # type: ignore[override]
        """decode(codes) * 2^(scale - 127), computed in float32, returned in ``dtype``."""
        scale = self.scale.view(torch.uint8)
        return torch.ops.aoq.mx_dequantize(
            self.qdata, scale, self.elem.value, self.block_size, self.axis, dtype or self.dtype
        )


class MXWeight(MXTensor, QuantizedWeight):
    attr_fields = MXTensor.attr_fields + ("act", "config_id", "config_json")

    @classmethod
    def from_weight(
        cls,
        w: Tensor,
        elem: MXElem,
        block_size: int,
        scale_rounding: ScaleRounding,
        act: ActQuant,
        config_id: str,
        config_json: str,
    ) -> MXWeight:
        parts = cls._parts(w, elem, block_size, -1, scale_rounding)
        t = cls(w.shape, w.dtype, act=act, config_id=config_id, config_json=config_json, **parts)
        t.validate()
        return t

    def validate(self) -> None:
        if self.dim() != 2 or self.axis != 1:
            raise ValueError(
                f"MXWeight: a linear weight is [N, K] blocked along K (axis 1); got shape "
                f"{tuple(self.shape)} blocked along axis {self.axis}"
            )
        super().validate()
        check_act(self, (ActQuant.NONE, ActQuant.MX_DYNAMIC))

    @property
    def scheme(self) -> Scheme:
        return Scheme.MX_WEIGHT_ONLY if self.act is ActQuant.NONE else Scheme.MX_MX

    def build_derived(self) -> dict[str, Tensor]:
        """CUDA, fp4, fp6, fp8 (e4m3, e5m2) or int8 elements in blocks of 32..256: the E8M0 bytes
        group-major, [G, N] (``scale_gm``), and ``big_scales`` (:func:`big_scale_flag`): the
        bf16 decode kernel (kernels/decode_mma.py, WFMT 4 to 8 and 10) reads a block's bytes for a
        tile of rows in one coalesced load, and takes its one-multiply path when no byte is
        above BIG_LIMIT's. One byte a block of 32 beside its 16 (fp6: 24, fp8 and int8: 32)
        bytes of codes (+6 %, +4 %, +3 % of the weight's memory)."""
        if (
            self.qdata.device.type != "cuda"
            or self.elem not in BIG_LIMIT
            or self.block_size not in DECODE_MMA_BLOCKS
        ):
            return {}
        s = self.scale.view(torch.uint8)
        # the kernel's fp8 placement makes NaN (e5m2: and Inf) codes finite: such weights
        # (and any the host may not look at now) stay on the generic kernel
        special = {MXElem.FP8_E4M3: 0x7F, MXElem.FP8_E5M2: 0x7C}.get(self.elem)
        if special is not None and (
            not _may_look(self.qdata) or bool(((self.qdata & special) == special).any())
        ):
            return {}
        flag = big_scale_flag(s, BIG_LIMIT[self.elem])
        return {"scale_gm": s.t().contiguous(), "big_scales": flag}

    @property
    def dispatch_variant(self) -> str | None:
        """ "fp6" for fp6 codes (four in three bytes: dispatch.VARIANT_BY_M), "int8" for int8
        ones (sm90's decode band ends at 64 rows for fp6 and for int8 with fp16 x:
        dispatch.ARCH_VARIANT_BY_M, ARCH_VARIANT_DTYPE_BY_M), else None."""
        if self.elem.spec.bits == 6:
            return "fp6"
        return "int8" if self.elem is MXElem.INT8 else None

    def quantize_activation(self, x: Tensor) -> Tensor:
        """x [M, K] -> MX quantize-dequantize along K with this weight's format, in x's dtype."""
        return torch.ops.aoq.mx_qdq(
            x, self.elem.value, self.block_size, 1, self.scale_rounding.value
        )


def to_mx(
    x: Tensor,
    elem: MXElem | str,
    block_size: int = 32,
    axis: int = -1,
    scale_rounding: ScaleRounding | str = "floor",
) -> MXTensor:
    """x (any float dtype, any shape) -> MXTensor with ``elem`` elements in blocks of
    ``block_size`` along ``axis`` (strings are accepted here, at the public edge)."""
    e = parse_choice(MXElem, elem, "MX element")
    rule = parse_choice(ScaleRounding, scale_rounding, "scale_rounding")
    if not x.dtype.is_floating_point:
        raise TypeError(f"to_mx quantizes float tensors, got {x.dtype}")
    return MXTensor.from_float(x, e, block_size, axis, rule)


# --- kernels: the reference (float32) and the emulated intended kernels (input dtype) ------


@kernel("reference.mx_weight_only")
def _mxwo_reference(x: Tensor, w: MXWeight, bias: Tensor | None) -> Tensor:
    fb, _ = split_bias(bias, static=False)
    return ref.weight_only_linear(x, w.dequantize(torch.float32), fb)


@kernel("reference.mx_mx")
def _mx_reference(x: Tensor, w: MXWeight, bias: Tensor | None) -> Tensor:
    fb, _ = split_bias(bias, static=False)
    xq = w.quantize_activation(x.to(torch.float32))  # the same blocks: quantizing reads float32
    y = ref.weight_only_linear(xq, w.dequantize(torch.float32), fb)
    return y.to(x.dtype)


def _emulated(xq: Tensor, w: MXWeight, bias: Tensor | None) -> Tensor:
    fb, _ = split_bias(bias, static=False)
    return F.linear(xq, w.dequantize(xq.dtype), None if fb is None else fb.to(xq.dtype))


@kernel("emulated.mx_dequant_mm")
def _mxwo_emulated(x: Tensor, w: MXWeight, bias: Tensor | None) -> Tensor:
    """The weight dequantized to x's dtype (exact for fp8/fp6/fp4 codes in bf16 and fp32),
    then one matmul in x's dtype: what a GPU without an MX GEMM does fastest."""
    return _emulated(x, w, bias)


@kernel("emulated.mx_qdq_mm")
def _mx_emulated(x: Tensor, w: MXWeight, bias: Tensor | None) -> Tensor:
    """Activations MX quantize-dequantized along K (the Triton cast on GPUs), then as above."""
    return _emulated(w.quantize_activation(x), w, bias)
