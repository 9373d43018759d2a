"""bench/decode_rows.py's weights per format: random weights quantized as each decode_mma
format takes them on CUDA (group-major scales, MX's BIG flag, NVFP4's tensor scale), a list
of copies so the timed replays read past L2."""

from __future__ import annotations

from typing import Any

import torch

from bench.decode_sweep import weights


def weight_bytes(t: tuple) -> int:
    """The bytes of a case's tensors (codes, scales, zero points or flag)."""
    return sum(a.numel() * a.element_size() for a in t if isinstance(a, torch.Tensor))


def _mx(elem_name: str, n: int, k: int, copies: int) -> list[tuple]:
    from aoq.formats.mx import MXElem, mx_quantize, pack_mx_codes
    from aoq.tensors.mx import BIG_LIMIT, big_scale_flag

    elem = MXElem[elem_name]
    limit = BIG_LIMIT.get(elem, 255)  # (int8: the post-MMA scale has no second path)
    out = []
    for _ in range(copies):
        codes, scale = mx_quantize(torch.randn(n, k, device="cuda"), elem, 32, 1)
        gm = scale.t().contiguous().t()
        out.append((pack_mx_codes(codes, elem), gm, big_scale_flag(scale, limit)))
    return out


def _nvfp4(n: int, k: int, copies: int) -> list[tuple]:
    from aoq.formats.nvfp4 import nvfp4_quantize
    from aoq.formats.packing import pack_uint4

    out = []
    for _ in range(copies):
        codes, scale, ts = nvfp4_quantize(torch.randn(n, k, device="cuda"))
        gm = scale.view(torch.uint8).t().contiguous().t()
        out.append((pack_uint4(codes), gm, ts.reshape(()).float()))
    return out


def weight_case(fmt: str, n: int, k: int, copies: int) -> tuple[Any, list[tuple], int]:
    """(weight format, per-copy (codes, scale, zero or flag), groups)."""
    from aoq.kernels._common import WeightFormat as W

    if fmt.startswith("mx"):
        wf, elem = {"mxfp4": (W.MX_FP4, "FP4_E2M1"), "mxfp8": (W.MX_FP8, "FP8_E4M3"),
                    "mxfp6": (W.MX_FP6_E3M2, "FP6_E3M2"),
                    "mxfp6e2m3": (W.MX_FP6_E2M3, "FP6_E2M3"),
                    "mxfp8e5m2": (W.MX_FP8_E5M2, "FP8_E5M2"),
                    "mxint8": (W.MX_INT8, "INT8")}[fmt]  # fmt: skip
        return wf, _mx(elem, n, k, copies), k // 32
    if fmt == "nvfp4":  # e4m3 block bytes group-major, the tensor scale where MX has BIG
        return W.NVFP4, _nvfp4(n, k, copies), k // 16
    if fmt == "w4a8gemv":  # the GEMV reads row-major scales (SGM: a group-major copy)
        return W.INT4_SYM, weights("w4a8", n, k, copies), k // 32
    if fmt in ("w8a8act", "fp8act"):  # per-channel scales [N, 1]
        ws = weights(fmt[:-3].replace("w8a8", "int8"), n, k, copies)
        return (
            (W.INT8 if fmt == "w8a8act" else W.FP8),
            [(q, s.reshape(-1, 1), z) for q, s, z in ws],
            1,
        )
    fmt = "w4a8" if fmt == "w4a8rows" else fmt  # kernels/w4a8_mma.py: W4A8's weights
    ws = weights(fmt, n, k, copies)
    if fmt in ("int4", "w4a8"):  # the group-major scales (and zero points) of CUDA weights
        ws = [
            (q, s.t().contiguous().t(), None if z is None else z.t().contiguous().t())
            for q, s, z in ws
        ]
        return (W.UINT4 if fmt == "int4" else W.INT4_SYM), ws, ws[0][1].shape[1]
    return (W.INT8 if fmt == "int8" else W.FP8), ws, 1
