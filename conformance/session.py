"""One run of the matrix on one backend: cases -> workers -> records -> store and JSONL.

The worker reports raw check results; here each becomes a ``Record`` with its effective
tolerance and the profile file it came from, the profile's expectations are applied (a known
failure becomes ``xfail``; an xfail that passes is red), and the case's records plus its
``cell`` summary are written at once to the SQLite store and the run's JSONL. A resumed run
(``--resume``) first reconciles the two, keeps the cases that finished, and runs the rest.

Cases go to the workers in matrix order, the LLM-sized shapes of GPU backends first, so that
none of them (nor its CPU cross-device check) ends a run alone. A run given a deadline
(``--time-limit``) leaves the cases it could not finish in ``Session.left`` for ``--resume``.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import shutil
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from aoq.testing import matrix, profiles
from aoq.testing.matrix import Case
from aoq.testing.records import JsonlWriter, Record, RunInfo, git_sha, now, read_jsonl
from aoq.testing.store import SUMMARY_CHECK, Store, complete
from conformance.checks import ALL_CHECKS, CheckResult
from conformance.progress import RED, Progress, worst
from conformance.runner import Runner, Task

PROFILES = Path(__file__).resolve().parent / "profiles"
TOLERANCED = (
    "output",
    "sqnr",
    "compile",
    "model_cosine",
    "cross_device",
    "pack",
    "save_load",
    "pretrained",
    "prequant_bias",
)


class UsageError(ValueError):
    """The run cannot start as asked (wrong backend for this machine, unknown run id)."""


@dataclasses.dataclass
class Options:
    backend: str
    quick: bool = False
    only: tuple[str, ...] = ()
    shard: tuple[int, int] | None = None
    """(i, n): this process's share of one run; its records go to the shard's own file."""
    shard_filters: bool = True
    """Whether the shard also selects the cases (``--shard``); under pytest-xdist the workers
    get their tests from xdist, so the shard only names the file."""
    inject: tuple[str, ...] = ()
    jobs: int = 1
    """Worker processes (in-process checks)."""
    fresh_jobs: int | None = None
    """Checker processes (checkpoint checks in fresh processes); default half of ``jobs``."""
    timeout: float = 300.0
    store: Path = Path("reports/results.sqlite")
    runs_dir: Path = Path("reports/runs")
    profiles: Path = PROFILES
    run_id: str | None = None
    resume: bool = False
    deadline: float | None = None
    """A time.monotonic() by which the run must end (``--time-limit``); None: no limit."""
    gpus: tuple[str, ...] = ()
    argv: tuple[str, ...] = ()


def worker_env(
    backend: str, index: int, threads: int, gpus: tuple[str, ...], role: str = "case"
) -> dict[str, str]:
    """The environment of a worker (``role`` case) or checker (``fresh``), set before its
    interpreter starts. Every process shares Triton's and inductor's on-disk caches of
    compiled kernels (their defaults, or TRITON_CACHE_DIR / TORCHINDUCTOR_CACHE_DIR as set),
    whose writes are atomic; GPU processes share the GPU each as its own CUDA context."""
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    if role == "fresh":  # its own autotuning, as a new process elsewhere: never the workers'
        env.pop("TRITON_CACHE_AUTOTUNING", None)
    if backend == "interpret":
        env["TRITON_INTERPRET"] = "1"
    if backend in matrix.GPU_BACKENDS and gpus:  # one GPU per worker, as index 0 there
        gpu = gpus[index % len(gpus)]
        for var in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
            env.pop(var, None)
        env["HIP_VISIBLE_DEVICES" if backend == "rocm" else "CUDA_VISIBLE_DEVICES"] = gpu
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    env.update(
        AOQ_CONFORM_BACKEND=backend,
        AOQ_CONFORM_THREADS=str(threads),
        OMP_NUM_THREADS=str(threads),
        TORCHINDUCTOR_COMPILE_THREADS="1",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
    )
    return env


def process_threads(cores: int, workers: int, checkers: int) -> dict[str, int]:
    """torch threads per process: the cores shared out, workers first; checkers get what is
    left (their cross-device checks run CPU matmuls at K=4096)."""
    case = max(1, cores // (workers + checkers))
    return {"case": case, "fresh": max(1, (cores - workers * case) // checkers)}


def slow_first(case: Case) -> int:
    """Sort key: the LLM-sized shapes first (the slowest cases of a GPU run, whose CPU
    cross-device check is a K=4096 matmul on the CPU), then the matrix order. Only those: the
    matrix order interleaves each cell's model case and compiled shapes with light cases, and
    running the heavy kinds all at once was slower (cpu matrix, 2 cores: 86 s against 70 s,
    the model cases 1.5x slower side by side)."""
    return 0 if case.shape is not None and case.shape.kind == "large" else 1


def _jsonl_name(run_id: str, shard: tuple[int, int] | None) -> str:
    return f"{run_id}.jsonl" if shard is None else f"{run_id}.shard-{shard[0]}of{shard[1]}.jsonl"


def new_run_info(hello: dict[str, Any], opts: Options) -> RunInfo:
    stamp = now().replace("-", "").replace(":", "").replace("+0000", "Z")[:15] + "Z"
    run_id = opts.run_id or f"{stamp}-conformance-{opts.backend}-{uuid.uuid4().hex[:6]}"
    extra = {
        "argv": list(opts.argv),
        "quick": opts.quick,
        "only": list(opts.only),
        "shard": list(opts.shard) if opts.shard else None,
        "inject": list(opts.inject),
        "jobs": opts.jobs,
        "cuda": hello.get("cuda"),
        "hip": hello.get("hip"),
        "python": platform.python_version(),
        "features": dict(hello.get("features") or {}),
    }
    return RunInfo(
        run_id=run_id,
        kind="conformance",
        started=now(),
        git_sha=git_sha(Path(__file__).resolve().parent.parent),
        host=platform.node(),
        backend=hello["backend"],
        device=hello["device"],
        arch=hello["arch"],
        torch=hello["torch"],
        triton=hello["triton"],
        extra=extra,
    )


class Session:
    """A run: ``start()`` (workers up, run header written), ``run()``, ``close()``."""

    def __init__(self, opts: Options) -> None:
        self.opts = opts
        self.scratch = Path(tempfile.mkdtemp(prefix="aoq-conform-"))
        self.started = time.monotonic()
        self.records: list[Record] = []
        self.left: list[Case] = []
        """Cases not run because the deadline came first (``--resume`` runs them)."""
        self.cases: list[Case] = []
        self._tol: dict[str, dict[str, profiles.Tolerance]] = {}
        self._tol_err: dict[str, dict[str, str]] = {}

    def _resume_state(self, run_id: str) -> tuple[RunInfo, list[Record]]:
        """Union of the store and the JSONL, complete cases only; the JSONL is rewritten to
        exactly that, so appending the rest leaves no duplicate and no torn line."""
        path = self.opts.runs_dir / _jsonl_name(run_id, self.opts.shard)
        run, from_file = read_jsonl(path) if path.exists() else (None, [])
        stored = self.store.run(run_id)
        run = run or stored
        if run is None:
            raise UsageError(f"--resume {run_id}: no such run in {self.store.path} or {path}")
        self.store.drop_incomplete(run_id)
        merged = {(r.case_id, r.check): r for r in complete(from_file)}
        for r in self.store.records(run_id):
            merged.setdefault((r.case_id, r.check), r)
        records = list(merged.values())
        in_store = self.store.complete_cases(run_id)
        self.store.add_run(run)
        self.store.add_records([r for r in records if r.case_id not in in_store])
        tmp = path.with_suffix(".tmp")
        tmp.unlink(missing_ok=True)
        with JsonlWriter(run, tmp.parent, tmp.name) as w:
            if records:
                w.write_many(records)
        tmp.replace(path)
        return run, records

    def start(self) -> RunInfo:
        o = self.opts
        workers, checkers = max(1, o.jobs), max(1, o.fresh_jobs or o.jobs // 2)
        threads = process_threads(os.cpu_count() or 1, workers, checkers)

        def env(slot: int, role: str) -> dict[str, str]:
            return worker_env(o.backend, slot, threads[role], o.gpus, role)

        self.store = Store(o.store)
        self.runner = Runner(env, workers, checkers, o.timeout, self.scratch)
        hello = self.runner.platform()
        if hello["backend"] != o.backend:
            raise UsageError(
                f"--backend {o.backend}: this machine's worker got {hello['backend']} "
                f"({hello['device']}); run --backend {hello['backend']}, or --backend auto"
            )
        if o.resume:
            assert o.run_id is not None
            self.run, self.records = self._resume_state(o.run_id)
        else:
            self.run = new_run_info(hello, o)
            self.store.add_run(self.run)
        self.writer = JsonlWriter(self.run, o.runs_dir, _jsonl_name(self.run.run_id, o.shard))
        self.features: dict[str, str] = dict(hello.get("features") or {})
        self.profile = profiles.load_profile(o.profiles, o.backend, hello["arch"], self.features)
        cases = matrix.cases(o.backend, o.quick, only=o.only)
        if o.shard and o.shard_filters:
            cases = matrix.shard(cases, *o.shard)
        if o.inject:
            cases = matrix.inject(cases, o.inject)
        self.cases = cases
        return self.run

    # -- per case -------------------------------------------------------------------------

    def _task(self, case: Case) -> Task:
        cfg, shape = case.config.id, case.shape_name
        k = case.shape.k if case.shape is not None else None
        self._tol[case.id], self._tol_err[case.id] = {}, {}
        skip: dict[str, str] = {}
        for check in TOLERANCED:
            try:
                tol = self.profile.tolerance(check, cfg, case.dtype, shape, k)
            except profiles.ProfileError as e:
                self._tol_err[case.id][check] = str(e)
                skip[check] = str(e)
                continue
            if tol is not None:
                self._tol[case.id][check] = tol
        for check in ALL_CHECKS:
            exp = self.profile.expectation(cfg, case.dtype, shape, check)
            if exp is not None and exp.kind == "skip":
                skip[check] = f"{exp.reason} [{exp.source}]"
        if case.shape is not None and not matrix.compiles(case.shape, self.opts.quick):
            kinds = matrix.QUICK_COMPILE_KINDS if self.opts.quick else matrix.COMPILE_KINDS
            skip.setdefault("compile", f"compile parity runs on the {'/'.join(kinds)} shapes")
        safe = case.id.replace("/", "__").replace("+", "_")
        return Task(
            case,
            {c: t.values for c, t in self._tol[case.id].items()},
            skip,
            self.scratch / "cases" / safe,
        )

    def _record(self, case: Case, r: CheckResult) -> Record:
        status, reason = r.status, r.reason
        tol = self._tol.get(case.id, {}).get(r.check)
        if r.check in self._tol_err.get(case.id, {}):
            status, reason = "error", self._tol_err[case.id][r.check]
        exp = self.profile.expectation(case.config.id, case.dtype, case.shape_name, r.check)
        if exp is not None and exp.kind == "xfail" and r.check != SUMMARY_CHECK:
            if status == "fail":
                status, reason = "xfail", f"{exp.reason} [{exp.source}]; {reason}"
            elif status == "pass":
                status = "fail"
                reason = (
                    f"passed, but {exp.source} expects a failure ({exp.reason}): remove that entry"
                )
        return Record(
            run_id=self.run.run_id,
            case_id=case.id,
            check=r.check,
            status=status,
            config=case.config.id,
            dtype=case.dtype,
            shape=case.shape_name,
            kernel=r.kernel,
            metrics=r.metrics,
            tolerance=tol.values if tol else None,
            tolerance_source=tol.source if tol else None,
            reason=reason,
        )

    def finish_case(
        self, case: Case, results: list[CheckResult], timing: dict[str, float] | None = None
    ) -> None:
        records = [self._record(case, r) for r in results if r.check != SUMMARY_CHECK]
        given = next((r for r in results if r.check == SUMMARY_CHECK), None)
        status = given.status if given else worst([r.status for r in records])
        first = next((r for r in records if r.status in RED), None) or next(
            (r for r in records if r.status in ("xfail", "skip")), None
        )
        reason = given.reason if given else (f"{first.check}: {first.reason}" if first else None)
        kernel = next((r.kernel for r in records if r.kernel), None)
        summary = Record(
            run_id=self.run.run_id,
            case_id=case.id,
            check=SUMMARY_CHECK,
            status=status,
            config=case.config.id,
            dtype=case.dtype,
            shape=case.shape_name,
            kernel=kernel,
            metrics={"checks": {r.check: r.status for r in records}, **(timing or {})},
            reason=reason,
        )
        records = [dataclasses.replace(r, time=now()) for r in [*records, summary]]
        self.store.add_records(records)
        self.writer.write_many(records)
        self.records.extend(records)
        self.progress.update(case.id, status, reason)

    def run_cases(self, cases: list[Case] | None = None, quiet: bool = False) -> list[Record]:
        """Run ``cases`` (default: the whole selection) that are not done yet; returns the
        records of the run so far (the pytest entry asks for one cell at a time)."""
        done = {r.case_id for r in self.records if r.check == SUMMARY_CHECK}
        todo = [c for c in (self.cases if cases is None else cases) if c.id not in done]
        todo.sort(key=slow_first)
        label = f"{self.opts.backend}{' quick' if self.opts.quick else ''}"
        self.progress = Progress(len(todo), label, quiet=quiet, eta=self.runner.eta)
        tasks = []
        for case in todo:
            whole = self.profile.expectation(case.config.id, case.dtype, case.shape_name, None)
            if whole is not None:
                reason = f"{whole.reason} [{whole.source}]"
                self.finish_case(case, [CheckResult(SUMMARY_CHECK, "skip", reason=reason)])
                continue
            tasks.append(self._task(case))
        left = self.runner.run(tasks, self.finish_case, self.opts.deadline)
        self.left += [t.case for t in left]
        self.progress.finish()
        return self.records

    def timing(self) -> str:
        """Where the time went, for the end of a run (and the next run's estimate)."""
        r, n = self.runner, self.runner.counts()
        wall = time.monotonic() - self.started
        return (
            f"timing: {wall:.0f}s wall on {n['case']} worker(s) + {n['fresh']} checker(s) at the "
            f"end; in-process checks {sum(r.case_seconds):.0f}s over {len(r.case_seconds)} "
            f"cases, checkpoint checks {sum(r.fresh_seconds):.0f}s over {len(r.fresh_seconds)} "
            "(summed process wall time)"
        )

    def close(self) -> None:
        if hasattr(self, "runner"):
            self.runner.close()
        if hasattr(self, "writer"):
            self.writer.close()
        if hasattr(self, "store"):
            self.store.close()
        shutil.rmtree(self.scratch, ignore_errors=True)
