"""Isolation: cases run in worker processes, checkpoints are checked by fresh processes.

The runner keeps ``jobs`` workers (``conformance.worker``) busy, one case at a time each. A
worker that dies (abort, segfault: a compiler's ``LLVM ERROR: Cannot select`` ends in
SIGABRT) or runs past the time limit is killed with its process group, its case becomes a
``crash`` with the signal and the tail of its log, a new worker takes its place, and the run
goes on. Cases that saved a checkpoint wait for a *fresh* process (``conformance.fresh``) that
checks them in batches, so one interpreter start serves many cases; a batch whose process
crashes is retried one case per process, so only the guilty case is marked.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from aoq.testing.matrix import Case
from conformance.checks import FRESH_CHECKS, CheckResult

ROOT = Path(__file__).resolve().parent.parent
Done = Callable[[Case, list[CheckResult], float | None], None]


class RunnerError(RuntimeError):
    """The machinery itself cannot work (a worker that cannot even start)."""


@dataclasses.dataclass
class Task:
    case: Case
    tolerance: dict[str, dict[str, Any]]
    skip: dict[str, str]
    artifacts: Path
    seconds: float | None = None
    """Worker time of the in-process checks, once known."""

    def message(self) -> str:
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


def _tail(path: Path, offset: int, lines: int = 14) -> str:
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


class Worker:
    def __init__(self, index: int, env: dict[str, str], log_dir: Path) -> None:
        self.index = index
        self.log_path = log_dir / f"worker{index}.log"
        task_r, task_w = os.pipe()
        res_r, res_w = os.pipe()
        self._log: IO[bytes] = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "conformance.worker", str(task_r), str(res_w)],
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

    def send(self, task: Task) -> None:
        self.task, self.started = task, time.monotonic()
        self.log_offset = self.log_path.stat().st_size
        self.tasks.write(task.message() + "\n")
        self.tasks.flush()

    def messages(self, data: bytes) -> list[dict[str, Any]]:
        self.buf += data
        *lines, self.buf = self.buf.split(b"\n")
        return [json.loads(line) for line in lines if line.strip()]

    def dump_stack(self) -> None:
        """Ask a hung worker for its Python stack (faulthandler on SIGUSR1) for the log."""
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


@dataclasses.dataclass
class _Batch:
    items: list[tuple[Task, list[CheckResult]]]
    proc: subprocess.Popen[bytes]
    results: Path
    log: Path
    started: float


class Runner:
    """Runs tasks on ``jobs`` workers; ``done(case, results)`` is called once per case."""

    def __init__(
        self,
        envs: list[dict[str, str]],
        timeout: float,
        scratch: Path,
        fresh_batch: int = 24,
    ) -> None:
        self.envs, self.timeout, self.scratch = envs, timeout, scratch
        self.fresh_batch = fresh_batch
        self.logs = scratch / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.sel = selectors.DefaultSelector()
        self.workers: list[Worker] = []
        self._batches = 0
        self._waiting: list[tuple[Task, list[CheckResult]]] = []
        self._retry: list[tuple[Task, list[CheckResult]]] = []
        for i in range(len(envs)):
            self._start(i)

    def _start(self, index: int) -> Worker:
        w = Worker(index, self.envs[index], self.logs)
        self.sel.register(w.fd, selectors.EVENT_READ, w)
        if index < len(self.workers):
            self.workers[index] = w
        else:
            self.workers.append(w)
        return w

    def _replace(self, w: Worker) -> None:
        self.sel.unregister(w.fd)
        w.kill()
        self._start(w.index)

    def platform(self, wait: float = 300.0) -> dict[str, Any]:
        """The first worker's hello: backend, arch, device, versions."""
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            for w in self.workers:
                if w.hello:
                    return w.hello
            self._poll(None, 0.2)
        raise RunnerError(f"no worker said hello within {wait:.0f}s; see {self.logs}")

    def _poll(self, done: Done | None, wait: float) -> None:
        for key, _ in self.sel.select(timeout=wait):
            w: Worker = key.data
            data = os.read(w.fd, 1 << 16)
            if not data:
                self._died(w, done, w.death())
                continue
            for msg in w.messages(data):
                if msg.get("hello"):
                    w.hello = msg
                elif w.task is not None and done is not None:
                    task, w.task = w.task, None
                    self._result(task, msg, done)
        for w in list(self.workers):
            if w.task is not None and time.monotonic() - w.started > self.timeout:
                w.dump_stack()
                self._died(w, done, f"hung: no result after {self.timeout:.0f}s, killed")

    def _died(self, w: Worker, done: Done | None, why: str) -> None:
        task = w.task
        if w.hello is None:
            w.kill()
            tail = _tail(w.log_path, 0)
            raise RunnerError(f"worker {w.index} could not start ({why}):\n{tail}")
        w.kill()
        tail = _tail(w.log_path, w.log_offset)
        self._replace(w)
        if task is not None and done is not None:
            reason = f"worker {why}" + (f"\n{tail}" if tail else "")
            done(task.case, [CheckResult("cell", "crash", reason=reason)], None)

    def _result(self, task: Task, msg: dict[str, Any], done: Done) -> None:
        if "error" in msg:
            done(task.case, [CheckResult("cell", "error", reason=msg["error"])], None)
            return
        results = [CheckResult(**r) for r in msg["results"]]
        task.seconds = msg.get("seconds")
        if msg.get("fresh"):
            self._waiting.append((task, results))
        else:
            done(task.case, results, task.seconds)

    # -- fresh-process batches ----------------------------------------------------------------

    def _start_batch(self, items: list[tuple[Task, list[CheckResult]]]) -> _Batch:
        self._batches += 1
        results = self.scratch / f"fresh{self._batches}.jsonl"
        log = self.logs / f"fresh{self._batches}.log"
        dirs = [str(t.artifacts) for t, _ in items]
        with log.open("wb") as f:
            proc = subprocess.Popen(
                [sys.executable, "-m", "conformance.fresh", str(results), *dirs],
                stdout=f,
                stderr=subprocess.STDOUT,
                env=self.envs[0],
                cwd=ROOT,
                start_new_session=True,
            )
        return _Batch(items, proc, results, log, time.monotonic())

    def _finish_batch(self, b: _Batch, done: Done, timed_out: bool) -> None:
        got: dict[str, list[CheckResult]] = {}
        if b.results.exists():
            for line in b.results.read_text().splitlines():
                if line.strip():
                    msg = json.loads(line)
                    got[msg["case_id"]] = [CheckResult(**r) for r in msg["results"]]
        missing = []
        for task, results in b.items:
            if task.case.id in got:
                done(task.case, results + got[task.case.id], task.seconds)
                shutil.rmtree(task.artifacts, ignore_errors=True)
            else:
                missing.append((task, results))
        if not missing:
            return
        if len(missing) > 1 or len(b.items) > 1:  # retry alone: only the guilty case crashes
            self._retry.extend(missing)
            return
        task, results = missing[0]
        why = "hung" if timed_out else _signal_text(b.proc.returncode)
        tail = _tail(b.log, 0)
        reason = f"fresh-process check {why}" + (f"\n{tail}" if tail else "")
        checks = [
            c for c in FRESH_CHECKS if c != "cross_device" or task.case.backend in ("cuda", "rocm")
        ]
        done(
            task.case,
            results + [CheckResult(c, "crash", reason=reason) for c in checks],
            task.seconds,
        )
        shutil.rmtree(task.artifacts, ignore_errors=True)

    # -- the loop -------------------------------------------------------------------------

    def run(self, tasks: list[Task], done: Done) -> None:
        queue = collections.deque(tasks)
        batch: _Batch | None = None
        while True:
            for w in self.workers:
                if w.hello and w.task is None and queue:
                    w.send(queue.popleft())
            busy = any(w.task is not None for w in self.workers)
            if batch is None:
                if self._retry:
                    batch = self._start_batch([self._retry.pop(0)])
                elif self._waiting and (
                    len(self._waiting) >= self.fresh_batch or not (queue or busy)
                ):
                    items, self._waiting = (
                        self._waiting[: self.fresh_batch],
                        self._waiting[self.fresh_batch :],
                    )
                    batch = self._start_batch(items)
            if batch is not None:
                limit = self.timeout + 20 * len(batch.items)
                late = time.monotonic() - batch.started > limit
                if late:
                    os.killpg(batch.proc.pid, signal.SIGKILL)
                if batch.proc.poll() is not None or late:
                    batch.proc.wait()
                    self._finish_batch(batch, done, late)
                    batch = None
                    continue
            if not (queue or busy or batch or self._waiting or self._retry):
                return
            self._poll(done, 0.1 if batch else 0.5)

    def close(self) -> None:
        for w in self.workers:
            self.sel.unregister(w.fd)
            w.kill()
        self.workers = []
