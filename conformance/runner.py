"""Isolation and scheduling: cases run in worker processes, their checkpoints are checked by
fresh processes, and both kinds share the machine.

Two kinds of long-lived processes (``conformance.worker``), each doing one task at a time:

- *workers* (role ``case``) run a case's in-process checks and save its checkpoint;
- *checkers* (role ``fresh``) check saved checkpoints (``conformance.fresh``). A checker had
  done nothing but import aoq before its first checkpoint, as a user's new process would.

A process that dies (abort, segfault: a compiler's ``LLVM ERROR: Cannot select`` ends in
SIGABRT) or runs past the time limit is killed with its process group, its case becomes a
``crash`` with the signal and the tail of its log, a new process takes its place, and the run
goes on. A checker that dies after checking other cases first gets the case once more in a
new process (an earlier case may have broken it), so only the guilty case is marked; a hang
is not retried (it would cost the time limit again).

Scheduling: workers take the cases in the order given (the session puts the slow ones first);
a case that saved a checkpoint queues for a checker and is done when checked. Once every case
is handed out, an idle worker is replaced by a checker while checkpoints wait, so the tail of
a run checks with every process. With ``stop_at`` (``--time-limit``) no case starts that
could not be done in time, and at the limit whatever still runs is killed: those cases are
returned unfinished, for ``--resume``.
"""

from __future__ import annotations

import collections
import os
import selectors
import shutil
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aoq.testing.matrix import GPU_BACKENDS, Case
from conformance.checks import FRESH_CHECKS, CheckResult
from conformance.proc import Proc, Task, log_tail

ROLES = ("case", "fresh")
Done = Callable[[Case, list[CheckResult], dict[str, float]], None]
"""``done(case, results, timing)``; timing: ``seconds`` (in-process checks, as the worker
measured them), ``fresh_seconds`` (checkpoint checks), ``latency`` (handed out -> done)."""
EnvFor = Callable[[int, str], dict[str, str]]
"""``env(slot, role)``: the environment of the process in a slot."""


class RunnerError(RuntimeError):
    """The machinery itself cannot work (a worker that cannot even start)."""


