"""Static look at compiled kernels, no GPU needed: ``python -m bench.sass NAME [NAME ...]``.

For each kernel spec of aoq.kernels.target_specs whose name matches NAME (a glob:
``'*decode_mma*'``), compiled for ``--target`` (sm90 unless given; NVIDIA targets): its
registers, spills and shared memory, the programs an SM holds at once by registers and by
shared memory (the smaller bounds a wave of a split kernel: decode_mma's ``per_sm`` aims at
it), and the instruction mix of its loops, largest first (the SASS from Triton's bundled
nvdisasm; a loop is the body of a backward branch). ``--set KEY=VALUE`` overrides a
constexpr (VALUE read as JSON, else kept as text: ``--set ROWS=8 --set POST=true``);
``--warps``, ``--stages`` and ``--maxnreg`` the launch options.

What bench/NOTES.md's instruction counts came from (int4's 357 instructions a 64 x 128 step,
sessions 28-34; MX 8-bit's 48 KB of shared memory, session 35), counted by scripts that each
session wrote again.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import fnmatch
import json
import os
import re
import subprocess
import tempfile
from collections.abc import Sequence
from typing import Any

SM_LIMITS = {
    "sm80": (65536, 164 * 1024, 32),
    "sm89": (65536, 100 * 1024, 24),
    "sm90": (65536, 228 * 1024, 32),
    "sm100": (65536, 228 * 1024, 32),
}
"""Per target: registers, shared memory (bytes) and resident programs an SM (CUDA's
occupancy tables: compute capability 8.0, 8.9, 9.0 and 10.0)."""
RESERVED_SHARED = 1024
"""Shared memory the driver reserves per program on sm80 and later."""
LABEL = re.compile(r"^\s*\.(L_x_\d+):")
INSTR = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;")
BRANCH = re.compile(r"\bBRA\b.*`?\(?\.(L_x_\d+)")
PREDICATE = re.compile(r"^@!?U?P[T\d]+\s+")


def fit(regs: int, shared: int, warps: int, target: str = "sm90") -> dict[str, int]:
    """Programs of ``warps`` warps an SM holds at once: by registers (``regs`` a thread,
    allocated 256 a warp at a time), by shared memory (``shared`` bytes plus the driver's
    reserve) and by the hardware's limit; ``programs`` is the least of the three."""
    reg_file, smem, most = SM_LIMITS[target]
    per_warp = -(-max(regs, 1) * 32 // 256) * 256
    by_regs = reg_file // (per_warp * warps)
    by_shared = smem // (shared + RESERVED_SHARED) if shared else most
    return {
        "by_regs": by_regs,
        "by_shared": by_shared,
        "programs": min(by_regs, by_shared, most),
    }


def instructions(sass: str) -> tuple[list[str], dict[str, int]]:
    """nvdisasm -c text -> (its instructions in order, each label's index there)."""
    ins: list[str] = []
    labels: dict[str, int] = {}
    for line in sass.splitlines():
        m = LABEL.match(line)
        if m:
            labels[m.group(1)] = len(ins)
            continue
        m = INSTR.match(line)
        if m:
            ins.append(m.group(1))
    return ins, labels


@dataclasses.dataclass
class Loop:
    start: int
    end: int
    mix: collections.Counter

    @property
    def size(self) -> int:
        return self.end - self.start + 1


def opcode(instr: str) -> str:
    """``@!P0 LDG.E.128 R4, [R2.64]`` -> ``LDG``."""
    return PREDICATE.sub("", instr).split()[0].split(".")[0]


def loops(sass: str) -> list[Loop]:
    """Every backward branch's body with its opcode counts, largest first."""
    ins, labels = instructions(sass)
    found = []
    for i, text in enumerate(ins):
        m = BRANCH.search(text)
        if m and labels.get(m.group(1), i + 1) <= i:
            start = labels[m.group(1)]
            found.append(Loop(start, i, collections.Counter(map(opcode, ins[start : i + 1]))))
    return sorted(found, key=lambda lp: -lp.size)


def disassemble(cubin: bytes) -> str:
    """Triton's bundled nvdisasm over ``cubin`` (its -c listing)."""
    import triton

    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "nvdisasm")
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(cubin)
    try:
        out = subprocess.run([tool, "-c", f.name], capture_output=True, text=True, timeout=120)
    finally:
        os.unlink(f.name)
    if out.returncode != 0:
        raise RuntimeError(f"nvdisasm failed: {out.stderr.strip()[:300]}")
    return out.stdout


