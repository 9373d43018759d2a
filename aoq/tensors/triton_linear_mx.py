"""The GPU and interpreter decode entries of the MX and NVFP4 schemes (kernels/mx_decode.py,
and kernels/decode_mma.py's decode for MX fp4, fp6, fp8 and int8 with bf16 or fp16
activations on CUDA; fp6 runs nothing else: the check refuses it there); the other schemes' entries,
and the helpers these share, are in triton_linear.py."""

from __future__ import annotations

from typing import Any

import torch

from aoq.dispatch import kernel
from aoq.formats.mx import MXElem
from aoq.tensors.activation import split_bias
from aoq.tensors.base import ActQuant
from aoq.tensors.mx import MXWeight
from aoq.tensors.nvfp4 import NVFP4Tensor, nvfp4_qdq_gpu
from aoq.tensors.triton_linear import _call, _common, _k, _one_row_pays, _traced


def _mx_decode_check(x: torch.Tensor, w: MXWeight | NVFP4Tensor, bias: Any) -> str | None:
    bs = w.block_size if isinstance(w, MXWeight) else 16
    why = _common(x, w)
    if why is not None:
        return why
    past = x.dim() == 2 and x.shape[0] > 16
    gm, zero, wfmt = _group_major(x, w) if past or _fp6(w) else (None, None, None)
    # past 16 rows decode_mma on the group-major bytes (sm90: mx_decode.mma_rows)
    rows = _k.mx_decode.mma_rows(x, w.qdata, gm, zero, bs, wfmt) if past else 16
    why = _k.mx_decode.serves(x, w.qdata, bs, rows)
    if why is None and _fp6(w):  # fp6 runs only decode_mma's loop (mx_decode.fp6_refusal)
        why = _k.mx_decode.fp6_refusal(x, w.qdata, gm, zero, bs, w.elem)
    return why


def _group_major(x: torch.Tensor, w: MXWeight | NVFP4Tensor) -> tuple[Any, Any, Any]:
    """The weight's group-major bytes (a view with strides (1, N)), its BIG flag (MX) or
    tensor scale (NVFP4) and decode_mma's format for it, from its derived layout (CUDA, bf16
    / fp16 x); Nones where it has none."""
    d = w.derived() if x.dtype in (torch.bfloat16, torch.float16) else {}
    nv = isinstance(w, NVFP4Tensor)
    gm = d["scale_gm"].t() if "scale_gm" in d else None
    zero = w.tensor_scale if nv else d.get("big_scales")
    wfmt = _k._common.WeightFormat.NVFP4 if nv else _k.mx_decode.DECODE_MMA_FORMATS.get(w.elem)
    return gm, zero, wfmt


def _fp6(w: MXWeight | NVFP4Tensor) -> bool:
    return isinstance(w, MXWeight) and w.elem.spec.bits == 6


def _mx_decode(x: torch.Tensor, w: MXWeight | NVFP4Tensor, bias: Any) -> torch.Tensor:
    """The weight dequantized tile by tile inside the decode kernel (kernels/mx_decode.py):
    the emulated path's weights and products, without the dequantized copy."""
    fb, _ = split_bias(bias, static=False)
    gpu = x.device.type != "cpu"  # eagerly the GPU ops' implementations, called directly
    nvfp4 = isinstance(w, NVFP4Tensor)
    scale = w.scale.view(torch.uint8)  # opcheck and fake tensors cannot compute on float8
    if nvfp4:
        elem, bs, ts, rule = MXElem.FP4_E2M1, 16, w.tensor_scale, "nvfp4"
    else:
        elem, bs, ts, rule = w.elem, w.block_size, None, w.scale_rounding.value
    if _xmx(x, w):  # (AOQ_XMX=1) MX int8 codes of x on the integer MMA: mx_decode.XMX
        d = w.derived()
        return _k.mx_decode.mx_int8_xmx(x, w.qdata, d["scale_gm"].t(), d["big_scales"], bs, fb,
                                        rule)  # fmt: skip
    if w.act in (ActQuant.NVFP4_DYNAMIC, ActQuant.MX_DYNAMIC):
        fp6 = _fp6(w)
        fits = not fp6 or bs <= _k.decode_mma.FP6_STEP
        if fits and not _traced(x, w.qdata) and _one_row_pays(x, w):
            # eager M = 1, a small weight: the decode kernel rounds x itself (one launch,
            # the same bits as the activation kernel and this kernel; but NVFP4 under graph
            # capture runs decode_mma's exact-step path, NVX, which differs from this by
            # float rounding: bench/NOTES.md, session 39); rule: the activation's MX scale
            # rounding, or "nvfp4"; fp6:
            # decode_mma's loop, on the weight's group-major bytes (the check saw them), for
            # blocks up to its step (larger ones keep the activation kernel)
            s, big = scale, None
            if fp6:
                d = w.derived()
                s, big = d["scale_gm"].t(), d["big_scales"]
            return _k.mx_decode.mx_decode_triton(x, w.qdata, s, ts, elem.value, bs, fb, None,
                                                 rule, big_scales=big)  # fmt: skip
        if nvfp4:  # the same ops as w.quantize_activation
            x = _call("nvfp4_qdq", nvfp4_qdq_gpu if gpu else torch.ops.aoq.nvfp4_qdq, x)
        else:
            qdq = _k.mx_cast.mx_qdq_gpu if gpu else torch.ops.aoq.mx_qdq
            x = _call("mx_qdq", qdq, x, elem.value, bs, 1, rule)
    half = x.dtype in (torch.bfloat16, torch.float16)
    d = w.derived() if half else {}
    if "big_scales" in d:  # MX fp4 / fp6 / fp8 on CUDA: the bf16-pair decode (decode_mma.py)
        gm, flag = d["scale_gm"].t(), d["big_scales"]
        return _call("mx_decode", _mx_decode_bf16,
                     x, w.qdata, gm, ts, elem.value, bs, fb, flag)  # fmt: skip
    if nvfp4 and "scale_gm" in d:  # the same kernel's NVFP4 path (group-major bytes)
        return _call("mx_decode", _k.mx_decode.mx_decode_triton,
                     x, w.qdata, d["scale_gm"].t(), ts, elem.value, bs, fb)  # fmt: skip
    return _call("mx_decode", _k.mx_decode.mx_decode_triton,
                 x, w.qdata, scale, ts, elem.value, bs, fb)  # fmt: skip


def _xmx(x: torch.Tensor, w: MXWeight | NVFP4Tensor) -> bool:
    """The mx-int8 config at decode M up to 16 rows takes mx_decode.mx_int8_xmx (AOQ_XMX=1):
    MX int8 weights and activations, bf16 / fp16 x, the weight's group-major bytes (CUDA),
    not traced."""
    return (
        _k.mx_decode.XMX
        and x.shape[0] <= 16
        and isinstance(w, MXWeight)
        and w.elem is MXElem.INT8
        and w.act is ActQuant.MX_DYNAMIC
        and x.dtype in (torch.bfloat16, torch.float16)
        and not _traced(x, w.qdata)
        and "big_scales" in w.derived()
    )


def _mx_decode_bf16(*args: Any) -> torch.Tensor:
    """mx_decode_triton with the weight's group-major bytes and BIG flag (the op's order)."""
    return _k.mx_decode.mx_decode_triton(*args[:7], big_scales=args[7])


for _name in (
    "triton.mxwo.decode",
    "triton.mx.decode",
    "triton.nvfp4wo.decode",
    "triton.nvfp4.decode",
):
    kernel(_name, _mx_decode_check)(_mx_decode)
