"""The catalogue of what ``python -m aoq.kernels.targets`` compiles: one :class:`Spec` per kernel
at a representative tile (signature types, constexprs, warps), per target where the types
differ (gfx942's e4m3fnuz). Kept apart from the compiling machinery in targets.py."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
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
    maxnreg: int | None = None
    """NVIDIA: registers a thread may use at most (the launch option; None: the compiler's)."""
    fails_on: dict[str, str] = field(default_factory=dict)
    """Targets where Triton is known to fail on this kernel, with the reason (an xfail; a
    compile that succeeds there is a fail, so the entry is dropped once Triton mends it)."""
    spill_budget: int = 0
    """Bytes the compiler may spill (a tile timed faster with its spills than the tiles
    without; the spec says where) before tests/kernels/test_targets.py calls it a regression."""


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
    else:  # the partials and K_SPLIT of mid_rows.py's split (no counters: never fused)
        sig = {k: v for k, v in _split_sig(sig, "*fp32").items() if k != "c_ptr"}
        sig["M_KEY"] = "i32"
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


def mid_split(target: str, spec: Spec, bk: int = 128) -> Spec:
    """``spec`` (a prefill kernel) at mid_rows.py's 64 x 128 tile with K split four ways, its
    reduction kernel chained where the target has PDL."""
    ce = {**spec.constexprs, "SPLIT_K": 4, "BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": bk}
    if "TAIL" in ce:
        ce["TAIL"] = 0
    if target in PDL_TARGETS:
        ce["TRIGGER"] = True
    return replace(spec, name=f"{spec.name}_split", constexprs=ce, warps=4, stages=4)


def fp8_pointer(target: str) -> str:
    """The arch's own e4m3 as a pointer type (gfx942: the fnuz variant)."""
    return "*fp8e4b8" if target == "gfx942" else "*fp8e4nv"


def specs(target: str) -> list[Spec]:
    """The kernels compiled for ``target`` (float8 kernels use the arch's own e4m3)."""
    from aoq.kernels.target_specs_decode import (
        decode_mma,
        decode_mma_specs,
        w4a8_mma_specs,
        wt_rows_specs,
    )
    from aoq.kernels.target_specs_gemv import gemv_specs
    from aoq.kernels.target_specs_mx import mx_specs

    f8 = fp8_pointer(target)
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
                ),
                replace(  # decode's rows up to ACT_PDL_ROWS: placed early, waits first
                    int8_row,
                    name="act_quant.int8_row_pdl",
                    constexprs={**act_ce, "TRIGGER": True, "PDL": True},
                ),
                replace(  # W4A8 past w4a8_mma.PDL_ROWS, split: its decode placed as it ends
                    int8_row,
                    name="act_quant.int8_row_pdl_late",
                    constexprs={**act_ce, "TRIGGER": True, "PDL": True, "LATE": True},
                ),
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
            "act_amax",
            "_row_amax_kernel",
            {"x_ptr": "*bf16", "out_ptr": "*fp32", "M": "i32", "K": "i32", "stride_xm": "i32"},
            dict(BLOCK_M=1, BLOCK_K=4096),
            warps=4,
            mma=False,
        ),
        Spec(
            "act_quant.tensor_scale",
            "act_amax",
            "_tensor_scale_kernel",
            {"amax_ptr": "*fp32", "s_ptr": "*fp32", "M": "i32"},
            dict(QMAX=448.0, BLOCK=1024),
            mma=False,
        ),
        _wo("int4wo.gemv", "*u8", 1, 128, 1, 32, 128),
        _wo("int4wo.decode", "*u8", 1, 128, 16, 64, 128),
        int4wo_prefill := _wo("int4wo.prefill", "*u8", 1, 128, 128, 128, 64, warps=8),
        mid_split(target, int4wo_prefill, 64),
        mid_split(target, _wo("int8wo.prefill", "*i8", 0, 0, 128, 128, 64, warps=8), 64),
        mid_split(target, _wo("fp8wo.prefill", f8, 2, 0, 128, 128, 64, warps=8), 64),
        int8wo_decode := _wo("int8wo.decode", "*i8", 0, 0, 16, 64, 128),
        *decode_mma_specs(target),
        *w4a8_mma_specs(target),
        _wo("fp8wo.decode", f8, 2, 0, 16, 64, 128),
        # int4 groups of 128 and W4A8's of 32 (two and eight a tile, their scales one block):
        # tiles of 16 rows x 256 codes; tiled int4 32 x 128 (dequantize_weight_triton)
        *(
            Spec(
                name,
                "weight_dequant",
                "_dequantize_kernel",
                deq_sig,
                dict(
                    WFMT=1,
                    GROUP_SIZE=gs,
                    BLOCK_N=32 if tiled else 16,
                    BLOCK_K=128 if tiled else 256,
                    TILED=tiled,
                ),
                mma=False,
            )
            for name, gs, tiled in (
                ("dequant.int4", 128, False),
                ("dequant.int4_g32", 32, False),
                ("dequant.int4_tiled", 128, True),  # codes in tile_uint4's order
            )
        ),  # fmt: skip
        w8a8_prefill := _int_act("w8a8.prefill", False, 0, 128, 128, 128, warps=8),
        mid_split(target, w8a8_prefill),
        mid_split(target, _int_act("w4a8.prefill", True, 32, 128, 128, 32, warps=8), 32),
        _int_act("w4a8.decode", True, 32, 16, 64, 32),
        w8a8_decode := _int_act("w8a8.decode", False, 0, 16, 64, 128),
        one_row_variant(replace(w8a8_decode, name="w8a8.decode_one_row"), "xq_ptr", XQ=True),
        *gemv_specs(target),
        fp8_pre := Spec(
            "fp8.prefill", "fp8_mm", "_fp8_mm_kernel", fp8_sig, fp8_ce, warps=8, fp8=True
        ),
        mid_split(target, fp8_pre),
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
            decode_mma("int4wo.decode_mma_tiled_m8", 1, 128, 128, target, 8, tiled=True),
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
        *wt_rows_specs(target),
    ]