class Runner:
    """Runs tasks on ``workers`` workers and ``checkers`` checkers; ``done`` is called once
    per case, when its last check is in."""

    def __init__(
        self, env: EnvFor, workers: int, checkers: int, timeout: float, scratch: Path
    ) -> None:
        self.env, self.timeout, self.scratch = env, timeout, scratch
        self.workers = workers
        self.logs = scratch / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.sel = selectors.DefaultSelector()
        self.procs: list[Proc] = []
        self.cases: collections.deque[Task] = collections.deque()
        self.checks: collections.deque[Task] = collections.deque()
        self.case_seconds: list[float] = []
        """Wall seconds of each in-process task, as the runner saw it (contention included)."""
        self.fresh_seconds: list[float] = []
        self._to_check = 0
        for slot in range(workers + max(1, checkers)):
            self._start(slot, "case" if slot < workers else "fresh")

    def _start(self, slot: int, role: str) -> Proc:
        p = Proc(slot, role, self.env(slot, role), self.logs)
        self.sel.register(p.fd, selectors.EVENT_READ, p)
        if slot < len(self.procs):
            self.procs[slot] = p
        else:
            self.procs.append(p)
        return p

    def _replace(self, p: Proc, role: str) -> None:
        self.sel.unregister(p.fd)
        p.kill()
        self._start(p.slot, role)

    def counts(self) -> dict[str, int]:
        """How many processes have each role now."""
        return {r: sum(p.role == r for p in self.procs) for r in ROLES}

    def platform(self, wait: float = 300.0) -> dict[str, Any]:
        """The first process's hello: backend, arch, device, versions."""
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            for p in self.procs:
                if p.hello:
                    return p.hello
            self._poll(None, 0.2)
        raise RunnerError(f"no worker said hello within {wait:.0f}s; see {self.logs}")

    # -- estimates ----------------------------------------------------------------------------

    def _means(self) -> tuple[float, float, float] | None:
        """(in-process seconds, checkpoint seconds, share of cases with a checkpoint), from
        what finished so far; None before the first in-process result."""
        if not self.case_seconds:
            return None
        share = self._to_check / max(1, len(self.case_seconds))
        fresh = statistics.fmean(self.fresh_seconds) if self.fresh_seconds else 0.0
        return statistics.fmean(self.case_seconds), fresh, share

    def eta(self) -> float | None:
        """Seconds until the last case is done, at the pace measured so far: the work left
        (cases not started, checkpoints waiting, what runs now) over the processes."""
        means = self._means()
        if means is None:
            return None
        case_s, fresh_s, share = means
        now = time.monotonic()
        running = sum(
            max(0.0, (case_s if p.role == "case" else fresh_s) - (now - p.started))
            for p in self.procs
            if p.task is not None
        )
        work = len(self.cases) * (case_s + share * fresh_s) + len(self.checks) * fresh_s + running
        return work / max(1, len(self.procs))

    def _reserve(self) -> float:
        """How long before ``stop_at`` the last case may start: twice the typical work of a
        case, in-process checks plus checkpoint checks (30 s until measured)."""
        if not self.case_seconds:
            return 30.0
        fresh = statistics.median(self.fresh_seconds) if self.fresh_seconds else 0.0
        return max(10.0, 2 * (statistics.median(self.case_seconds) + fresh))

    # -- events -------------------------------------------------------------------------------

    def _poll(self, done: Done | None, wait: float) -> None:
        for key, _ in self.sel.select(timeout=wait):
            p: Proc = key.data
            if self.procs[p.slot] is not p:
                continue  # replaced while handling an earlier event of this round
            data = os.read(p.fd, 1 << 16)
            if not data:
                self._died(p, done, p.death())
                continue
            for msg in p.messages(data):
                if msg.get("hello"):
                    p.hello = msg
                elif p.task is not None and done is not None:
                    task, p.task = p.task, None
                    p.jobs += 1
                    self._result(p, task, msg, done)
        now = time.monotonic()
        for p in list(self.procs):
            if p.task is not None and now - p.started > self.timeout:
                p.dump_stack()
                self._died(p, done, f"hung: no result after {self.timeout:.0f}s, killed", hung=True)

    def _timing(self, task: Task) -> dict[str, float]:
        if task.handed_out is not None:
            task.timing["latency"] = round(time.monotonic() - task.handed_out, 2)
        return task.timing

    def _finish(self, task: Task, results: list[CheckResult], done: Done) -> None:
        done(task.case, results, self._timing(task))
        shutil.rmtree(task.artifacts, ignore_errors=True)

    def _fresh_checks(self, task: Task) -> list[str]:
        gpu = task.case.backend in GPU_BACKENDS
        return [c for c in FRESH_CHECKS if c != "cross_device" or gpu]

    def _died(self, p: Proc, done: Done | None, why: str, hung: bool = False) -> None:
        task = p.task
        if p.hello is None:
            p.kill()
            tail = log_tail(p.log_path, 0)
            raise RunnerError(f"worker {p.slot} ({p.role}) could not start ({why}):\n{tail}")
        p.kill()
        tail = log_tail(p.log_path, p.log_offset)
        self._replace(p, p.role)
        if task is None or done is None:
            return
        if p.role == "case":
            reason = f"worker {why}" + (f"\n{tail}" if tail else "")
            self._finish(task, [CheckResult("cell", "crash", reason=reason)], done)
        elif p.jobs > 0 and not task.retried and not hung:  # an earlier case may have broken it
            task.retried = True
            self.checks.appendleft(task)
        else:
            reason = f"fresh-process check {why}" + (f"\n{tail}" if tail else "")
            crashed = [CheckResult(c, "crash", reason=reason) for c in self._fresh_checks(task)]
            self._finish(task, task.results + crashed, done)

    def _result(self, p: Proc, task: Task, msg: dict[str, Any], done: Done) -> None:
        seconds = time.monotonic() - p.started
        if msg.get("restart"):  # the GPU is unusable in that process: it gets no more tasks
            self._replace(p, p.role)
        if p.role == "case":
            self.case_seconds.append(seconds)
            if msg.get("seconds") is not None:
                task.timing["seconds"] = msg["seconds"]
            if "error" in msg:
                self._finish(task, [CheckResult("cell", "error", reason=msg["error"])], done)
                return
            task.results = [CheckResult(**r) for r in msg["results"]]
            if msg.get("fresh"):
                self._to_check += 1
                self.checks.append(task)
            else:
                self._finish(task, task.results, done)
            return
        self.fresh_seconds.append(seconds)
        if msg.get("seconds") is not None:
            task.timing["fresh_seconds"] = msg["seconds"]
        if "error" in msg:
            more = [CheckResult(c, "error", reason=msg["error"]) for c in self._fresh_checks(task)]
        else:
            more = [CheckResult(**r) for r in msg["results"]]
        self._finish(task, task.results + more, done)

    # -- the loop -----------------------------------------------------------------------------

    def _rebalance(self) -> None:
        """Every case is out: idle workers become checkers while checkpoints wait."""
        free = sum(p.role == "fresh" and p.task is None for p in self.procs)
        want = len(self.checks) - free
        for p in list(self.procs):
            if want <= 0:
                return
            if p.role == "case" and p.task is None and p.hello is not None:
                self._replace(p, "fresh")
                want -= 1

    def _abandon(self) -> list[Task]:
        """At the time limit: kill what runs; every case not done is returned."""
        left = []
        for p in list(self.procs):
            if p.task is not None:
                left.append(p.task)
                p.task = None
                self._replace(p, p.role)
        left += list(self.checks) + list(self.cases)
        self.checks.clear()
        self.cases.clear()
        for t in left:
            shutil.rmtree(t.artifacts, ignore_errors=True)
        return left

    def run(self, tasks: list[Task], done: Done, stop_at: float | None = None) -> list[Task]:
        """Run ``tasks``; returns those left undone at ``stop_at`` (a time.monotonic()), [] when
        every case got its results. (The pytest entry calls this once per cell: the roles the
        end of the previous call changed are set back first.)"""
        for p in list(self.procs):
            role = "case" if p.slot < self.workers else "fresh"
            if p.role != role and p.task is None:
                self._replace(p, role)
        self.cases.extend(tasks)
        while True:
            now = time.monotonic()
            if stop_at is not None and now >= stop_at:
                return self._abandon()
            hand_out = stop_at is None or now + self._reserve() < stop_at
            if not (self.cases and hand_out):
                self._rebalance()
            for p in self.procs:
                if p.hello is None or p.task is not None:
                    continue
                if p.role == "case" and self.cases and hand_out:
                    task = self.cases.popleft()
                    task.handed_out = task.handed_out or now
                    if not p.send(task):
                        self.cases.appendleft(task)
                        self._died(p, done, p.death())
                elif p.role == "fresh" and self.checks:
                    task = self.checks.popleft()
                    if not p.send(task):
                        self.checks.appendleft(task)
                        self._died(p, done, p.death())
            busy = any(p.task is not None for p in self.procs)
            if not (busy or self.checks or (self.cases and hand_out)):
                left = list(self.cases)
                self.cases.clear()
                return left
            self._poll(done, 0.2)

    def close(self) -> None:
        for p in self.procs:
            self.sel.unregister(p.fd)
            p.kill()
        self.procs = []
