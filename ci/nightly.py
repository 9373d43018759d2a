"""The nightly's steps that are more than one command (ci/workflows/nightly.yml). Standard
library only: the GPU jobs call it with the host's python3 before any venv exists.

    python -m ci.nightly suite -- make conform BACKEND=cuda CONTAINER=1
        run a suite; red cases (exit 1) are results the report job judges, not a job failure;
        anything else non-zero (a broken run, a container failure, a time-out) fails the step
    python -m ci.nightly stage --out DIR
        copy this job's new run files (reports/runs/*.jsonl that git does not track) to DIR
    python -m ci.nightly gate --new DIR --history DIR --backends cpu,cuda,rocm
        missing data (a backend without a conformance or bench run holding records) and
        `python -m reports compare LAST NEW` for each new run against the last nightly's run
        of its kind, backend and arch; exit 1 if either fails
    python -m ci.nightly merge --new DIR --history DIR
        add the new run files to the history folder (the nightly-history branch's runs/)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

RESULT_CODES = (0, 1)
"""Suite exit statuses that mean "the run finished": all green, or some cases red."""
EXPECTED_KINDS = ("conformance", "bench")
"""What every backend's job must deliver each night; anything missing fails the nightly."""


@dataclass(frozen=True)
class RunFile:
    path: Path
    run_id: str
    kind: str
    backend: str
    arch: str
    started: str
    records: int

    @property
    def key(self) -> tuple[str, str, str]:
        """What a run is compared with: the last nightly's run of the same kind on the same
        backend and arch (another GPU model is not a baseline)."""
        return (self.kind, self.backend, self.arch)


def read_run(path: Path) -> RunFile | None:
    """The run header of a JSONL run file and its record count; None if it has no header."""
    lines = path.read_text().splitlines()
    try:
        head = json.loads(lines[0]) if lines else {}
    except json.JSONDecodeError:
        return None
    if head.get("type") != "run":
        return None
    records = sum(1 for line in lines[1:] if '"type": "record"' in line)
    return RunFile(
        path,
        str(head.get("run_id", path.stem)),
        str(head.get("kind", "")),
        str(head.get("backend", "")),
        str(head.get("arch") or head.get("backend", "")),
        str(head.get("started", "")),
        records,
    )


def read_runs(folder: Path) -> list[RunFile]:
    runs = (read_run(p) for p in sorted(folder.rglob("*.jsonl")))
    return [r for r in runs if r is not None]


def suite(command: list[str]) -> int:
    """Run ``command``; 0 when it finished (green or red), its status otherwise."""
    code = subprocess.call(command)
    if code in RESULT_CODES:
        if code:
            print(f"::notice::{' '.join(command)}: red cases (exit 1); the report job judges them")
        return 0
    print(f"::error::{' '.join(command)} exited {code}: the run did not finish")
    return code


def new_run_files(runs_dir: Path) -> list[Path]:
    """Run files under ``runs_dir`` that git does not track: the ones this checkout made."""
    tracked = subprocess.run(
        ["git", "ls-files", "-z", "--", str(runs_dir)], capture_output=True, check=True
    ).stdout.decode()
    known = {Path(p).resolve() for p in tracked.split("\0") if p}
    return [p for p in sorted(runs_dir.glob("*.jsonl")) if p.resolve() not in known]


def stage(runs_dir: Path, out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    found = new_run_files(runs_dir)
    for path in found:
        shutil.copy2(path, out / path.name)
        print(f"staged {path.name}")
    if not found:
        print(f"::error::no new run file under {runs_dir}: this job produced no data")
        return 1
    return 0


def missing(new: Iterable[RunFile], backends: Iterable[str]) -> list[str]:
    """A line per (kind, backend) the night should have delivered and did not."""
    have = {(r.kind, r.backend) for r in new if r.records}
    return [
        f"missing data: no {kind} run with records from {backend}"
        for backend in backends
        for kind in EXPECTED_KINDS
        if (kind, backend) not in have
    ]


def baseline(run: RunFile, history: Iterable[RunFile]) -> RunFile | None:
    """The last nightly's run to compare ``run`` with: same key, started before it."""
    older = [h for h in history if h.key == run.key and h.started < run.started]
    return max(older, key=lambda h: h.started, default=None)


def compare_command(base: RunFile, new: RunFile) -> list[str]:
    """The one place that knows reports' compare interface: BASE and NEW run files."""
    return [sys.executable, "-m", "reports", "compare", str(base.path), str(new.path)]


def gate(new_dir: Path, history_dir: Path, backends: list[str]) -> int:
    new, history = read_runs(new_dir), read_runs(history_dir)
    failed = missing(new, backends)
    notes = []
    for run in new:
        base = baseline(run, history)
        if base is None:
            notes.append(f"{run.run_id}: no earlier nightly run of {'/'.join(run.key)}")
            continue
        print(f"== compare {base.run_id} -> {run.run_id}", flush=True)
        code = subprocess.call(compare_command(base, run))
        line = f"{run.run_id} vs {base.run_id}"
        if code:
            failed.append(f"{line}: regression or missing rows (compare exited {code})")
        else:
            notes.append(f"{line}: ok")
    report = "\n".join(f"- {line}" for line in failed + notes) or "- no runs"
    print(report)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a") as f:
            f.write(f"## Nightly gate: {'FAILED' if failed else 'passed'}\n\n{report}\n")
    return 1 if failed else 0


def merge(new_dir: Path, history_dir: Path) -> int:
    history_dir.mkdir(parents=True, exist_ok=True)
    for run in read_runs(new_dir):
        dest = history_dir / run.path.name
        if not dest.exists():
            shutil.copy2(run.path, dest)
            print(f"history += {run.path.name}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ci.nightly",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="step", required=True)
    p = sub.add_parser("suite")
    p.add_argument("command", nargs=argparse.REMAINDER)
    p = sub.add_parser("stage")
    p.add_argument("--runs-dir", type=Path, default=Path("reports/runs"))
    p.add_argument("--out", type=Path, required=True)
    p = sub.add_parser("gate")
    p.add_argument("--new", type=Path, required=True)
    p.add_argument("--history", type=Path, required=True)
    p.add_argument("--backends", default="cpu,cuda,rocm")
    p = sub.add_parser("merge")
    p.add_argument("--new", type=Path, required=True)
    p.add_argument("--history", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.step == "suite":
        command = args.command[1:] if args.command[:1] == ["--"] else args.command
        if not command:
            parser.error("suite needs a command after --")
        return suite(command)
    if args.step == "stage":
        return stage(args.runs_dir, args.out)
    if args.step == "gate":
        return gate(args.new, args.history, [b for b in args.backends.split(",") if b])
    return merge(args.new, args.history)


if __name__ == "__main__":
    sys.exit(main())
