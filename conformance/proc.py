"""One worker or checker process of the conformance runner (conformance/runner.py): its
start (``python -m conformance.worker ROLE TASK_FD RESULT_FD``, its own process group, output
to a log), the task it is on, the messages it sends back, and how it died (signal, and the
tail of its log)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

from aoq.testing.matrix import Case
from conformance.checks import CheckResult

ROOT = Path(__file__).resolve().parent.parent


@dataclasses.dataclass
class Task:
    case: Case
    tolerance: dict[str, dict[str, Any]]
    skip: dict[str, str]
    artifacts: Path
    results: list[CheckResult] = dataclasses.field(default_factory=list)
    """The in-process results, kept while the checkpoint waits for a checker."""
    timing: dict[str, float] = dataclasses.field(default_factory=dict)
    handed_out: float | None = None
    retried: bool = False

    def message(self, role: str) -> str:
        if role == "fresh":
            return json.dumps({"id": self.case.id, "dir": str(self.artifacts)})
        return json.dumps(
            {
                "id": self.case.id,
                "case": self.case.to_json(),
                "tolerance": self.tolerance,
                "skip": self.skip,
                "artifacts": str(self.artifacts),
            }
        )


def _signal_text(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"


def log_tail(path: Path, offset: int, lines: int = 14) -> str:
    """What a dead process last said, from ``offset`` on: the start of a faulthandler dump
    (its innermost frame comes first) with the few lines before it (``LLVM ERROR: ...``), else
    the last lines."""
    try:
        with path.open("rb") as f:
            f.seek(offset)
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    noise = ("=== ", "Extension modules:")
    kept = [t for t in text.splitlines() if t.strip() and not t.startswith(noise)]
    starts = [i for i, t in enumerate(kept) if t.startswith(("Fatal Python error", "Thread 0x"))]
    if starts:
        i = starts[0]
        kept = kept[max(0, i - 3) : i + lines]
    else:
        kept = kept[-lines:]
    return "\n".join(kept)[-2000:]


class Proc:
    """One worker or checker process and the task it is on."""

    def __init__(self, slot: int, role: str, env: dict[str, str], log_dir: Path) -> None:
        self.slot, self.role = slot, role
        self.log_path = log_dir / f"{'worker' if role == 'case' else 'fresh'}{slot}.log"
        task_r, task_w = os.pipe()
        res_r, res_w = os.pipe()
        self._log: IO[bytes] = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "conformance.worker", role, str(task_r), str(res_w)],
            pass_fds=(task_r, res_w),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=ROOT,
            start_new_session=True,
        )
        os.close(task_r)
        os.close(res_w)
        self.tasks = os.fdopen(task_w, "w", encoding="utf-8")
        self.fd = res_r
        self.buf = b""
        self.hello: dict[str, Any] | None = None
        self.task: Task | None = None
        self.started = 0.0
        self.log_offset = 0
        self.jobs = 0
        """Tasks this process finished."""

    def send(self, task: Task) -> bool:
        """Hand ``task`` over; False when the process is gone (its pipe is closed)."""
        self.task, self.started = task, time.monotonic()
        self.log_offset = self.log_path.stat().st_size
        try:
            self.tasks.write(task.message(self.role) + "\n")
            self.tasks.flush()
        except OSError:  # it died between two tasks: the task goes to another process
            self.task = None
            return False
        return True

    def messages(self, data: bytes) -> list[dict[str, Any]]:
        self.buf += data
        *lines, self.buf = self.buf.split(b"\n")
        return [json.loads(line) for line in lines if line.strip()]

    def dump_stack(self) -> None:
        """Ask a hung process for its Python stack (faulthandler on SIGUSR1) for the log."""
        try:
            os.kill(self.proc.pid, signal.SIGUSR1)
            time.sleep(0.5)
        except ProcessLookupError:
            pass

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        for f in (self.tasks, self._log):
            with contextlib.suppress(OSError):
                f.close()
        with contextlib.suppress(OSError):
            os.close(self.fd)

    def death(self) -> str:
        self.proc.wait()
        return _signal_text(self.proc.returncode)
