"""The catalogue of what ``python -m aoq.kernels.targets`` compiles: one :class:`Spec` per kernel
at a representative tile (signature types, constexprs, warps), per target where the types
differ (gfx942's e4m3fnuz). Kept apart from the compiling machinery in targets.py."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True)
class Spec:
    name: str
    module: str
    fn: str
    signature: dict[str, str]
    constexprs: dict[str, Any]
    warps: int = 4
    stages: int = 3
    fp8: bool = False
    """Uses float8 (an expected impossibility on the NO_FP8 targets)."""
    mma: bool = True
    """A matrix kernel: its assembly should hold matrix instructions."""
    block_scaled: bool = False
    """A native block-scaled GEMM: needs BLOCK_SCALED's instruction (xfail elsewhere)."""
    max_shared: int | None = None
    """Shared memory (bytes) the kernel may use at most (a streaming kernel's budget)."""


def split_tail(fused: bool = True) -> int:
    """The split decode kernels' TAIL: the fused reduction (kernels/splitk.py's finish) with
    a column scale, a row scale and a bias; without FUSE, the reduction kernel's."""
    from aoq.kernels import splitk

    bits = splitk.COL_SCALE | splitk.ROW_SCALE | splitk.BIAS
    return bits | splitk.FUSE if fused else bits


PDL_TARGETS = ("sm90", "sm100")
"""Where the W4A8, W8A8 and fp8 decode kernels take programmatic dependent launch
(kernels/_common.pdl), and every split decode kernel triggers its reduction kernel."""


def pdl_variant(spec: Spec, ahead: bool = False) -> Spec:
    """``spec`` launched with programmatic dependent launch (PDL_TARGETS only); ``ahead``: its
    first step's weights loaded before the wait (the kernels that take AHEAD)."""
    ce = {**spec.constexprs, "PDL": True, **({"AHEAD": True} if ahead else {})}
    return replace(spec, name=f"{spec.name}_pdl", constexprs=ce)


def chained_variant(spec: Spec) -> Spec:
    """``spec`` (a split decode kernel) with its reduction kernel chained: TRIGGER first, the
    reduction not fused (splitk.Plan.chain; PDL_TARGETS only)."""
    ce = {**spec.constexprs, "TRIGGER": True, "TAIL": split_tail(fused=False)}
    return replace(spec, name=f"{spec.name}_chained", constexprs=ce)


def chained(target: str, *specs: Spec) -> list[Spec]:
    """:func:`chained_variant` of each of ``specs`` on PDL_TARGETS, none elsewhere."""
    return [chained_variant(s) for s in specs] if target in PDL_TARGETS else []


def one_row_variant(spec: Spec, x_arg: str, **constexprs: Any) -> Spec:
    """``spec`` quantizing its own bf16 activation row (act_one_row.one_row_scale: M = 1)."""
    return replace(spec, signature={**spec.signature, x_arg: "*bf16"},
                   constexprs={**spec.constexprs, **constexprs})  # fmt: skip


def _mm_sig(x: str, w: str, y: str) -> dict[str, str]:
    names = ("x_ptr", "w_ptr", "s_ptr", "z_ptr", "b_ptr", "y_ptr")
    types = (x, w, "*fp32", "*u8" if w == "*u8" else "*fp32", "*bf16", y)
    sig = dict(zip(names, types, strict=True))
    sig.update(
        {n: "i32" for n in ("M", "N", "K", "G", "stride_xm", "stride_wn", "stride_ym", "M_KEY")}
    )
    return sig


def _wo(name: str, w: str, wfmt: int, gs: int, bm: int, bn: int, bk: int, warps: int = 4) -> Spec:
    """A weight-only kernel; ``*.gemv`` / ``*.decode`` names are the split-K decode kernel."""
    decode = name.endswith((".gemv", ".decode"))
    ce = dict(
        WFMT=wfmt,
        GROUP_SIZE=gs,
        PER_CHANNEL=wfmt != 1,
        HAS_BIAS=True,
        UPCAST=False,
        PRECISION="ieee",
        BLOCK_M=bm,
        BLOCK_N=bn,
        BLOCK_K=bk,
    )
    sig = _mm_sig("*bf16", w, "*bf16")
    if decode:
        ce["SPLIT_K"] = 4
        ce["TAIL"] = split_tail()
        sig = _split_sig(sig, "*fp32")
    return Spec(
        name,
        "weight_only",
        "_weight_only_decode_kernel" if decode else "_weight_only_mm_kernel",
        sig,
        ce,
        warps=warps,
        fp8=wfmt == 2,
        mma=bm > 1,
    )


