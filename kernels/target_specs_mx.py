"""The MX and NVFP4 part of the compile catalogue (kernels/target_specs.py): casts, the
block-scaled GEMM, dequantization, decode and NVFP4 activations, at their launch tiles."""

from __future__ import annotations

from typing import Any

from aoq.kernels.target_specs import Spec, chained, split_tail


def mx_cast_spec(name: str, dim: int, elem: str, target: str) -> Spec:
    """An MX cast (kernels/mx_cast.py) of bf16 at its default tile for 8192 x 8192, fp8
    through the float8 conversion where Triton emits it directly (sm90+). Budget: the scale
    bytes' layout conversion (<= 512 B); the data never passes through shared memory."""
    from aoq.kernels import mx_steps
    from aoq.kernels.mx_ops import PACK_GROUP, Dim1Tile, default_tile

    from aoq.formats.mx import MXElem, ScaleRounding

    e = MXElem(elem)
    hw = target in ("sm90", "sm100") and e in mx_steps.FP8_TY
    ce: dict[str, Any] = dict(QDQ=False, BLOCK=32, VEC=8, EVEN=True)
    ce.update(
        PACK=PACK_GROUP.get(e.spec.bits, 1), **mx_steps.elem_constants(e, ScaleRounding.RCEIL, hw)
    )
    pairs = target in ("sm90", "sm100") and not hw  # bf16x2 / u16x2 instructions (PTX 8.0)
    ce.update(PACKED=pairs, ASM=pairs)
    tile = default_tile(dim, e)
    sig = {"x_ptr": "*bf16", "out_ptr": "*u8", "scale_ptr": "*u8"}
    if isinstance(tile, Dim1Tile):
        sig["NBLK"] = "i32"
        ce.update(NB=tile.blocks, H=tile.pieces)
    else:
        sig.update({n: "i32" for n in ("C", "NBR", "NCT", "stride_xr", "stride_or", "stride_sr")})
        ce.update(LANES=tile.lanes, CG=tile.groups, RB=tile.rows)
        ce.update(WARP=64 if target.startswith("gfx") else 32)
    fn = f"_mx_cast_dim{dim}_kernel"
    return Spec(name, "mx_cast", fn, sig, ce, warps=tile.warps, mma=False, max_shared=512)


def _mx_dequant_spec(name: str, bits: int, params: tuple[int, ...], nvfp4: bool) -> Spec:
    """kernels/mx_dequant.py at its tile: packed codes and uint8 scales to bf16."""
    sig = {"q_ptr": "*u8", "s_ptr": "*u8", "ts_ptr": "*fp32", "y_ptr": "*bf16"}
    sig.update({n: "i32" for n in ("N", "K", "stride_qn", "stride_sn", "stride_yn")})
    ebits, mbits, bias, nan = params
    ce = dict(BITS=bits, EBITS=ebits, MBITS=mbits, BIAS=bias, NAN=nan, NVFP4=nvfp4,
              BS=16 if nvfp4 else 32, BLOCK_N=16, BLOCK_K=256)  # fmt: skip
    return Spec(name, "mx_dequant", "_mx_dequant_kernel", sig, ce, warps=4, mma=False)


def _mx_decode_spec(name: str, bits: int, params: tuple[int, ...], nvfp4: bool) -> Spec:
    """kernels/mx_decode.py at its tile: bf16 x, packed codes and uint8 scales, split-K."""
    sig = {"x_ptr": "*bf16", "q_ptr": "*u8", "s_ptr": "*u8", "ts_ptr": "*fp32", "b_ptr": "*bf16",
           "y_ptr": "*bf16", "p_ptr": "*fp32", "c_ptr": "*i32"}  # fmt: skip
    names = ("M", "N", "K", "K_SPLIT", "stride_xm", "stride_qn", "stride_sn", "stride_ym")
    sig.update({n: "i32" for n in names})
    ebits, mbits, bias, nan = params
    ce = dict(BITS=bits, EBITS=ebits, MBITS=mbits, BIAS=bias, NAN=nan, NVFP4=nvfp4,
              BS=16 if nvfp4 else 32, HAS_BIAS=True, SPLIT_K=4, TAIL=split_tail(), BLOCK_N=64,
              BLOCK_K=128, UPCAST=False)  # fmt: skip
    return Spec(name, "mx_decode", "_mx_decode_kernel", sig, ce, warps=4)


