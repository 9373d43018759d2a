"""Ahead-of-time compilation of every kernel for every GPU target, on a machine with no GPU.

``python -m aoq.kernels.targets [--targets sm90,gfx942] [--out reports/runs]`` compiles each
kernel spec below with ``triton.compile(ASTSource, target=GPUTarget)`` and prints a table:
success, the matrix instructions in the assembly (``mma.sync`` / ``wgmma`` / ``tcgen05.mma``
for NVIDIA, ``v_mfma`` for AMD) and spills (ptxas -v for NVIDIA, the ``vgpr/sgpr_spill_count``
notes of the AMD code object). Each record is an aoq.testing.records ``Record`` (kind
"compile"), written to JSONL with ``--out``.

A compiler abort (``LLVM ERROR``, a segfault) must not take the caller down: every target
compiles in a worker subprocess that reports one JSON line per kernel; if the worker dies, the
kernel it was compiling is recorded as ``crash`` and a fresh worker carries on after it.
Expected impossibilities (float8 on archs without it; a native block-scaled GEMM where the
hardware has none) are ``xfail`` with the reason; one that compiles anyway is ``fail`` (the
expectation is wrong). Kernels that are not matrix kernels may carry a shared-memory budget
(the MX casts: only their scale bytes may pass through shared memory).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

TARGETS = ("sm80", "sm89", "sm90", "sm100", "gfx90a", "gfx942", "gfx950")
NO_FP8 = {"sm80": "sm80 has no float8 conversion or MMA instructions (Triton needs sm89+)"}
"""Expected impossibilities. (gfx90a has no float8 hardware either, but Triton emulates its
conversions there and widens the MMA to bf16, so those compile; dispatch still sends float8
on gfx90a to the reference, see aoq/tensors/triton_linear.FP8_ARCHS.)"""
MMA_PATTERNS = (
    "tcgen05.mma",
    "wgmma.mma_async",
    "mma.sync",
    "v_mfma",
    "block_scale",
    "v_mfma_scale",
)
BLOCK_SCALED = {"sm100": "block_scale", "gfx950": "v_mfma_scale"}
"""Targets with an MMA that takes E8M0 block scales, and the instruction that shows it:
``tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale`` (fp8; ``kind::mxf4`` for fp4) and
``v_mfma_scale_f32_*_f8f6f4``."""
NO_BLOCK_SCALED = {
    "sm80": "sm80 has no block-scaled MMA: Triton emulates tl.dot_scaled (MX operands scaled "
    "and upcast to bf16, mma.sync bf16), no faster than aoq's emulated MX GEMM",
    "sm89": "sm89 has no block-scaled MMA: Triton emulates tl.dot_scaled (MX operands scaled "
    "and upcast to bf16, mma.sync bf16), no faster than aoq's emulated MX GEMM",
    "sm90": "sm90 has no block-scaled MMA: Triton emulates tl.dot_scaled (MX operands scaled "
    "and upcast to bf16, wgmma bf16), no faster than aoq's emulated MX GEMM",
    "gfx90a": "gfx90a has no block-scaled MFMA and triton 3.6 has no lowering of "
    "tl.dot_scaled for CDNA2 (LLVM ERROR: Unsupported DotScaleOp)",
    "gfx942": "gfx942 has no block-scaled MFMA and triton 3.6 has no lowering of "
    "tl.dot_scaled for CDNA3 (LLVM ERROR: Unsupported DotScaleOp)",
}
"""Why the native MX GEMM (kernels/mx_mm.py) is not native there: an emulated compile (no
block-scaled instruction) or a failed one is ``xfail`` with this reason."""


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
    )
    sig = _split_sig(sig, "*i32" if gs == 0 else "*fp32")
    return Spec(name, "int_act_mm", "_int_act_mm_kernel", sig, ce, **kw)


def _splitk_specs() -> list[Spec]:
    """The GEMVs (no matrix instructions) and the split-K reduction."""
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
        "N": "i32",
        "K": "i32",
        "G": "i32",
        "K_SPLIT": "i32",
    }
    gemv_ce = dict(
        GROUP_SIZE=32, ASYM=False, STATIC=False, HAS_BIAS=True, HAS_BIAS_INT=False, SPLIT_K=4,
        BLOCK_N=128,
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
    red_ce = dict(
        SPLIT_K=4, HAS_BIAS_INT=False, COL_SCALE=True, ROW_SCALE=True, STATIC_ROW=False,
        HAS_BIAS=True, BLOCK_N=512,
    )  # fmt: skip
    words_sig = {
        "x_ptr": "*bf16",
        "w_ptr": "*u32",
        "s_ptr": "*fp32",
        "z_ptr": "*u8",
        "b_ptr": "*bf16",
        "y_ptr": "*bf16",
        "p_ptr": "*fp32",
        "N": "i32",
        "K": "i32",
        "G": "i32",
        "K_SPLIT": "i32",
        "stride_wn": "i32",
    }
    words_ce = dict(
        GROUP_SIZE=128, PER_CHANNEL=False, HAS_BIAS=True, SPLIT_K=4, BLOCK_N=64, WORDS=16,
        EVEN_K=True,
    )  # fmt: skip
    int8_words = {**words_ce, "INT4": False, "GROUP_SIZE": 0, "PER_CHANNEL": True}
    return [
        Spec(
            "int4wo.gemv_words",
            "gemv",
            "_gemv_words_kernel",
            words_sig,
            {**words_ce, "INT4": True},
            mma=False,
        ),  # fmt: skip
        Spec("int8wo.gemv_words", "gemv", "_gemv_words_kernel", words_sig, int8_words, mma=False),
        Spec("w4a8.gemv", "int_act_mm", "_w4a8_gemv_kernel", gemv_sig, gemv_ce, mma=False),
        Spec("splitk.reduce", "splitk", "_reduce_kernel", red_sig, red_ce, mma=False),
    ]


def mx_cast_spec(name: str, dim: int, elem: str, target: str) -> Spec:
    """An MX cast (kernels/mx_cast.py) of bf16 at its default tile for 8192 x 8192, fp8
    through the float8 conversion where Triton emits it directly (sm90+). Budget: the scale
    bytes' layout conversion (<= 512 B); the data never passes through shared memory."""
    from aoq.kernels import mx_cast
    from aoq.kernels.mx_ops import PACK_GROUP, Dim1Tile, default_tile

    from aoq.formats.mx import MXElem, ScaleRounding

    e = MXElem(elem)
    hw = target in ("sm90", "sm100") and e in mx_cast._FP8_TY
    ce: dict[str, Any] = dict(QDQ=False, BLOCK=32, VEC=8, EVEN=True)
    ce.update(
        PACK=PACK_GROUP.get(e.spec.bits, 1), **mx_cast._elem_constants(e, ScaleRounding.RCEIL, hw)
    )
    tile = default_tile(dim)
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


