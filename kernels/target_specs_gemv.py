"""Compile specs of the GEMVs (no matrix instructions) and the split-K reduction, for
target_specs.specs."""

from __future__ import annotations

from dataclasses import replace

from aoq.kernels.target_specs import (
    PDL_TARGETS,
    Spec,
    chained,
    fp8_pointer,
    one_row_variant,
    pdl_variant,
    split_tail,
)


def gemv_specs(target: str) -> list[Spec]:
    """The GEMVs (no matrix instructions) and the split-K reduction. The W4A8 GEMV's integer
    dot products are NVIDIA PTX (``dp4a``); AMD compiles its float path; its tiles are
    GEMV_TILE's."""
    from aoq.kernels.gemv_static import static_tile
    from aoq.kernels.w4a8_gemv import GEMV_TILE

    gemv_sig = {
        "xq_ptr": "*i8",
        "xs_ptr": "*fp32",
        "xz_ptr": "*i32",
        "w_ptr": "*u8",
        "s_ptr": "*fp32",
        "b_ptr": "*bf16",
        "bq_ptr": "*i32",
        "gstar_ptr": "*i32",
        "y_ptr": "*bf16",
        "p_ptr": "*fp32",
        "c_ptr": "*i32",
        "N": "i32",
        "K": "i32",
        "stride_sn": "i32",
        "stride_sg": "i32",
        "K_SPLIT": "i32",
    }
    gemv_ce = dict(
        GROUP_SIZE=32, GROUPS=GEMV_TILE["STEP_K"] // 32, ASYM=False, STATIC=False,
        HAS_BIAS=True, HAS_BIAS_INT=False, SPLIT_K=4, TAIL=split_tail(),
        BLOCK_N=GEMV_TILE["BLOCK_N"], ASM=target.startswith("sm"), PDL=False,
        ALIGNED=GEMV_TILE["ALIGNED"],
    )  # fmt: skip
    red_sig = {
        "part_ptr": "*fp32",
        "bi_ptr": "*i32",
        "cs_ptr": "*fp32",
        "rs_ptr": "*fp32",
        "b_ptr": "*bf16",
        "y_ptr": "*bf16",
        "M": "i32",
        "N": "i32",
        "stride_ym": "i32",
    }
    red_ce = dict(SPLIT_K=4, TAIL=split_tail(fused=False), BLOCK_N=512)
    words_sig = {
        "x_ptr": "*bf16",
        "w_ptr": "*u32",
        "s_ptr": "*fp32",
        "z_ptr": "*u8",
        "b_ptr": "*bf16",
        "y_ptr": "*bf16",
        "p_ptr": "*fp32",
        "c_ptr": "*i32",
        "N": "i32",
        "K": "i32",
        "G": "i32",
        "K_SPLIT": "i32",
        "stride_wn": "i32",
    }
    words_ce = dict(
        GROUP_SIZE=128, PER_CHANNEL=False, HAS_BIAS=True, SPLIT_K=4, TAIL=split_tail(),
        BLOCK_N=64, WORDS=16,
        EVEN_K=True,
    )  # fmt: skip
    int8_words = {**words_ce, "INT4": False, "GROUP_SIZE": 0, "PER_CHANNEL": True}
    static_sig = {
        "x_ptr": "*bf16",
        "w_ptr": "*i8",
        "s_ptr": "*fp32",
        "b_ptr": "*bf16",
        "y_ptr": "*bf16",
        "N": "i32",
        "stride_wn": "i32",
    }
    # K 4096 (its whole-row tile) and K 14336 (STATIC_TILE's 512-code steps)
    whole, steps = static_tile(4096), static_tile(14336)
    static_ce = dict(K=4096, INT8=True, HAS_BIAS=True, BLOCK_N=whole["BLOCK_N"],
                     BLOCK_K=whole["BLOCK_K"])  # fmt: skip
    static = Spec("int8wo.gemv_static", "gemv_static", "_gemv_static_kernel", static_sig,
                  static_ce, warps=whole["num_warps"], mma=False)  # fmt: skip
    static_steps = replace(
        static, name="int8wo.gemv_static_steps", warps=steps["num_warps"],
        constexprs={**static_ce, "K": 14336, "BLOCK_N": steps["BLOCK_N"],
                    "BLOCK_K": steps["BLOCK_K"]},
    )  # fmt: skip
    return [
        Spec(
            "int4wo.gemv_words",
            "gemv",
            "_gemv_words_kernel",
            words_sig,
            {**words_ce, "INT4": True},
            mma=False,
        ),  # fmt: skip
        static,
        static_steps,
        replace(
            static,
            name="fp8wo.gemv_static",
            fp8=True,
            signature={**static_sig, "w_ptr": fp8_pointer(target)},
            constexprs={**static_ce, "INT8": False},
        ),
        int8_gemv := Spec(
            "int8wo.gemv_words", "gemv", "_gemv_words_kernel", words_sig, int8_words, mma=False
        ),
        w4a8_gemv := Spec(
            "w4a8.gemv",
            "w4a8_gemv",
            "_w4a8_gemv_kernel",
            gemv_sig,
            gemv_ce,
            warps=GEMV_TILE["num_warps"],
            mma=False,
        ),  # fmt: skip
        one_row_variant(
            replace(w4a8_gemv, name="w4a8.gemv_one_row", warps=GEMV_TILE["XQ_num_warps"]),
            "xq_ptr",
            XQ=True,
            BLOCK_N=GEMV_TILE["XQ_BLOCK_N"],
        ),  # fmt: skip
        # three activation rows a launch (int_act_mm.GEMV_ROWS), at their step
        replace(
            w4a8_gemv,
            name="w4a8.gemv_rows3",
            constexprs={**gemv_ce, "ROWS": 3, "GROUPS": GEMV_TILE["STEP_K_ROWS"][3] // 32},
        ),
        # programmatic dependent launch (griddepcontrol): sm90 and later
        *([pdl_variant(w4a8_gemv, True)] if target in PDL_TARGETS else []),
        # weight-only decode launched dependent on the kernel before it (_common.DECODE_PDL)
        *([pdl_variant(static)] if target in PDL_TARGETS else []),
        reduce := Spec("splitk.reduce", "splitk", "_reduce_kernel", red_sig, red_ce, mma=False),
        # chained (splitk.Plan.chain): the split kernel triggers, the reduction waits
        *chained(target, int8_gemv, pdl_variant(w4a8_gemv, True)),
        *([pdl_variant(reduce)] if target in PDL_TARGETS else []),
    ]