def _one_row_spec(spec: Spec) -> Spec:
    """``spec`` (fp4 MX or NVFP4 weights) rounding its own one-row bf16 activation
    (mx_decode.mx_decode_triton's one_row): MX fp4 with RCEIL, NVFP4 with the row's tensor
    scale."""
    from dataclasses import replace

    from aoq.kernels.mx_decode import one_row_constexprs

    nvfp4 = bool(spec.constexprs["NVFP4"])
    act = one_row_constexprs("fp4_e2m1", "nvfp4" if nvfp4 else "rceil", nvfp4, False)
    return replace(spec, name=spec.name + "_one_row", constexprs={**spec.constexprs, **act})


def _nvfp4_act_specs() -> list[Spec]:
    """kernels/nvfp4_act.py: the amax pass and the quantize-dequantize of bf16 activations,
    at their launch tiles (the most partials)."""
    from aoq.kernels import nvfp4_act as na

    amax = Spec("nvfp4_act.amax", "nvfp4_act", "_amax_kernel",
                {"x_ptr": "*bf16", "part_ptr": "*i32", "n": "i32", "per_prog": "i32"},
                {"CHUNK": na.AMAX_CHUNK}, mma=False, max_shared=512)  # fmt: skip
    sig = {"x_ptr": "*bf16", "part_ptr": "*i32", "y_ptr": "*bf16", "nblk": "i32", "n_parts": "i32"}
    ce = dict(PARTS=na.MAX_PARTIALS, NB=na.TILE_BLOCKS, **na.QDQ_CONSTS)
    qdq = Spec("nvfp4_act.qdq", "nvfp4_act", "_qdq_kernel", sig, ce, mma=False)
    return [amax, qdq]


def _mx_mm_spec(name: str, fmt: str) -> Spec:
    """The MX GEMM of a forward linear: both operands contiguous along K (the JIT makes unit
    strides constants, as here)."""
    sig = {n: "*u8" for n in ("a_ptr", "as_ptr", "b_ptr", "bs_ptr")}
    sig.update({"y_ptr": "*bf16", "M": "i32", "N": "i32", "K": "i32"})
    sig.update({f"stride_{n}": "i32" for n in ("am", "asm", "bn", "bsn", "ym")})
    ce: dict[str, Any] = {f"stride_{n}": 1 for n in ("ak", "ask", "bk", "bsk")}
    ce.update(FMT_A=fmt, FMT_B=fmt, DOT_SCALED=True, BLOCK_M=128, BLOCK_N=128, BLOCK_K=128)
    return Spec(
        name, "mx_mm", "_mx_mm_kernel", sig, ce, warps=8, fp8=fmt != "e2m1", block_scaled=True
    )


def _wt_rows_mx_specs(target: str) -> list[Spec]:
    """kernels/wt_rows_mx.py (MX and NVFP4 weights at 65-128 rows, the decoded weights as the
    MMA's register operand): MX fp4 (one multiply), e4m3 (BIG's second), int8 and NVFP4 (its
    exact steps), bf16 x through its descriptor, split in two. Served on sm90 only; the
    others compile it as their Triton lowers descriptors (MX int8 spills there: 72 / 168
    bytes on sm80 / sm89's mma.sync layouts, 16 on gfx950; a budget there)."""
    from dataclasses import replace

    from aoq.kernels import wt_rows_mx as wm
    from aoq.kernels._common import WeightFormat as F

    sig = {"x_ptr": "*bf16", "w_ptr": "*u8", "s_ptr": "*u8", "z_ptr": "*u8", "b_ptr": "*bf16",
           "y_ptr": "*bf16", "p_ptr": "*fp32"}  # fmt: skip
    sig.update({a: "i32" for a in ("M", "N", "K", "K_SPLIT")})
    ce = dict(WFMT=int(F.MX_FP4), GROUP_SIZE=32, HAS_BIAS=True, SPLIT_K=2, ROWS=wm.ROWS,
              BLOCK_N=wm.BLOCK_N, BLOCK_K=wm.step_k(F.MX_FP4), STAGES=wm.STAGES, BIG=0,
              ASM=target.startswith("sm"))  # fmt: skip
    budget = {"sm80": 256, "sm89": 256, "gfx950": 64}.get(target, 0)
    fp4 = Spec("mxfp4.rows", "wt_rows_mx", "_wt_rows_mx_kernel", sig, ce, stages=wm.STAGES,
               spill_budget=budget)  # fmt: skip
    byte = {**ce, "BLOCK_K": wm.step_k(F.MX_FP8)}
    e4m3 = replace(fp4, name="mxfp8.rows_big", constexprs={**byte, "WFMT": int(F.MX_FP8), "BIG": 1})
    int8 = replace(fp4, name="mxint8.rows", constexprs={**byte, "WFMT": int(F.MX_INT8)})
    nv = {**ce, "WFMT": int(F.NVFP4), "BLOCK_K": wm.step_k(F.NVFP4), "NVX": True}
    nvfp4 = replace(fp4, name="nvfp4.rows", signature={**sig, "z_ptr": "*fp32"}, constexprs=nv)
    return [fp4, e4m3, int8, nvfp4, *_wt_rows_fp6_specs(target)]


