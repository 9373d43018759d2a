"""int4 weights, two codes per byte: asymmetric weight-only (W4A16) and symmetric W4A8.

Fields:
    qdata       uint8   [N, K // 2]  codes packed along K, first element in the low nibble
                                     (aoq.formats.packing); asymmetric: q in [0, 15];
                                     symmetric: the nibble holds q + 8 for q in [-8, 7]
    scale       float32 [N, G]       G = K // group_size
    zero_point  uint8   [N, G]       asymmetric only, in [0, 15]
    act_scale   float32 []           W4A8 with ActQuant.INT8_STATIC only
Attrs: act (NONE for W4A16; INT8_DYNAMIC, INT8_DYNAMIC_ASYM or INT8_STATIC for W4A8),
config_id, config_json, packing ("plain": qdata as above; "tiled": the same bytes in
aoq.formats.packing.tile_uint4's order, 64 rows x 128 codes a tile: the GPU decode kernel
then reads each step's codes as one 4 KB run, 11-14 % faster on an H100, bench/NOTES.md
session 20).

The packing follows the device (``packing_on``, a layout attr): a W4A16 weight quantized,
moved or loaded onto a GPU is tiled where the shape tiles; on the CPU it is plain; on the
meta device it stays as it is. A checkpoint holds qdata in the packing of the tensor that was
saved (its attr says which; checkpoints written before the attr existed are "plain") and loads
into the packing of the device it lands on. The CPU tinygemm layout is built at first use.
"""

from __future__ import annotations

from typing import Any

import torch

from aoq.dispatch import Scheme, kernel
from aoq.formats import affine
from aoq.formats import linear as ref
from aoq.formats.packing import (
    pack_uint4,
    pack_zero_words,
    tile_uint4,
    tiles_uint4,
    unpack_uint4,
    untile_uint4,
)
from aoq.tensors import cpu_ops
from aoq.tensors.activation import quantize_int8_activation, split_bias
from aoq.tensors.base import ActQuant, AoqTensor, QuantizedWeight, check_act

CPU_FLOAT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
SYM_OFFSET = 8
DECODE_MMA_GROUPS = (32, 64, 128, 256)
"""The group sizes kernels/decode_mma.py serves (its ``serves``): only those weights get the
group-major copies, whose memory would buy nothing for the others."""


def _tileable(n: int, k: int, group_size: int, act: ActQuant) -> bool:
    """Whether an int4 weight may take the tiled packing: W4A16 (the kernels that read it) in
    whole tiles."""
    return act is ActQuant.NONE and tiles_uint4(n, k, group_size)