def specs(target: str) -> list[Spec]:
    """The kernels compiled for ``target`` (float8 kernels use the arch's own e4m3)."""
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
        "M": "i32",
        "N": "i32",
        "K": "i32",
        "stride_xm": "i32",
        "stride_wn": "i32",
        "stride_ym": "i32",
        "M_KEY": "i32",
    }
    fp8_ce = dict(
        X_ROW=True, W_ROW=True, HAS_BIAS=True, WIDEN=0, BLOCK_M=128, BLOCK_N=128, BLOCK_K=128
    )
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
    return [
        Spec(
            "act_quant.int8_row", "act_quant", "_act_quant_kernel", act, act_ce, warps=8, mma=False
        ),
        Spec(
            "act_quant.fp8_row",
            "act_quant",
            "_act_quant_kernel",
            {**act, "q_ptr": f8},
            {**act_ce, "MODE": 3, "QMAX": 240.0 if target == "gfx942" else 448.0},
            warps=8,
            fp8=True,
            mma=False,
        ),
        _wo("int4wo.gemv", "*u8", 1, 128, 1, 32, 128),
        _wo("int4wo.decode", "*u8", 1, 128, 16, 64, 128),
        _wo("int4wo.prefill", "*u8", 1, 128, 128, 128, 64, warps=8),
        _wo("int8wo.decode", "*i8", 0, 0, 16, 64, 128),
        _wo("fp8wo.decode", f8, 2, 0, 16, 64, 128),
        Spec(
            "dequant.int4",
            "weight_only",
            "_dequantize_kernel",
            deq_sig,
            dict(WFMT=1, GROUP_SIZE=128, BLOCK_N=32, BLOCK_K=128),
            mma=False,
        ),
        _int_act("w8a8.prefill", False, 0, 128, 128, 128, warps=8),
        _int_act("w4a8.decode", True, 32, 16, 64, 32),
        *_splitk_specs(),
        Spec("fp8.prefill", "fp8_mm", "_fp8_mm_kernel", fp8_sig, fp8_ce, warps=8, fp8=True),
        mx_cast_spec("mx_cast.dim0.fp8_e4m3", 0, "fp8_e4m3", target),
        mx_cast_spec("mx_cast.dim1.fp8_e4m3", 1, "fp8_e4m3", target),
        _mx_mm_spec("mx_mm.fp8", "e4m3"),
        _mx_mm_spec("mx_mm.fp4", "e2m1"),
    ]


