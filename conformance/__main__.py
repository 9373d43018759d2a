"""``python -m conformance``: run the conformance matrix, print its summary, write the report.

    python -m conformance [--backend auto|cpu|cuda|rocm|interpret] [--quick]
                          [--only GLOB ...] [--shard i/n] [--run-id ID] [--jobs N]
                          [--fresh-jobs N] [--timeout S] [--time-limit S]
                          [--store PATH] [--runs-dir DIR] [--report PATH]
    python -m conformance --resume RUN_ID          finish a run that was killed or cut
    python -m conformance merge RUN_ID             join the shards of a run

``auto`` runs the GPU backend of this machine, or, with no GPU, the cpu matrix plus the quick
interpreter subset; both add the compile-target matrix. Every case runs in a worker process
(a crash or hang becomes a ``crash`` case), its checkpoint is checked by a fresh process, it
is written at once to the SQLite store and the run's JSONL, and the report is rendered at the
end. Exit status: 1 iff a case is red (fail, error, crash), 2 for bad usage, 3 when
``--time-limit`` left cases to ``--resume`` (and none is red).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from pathlib import Path

from aoq.testing import matrix
from aoq.testing.profiles import ProfileError
from aoq.testing.records import STATUSES, JsonlWriter, Record, read_jsonl
from aoq.testing.store import Store
from conformance import merge as merge_mod
from conformance.progress import RED, red_list, summary_table
from conformance.runner import RunnerError
from conformance.session import PROFILES, Options, Session, UsageError


def _gpus() -> tuple[str, ...]:
    import torch

    names = (
        ("HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")
        if torch.version.hip
        else ("CUDA_VISIBLE_DEVICES",)
    )
    visible = next((os.environ[n] for n in names if os.environ.get(n)), "")
    if visible:
        return tuple(v.strip() for v in visible.split(",") if v.strip())
    return tuple(str(i) for i in range(torch.cuda.device_count()))


def _plan(backend: str, quick: bool) -> list[tuple[str, bool]]:
    """(backend, quick) parts of one invocation."""
    if backend != "auto":
        return [(backend, quick)]
    import torch

    if torch.cuda.device_count() > 0:
        return [("rocm" if torch.version.hip else "cuda", quick)]
    return [("cpu", quick), ("interpret", True)]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m conformance",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--backend", default="auto", choices=["auto", *matrix.BACKENDS])
    p.add_argument("--quick", action="store_true", help="the CI subset")
    p.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="GLOB",
        help="run cases whose id matches (repeatable), e.g. 'int8wo/*/cpu/M1-*'",
    )
    p.add_argument("--shard", help="i/n: this machine's share (whole cells)")
    p.add_argument("--run-id", help="name the run (shards of one run share it)")
    p.add_argument("--resume", metavar="RUN_ID", help="finish a killed run")
    p.add_argument(
        "--jobs",
        type=int,
        help="worker processes (default: the cores, at most 8; with GPUs half the cores, at "
        "most 8 per GPU, sharing the GPUs round robin)",
    )
    p.add_argument(
        "--fresh-jobs",
        type=int,
        help="checker processes, which check saved checkpoints in fresh processes (default: "
        "half of --jobs, at least 1; idle workers become checkers at the end of a run)",
    )
    p.add_argument(
        "--timeout", type=float, default=300.0, help="seconds per case and per checkpoint check"
    )
    p.add_argument(
        "--time-limit",
        type=float,
        metavar="S",
        help="end within S seconds of starting: no case starts that could not finish, what "
        "still runs at S is dropped, and --resume RUN_ID finishes the run (exit status 3)",
    )
    p.add_argument("--store", type=Path, default=Path("reports/results.sqlite"))
    p.add_argument("--runs-dir", type=Path, default=Path("reports/runs"))
    p.add_argument("--report", type=Path, default=Path("reports/site/index.html"))
    p.add_argument("--no-report", action="store_true")
    p.add_argument("--no-targets", action="store_true", help="skip the compile-target matrix")
    p.add_argument("--profiles", type=Path, default=PROFILES, help="tolerance profile directory")
    p.add_argument("--inject", action="append", default=[], help=argparse.SUPPRESS)
    return p


def _check_backend(backend: str) -> None:
    """A GPU backend this machine's torch cannot serve is a usage error, said up front."""
    import torch

    if backend not in matrix.GPU_BACKENDS:
        return
    if torch.cuda.device_count() == 0:
        raise UsageError(f"--backend {backend}: no GPU visible to torch {torch.__version__} here")
    vendor = "rocm" if torch.version.hip else "cuda"
    if backend != vendor:
        raise UsageError(f"--backend {backend}: this torch is built for {vendor}")


