"""Typed result records: one schema for conformance cells, bench rows and training runs.

Every run writes ``reports/runs/<run_id>.jsonl``: the first line is the run header
(``{"type": "run", ...RunInfo}``), then one ``{"type": "record", ...Record}`` per finished
cell or row, appended and flushed at once so a killed run keeps what it did. The renderer
only reads these files (and the SQLite store built from them); it never imports kernels.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import platform
import re
import subprocess
import uuid
from pathlib import Path
from typing import IO, Any

import torch

SCHEMA_VERSION = 1
STATUSES = ("pass", "fail", "skip", "xfail", "error", "crash")
KINDS = ("conformance", "bench", "training", "compile")


@dataclasses.dataclass(frozen=True)
class RunInfo:
    """Where and with what a run happened."""

    run_id: str
    kind: str
    started: str
    git_sha: str
    host: str
    backend: str
    device: str
    """e.g. 'NVIDIA H100 80GB HBM3' or the CPU model."""
    arch: str
    torch: str
    triton: str | None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Driver, clocks, CUDA version, the command line: whatever the producer knows."""
    schema: int = SCHEMA_VERSION


@dataclasses.dataclass(frozen=True)
class Record:
    """One finished check (conformance), one timed row (bench) or one curve (training)."""

    run_id: str
    case_id: str
    """Readable id, e.g. ``int4wo-g128/bf16/cuda/M1-K4096-N4096``."""
    check: str
    """What was checked or measured: 'output', 'sqnr', 'kernel', 'save_load', 'latency', ..."""
    status: str
    config: str | None = None
    dtype: str | None = None
    shape: str | None = None
    kernel: str | None = None
    metrics: dict[str, Any] = dataclasses.field(default_factory=dict)
    tolerance: dict[str, Any] | None = None
    tolerance_source: str | None = None
    reason: str | None = None
    time: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status {self.status!r} is not one of {STATUSES}")


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def git_sha(cwd: str | os.PathLike[str] | None = None) -> str:
    """The commit the code came from: AOQ_GIT_SHA if set (a copy of the tree without its
    history, e.g. on a GPU machine), else ``git rev-parse HEAD`` with ``-dirty`` for
    uncommitted changes to tracked files; ``unknown`` when neither says."""
    override = os.environ.get("AOQ_GIT_SHA", "").strip()
    if override:
        return override
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "--verify", "-q", "HEAD^{commit}"],
            capture_output=True,
            text=True,
            cwd=cwd,
            timeout=10,
        ).stdout.strip()
        if not re.fullmatch(r"[0-9a-f]{40}", sha):
            return "unknown"
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            cwd=cwd,
            timeout=10,
        ).stdout.strip()
        return sha + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return platform.processor() or platform.machine()


def new_run(kind: str, backend: str, device: torch.device, arch: str, **extra: Any) -> RunInfo:
    """A RunInfo for a run starting now on ``device``."""
    if kind not in KINDS:
        raise ValueError(f"kind {kind!r} is not one of {KINDS}")
    try:
        import triton

        triton_version: str | None = triton.__version__
    except ImportError:
        triton_version = None
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return RunInfo(
        run_id=f"{stamp}-{kind}-{backend}-{uuid.uuid4().hex[:6]}",
        kind=kind,
        started=now(),
        git_sha=git_sha(),
        host=platform.node(),
        backend=backend,
        device=device_name(device),
        arch=arch,
        torch=torch.__version__,
        triton=triton_version,
        extra=dict(extra),
    )


class JsonlWriter:
    """Appends a run's header and records to ``<dir>/<run_id>.jsonl``, flushed line by line."""

    def __init__(
        self,
        run: RunInfo,
        directory: str | os.PathLike[str] = "reports/runs",
        name: str | None = None,
    ) -> None:
        """``name``: the file name, default ``<run_id>.jsonl`` (shards of one run use
        ``<run_id>.shard-<i>of<n>.jsonl``). Reopening a file appends to it; a torn last line
        left by a killed writer is cut off first, so appended lines stay whole."""
        self.run = run
        self.path = Path(directory) / (name or f"{run.run_id}.jsonl")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fresh = not self.path.exists()
        if not fresh:
            _cut_torn_tail(self.path)
        self._f: IO[str] = open(self.path, "a", encoding="utf-8")  # noqa: SIM115
        if fresh:
            self._write({"type": "run", **dataclasses.asdict(run)})

    def _write(self, *objs: dict[str, Any]) -> None:
        self._f.write("".join(json.dumps(o, sort_keys=True, allow_nan=True) + "\n" for o in objs))
        self._f.flush()
        os.fsync(self._f.fileno())

    def _line(self, record: Record) -> dict[str, Any]:
        if record.run_id != self.run.run_id:
            raise ValueError(f"record of run {record.run_id} written to {self.run.run_id}")
        rec = record if record.time else dataclasses.replace(record, time=now())
        return {"type": "record", **dataclasses.asdict(rec)}

    def write(self, record: Record) -> None:
        self._write(self._line(record))

    def write_many(self, records: list[Record]) -> None:
        """Several records in one write and one fsync (a conformance case and its summary)."""
        self._write(*(self._line(r) for r in records))

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> JsonlWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _cut_torn_tail(path: Path) -> None:
    """Truncate a file after its last newline (what a writer killed mid-line leaves)."""
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        with open(path, "r+b") as f:
            f.truncate(data.rfind(b"\n") + 1)


def read_jsonl(path: str | os.PathLike[str]) -> tuple[RunInfo, list[Record]]:
    """Parse a run file; a torn last line (a killed writer) is ignored, anything else raises."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    run: RunInfo | None = None
    records: list[Record] = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            if i == len(lines) - 1:
                break
            raise ValueError(f"{path}:{i + 1}: not JSON") from None
        kind = obj.pop("type", None)
        if kind == "run":
            run = RunInfo(**obj)
        elif kind == "record":
            records.append(Record(**obj))
        else:
            raise ValueError(f"{path}:{i + 1}: unknown line type {kind!r}")
    if run is None:
        raise ValueError(f"{path}: no run header")
    return run, records