def _gpu_target(target: str) -> Any:
    from triton.backends.compiler import GPUTarget

    if target.startswith("sm"):
        return GPUTarget("cuda", int(target[2:]), 32)
    return GPUTarget("hip", target, 64)


def _spills(asm: dict[str, Any], target: str) -> tuple[int | None, int | None]:
    """(spilled bytes or registers, registers) from ptxas -v or the AMD code object notes."""
    if target.startswith("gfx"):
        text = asm.get("amdgcn", "")
        spill = sum(int(v) for v in re.findall(r"\.[sv]gpr_spill_count:\s+(\d+)", text))
        vgpr = re.findall(r"\.vgpr_count:\s+(\d+)", text)
        return spill, int(vgpr[0]) if vgpr else None
    import tempfile

    from triton.backends.nvidia.compiler import get_ptxas, sm_arch_from_capability

    cap = int(target[2:])
    with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
        f.write(asm["ptx"])
    out = subprocess.run(
        [
            get_ptxas(cap).path,
            "-v",
            f"--gpu-name={sm_arch_from_capability(cap)}",
            f.name,
            "-o",
            f.name + ".cubin",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    log = out.stderr + out.stdout
    spill = sum(int(v) for v in re.findall(r"(\d+) bytes spill (?:stores|loads)", log))
    regs = re.findall(r"Used (\d+) registers", log)
    return spill, int(regs[0]) if regs else None


def compile_spec(spec: Spec, target: str, asm: bool = False) -> dict[str, Any]:
    """Compile ``spec`` for ``target`` in this process: the row of the compile matrix (ok,
    mma, spills, regs, shared, or the error), with the assembly text under "asm" if asked."""
    import importlib

    import triton
    from triton.compiler import ASTSource

    row: dict[str, Any] = {"name": spec.name}
    try:
        fn = getattr(importlib.import_module(f"aoq.kernels.{spec.module}"), spec.fn)
        sig = {**spec.signature, **{k: "constexpr" for k in spec.constexprs}}
        # what the JIT sees at run time: 16-byte aligned pointers, strides and K/N
        # multiples of 16 (its "divisibility" specialization of every such argument)
        attrs = {
            (i,): [["tt.divisibility", 16]]
            for i, (a, t) in enumerate(spec.signature.items())
            if t.startswith("*") or a.startswith("stride") or a in ("K", "N")
        }
        src = ASTSource(fn=fn, signature=sig, constexprs=dict(spec.constexprs), attrs=attrs)
        opts: dict[str, Any] = {"num_warps": spec.warps, "num_stages": spec.stages}
        if target.startswith("gfx"):
            opts.update(num_stages=2, waves_per_eu=0, matrix_instr_nonkdim=16)
        c = triton.compile(src, target=_gpu_target(target), options=opts)
        text = c.asm.get("ptx") or c.asm.get("amdgcn") or ""
        mma = sorted({p for p in MMA_PATTERNS if p in text})
        spill, regs = _spills(c.asm, target)
        row.update(ok=True, mma=mma, spills=spill, regs=regs, shared=c.metadata.shared)
        if asm:
            row["asm"] = text
    except Exception as e:  # noqa: BLE001 - a compile error is a result, not a crash
        row.update(ok=False, error=f"{type(e).__name__}: {str(e).strip().splitlines()[-1][:300]}")
    return row


def _worker(target: str, skip: int) -> None:
    """Compile specs[skip:] for ``target``, one JSON line each (printed before and after)."""
    for i, spec in enumerate(specs(target)[skip:], start=skip):
        print(json.dumps({"start": i}), flush=True)
        t0 = time.time()
        row = {"done": i, **compile_spec(spec, target)}
        row["seconds"] = round(time.time() - t0, 2)
        print(json.dumps(row), flush=True)


def compile_target(target: str, timeout: float = 600) -> list[dict[str, Any]]:
    """Results of every spec on ``target``, each compiled in a worker subprocess."""
    n = len(specs(target))
    rows: dict[int, dict[str, Any]] = {}
    skip = 0
    while skip < n:
        cmd = [sys.executable, "-m", "aoq.kernels.targets", "--worker", target, "--skip", str(skip)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
            out, err, rc = proc.stdout, proc.stderr, proc.returncode
        except subprocess.TimeoutExpired as e:
            out, err, rc = (e.stdout or b"").decode(), "timed out", -1
        started = skip
        for line in out.splitlines():
            if line.startswith("{"):
                msg = json.loads(line)
                if "start" in msg:
                    started = msg["start"]
                else:
                    rows[msg["done"]] = msg
        if rc != 0 or len(rows) < n:
            if started not in rows:
                tail = (err.strip().splitlines() or ["no output"])[-1][:300]
                rows[started] = {
                    "name": specs(target)[started].name,
                    "ok": False,
                    "crash": True,
                    "error": f"compiler process died (rc={rc}): {tail}",
                }
            skip = max(rows) + 1
        else:
            skip = n
    return [rows[i] for i in range(n)]


def _status(spec: Spec, target: str, row: dict[str, Any]) -> tuple[str, str | None]:
    expected = NO_FP8.get(target) if spec.fp8 else None
    if expected:
        return (
            ("fail", f"compiled although expected not to: {expected}")
            if row["ok"]
            else ("xfail", expected)
        )
    if spec.block_scaled and target not in BLOCK_SCALED:
        reason = NO_BLOCK_SCALED.get(target, f"{target}: no block-scaled MMA known")
        native = row["ok"] and {"block_scale", "v_mfma_scale"} & set(row.get("mma") or [])
        return (
            ("fail", f"block-scaled MMA found although {reason}") if native else ("xfail", reason)
        )
    if not row["ok"]:
        return ("crash" if row.get("crash") else "fail"), row.get("error")
    if spec.mma and not row.get("mma"):
        return "fail", "compiled, but no matrix instructions in the assembly"
    if spec.block_scaled and BLOCK_SCALED[target] not in row.get("mma", []):
        return "fail", f"compiled, but no {BLOCK_SCALED[target]} instruction: not native"
    if spec.max_shared is not None and (row.get("shared") or 0) > spec.max_shared:
        return "fail", f"{row.get('shared')} B of shared memory, more than {spec.max_shared}"
    return "pass", None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("--out", default=None, help="directory for the JSONL run file")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--skip", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        _worker(args.worker, args.skip)
        return 0
    import torch

    from aoq.testing.records import JsonlWriter, Record, new_run

    targets = [t for t in args.targets.split(",") if t]
    run = new_run("compile", "cpu", torch.device("cpu"), "cpu", command=" ".join(sys.argv))
    writer = JsonlWriter(run, args.out) if args.out else None
    table: dict[str, dict[str, str]] = {}
    bad = 0
    for target in targets:
        for spec, row in zip(specs(target), compile_target(target), strict=True):
            status, reason = _status(spec, target, row)
            bad += status in ("fail", "crash")
            metrics = {k: row.get(k) for k in ("mma", "spills", "regs", "shared", "seconds")}
            rec = Record(
                run.run_id,
                f"{spec.name}/{target}",
                "compile",
                status,
                kernel=spec.name,
                metrics=metrics,
                reason=reason,
            )
            if writer:
                writer.write(rec)
            mma = ",".join(m.split(".")[0].removeprefix("v_") for m in row.get("mma") or []) or "-"
            cell = f"{status} {mma} sp={row.get('spills')}" if status == "pass" else status
            table.setdefault(spec.name, {})[target] = cell
    width = max(len(t) for t in table) + 2
    print(f"{'kernel':<{width}}" + "".join(f"{t:<22}" for t in targets))
    for name, cells in table.items():
        print(f"{name:<{width}}" + "".join(f"{cells.get(t, ''):<22}" for t in targets))
    if writer:
        writer.close()
        print(f"records: {writer.path}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
