"""Ahead-of-time compilation of every kernel for every GPU target, on a machine with no GPU.

``python -m aoq.kernels.targets [--targets sm90,gfx942] [--out reports/runs]`` compiles each
kernel spec of target_specs.py with ``triton.compile(ASTSource, target=GPUTarget)`` and
prints a table: success, the matrix instructions in the assembly (``mma.sync`` / ``wgmma``
/ ``tcgen05.mma`` for NVIDIA, ``v_mfma`` for AMD) and spills (ptxas -v for NVIDIA, the
``vgpr/sgpr_spill_count`` notes of the AMD code object), and on NVIDIA whether ptxas
serialized the kernel's wgmma (its C7515 note: ``wgmma_serialized``, the reason; the table
marks it SERIAL). Each record is an
aoq.testing.records ``Record`` (kind "compile"), written to JSONL with ``--out``.

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
import os
import queue
import re
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from aoq.kernels.target_specs import Spec, specs
from aoq.kernels.target_specs_mx import mx_cast_spec

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

MAX_SHARED = {"sm80": 166912, "sm89": 101376, "sm90": 232448, "sm100": 232448}
"""The most shared memory one program may take on each NVIDIA target (CUDA's occupancy table:
163, 99, 227 and 227 KB): a kernel compiled past it cannot launch there."""

__all__ = ["Spec", "mx_cast_spec", "specs", "compile_spec", "compile_target", "main"]


def _gpu_target(target: str) -> Any:
    from triton.backends.compiler import GPUTarget

    if target.startswith("sm"):
        return GPUTarget("cuda", int(target[2:]), 32)
    return GPUTarget("hip", target, 64)


WGMMA_SERIALIZED = re.compile(r"\(C7515\).*?serialized due to (.*?)(?: in the function|$)", re.M)
"""ptxas -v's note that it issues a kernel's wgmma one at a time (each waits for the one
before), and why: three sm90 kernels ran so unseen until session 56 (splitk.k_range's
NONEMPTY). The compile matrix records the reason and the tests refuse it."""


def _spills(asm: dict[str, Any], target: str) -> tuple[int | None, int | None, str | None]:
    """(spilled bytes or registers, registers, why ptxas serialized the wgmma or None) from
    ptxas -v or the AMD code object notes."""
    if target.startswith("gfx"):
        text = asm.get("amdgcn", "")
        spill = sum(int(v) for v in re.findall(r"\.[sv]gpr_spill_count:\s+(\d+)", text))
        vgpr = re.findall(r"\.vgpr_count:\s+(\d+)", text)
        return spill, int(vgpr[0]) if vgpr else None, None
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
    serial = WGMMA_SERIALIZED.search(log)
    return spill, int(regs[0]) if regs else None, serial.group(1).strip() if serial else None


def compile_spec(spec: Spec, target: str, asm: bool = False) -> dict[str, Any]:
    """Compile ``spec`` for ``target`` in this process: the row of the compile matrix (ok,
    mma, spills, regs, shared, or the error), with the assembly text under "asm" if asked
    (and NVIDIA's cubin bytes under "cubin")."""
    import importlib

    import triton
    from triton.compiler import ASTSource

    row: dict[str, Any] = {"name": spec.name}
    try:
        fn = getattr(importlib.import_module(f"aoq.kernels.{spec.module}"), spec.fn)
        sig = {**spec.signature, **{k: "constexpr" for k in spec.constexprs}}
        # what the JIT sees at run time: 16-byte aligned pointers, strides and K/N
        # multiples of 16 (its "divisibility" specialization of every such argument; a
        # split-K range is a multiple of the K step, so of 16)
        attrs = {
            (i,): [["tt.divisibility", 16]]
            for i, (a, t) in enumerate(spec.signature.items())
            if t.startswith("*") or a.startswith("stride") or a in ("K", "N", "K_SPLIT")
        }
        # a constexpr the spec leaves out takes the kernel's default, as a launch does
        # (ASTSource alone would pass None)
        constexprs = {
            p.name: p.default
            for p in fn.params
            if p.is_constexpr and p.has_default and p.name not in spec.signature
        }
        constexprs.update(spec.constexprs)
        sig.update({k: "constexpr" for k in constexprs})
        src = ASTSource(fn=fn, signature=sig, constexprs=constexprs, attrs=attrs)
        opts: dict[str, Any] = {"num_warps": spec.warps, "num_stages": spec.stages}
        if target.startswith("gfx"):
            opts.update(num_stages=2, waves_per_eu=0, matrix_instr_nonkdim=16)
        elif spec.maxnreg is not None:
            opts["maxnreg"] = spec.maxnreg
        c = triton.compile(src, target=_gpu_target(target), options=opts)
        text = c.asm.get("ptx") or c.asm.get("amdgcn") or ""
        mma = sorted({p for p in MMA_PATTERNS if p in text})
        spill, regs, serial = _spills(c.asm, target)
        row.update(ok=True, mma=mma, spills=spill, regs=regs, shared=c.metadata.shared,
                   wgmma_serialized=serial)  # fmt: skip
        if asm:
            row["asm"] = text
            if "cubin" in c.asm:  # NVIDIA's machine code (bench/sass.py disassembles it)
                row["cubin"] = c.asm["cubin"]
    except Exception as e:  # noqa: BLE001 - a compile error is a result, not a crash
        cause: BaseException = e  # Triton nests the reason (the outer text ends in a caret)
        while cause.__cause__ is not None:
            cause = cause.__cause__
        last = (str(cause).strip().splitlines() or [""])[-1][:300]
        row.update(ok=False, error=f"{type(e).__name__}: {type(cause).__name__}: {last}")
    return row


def _worker(target: str, skip: int) -> None:
    """Compile specs[skip:] for ``target``, one JSON line each (printed before and after)."""
    for i, spec in enumerate(specs(target)[skip:], start=skip):
        print(json.dumps({"start": i}), flush=True)
        t0 = time.time()
        row = {"done": i, **compile_spec(spec, target)}
        row["seconds"] = round(time.time() - t0, 2)
        print(json.dumps(row), flush=True)


def _run_worker(cmd: list[str], timeout: float) -> tuple[list[str], str, int]:
    """Run a worker; its stdout lines as they come, its stderr's last text and its exit
    status. ``timeout`` bounds the wait for each line (each kernel prints one when it starts
    and one when it is done), not the whole worker: a target's many kernels may together
    take longer than any one may. A worker silent that long is killed (rc -1)."""
    lines: list[str] = []
    q: queue.Queue[str | None] = queue.Queue()
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
        assert proc.stdout is not None
        out = proc.stdout

        def pump() -> None:
            for line in out:
                q.put(line)
            q.put(None)

        threading.Thread(target=pump, daemon=True).start()
        timed_out = False
        while True:
            try:
                line = q.get(timeout=timeout)
            except queue.Empty:
                proc.kill()
                timed_out = True
                break
            if line is None:
                break
            lines.append(line)
        rc = proc.wait()
        err.seek(0)
        tail = "timed out" if timed_out else err.read()[-2000:]
    return lines, tail, -1 if timed_out else rc


def compile_target(target: str, timeout: float = 600) -> list[dict[str, Any]]:
    """Results of every spec on ``target``, each compiled in a worker subprocess (``timeout``:
    seconds one kernel may take)."""
    n = len(specs(target))
    rows: dict[int, dict[str, Any]] = {}
    skip = 0
    while skip < n:
        cmd = [sys.executable, "-m", "aoq.kernels.targets", "--worker", target, "--skip", str(skip)]
        out, err, rc = _run_worker(cmd, timeout)
        started = skip
        for line in out:
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
    expected = spec.fails_on.get(target) or (NO_FP8.get(target) if spec.fp8 else None)
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


def _timed_target(target: str) -> list[dict[str, Any]]:
    """compile_target with a line of progress when it ends (a full run takes minutes)."""
    t0 = time.time()
    rows = compile_target(target)
    bad = sum(not r["ok"] for r in rows)
    print(f"{target}: {len(rows)} kernels in {time.time() - t0:.0f} s, {bad} not compiled",
          file=sys.stderr, flush=True)  # fmt: skip
    return rows


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
    # targets side by side, each in its own worker process (AOQ_COMPILE_JOBS: how many)
    jobs = int(os.environ.get("AOQ_COMPILE_JOBS", os.cpu_count() or 1))
    with ThreadPoolExecutor(max(1, min(jobs, len(targets)))) as pool:
        results = pool.map(_timed_target, targets)
        done = dict(zip(targets, results, strict=True))
    for target in targets:
        for spec, row in zip(specs(target), done[target], strict=True):
            status, reason = _status(spec, target, row)
            bad += status in ("fail", "crash")
            keys = ("mma", "spills", "regs", "shared", "wgmma_serialized", "seconds")
            metrics = {k: row.get(k) for k in keys}
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
            if row.get("wgmma_serialized"):
                cell += " SERIAL"
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