def _split_sig(sig: dict[str, str], part: str) -> dict[str, str]:
    """A matmul signature with the split-K partials pointer after y_ptr and K_SPLIT after G
    (decode kernels, kernels/splitk.py); the decode kernels take no M_KEY."""
    out: dict[str, str] = {}
    for k, v in sig.items():
        if k == "M_KEY" and "xq_ptr" not in sig:
            continue
        out[k] = v
        if k == "y_ptr":
            out["p_ptr"] = part
            out["c_ptr"] = "*i32"
        if k == "G":
            out["K_SPLIT"] = "i32"
    return out


def _int_act(name: str, int4: bool, gs: int, bm: int, bn: int, bk: int, **kw: Any) -> Spec:
    sig = {
        "xq_ptr": "*i8",
        "xs_ptr": "*fp32",
        "xz_ptr": "*i32",
        "w_ptr": "*u8" if int4 else "*i8",
        "s_ptr": "*fp32",
        "b_ptr": "*bf16",
        "bq_ptr": "*i32",
        "gstar_ptr": "*i32",
        "y_ptr": "*bf16",
    }
    sig.update(
        {n: "i32" for n in ("M", "N", "K", "G", "stride_xm", "stride_wn", "stride_ym", "M_KEY")}
    )
    ce = dict(
        INT4=int4,
        GROUP_SIZE=gs,
        PER_CHANNEL=gs == 0,
        ASYM=False,
        STATIC=False,
        HAS_BIAS=True,
        HAS_BIAS_INT=False,
        UPCAST=False,
        PRECISION="ieee",
        BLOCK_M=bm,
        BLOCK_N=bn,
        BLOCK_K=bk,
        SPLIT_K=4 if name.endswith(".decode") else 1,
        TAIL=split_tail() if name.endswith(".decode") else 0,
    )
    sig = _split_sig(sig, "*i32" if gs == 0 else "*fp32")
    return Spec(name, "int_act_mm", "_int_act_mm_kernel", sig, ce, **kw)


def _decode_mma(
    name: str,
    wfmt: int,
    gs: int,
    step: int,
    target: str,
    rows: int = 16,
    tiled: bool = False,
    fp16: bool = False,
    **over: Any,
) -> Spec:
    """kernels/decode_mma.py; its bf16-pair assembly is NVIDIA PTX (AMD runs the float path).
    WFMT 3 is W4A8: int8 activations with zero points, symmetric int4 weights; 4 MX fp4
    weights (E8M0 bytes, the BIG flag as z_ptr). ``rows``: x's padding (tile ROWS);
    ``tiled``: int4 codes in tile order with zero points as words (decode_mma.TILED_TILE);
    ``fp16``: fp16 activations (per-channel int8 / e4m3: the float path, except e4m3 on sm80,
    decode_mma._asm)."""
    from aoq.kernels._common import WeightFormat
    from aoq.kernels.decode_mma import TILE, TILED_TILE

    if tiled:
        over = {**TILED_TILE, "TILED": True, "ZW": True, **over}

    xq = wfmt == 3
    mx = wfmt >= 4
    xf = "*fp16" if fp16 else "*bf16"
    sig = {
        "x_ptr": "*i8" if xq else xf, "w_ptr": {0: "*i8", 2: "*fp8e4nv"}.get(wfmt, "*u8"),
        "s_ptr": "*u8" if mx else "*fp32", "z_ptr": "*i32" if mx else "*u8", "xs_ptr": "*fp32",
        "xz_ptr": "*i32", "b_ptr": xf,
        "y_ptr": xf, "p_ptr": "*fp32", "c_ptr": "*i32",
    }  # fmt: skip
    asm = target.startswith("sm") and (not fp16 or (wfmt == 2 and target == "sm80"))
    sig.update({n: "i32" for n in ("M", "N", "K", "stride_sn", "stride_sg", "K_SPLIT",
                                   "stride_xm", "stride_wn", "stride_ym")})  # fmt: skip
    int4 = wfmt in (1, 3, 4, 5)  # grouped: a scale (and PREF) a group
    tile = TILE[WeightFormat(wfmt)]
    ce = dict(
        WFMT=wfmt, GROUP_SIZE=gs, GROUPS=step // gs, XQ=xq, XZ=xq, STATIC=False, HAS_BIAS=True,
        SPLIT_K=4, TAIL=split_tail(), BLOCK_N=tile["BLOCK_N"], BLOCK_K=step,
        ASM=asm, UPCAST=False, WT=tile.get("WT", False),
        PREF=tile.get("PREF", False) and int4,  # decode_mma.TILE's orientation
        BIG=2 if mx else 0,  # MX: the flag read on the device, both paths compiled
        ROWS=rows, LOOP_STAGES=tile.get("LOOP_STAGES", 0), ZW=False,
    )  # fmt: skip
    ce.update(over)
    if ce["ZW"]:  # aoq.formats.packing.pack_zero_words: int32 words of four zero points
        sig["z_ptr"] = "*i32"
    return Spec(name, "decode_mma", "_decode_mma_kernel", sig, ce, warps=tile["num_warps"],
                fp8=wfmt == 2)  # fmt: skip