def look(spec: Any, target: str, n_loops: int = 2) -> dict[str, Any]:
    """Compile ``spec`` for ``target``: the compile row (less the assembly), its fit and the
    ``n_loops`` largest loops."""
    from aoq.kernels.targets import compile_spec

    row = compile_spec(spec, target, asm=True)
    out = {k: v for k, v in row.items() if k not in ("asm", "cubin")}
    if not row.get("ok"):
        return out
    out["fit"] = fit(row["regs"] or 0, row["shared"] or 0, spec.warps, target)
    out["loops"] = [
        {"size": lp.size, "mix": dict(lp.mix.most_common())}
        for lp in loops(disassemble(row["cubin"]))[:n_loops]
    ]
    return out


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def pick(target: str, patterns: Sequence[str]) -> list[Any]:
    """The target's specs whose names match any of ``patterns`` (globs)."""
    from aoq.kernels.target_specs import specs

    chosen = [s for s in specs(target) if any(fnmatch.fnmatch(s.name, p) for p in patterns)]
    if not chosen:
        raise SystemExit(f"no spec on {target} matches {list(patterns)}")
    return chosen


def render(spec: Any, res: dict[str, Any], per_sm: int | None = None) -> str:
    if not res.get("ok"):
        return f"{spec.name}: compile failed: {res.get('error')}"
    f = res["fit"]
    head = (
        f"{spec.name}: {res['regs']} registers, {res['spills']} spilled, "
        f"{res['shared']} B shared, {spec.warps} warps -> {f['programs']} programs an SM "
        f"(registers {f['by_regs']}, shared memory {f['by_shared']})"
    )
    if per_sm is not None:
        over = " (more than fit)" if per_sm > f["programs"] else ""
        head += f"; the tile's per_sm {per_sm}{over}"
    if res.get("wgmma_serialized"):
        head += f"; ptxas serialized its wgmma: {res['wgmma_serialized']}"
    lines = [head]
    for lp in res["loops"]:
        mix = ", ".join(f"{k} {v}" for k, v in list(lp["mix"].items())[:14])
        lines.append(f"  loop of {lp['size']} instructions: {mix}")
    return "\n".join(lines)


def _per_sm(spec: Any) -> int | None:
    """decode_mma's per_sm for a decode_mma spec (what its split aims for): TILE's, or past 16
    rows ROWS_TILE's for the spec's padding."""
    if spec.fn != "_decode_mma_kernel":
        return None
    from aoq.kernels._common import WeightFormat
    from aoq.kernels.decode_mma_tiles import TILE, rows_tile

    wfmt = WeightFormat(spec.constexprs["WFMT"])
    tile = {**TILE[wfmt], **rows_tile(wfmt, spec.constexprs.get("ROWS", 16))}
    return tile.get("per_sm", 4)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="+", help="spec names or globs (aoq.kernels.target_specs)")
    ap.add_argument("--target", default="sm90", choices=sorted(SM_LIMITS))
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--warps", type=int, default=None)
    ap.add_argument("--stages", type=int, default=None)
    ap.add_argument("--maxnreg", type=int, default=None, help="NVIDIA: registers a thread")
    ap.add_argument("--loops", type=int, default=2, help="loops shown, largest first")
    args = ap.parse_args(argv)
    over = dict(kv.split("=", 1) for kv in args.set)
    for spec in pick(args.target, args.names):
        spec = dataclasses.replace(
            spec,
            constexprs={**spec.constexprs, **{k: _value(v) for k, v in over.items()}},
            warps=args.warps or spec.warps,
            stages=args.stages or spec.stages,
            maxnreg=args.maxnreg or spec.maxnreg,
        )
        print(render(spec, look(spec, args.target, args.loops), _per_sm(spec)), flush=True)


if __name__ == "__main__":
    main()