def default_jobs(backend: str, cores: int, gpus: int) -> int:
    """Worker processes. CPU backends: one per core, at most 8. GPU backends: several per GPU
    (each its own CUDA context, a few hundred MB of GPU memory; the cases are small, so a GPU
    is mostly idle while one process compiles or checks on the CPU), half the cores in all,
    at most 8 per GPU: 8 on a 16-core, 1-GPU machine, which with the 4 checkers leaves cores
    for the checkers' CPU matmuls and the Triton and inductor compiles."""
    if backend in matrix.GPU_BACKENDS:
        return max(1, gpus, min(cores // 2, 8 * gpus))
    return max(1, min(8, cores))


def _options(args: argparse.Namespace, backend: str, quick: bool, argv: list[str]) -> Options:
    _check_backend(backend)
    gpus = _gpus() if backend in matrix.GPU_BACKENDS else ()
    jobs = args.jobs or default_jobs(backend, os.cpu_count() or 1, len(gpus))
    return Options(
        backend=backend,
        quick=quick,
        only=tuple(args.only),
        shard=matrix.parse_shard(args.shard) if args.shard else None,
        inject=tuple(args.inject),
        jobs=jobs,
        fresh_jobs=args.fresh_jobs,
        timeout=args.timeout,
        store=args.store,
        runs_dir=args.runs_dir,
        run_id=args.run_id,
        gpus=gpus,
        profiles=args.profiles,
        argv=tuple(argv),
        deadline=args.deadline,
    )


def _resume_options(args: argparse.Namespace, argv: list[str]) -> Options:
    """The options a run was started with, from its header (store or JSONL)."""
    run = None
    if args.store.exists():
        with Store(args.store) as store:
            run = store.run(args.resume)
    if run is None:
        files = sorted(args.runs_dir.glob(f"{args.resume}*.jsonl"))
        if not files:
            raise UsageError(f"--resume {args.resume}: not in {args.store} nor {args.runs_dir}")
        run, _ = read_jsonl(files[0])
    if run.kind != "conformance":
        raise UsageError(f"--resume {args.resume}: a {run.kind} run; only conformance runs resume")
    x = run.extra
    ns = argparse.Namespace(
        **{
            **vars(args),
            "only": x.get("only") or [],
            "inject": x.get("inject") or [],
            "run_id": run.run_id,
            "shard": "/".join(map(str, x["shard"])) if x.get("shard") else None,
        }
    )
    opts = _options(ns, run.backend, bool(x.get("quick")), argv)
    opts.resume = True
    return opts


def _run_part(opts: Options) -> tuple[list[Record], int]:
    """The records of one run, and how many of its cases are left for --resume."""
    session = Session(opts)
    try:
        run = session.start()
        what = "resuming" if opts.resume else "running"
        n = session.runner.counts()
        print(
            f"{what} {run.run_id}: {len(session.cases)} cases on {run.backend}-{run.arch} "
            f"({run.device}), {n['case']} worker(s) + {n['fresh']} checker(s)",
            file=sys.stderr,
            flush=True,
        )
        for feature, why in session.features.items():
            print(f"platform feature {feature} ({run.backend}+{feature}.toml read): {why}",
                  file=sys.stderr, flush=True)  # fmt: skip
        records = session.run_cases()
        print(session.timing(), file=sys.stderr, flush=True)
        left = len(session.left)
    finally:
        session.close()
    print(f"\n== {run.run_id} ({run.backend}-{run.arch}, {run.device})")
    print(summary_table(records))
    red = red_list(records)
    if red:
        print(red)
    print(f"records: {opts.store} and {opts.runs_dir}/{run.run_id}*.jsonl", flush=True)
    if left:
        print(
            f"INCOMPLETE: the time limit left {left} of {len(session.cases)} cases; finish with\n"
            f"  python -m conformance --resume {run.run_id} --store {opts.store} "
            f"--runs-dir {opts.runs_dir}",
            flush=True,
        )
    return records, left


def _targets(args: argparse.Namespace) -> list[Record]:
    from conformance.merge import ingest
    from conformance.targets import run_targets

    run, records = run_targets(timeout=max(args.timeout, 600.0))
    ingest(args.store, run, records)
    with JsonlWriter(run, args.runs_dir) as w:
        w.write_many(records)
    cells = [r for r in records if r.check == "cell"]
    counts = Counter(r.status for r in cells)
    first = cells[0].reason if len(cells) == 1 and cells[0].reason else ""
    print(
        f"\n== compile targets ({run.run_id}): "
        + ", ".join(f"{s} {counts[s]}" for s in STATUSES if counts[s])
        + (f" ({first})" if first else "")
    )
    return records


def _report(args: argparse.Namespace, wanted: list[str]) -> bool:
    """Render the page; False (and why) if it could not be, the results being safe anyway."""
    try:
        from reports.render import render_report
    except ImportError as e:
        print(f"report not rendered ({e}); run `python -m reports` where reports/ exists")
        return True
    try:
        path = render_report(args.store, args.runs_dir, args.report, wanted)
    except Exception as e:  # the records are stored; a broken renderer must not hide them
        print(f"report FAILED to render: {type(e).__name__}: {e}", file=sys.stderr)
        return False
    print(f"report: {path.resolve().as_uri()}")
    return True


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--container" in argv:  # the same run inside the backend's pinned image (ci/container.py)
        from ci.container import conformance_in_container

        return conformance_in_container([a for a in argv if a != "--container"])
    if argv[:1] == ["merge"]:
        mp = argparse.ArgumentParser(prog="python -m conformance merge")
        mp.add_argument("run_id")
        mp.add_argument("--runs-dir", type=Path, default=Path("reports/runs"))
        mp.add_argument("--store", type=Path, default=Path("reports/results.sqlite"))
        m = mp.parse_args(argv[1:])
        try:
            print(merge_mod.merge(m.runs_dir, m.run_id, m.store))
        except merge_mod.MergeError as e:
            print(f"merge: {e}", file=sys.stderr)
            return 2
        return 0
    args = _parser().parse_args(argv)
    args.deadline = None if args.time_limit is None else time.monotonic() + args.time_limit
    try:
        if args.resume:
            parts = [_resume_options(args, argv)]
        else:
            parts = [_options(args, b, q, argv) for b, q in _plan(args.backend, args.quick)]
    except ValueError as e:  # UsageError included
        print(f"conformance: {e}", file=sys.stderr)
        return 2
    records: list[Record] = []
    left = 0
    try:
        for opts in parts:
            got, n = _run_part(opts)
            records += got
            left += n
    except (UsageError, RunnerError, ProfileError) as e:
        print(f"conformance: {e}", file=sys.stderr)
        return 2
    if args.backend == "auto" and not args.no_targets and not args.resume and not left:
        records += _targets(args)
    rendered = args.no_report or _report(args, list(dict.fromkeys(r.run_id for r in records)))
    red = sum(r.check == "cell" and r.status in RED for r in records)
    verdict = f"RED: {red} case(s) failed" if red else "all cases green"
    print(f"\n{verdict}{f' so far; {left} case(s) left to --resume' if left else ''}")
    return 1 if red else (3 if left else (0 if rendered else 2))


if __name__ == "__main__":
    sys.exit(main())