def specs(target: str) -> list[Spec]:
    """The kernels compiled for ``target`` (float8 kernels use the arch's own e4m3)."""
    from aoq.kernels.target_specs_gemv import gemv_specs
    from aoq.kernels.target_specs_mx import mx_specs

    f8 = "*fp8e4b8" if target == "gfx942" else "*fp8e4nv"
    act = {
        "x_ptr": "*bf16",
        "q_ptr": "*i8",
        "s_ptr": "*fp32",
        "z_ptr": "*i32",
        "given_ptr": "*fp32",
        "M": "i32",
        "K": "i32",
        "stride_xm": "i32",
        "stride_qm": "i32",
    }
    act_ce = dict(MODE=0, GIVEN=False, QMAX=127.0, BLOCK_M=1, BLOCK_K=8192, ONE_TILE=True)
    fp8_sig = {
        "x_ptr": f8,
        "xs_ptr": "*fp32",
        "w_ptr": f8,
        "ws_ptr": "*fp32",
        "b_ptr": "*bf16",
        "y_ptr": "*bf16",
        "p_ptr": "*fp32",
        "c_ptr": "*i32",
        "M": "i32",
        "N": "i32",
        "K": "i32",
        "K_SPLIT": "i32",
        "stride_xm": "i32",
        "stride_wn": "i32",
        "stride_ym": "i32",
        "M_KEY": "i32",
    }
    fp8_ce = dict(
        X_ROW=True, W_ROW=True, HAS_BIAS=True, WIDEN=0, SPLIT_K=1, TAIL=0, BLOCK_M=128, BLOCK_N=128,
        BLOCK_K=128,
    )  # fmt: skip
    fp8_decode = {**fp8_ce, "SPLIT_K": 4, "TAIL": split_tail(), "BLOCK_M": 16, "BLOCK_N": 64}
    deq_sig = {
        "w_ptr": "*u8",
        "s_ptr": "*fp32",
        "z_ptr": "*u8",
        "out_ptr": "*bf16",
        "N": "i32",
        "K": "i32",
        "G": "i32",
        "stride_wn": "i32",
    }
    int8_row = Spec(
        "act_quant.int8_row", "act_quant", "_act_quant_kernel", act, act_ce, warps=4, mma=False
    )
    return [
        int8_row,
        # W4A8 decode: lets the decode kernel start (programmatic dependent launch)
        *(
            [
                replace(
                    int8_row,
                    name="act_quant.int8_row_trigger",
                    constexprs={**act_ce, "TRIGGER": True},
                )
            ]
            if target in PDL_TARGETS
            else []
        ),  # fmt: skip
        Spec(
            "act_qdq.int8_asym",
            "act_quant",
            "_act_quant_kernel",
            {**act, "q_ptr": "*bf16"},
            {**act_ce, "MODE": 1, "QDQ": True},
            warps=4,
            mma=False,
        ),
        Spec(
            "act_quant.fp8_row",
            "act_quant",
            "_act_quant_kernel",
            {**act, "q_ptr": f8},
            {**act_ce, "MODE": 3, "QMAX": 240.0 if target == "gfx942" else 448.0},
            warps=4,
            fp8=True,
            mma=False,
        ),
        Spec(
            "act_quant.row_amax",
            "act_quant",
            "_row_amax_kernel",
            {"x_ptr": "*bf16", "out_ptr": "*fp32", "M": "i32", "K": "i32", "stride_xm": "i32"},
            dict(BLOCK_M=1, BLOCK_K=4096),
            warps=4,
            mma=False,
        ),
        Spec(
            "act_quant.tensor_scale",
            "act_quant",
            "_tensor_scale_kernel",
            {"amax_ptr": "*fp32", "s_ptr": "*fp32", "M": "i32"},
            dict(QMAX=448.0, BLOCK=1024),
            mma=False,
        ),
        _wo("int4wo.gemv", "*u8", 1, 128, 1, 32, 128),
        _wo("int4wo.decode", "*u8", 1, 128, 16, 64, 128),
        _wo("int4wo.prefill", "*u8", 1, 128, 128, 128, 64, warps=8),
        int8wo_decode := _wo("int8wo.decode", "*i8", 0, 0, 16, 64, 128),
        _decode_mma("int4wo.decode_mma", 1, 128, 128, target),
        # codes in tile_uint4's order, zero points as pack_zero_words (decode_mma.TILED_TILE)
        _decode_mma("int4wo.decode_mma_tiled", 1, 128, 128, target, tiled=True),
        _decode_mma("int8wo.decode_mma", 0, 16, 256, target),
        _decode_mma("w4a8.decode_mma", 3, 32, 64, target),
        # symmetric int8 x: the integer MMA (sm: mma.sync s8, gfx: v_mfma_i32 i8)
        _decode_mma("w4a8.decode_mma_imma", 3, 32, 64, target, XZ=False, IMMA=True),
        _decode_mma("mxwo_fp4.decode_mma", 4, 32, 64, target),
        _decode_mma("mxwo_fp8.decode_mma", 5, 32, 128, target),
        # fp8 decode_mma serves CUDA only (ROCm keeps the FMA decode below)
        *([_decode_mma("fp8wo.decode_mma", 2, 16, 256, target)] if target.startswith("sm") else []),
        # fp16 activations (decode_mma.X_DTYPES): per-channel int8 and e4m3
        _decode_mma("int8wo.decode_mma_fp16", 0, 16, 256, target, fp16=True),
        *(
            [_decode_mma("fp8wo.decode_mma_fp16", 2, 16, 256, target, fp16=True)]
            if target.startswith("sm")
            else []
        ),
        # x padded to 8 rows (tile ROWS 8, M <= 8): NVIDIA's m16n8k16 (AMD has no n = 8 MMA)
        *(
            [
                _decode_mma(f"{f}.decode_mma_m8", w, gs, step, target, rows=8)
                for f, w, gs, step in (("int4wo", 1, 128, 128), ("int8wo", 0, 16, 256))
            ]
            + [_decode_mma("w4a8.decode_mma_imma_m8", 3, 32, 64, target, 8, XZ=False, IMMA=True)]
            + [_decode_mma("int4wo.decode_mma_tiled_m8", 1, 128, 128, target, 8, tiled=True)]
            if target.startswith("sm")
            else []
        ),  # fmt: skip
        *(
            [
                _decode_mma(
                    "w4a8.decode_mma_imma_pdl", 3, 32, 64, target, XZ=False, IMMA=True, PDL=True
                )
            ]
            if target in PDL_TARGETS
            else []
        ),  # fmt: skip
        _wo("fp8wo.decode", f8, 2, 0, 16, 64, 128),
        # int4 groups of 128, and W4A8's of 32: one group a tile (dequantize_weight_triton)
        *(
            Spec(
                name,
                "weight_dequant",
                "_dequantize_kernel",
                deq_sig,
                dict(WFMT=1, GROUP_SIZE=gs, BLOCK_N=32 * 128 // gs, BLOCK_K=gs, TILED=tiled),
                mma=False,
            )
            for name, gs, tiled in (
                ("dequant.int4", 128, False),
                ("dequant.int4_g32", 32, False),
                ("dequant.int4_tiled", 128, True),  # codes in tile_uint4's order
            )
        ),  # fmt: skip
        _int_act("w8a8.prefill", False, 0, 128, 128, 128, warps=8),
        _int_act("w4a8.decode", True, 32, 16, 64, 32),
        w8a8_decode := _int_act("w8a8.decode", False, 0, 16, 64, 128),
        one_row_variant(replace(w8a8_decode, name="w8a8.decode_one_row"), "xq_ptr", XQ=True),
        *gemv_specs(target),
        Spec("fp8.prefill", "fp8_mm", "_fp8_mm_kernel", fp8_sig, fp8_ce, warps=8, fp8=True),
        fp8_dec := Spec("fp8.decode", "fp8_mm", "_fp8_mm_kernel", fp8_sig, fp8_decode, fp8=True),
        # programmatic dependent launch after the activation kernel (sm90 and later)
        *(
            [pdl_variant(w8a8_decode, True), pdl_variant(fp8_dec, True)]
            if target in PDL_TARGETS
            else []
        ),  # fmt: skip
        # the split kernels that trigger their chained reduction kernel (splitk.Plan.chain)
        *chained(
            target,
            int8wo_decode,
            _decode_mma("int4wo.decode_mma_tiled_m8", 1, 128, 128, target, 8, tiled=True),
            pdl_variant(w8a8_decode, True),
            pdl_variant(fp8_dec, True),
        ),
        one_row_variant(
            Spec("fp8.decode_one_row", "fp8_mm", "_fp8_mm_kernel", fp8_sig, fp8_decode, fp8=True),
            "x_ptr",
            XQ=1,
            QMAX=240.0 if target == "gfx942" else 448.0,
        ),  # fmt: skip
        *mx_specs(target),
    ]
