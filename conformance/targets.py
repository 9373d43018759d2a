"""The compile-target matrix: every Triton kernel compiled ahead of time for every GPU target
(sm80 ... gfx950) on this machine, no GPU needed.

The compiler driver is the kernels' own, ``python -m aoq.kernels.targets --out DIR`` (it
isolates each compile in a subprocess and writes a ``compile`` run of records); this module
runs it with a time limit, adds the ``cell`` summary record per kernel x target that the
store and the report expect, and says "not available" while that module does not exist.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import platform
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from aoq.testing.records import Record, RunInfo, git_sha, now, read_jsonl

MODULE = "aoq.kernels.targets"
ROOT = Path(__file__).resolve().parent.parent


def _own_run(extra: dict[str, object]) -> RunInfo:
    stamp = now().replace("-", "").replace(":", "")[:15] + "Z"
    return RunInfo(
        run_id=f"{stamp}-compile-cpu-{uuid.uuid4().hex[:6]}",
        kind="compile",
        started=now(),
        git_sha=git_sha(ROOT),
        host=platform.node(),
        backend="cpu",
        device=platform.processor() or platform.machine(),
        arch="cpu",
        torch=_version("torch"),
        triton=_version("triton"),
        extra=extra,
    )


def _version(name: str) -> str:
    try:
        return str(importlib.import_module(name).__version__)
    except ImportError:
        return "-"


def with_summaries(records: list[Record]) -> list[Record]:
    """Each ``<kernel>/<target>`` record followed by its ``cell`` summary (config = kernel,
    shape = target, so the report can lay them out as a kernel x target table)."""
    out = []
    for r in records:
        if r.check == "cell":
            continue
        kernel, _, target = r.case_id.rpartition("/")
        r = dataclasses.replace(r, config=r.config or r.kernel or kernel, shape=r.shape or target)
        out += [r, dataclasses.replace(r, check="cell")]
    return out


def _one(run: RunInfo, status: str, reason: str) -> list[Record]:
    rec = Record(run.run_id, "compile/*/*", "compile", status, config="*", shape="*",
                 reason=reason, time=now())  # fmt: skip
    return [rec, dataclasses.replace(rec, check="cell")]


def run_targets(timeout: float) -> tuple[RunInfo, list[Record]]:
    """Run the driver; a crash, hang or missing driver is one record saying so."""
    if importlib.util.find_spec(MODULE) is None:
        run = _own_run({"module": MODULE})
        return run, _one(run, "skip", f"not available: {MODULE} does not exist yet")
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", MODULE, "--out", tmp]
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
            tail = "\n".join((out.stderr or out.stdout).strip().splitlines()[-8:])
            why = f"{MODULE} exited with status {out.returncode} and wrote no run\n{tail}"
        except subprocess.TimeoutExpired:
            why = f"{MODULE} hung: no result after {timeout:.0f}s"
        files = sorted(Path(tmp).glob("*.jsonl"))
        if not files:
            run = _own_run({"module": MODULE})
            return run, _one(run, "crash", why)
        run, records = read_jsonl(files[0])
    return run, with_summaries(records)