def _wt_rows_fp6_specs(target: str) -> list[Spec]:
    """kernels/wt_rows_fp6.py (MX fp6 at 65-128 rows, served on sm90): e3m2 with BIG's second
    multiply and e2m3 without, bf16 x through its descriptor, split in two."""
    from dataclasses import replace

    from aoq.kernels import wt_rows_fp6 as w6

    sig = {"x_ptr": "*bf16", "w_ptr": "*u8", "s_ptr": "*u8", "z_ptr": "*u8", "b_ptr": "*bf16",
           "y_ptr": "*bf16", "p_ptr": "*fp32"}  # fmt: skip
    sig.update({a: "i32" for a in ("M", "N", "K", "K_SPLIT", "stride_wn")})
    # FRAG (wgmma's register layout) where the kernel serves, sm90, and on sm100; elsewhere
    # the K = 32 steps (on sm80 / sm89 FRAG's K = 128 dots spill: 255 registers)
    frag = w6.FRAG and target in ("sm90", "sm100")
    ce = dict(E3M2=True, HAS_BIAS=True, SPLIT_K=2, ROWS=w6.ROWS, BLOCK_N=w6.BLOCK_N,
              BLOCK_K=w6.BLOCK_K, STAGES=w6.STAGES, BIG=1, ASM=target.startswith("sm"),
              FRAG=frag, SU_LOAD=frag and w6.SU_LOAD)  # fmt: skip
    sm100 = ("Triton 3.6 aborts in TritonGPUOptimizeDotOperands (Illegal shared layout) on the "
             "decoded [64, 32] operands of its K = 32 MMAs; served on sm90 only")  # fmt: skip
    e3m2 = Spec("mxwo_fp6_e3m2.rows", "wt_rows_fp6", "_wt_rows_fp6_kernel", sig, ce,
                stages=w6.STAGES, fails_on={} if frag else {"sm100": sm100})  # fmt: skip
    e2m3 = replace(e3m2, name="mx_fp6_e2m3.rows", constexprs={**ce, "E3M2": False, "BIG": 0})
    permute = Spec("mx_fp6.permute_x", "wt_rows_fp6", "_permute_x_frag_kernel",
                   {"x_ptr": "*bf16", "y_ptr": "*bf16", "K": "i32", "stride_xm": "i32"},
                   {"BLOCK": w6.PERMUTE_BLOCK}, mma=False, max_shared=0)  # fmt: skip
    return [e3m2, e2m3, permute]


def mx_specs(target: str) -> list[Spec]:
    """The MX / NVFP4 kernels compiled for ``target``."""
    return [
        mx_cast_spec("mx_cast.dim0.fp8_e4m3", 0, "fp8_e4m3", target),
        mx_cast_spec("mx_cast.dim1.fp8_e4m3", 1, "fp8_e4m3", target),
        _mx_mm_spec("mx_mm.fp8", "e4m3"),
        _mx_mm_spec("mx_mm.fp4", "e2m1"),
        _mx_dequant_spec("mx_dequant.fp4", 4, (2, 1, 1, 0), False),
        _mx_dequant_spec("mx_dequant.fp6_e3m2", 6, (3, 2, 3, 0), False),
        _mx_dequant_spec("mx_dequant.fp8_e5m2", 8, (5, 2, 15, 2), False),
        _mx_dequant_spec("mx_dequant.nvfp4", 4, (2, 1, 1, 0), True),
        mx_fp4 := _mx_decode_spec("mx_decode.fp4", 4, (2, 1, 1, 0), False),
        *chained(target, mx_fp4),
        _mx_decode_spec("mx_decode.fp6_e2m3", 6, (2, 3, 1, 0), False),
        _mx_decode_spec("mx_decode.fp8_e4m3", 8, (4, 3, 7, 1), False),
        _mx_decode_spec("mx_decode.nvfp4", 4, (2, 1, 1, 0), True),
        _one_row_spec(_mx_decode_spec("mx_decode.fp4", 4, (2, 1, 1, 0), False)),
        _one_row_spec(_mx_decode_spec("mx_decode.nvfp4", 4, (2, 1, 1, 0), True)),
        *_nvfp4_act_specs(),
        *_wt_rows_mx_specs(target),
    ]
