"""Compile specs of decode_mma (kernels/decode_mma.py: the decode linears on the matrix
units), for target_specs.specs."""

from __future__ import annotations

import dataclasses
from typing import Any

from aoq.kernels.target_specs import PDL_TARGETS, Spec, chained, pdl_variant, split_tail


def decode_mma(
    name: str,
    wfmt: int,
    gs: int,
    step: int,
    target: str,
    rows: int = 16,
    tiled: bool = False,
    fp16: bool = False,
    xmx: bool = False,
    **over: Any,
) -> Spec:
    """kernels/decode_mma.py; its bf16-pair assembly is NVIDIA PTX (AMD runs the float path).
    WFMT 3 is W4A8: int8 activations with zero points, symmetric int4 weights; 4 to 7 MX
    weights (fp4, fp8 e4m3, fp6 e3m2 / e2m3: E8M0 bytes, the BIG flag as z_ptr). ``rows``:
    x's padding (tile ROWS); ``tiled``: int4 codes in tile order with zero points as words
    (decode_mma.TILED_TILE); ``fp16``: fp16 activations (int4, MX: their fp16 PTX;
    per-channel int8 / e4m3: the float path, except e4m3 on sm80: decode_mma.ptx_codes);
    ``xmx`` (MX int8): int8 MX activation codes and their E8M0 bytes, the integer MMA."""
    import torch
    from aoq.kernels._common import WeightFormat
    from aoq.kernels.decode_mma import TILE, TILED_TILE, ptx_codes
    from aoq.kernels.decode_mma_wide import wide_serves

    if tiled:
        over = {**TILED_TILE, "TILED": True, "ZW": True, **over}

    xq = wfmt == 3
    nv = wfmt == 9  # NVFP4: e4m3 bytes and the float32 tensor scale as z_ptr, no BIG flag
    mx = wfmt >= 4 and not nv
    xf = "*fp16" if fp16 else "*bf16"
    sig = {
        "x_ptr": "*i8" if xq or xmx else xf,
        "w_ptr": {0: "*i8", 2: "*fp8e4nv"}.get(wfmt, "*u8"),
        "s_ptr": "*u8" if mx or nv else "*fp32",
        "z_ptr": "*i32" if mx else "*fp32" if nv else "*u8", "xs_ptr": "*u8" if xmx else "*fp32",
        "xz_ptr": "*i32", "b_ptr": xf,
        "y_ptr": xf, "p_ptr": "*fp32", "c_ptr": "*i32",
    }  # fmt: skip
    asm = target.startswith("sm") and ptx_codes(WeightFormat(wfmt), fp16, target != "sm80")
    sig.update({n: "i32" for n in ("M", "N", "K", "stride_sn", "stride_sg", "K_SPLIT",
                                   "stride_xm", "stride_wn", "stride_ym")})  # fmt: skip
    int4 = wfmt in (1, 3, 4, 5, 9, 10)  # grouped: a scale (and PREF) a group
    tile = TILE[WeightFormat(wfmt)]
    tile = {**tile, **tile.get("at8", {})} if rows == 8 else tile  # (as decode_mma launches)
    ce = dict(
        WFMT=wfmt, GROUP_SIZE=gs, GROUPS=step // gs, XQ=xq, XZ=xq, STATIC=False, HAS_BIAS=True,
        SPLIT_K=4, TAIL=split_tail(), BLOCK_N=tile["BLOCK_N"], BLOCK_K=step,
        ASM=asm, UPCAST=False, WT=tile.get("WT", False),
        PREF=tile.get("PREF", False) and int4,  # decode_mma.TILE's orientation
        BIG=2 if mx else 0,  # MX: the flag read on the device, both paths compiled
        ROWS=rows, LOOP_STAGES=tile.get("LOOP_STAGES", 0), ZW=False,
        KINT=tile.get("KINT", False), NVX=tile.get("NVX", False) and not fp16, XMX=xmx,
        WIDE=tile.get("WIDE", False),
    )  # fmt: skip
    ce.update(over)
    xdt = torch.int8 if xmx else torch.float16 if fp16 else torch.bfloat16
    tiled_, post = ce.get("TILED", False), ce.get("POST", False)
    plain = wide_serves(WeightFormat(wfmt), ce["BLOCK_K"] // gs, xdt, tiled_, post)
    ce["WIDE"] = ce["WIDE"] and plain
    if ce["ZW"]:  # aoq.formats.packing.pack_zero_words: int32 words of four zero points
        sig["z_ptr"] = "*i32"
    return Spec(name, "decode_mma", "_decode_mma_kernel", sig, ce, warps=tile["num_warps"],
                fp8=wfmt == 2)  # fmt: skip


def decode_mma_sk(name: str, target: str, rows: int = 16, fp16: bool = False) -> Spec:
    """kernels/decode_mma_sk.py: int4 on stream-K, as decode_mma's TILE serves it on CUDA
    (codes in tile order, zero points as words, TILED_TILE's loop), chained to its
    reduction kernel where the target has PDL."""
    from aoq.kernels._common import WeightFormat
    from aoq.kernels.decode_mma import TILE, TILED_TILE, ptx_codes

    xf = "*fp16" if fp16 else "*bf16"
    sig = {"x_ptr": xf, "w_ptr": "*u8", "s_ptr": "*fp32", "z_ptr": "*i32", "p_ptr": "*fp32"}
    sig.update({n: "i32" for n in ("M", "N", "K", "stride_sn", "stride_sg", "stride_xm",
                                   "stride_wn", "P")})  # fmt: skip
    tile = TILE[WeightFormat.UINT4]
    asm = target.startswith("sm") and ptx_codes(WeightFormat.UINT4, fp16, target != "sm80")
    ce = dict(
        WFMT=1, GROUP_SIZE=128, GROUPS=1, PARTS=5, BLOCK_N=tile["BLOCK_N"], BLOCK_K=128,
        ASM=asm, UPCAST=False, WT=tile["WT"], PREF=TILED_TILE["PREF"], ROWS=rows,
        LOOP_STAGES=TILED_TILE["LOOP_STAGES"], ZW=True, TILED=True,
        TRIGGER=target in PDL_TARGETS,
    )  # fmt: skip
    return Spec(name, "decode_mma_sk", "_decode_mma_sk_kernel", sig, ce,
                warps=tile["num_warps"])  # fmt: skip


def _xmx_m8(target: str) -> Spec:
    """MX int8 x MX int8 (XMX) with x padded to 8 rows, at its depth (decode_mma.XMX_STAGES8)."""
    from aoq.kernels.decode_mma import XMX_STAGES8

    spec = decode_mma("mx_int8.decode_mma_xmx_m8", 10, 32, 128, target, 8, xmx=True)
    return dataclasses.replace(spec, stages=XMX_STAGES8)


def _fp6_row() -> dict[str, Any]:
    """The XQDQ constants of an MX fp6 e2m3 activation row with RCEIL scales."""
    from aoq.kernels.mx_decode import one_row_constexprs

    return one_row_constexprs("fp6_e2m3", "rceil", False, False)


def _rows(
    name: str, wfmt: int, gs: int, target: str, rows: int, tiled: bool = False, **extra: Any
) -> Spec:
    """decode_mma at decode_mma.ROWS_TILE's tile for ``rows`` (32 to 256) rows of x
    (weight-only past 16 rows, served on sm90), launched with PDL where the target has it,
    as shipped."""
    from aoq.kernels._common import WeightFormat
    from aoq.kernels.decode_mma import ROWS_TILE, TILE

    base, tile = TILE[WeightFormat(wfmt)], ROWS_TILE[WeightFormat(wfmt)][rows]
    over = {"BLOCK_N": tile.get("BLOCK_N", base["BLOCK_N"]), "WT": tile.get("WT", base["WT"])}
    over.update({k: tile[k] for k in ("WIDE",) if k in tile})
    # (MX specs read the BIG flag on the device: BIG 2, where a tile may take STEP_K_DEV)
    step = tile.get("STEP_K_DEV", tile.get("STEP_K", base["STEP_K"]))
    spec = decode_mma(name, wfmt, gs, step, target, rows, tiled=tiled, PDL=target in PDL_TARGETS,
                      **over, **extra)  # fmt: skip
    return dataclasses.replace(
        spec,
        warps=tile.get("num_warps", base["num_warps"]),
        stages=tile.get("num_stages", base["num_stages"]),
        spill_budget=ROWS_SPILLS.get((wfmt, rows), 0),
    )


ROWS_SPILLS = {(1, 128): 512, (5, 128): 16}
"""(WFMT, rows): bytes ROWS_TILE's tile may spill. int4 at 128 rows (sm90: 255 registers, 352
bytes; each group's float32 product tile beside the sums) ran 55-65 µs on an H200, where the
64-row column tiles that do not spill (234 registers) ran 62-74 (bench/NOTES.md, session 45).
MX e4m3 at 128 rows with 128-code steps (the host-known flag; sm90: 12 bytes) ran 55.8 / 54.9
µs against 61.0 / 59.8 with 64-code steps, which do not spill (session 53)."""


def decode_mma_specs(target: str) -> list[Spec]:
    """decode_mma at each weight format it serves on ``target``, with the 8-row, fp16 and PDL
    variants."""
    from aoq.kernels._common import WeightFormat
    from aoq.kernels.decode_mma import ROWS_TILE

    return [
        decode_mma("int4wo.decode_mma", 1, 128, 128, target),
        # codes in tile_uint4's order, zero points as pack_zero_words (decode_mma.TILED_TILE)
        decode_mma("int4wo.decode_mma_tiled", 1, 128, 128, target, tiled=True),
        # ... on stream-K where split-K leaves the wave emptier (decode_mma_sk.py)
        decode_mma_sk("int4wo.decode_mma_sk", target),
        decode_mma_sk("int4wo.decode_mma_sk_fp16", target, fp16=True),
        decode_mma("int8wo.decode_mma", 0, 16, 256, target),
        # W4A8 on bf16 pairs (x - z in bf16: the tile's IMMA off, served nowhere by default)
        decode_mma("w4a8.decode_mma", 3, 32, 64, target),
        # int8 x on the integer MMA (sm: mma.sync s8, gfx: v_mfma_i32 i8), symmetric and with
        # zero points (a second dot against z)
        decode_mma("w4a8.decode_mma_imma", 3, 32, 64, target, XZ=False, IMMA=True),
        decode_mma("w4a8.decode_mma_imma_asym", 3, 32, 64, target, IMMA=True),
        decode_mma("mxwo_fp4.decode_mma", 4, 32, 64, target),
        decode_mma("mxwo_fp8.decode_mma", 5, 32, 128, target),
        decode_mma("mx_fp8_e5m2.decode_mma", 8, 32, 128, target),
        # MX int8 (and e4m3 under POST): each block's scale on its float32 product tile
        decode_mma("mx_int8.decode_mma", 10, 32, 128, target),
        decode_mma("mxwo_fp8.decode_mma_post", 5, 32, 128, target, POST=True),
        # ... and against MX int8 activation codes on the integer MMA (XMX; not yet served)
        decode_mma("mx_int8.decode_mma_xmx", 10, 32, 128, target, xmx=True),
        # NVFP4 (nvfp4_codes.py): groups of two e4m3-scaled blocks of 16
        decode_mma("nvfp4wo.decode_mma", 9, 32, 64, target),
        decode_mma("nvfp4wo.decode_mma_fp16", 9, 32, 64, target, fp16=True),
        decode_mma("nvfp4wo.decode_mma_m8", 9, 32, 128, target, 8),  # (at8's 128-code steps)
        # MX fp6 (decode_mma_fp6.py): e3m2 and e2m3, four blocks a step
        decode_mma("mxwo_fp6_e3m2.decode_mma", 6, 32, 128, target),
        decode_mma("mx_fp6_e2m3.decode_mma", 7, 32, 128, target),
        # ... rounding its own one-row MX fp6 activation (mx_decode's one_row: x_qdq)
        decode_mma(
            "mx_fp6_e2m3.decode_mma_one_row",
            7,
            32,
            128,
            target,
            rows=8 if target.startswith("sm") else 16,
            **_fp6_row(),
        ),  # fmt: skip
        # fp8 decode_mma serves CUDA only (ROCm keeps the FMA decode below)
        *([decode_mma("fp8wo.decode_mma", 2, 16, 256, target)] if target.startswith("sm") else []),
        # fp16 activations (decode_mma.X_DTYPES): int4 and MX (their fp16 PTX), per-channel
        # int8 and e4m3
        decode_mma("int4wo.decode_mma_fp16", 1, 128, 128, target, fp16=True),
        decode_mma("mxwo_fp4.decode_mma_fp16", 4, 32, 64, target, fp16=True),
        decode_mma("mxwo_fp8.decode_mma_fp16", 5, 32, 128, target, fp16=True),
        decode_mma("mx_int8.decode_mma_fp16", 10, 32, 128, target, fp16=True),
        decode_mma("mxwo_fp6_e3m2.decode_mma_fp16", 6, 32, 128, target, fp16=True),
        decode_mma("int4wo.decode_mma_tiled_fp16", 1, 128, 128, target, tiled=True, fp16=True),
        decode_mma("int8wo.decode_mma_fp16", 0, 16, 256, target, fp16=True),
        *(
            [decode_mma("fp8wo.decode_mma_fp16", 2, 16, 256, target, fp16=True)]
            if target.startswith("sm")
            else []
        ),
        # x padded to 8 rows (tile ROWS 8, M <= 8): NVIDIA's m16n8k16 (AMD has no n = 8 MMA)
        *(
            [
                decode_mma(f"{f}.decode_mma_m8", w, gs, step, target, rows=8)
                for f, w, gs, step in (("int4wo", 1, 128, 128), ("int8wo", 0, 16, 256))
            ]
            + [decode_mma("w4a8.decode_mma_imma_m8", 3, 32, 64, target, 8, XZ=False, IMMA=True)]
            + [decode_mma("int4wo.decode_mma_tiled_m8", 1, 128, 128, target, 8, tiled=True)]
            + [decode_mma_sk("int4wo.decode_mma_sk_m8", target, 8)]
            + [decode_mma("mxwo_fp6_e3m2.decode_mma_m8", 6, 32, 128, target, 8)]
            + [decode_mma("mx_int8.decode_mma_m8", 10, 32, 128, target, 8)]
            + [decode_mma("mxwo_fp4.decode_mma_m8", 4, 32, 64, target, 8)]  # (WIDE: at8)
            + [decode_mma("mxwo_fp8.decode_mma_m8", 5, 32, 128, target, 8)]
            + [_xmx_m8(target)]
            # weight-only past 16 rows (decode_mma.ROWS_TILE): x padded to 32-256 rows
            + [
                _rows(
                    f"{f}.decode_mma{'_tiled' if f == 'int4wo' else ''}_m{rows}",
                    w,
                    gs,
                    target,
                    rows,
                    tiled=f == "int4wo",
                )
                for f, w, gs in (("int4wo", 1, 128), ("int8wo", 0, 16), ("fp8wo", 2, 16))
                for rows in ROWS_TILE[WeightFormat(w)]
            ]
            # ...MX and NVFP4's (session 51)
            + [
                _rows(f"{f}.decode_mma_m{rows}", w, 32, target, rows)
                for f, w in (
                    ("mxwo_fp4", 4),
                    ("nvfp4wo", 9),
                    ("mxwo_fp8", 5),
                    ("mx_fp8_e5m2", 8),
                    ("mx_int8", 10),
                    ("mxwo_fp6_e3m2", 6),
                    ("mx_fp6_e2m3", 7),
                )
                for rows in ROWS_TILE[WeightFormat(w)]
            ]  # fmt: skip
            # ...e4m3's 128-row tile with the BIG flag known on the host: 128-code steps
            + [
                _rows(
                    "mxwo_fp8.decode_mma_m128_host",
                    5,
                    32,
                    target,
                    128,
                    BIG=0,
                    BLOCK_K=128,
                    GROUPS=4,
                )
            ]  # fmt: skip
            # ...and W4A8's (the integer MMA; x symmetric and with zero points)
            + [
                _rows(
                    f"w4a8.decode_mma_imma{tag}_m{rows}", 3, 32, target, rows, XZ=xz, IMMA=True
                )  # fmt: skip
                for rows in ROWS_TILE[WeightFormat.INT4_SYM]
                for tag, xz in (("", False), ("_asym", True))
            ]
            if target.startswith("sm")
            else []
        ),  # fmt: skip
        *(
            [
                decode_mma(
                    "w4a8.decode_mma_imma_pdl", 3, 32, 64, target, XZ=False, IMMA=True, PDL=True
                ),
                # weight-only and MX decode (_common.DECODE_PDL)
                decode_mma(
                    "int4wo.decode_mma_tiled_m8_pdl", 1, 128, 128, target, 8, tiled=True, PDL=True
                ),
                decode_mma("mxwo_fp4.decode_mma_m8_pdl", 4, 32, 64, target, 8, PDL=True),
            ]
            if target in PDL_TARGETS
            else []
        ),  # fmt: skip
    ]


def w4a8_mma_specs(target: str) -> list[Spec]:
    """kernels/w4a8_mma.py (W4A8 at ROWS_MMA_FROM <= M <= 16 on row-major codes, the groups of a
    step one batched integer dot): x padded to 16 and 8 rows, with zero points (a second
    dot against them), with PDL and chained on PDL_TARGETS. Its nibbles are NVIDIA PTX; AMD
    compiles the plain path (not served there: ROCm keeps decode_mma)."""
    from aoq.kernels.w4a8_mma import TILE

    sig = {
        "x_ptr": "*i8", "w_ptr": "*u8", "s_ptr": "*fp32", "xs_ptr": "*fp32", "xz_ptr": "*i32",
        "b_ptr": "*bf16", "y_ptr": "*bf16", "p_ptr": "*fp32", "c_ptr": "*i32",
    }  # fmt: skip
    sig.update({n: "i32" for n in ("M", "N", "K", "stride_sn", "stride_sg", "K_SPLIT",
                                   "stride_xm", "stride_wn", "stride_ym")})  # fmt: skip
    ce = dict(
        ASYM=False, STATIC=False, HAS_BIAS=True, SPLIT_K=4, TAIL=split_tail(),
        BLOCK_N=TILE["BLOCK_N"], GROUPS=TILE["STEP_K"] // 32, ROWS=16, ASM=target.startswith("sm"),
        GACC=True,
    )  # fmt: skip
    base = Spec("w4a8.mma_rows", "w4a8_mma", "_w4a8_mma_kernel", sig, ce,
                warps=TILE["num_warps"], stages=TILE["num_stages"])  # fmt: skip
    rows8 = dataclasses.replace(base, name="w4a8.mma_rows_m8", constexprs={**ce, "ROWS": 8})
    zero = dataclasses.replace(base, name="w4a8.mma_rows_zero",
                               constexprs={**ce, "ASYM": True, "GACC": False})  # fmt: skip
    pdl = [pdl_variant(base)] if target in PDL_TARGETS else []
    return [base, rows8, zero, *pdl, *chained(target, base)]


def wt_rows_specs(target: str) -> list[Spec]:
    """kernels/wt_rows.py (weight-only at 65-128 rows, the weights as the MMA's register
    operand, device-made tensor descriptors): int8, e4m3, and int4 in tile order with its
    zero points as words (a GPU weight's layout), split, and chained where the target has
    PDL; W4A8's tile (groups of 32, x by masked loads). Served on sm90 only; the other
    targets compile it as their Triton lowers descriptors (plain loads where there is no
    TMA)."""
    from aoq.kernels import wt_rows
    from aoq.kernels.target_specs import fp8_pointer

    sig = {"x_ptr": "*bf16", "w_ptr": "*i8", "s_ptr": "*fp32", "z_ptr": "*fp32",
           "b_ptr": "*bf16", "y_ptr": "*bf16", "p_ptr": "*fp32"}  # fmt: skip
    sig.update({a: "i32" for a in ("M", "N", "K", "K_SPLIT", "stride_sn", "stride_sg",
                                   "stride_zn", "stride_zg")})  # fmt: skip
    ce = dict(WFMT=0, TILED=False, ZW=False, HAS_BIAS=True, SPLIT_K=2, ROWS=wt_rows.ROWS,
              BLOCK_N=wt_rows.BLOCK_N, BLOCK_K=wt_rows.BLOCK_K, STAGES=wt_rows.STAGES)  # fmt: skip
    int8 = Spec("int8wo.rows", "wt_rows", "_wt_rows_kernel", sig, ce, stages=wt_rows.STAGES)
    fp8 = dataclasses.replace(int8, name="fp8wo.rows", fp8=True,
                              signature={**sig, "w_ptr": fp8_pointer(target)})  # fmt: skip
    # (sm80 / sm89, where it is not served: mma.sync's layouts spill 544 bytes of the group's
    # product tile beside the sums)
    int4 = dataclasses.replace(int8, name="int4wo.rows", signature={**sig, "w_ptr": "*u8",
                               "z_ptr": "*i32"}, constexprs={**ce, "WFMT": 1, "TILED": True,
                               "ZW": True}, spill_budget=640 if target in ("sm80", "sm89")
                               else 0)  # fmt: skip
    # W4A8's tile: int4 codes q + 8 in groups of 32 dequantized in float32 to bf16, x by
    # masked loads on the 64-row tile (at every row count: wt_rows.W4A8_X_DESC)
    w4a8 = dataclasses.replace(int8, name="w4a8.rows", signature={**sig, "w_ptr": "*u8"},
                               constexprs={**ce, "WFMT": 2, "GROUP": 32, "X_DESC": False},
                               spill_budget=int4.spill_budget)  # fmt: skip
    chain = [
        dataclasses.replace(
            s, name=f"{s.name}_chained", constexprs={**s.constexprs, "TRIGGER": True}
        )  # fmt: skip
        for s in (int8, fp8, int4)
        if target in PDL_TARGETS
    ]
    # the wide tile (wt_rows.WIDE_TILE: 128 rows of W on two warp groups, x by its descriptor;
    # W4A8's at 65-95 rows)
    bn = {"BLOCK_N": wt_rows.WIDE_N, "X_DESC": True}
    wide = [
        dataclasses.replace(
            s,
            name=f"{s.name}_wide",
            constexprs={**s.constexprs, **bn},
            warps=wt_rows.WIDE_TILE["warps"],
        )
        for s in (int8, fp8, w4a8)
    ]
    return [int8, fp8, int4, w4a8, *chain, *wide]