class Int4Tensor(QuantizedWeight):
    tensor_fields = ("qdata", "scale")
    optional_fields = ("zero_point", "act_scale")
    attr_fields = ("act", "config_id", "config_json", "packing")
    layout_attrs = ("packing",)
    attr_defaults = {"packing": "plain"}
    PACKINGS = ("plain", "tiled")

    qdata: torch.Tensor
    scale: torch.Tensor
    zero_point: torch.Tensor | None
    act_scale: torch.Tensor | None

    @classmethod
    def from_float(
        cls,
        w: torch.Tensor,
        group_size: int,
        act: ActQuant,
        config_id: str,
        config_json: str,
        act_scale: torch.Tensor | None = None,
        packing: str = "plain",
    ) -> Int4Tensor:
        """Quantize ``w`` [N, K]; ``packing`` "tiled" (W4A16 only, where tiles_uint4 holds)
        stores the codes in tile order."""
        zero: torch.Tensor | None
        if act is ActQuant.NONE:
            q, s, zero = affine.quantize_uint4_asymmetric(w, group_size)
        else:
            qs, s = affine.quantize_int4_symmetric(w, group_size)
            q, zero = qs + SYM_OFFSET, None
        packed = pack_uint4(q)
        return cls(
            w.shape,
            w.dtype,
            qdata=tile_uint4(packed) if packing == "tiled" else packed,
            scale=s,
            zero_point=zero,
            act_scale=act_scale,
            act=act,
            config_id=config_id,
            config_json=config_json,
            packing=packing,
        )

    @staticmethod
    def packing_on(
        device: torch.device, n: int, k: int, group_size: int, act: ActQuant
    ) -> str | None:
        """The packing the kernels of ``device`` read for an [N, K] weight: "tiled" on a GPU
        for W4A16 in whole tiles (the decode kernel's layout), else "plain"; on a device
        with no kernels of its own (meta) None: a weight there keeps the packing it has."""
        if device.type == "cuda":
            return "tiled" if _tileable(n, k, group_size, act) else "plain"
        return "plain" if device.type == "cpu" else None

    @staticmethod
    def tiles(w: torch.Tensor, group_size: int, act: ActQuant) -> bool:
        """Whether ``w`` quantized where it lies takes the tiled packing (:meth:`packing_on`)."""
        n, k = w.shape
        return Int4Tensor.packing_on(w.device, n, k, group_size, act) == "tiled"

    def for_device(self) -> AoqTensor:
        n, k = self._size
        packing = self.packing_on(self.qdata.device, n, k, self.group_size, self.act)
        return self.relayout(packing=packing or self.packing)

    def relayout(self, **layout: Any) -> AoqTensor:
        """A copy in ``packing`` (scale and zero point shared); self when it has it."""
        packing = layout.pop("packing", self.packing)
        if layout:
            raise TypeError(f"Int4Tensor.relayout takes packing, not {sorted(layout)}")
        if packing == self.packing:
            return self
        self._check_packing(packing)
        plain = self.plain_qdata()
        qdata = tile_uint4(plain) if packing == "tiled" else plain
        return self.replace(qdata=qdata, packing=packing)

    def validate(self) -> None:
        n, k = self.shape
        groups = self.scale.shape[-1] if self.scale.dim() == 2 else 0
        if groups == 0 or k % groups or k % 2:
            raise ValueError(f"Int4Tensor.scale {tuple(self.scale.shape)} does not divide K={k}")
        self._expect("qdata", (torch.uint8,), (n, k // 2))
        self._expect("scale", (torch.float32,), (n, groups))
        check_act(
            self,
            (
                ActQuant.NONE,
                ActQuant.INT8_DYNAMIC,
                ActQuant.INT8_DYNAMIC_ASYM,
                ActQuant.INT8_STATIC,
            ),
        )
        self._check_packing(self.packing)
        if self.act is ActQuant.NONE:
            self._expect("zero_point", (torch.uint8,), (n, groups))
        elif self.zero_point is not None:
            raise ValueError("Int4Tensor: W4A8 weights are symmetric and take no zero_point")

    def _check_packing(self, packing: str) -> None:
        n, k = self._size
        if packing not in self.PACKINGS:
            raise ValueError(f"Int4Tensor.packing {packing!r}: not one of {self.PACKINGS}")
        if packing == "tiled" and not _tileable(n, k, self.group_size, self.act):
            raise ValueError(
                f"Int4Tensor: tiled packing is for W4A16 weights in whole 64 x 128 tiles with "
                f"groups of at most 128, not [{n}, {k}] in groups of {self.group_size} "
                f"({self.act})"
            )

    def build_derived(self) -> dict[str, torch.Tensor]:
        """CUDA: the scales (and the asymmetric weight-only zero points) group-major, [G, N]
        (``scale_gm``, ``zero_gm``), so the decode kernel reads a group's values for a block of
        rows in one coalesced load (kernels/decode_mma.py; about 15 % off its time at M <= 16,
        run of 2026-11-22; 25-45 % for W4A8's groups of 32, session 15). They cost 5 bytes
        a group beside the 64 of a 128-group's codes (weight-only), 4 beside the 16 of a
        32-group's (W4A8: its float32 scales, +20 % of the weight's memory).
        CPU tinygemm layout (asymmetric weight-only, N % 16 == 0): the packed weight and
        scales_and_zeros [G, N, 2] in the model dtype. tinygemm computes (q - 8) * s + zero,
        so zero = (8 - z) * s."""
        if self.qdata.device.type == "cuda" and self.group_size in DECODE_MMA_GROUPS:
            gm = {"scale_gm": self.scale.t().contiguous()}
            if self.zero_point is not None and self.packing == "tiled":
                gm["zero_gw"] = pack_zero_words(self.zero_point).t()  # [G / 4, N] words
            elif self.zero_point is not None:
                gm["zero_gm"] = self.zero_point.t().contiguous()
            return gm
        if self.qdata.device.type != "cpu" or _tinygemm_unsupported(self) is not None:
            return {}
        assert self.zero_point is not None
        packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(self.codes().to(torch.int32), 1)
        zero = (SYM_OFFSET - self.zero_point.to(torch.float32)) * self.scale
        sz = torch.stack([self.scale, zero], dim=-1).transpose(0, 1).contiguous().to(self.dtype)
        return {"tinygemm_qdata": packed, "tinygemm_scales_zeros": sz}

    @property
    def scheme(self) -> Scheme:
        return Scheme.INT4_WEIGHT_ONLY if self.act is ActQuant.NONE else Scheme.INT8_INT4

    @property
    def group_size(self) -> int:
        return self._size[1] // self.scale.shape[-1]

    def plain_qdata(self) -> torch.Tensor:
        """qdata in the plain packing (a copy if the tensor is tiled)."""
        return untile_uint4(self.qdata) if self.packing == "tiled" else self.qdata

    def canonical_tensors(self) -> dict[str, torch.Tensor]:
        return {**self.tensors(), "qdata": self.plain_qdata()}

    def codes(self) -> torch.Tensor:
        """Unpacked codes [N, K]: uint8 in [0, 15] (asymmetric) or int8 in [-8, 7] (symmetric)."""
        q = unpack_uint4(self.plain_qdata())
        return q if self.zero_point is not None else q.to(torch.int8) - SYM_OFFSET

    def dequantize(self, dtype: torch.dtype | None = None) -> torch.Tensor:  # type: ignore[override]
        if self.zero_point is not None:
            w = affine.dequantize_uint4_asymmetric(self.codes(), self.scale, self.zero_point)
        else:
            w = affine.dequantize_symmetric(self.codes(), self.scale)
        return w.to(dtype or self.dtype)


# --- weight-only ---------------------------------------------------------------------------


@kernel("reference.int4_weight_only")
def _int4wo_reference(x: torch.Tensor, w: Int4Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    fb, _ = split_bias(bias, static=False)
    return ref.weight_only_linear(x, w.dequantize(torch.float32), fb)


TINYGEMM_GROUPS = (32, 64, 128, 256)


def _tinygemm_unsupported(w: Int4Tensor) -> str | None:
    """Why the CPU tinygemm layout cannot hold this weight, or None."""
    if w.zero_point is None:
        return "symmetric int4 (tinygemm is asymmetric weight-only)"
    if w.shape[0] % 16:
        return f"N={w.shape[0]} is not a multiple of 16"
    if w.group_size not in TINYGEMM_GROUPS:
        return f"group_size={w.group_size} (the op takes {TINYGEMM_GROUPS})"
    if w.dtype not in CPU_FLOAT_DTYPES:
        return f"model dtype {w.dtype} (the op takes bf16, fp16 or fp32)"
    return None


def _tinygemm_check(x: torch.Tensor, w: Int4Tensor, bias: torch.Tensor | None) -> str | None:
    if x.dtype != w.dtype:
        return f"{x.dtype} input but the layout was built for the model dtype {w.dtype}"
    if "tinygemm_qdata" not in w.derived():
        return _tinygemm_unsupported(w) or "no CPU tinygemm layout"
    return None


@kernel("aten._weight_int4pack_mm_for_cpu", _tinygemm_check)
def _int4wo_cpu(x: torch.Tensor, w: Int4Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    fb, _ = split_bias(bias, static=False)
    d = w.derived()
    y = cpu_ops.weight_int4pack_mm(x, d["tinygemm_qdata"], w.group_size, d["tinygemm_scales_zeros"])
    return y if fb is None else y + fb.to(y.dtype)


# --- W4A8 ----------------------------------------------------------------------------------


@kernel("reference.int8_int4")
def _w4a8_reference(x: torch.Tensor, w: Int4Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    static = w.act is ActQuant.INT8_STATIC
    xq, xs, xz = quantize_int8_activation(x, w.act, w.act_scale)
    fb, ib = split_bias(bias, static)
    return ref.int_act_linear(xq, xs, xz, w.codes(), w.scale, x.dtype, bias=fb, bias_int=ib)


@kernel("cpu.w4a8_dequant_mm")
def _w4a8_cpu(x: torch.Tensor, w: Int4Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """Integer activations times dequantized weights in one float32 GEMM; the per-token scale
    (and zero point) in the epilogue. Same value as the reference up to float32 rounding."""
    static = w.act is ActQuant.INT8_STATIC
    xq, xs, xz = quantize_int8_activation(x, w.act, w.act_scale)
    fb, ib = split_bias(bias, static)
    ct = ref.compute_dtype(x)
    xi = xq.to(ct) if xz is None else xq.to(ct) - xz.to(ct).unsqueeze(-1)
    y = xi @ affine.dequantize_symmetric(w.codes(), w.scale).to(ct).t()
    y = y * (xs.to(ct).unsqueeze(-1) if xs.dim() else xs.to(ct))
    if ib is not None:
        gstar = ref.bias_group(w.scale)
        bias_scale = w.scale.gather(1, gstar.unsqueeze(-1)).squeeze(-1) * xs
        y = y + ib.to(ct) * bias_scale.to(ct)
    if fb is not None:
        y = y + fb.to(ct)
    return y.to(x.dtype)
