"""``python -m reports compare BASE NEW``: a run against its baseline; exits 1 on a regression.

    python -m reports compare BASE NEW [--store reports/results.sqlite] [--runs-dir reports/runs]
                              [--thresholds bench/thresholds.toml] [--alpha 0.01] [--all]
                              [--csv FILE] [--force]

BASE and NEW are run ids (or a unique part of one: ``528bd7``) from the store or the runs
directory, or paths to run files (``.jsonl``). Both must be runs of one kind on one backend
label (``--force`` compares others anyway). Prints regressions and missing rows first, then
improvements and unconfirmed rows (``--all``: also noise, new and ok rows), then a summary.
Exit status: 1 when any finding gates (a regression, a missing row), 0 when none does, 2 on a
usage error. ``--csv`` writes every finding, whatever ``--all`` says. The rules are in
reports/regress.py.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import sys
from collections import Counter
from pathlib import Path

from aoq.testing.records import read_jsonl
from reports.data import Run, load_runs
from reports.regress import (
    STATUS_ORDER,
    Finding,
    ThresholdError,
    compare_runs,
    load_thresholds,
    suite,
)

THRESHOLDS = Path(__file__).resolve().parents[1] / "bench" / "thresholds.toml"
QUIET = ("noise", "new", "ok")
"""Statuses the table leaves out unless --all."""


class UsageError(Exception):
    """Exit status 2: the runs asked for cannot be compared as asked."""


def _resolve(arg: str, runs: dict[str, Run], where: str) -> Run:
    """A run file, or a run id (or a unique part of one) among ``runs``."""
    path = Path(arg)
    if arg.endswith(".jsonl") or path.is_file():
        try:
            return Run(*read_jsonl(path))
        except (OSError, ValueError, TypeError) as e:
            raise UsageError(f"{arg}: not a readable run file ({e})") from e
    if arg in runs:
        return runs[arg]
    hits = sorted(r for r in runs if arg in r)
    if len(hits) == 1:
        return runs[hits[0]]
    if hits:
        more = ", ..." if len(hits) > 5 else ""
        raise UsageError(
            f"{arg!r} matches {len(hits)} runs ({', '.join(hits[:5])}{more}): give more of the id"
        )
    newest = sorted(runs, key=lambda r: runs[r].info.started)[-5:]
    raise UsageError(f"no run {arg!r} in {where}; newest there: {', '.join(newest) or 'none'}")


def _comparable(base: Run, new: Run) -> None:
    if base.info.kind != new.info.kind:
        raise UsageError(
            f"{base.info.run_id} is a {base.info.kind} run and {new.info.run_id} a "
            f"{new.info.kind} run: nothing to compare (--force compares them anyway)"
        )
    if base.label != new.label:
        raise UsageError(
            f"{base.info.run_id} ran on {base.label} and {new.info.run_id} on {new.label}: rows "
            "are compared within one backend (--force compares them anyway)"
        )
    if suite(base) != suite(new):  # legal (the legacy linear rows match), but say it
        print(
            f"note: {base.info.run_id} came from {suite(base) or 'python -m bench'} and "
            f"{new.info.run_id} from {suite(new) or 'python -m bench'}: rows one of them does "
            "not measure show as missing or new",
            file=sys.stderr,
        )


def _number(f: Finding, value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.4g} µs" if f.kind == "speed" else f"{value:.4g}"


def _change(f: Finding) -> str:
    if f.change is None:
        return "-"
    return f"{f.change:+.1%}" if f.kind in ("speed", "step") else f"{f.change:+.3g}"


def table(findings: list[Finding]) -> str:
    """An aligned text table, one finding a line; the reason last, unpadded."""
    head = ("status", "kind", "backend", "row", "base", "new", "change", "p", "reason")
    rows = [
        (
            f.status,
            f.kind,
            f.backend,
            f.row,
            _number(f, f.base),
            _number(f, f.new),
            _change(f),
            "-" if f.p_value is None else f"{f.p_value:.2g}",
            f.reason,
        )
        for f in findings
    ]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head) - 1)]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=False)) + "  " + r[-1]
        for r in [head, *rows]
    )


def summary(base: Run, new: Run, findings: list[Finding]) -> str:
    counts = Counter(f.status for f in findings)
    parts = [f"{counts[s]} {s}" for s in STATUS_ORDER if counts[s]] or ["no rows"]
    gating = sum(f.gating for f in findings)
    verdict = f"FAIL ({gating} gating)" if gating else "OK"
    return (
        f"{new.label} {new.info.kind}: {base.info.run_id} -> {new.info.run_id}: "
        f"{', '.join(parts)}. {verdict}"
    )


def write_csv(path: Path, findings: list[Finding]) -> None:
    fields = [f.name for f in dataclasses.fields(Finding)] + ["gating"]
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as out:
        w = csv.DictWriter(out, fieldnames=fields)
        w.writeheader()
        for f in findings:
            w.writerow({**dataclasses.asdict(f), "gating": f.gating})


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m reports compare",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("base", help="baseline: run id, a unique part of one, or a .jsonl path")
    p.add_argument("new", help="the run to judge: run id, a unique part of one, or a .jsonl path")
    p.add_argument("--store", type=Path, default=Path("reports/results.sqlite"))
    p.add_argument("--runs-dir", type=Path, default=Path("reports/runs"))
    p.add_argument("--thresholds", type=Path, default=THRESHOLDS)
    p.add_argument("--alpha", type=float, help="Mann-Whitney level (default: the file's, 0.01)")
    p.add_argument("--all", action="store_true", help="also list noise, new and ok rows")
    p.add_argument("--csv", type=Path, metavar="FILE", help="write every finding here")
    p.add_argument("--force", action="store_true", help="compare runs of another kind/backend")
    args = p.parse_args(argv)
    try:
        thresholds = load_thresholds(args.thresholds)
        if args.alpha is not None:
            if not 0 < args.alpha < 1:
                raise UsageError(f"--alpha {args.alpha}: must be between 0 and 1")
            thresholds = dataclasses.replace(thresholds, alpha=args.alpha)
        base, new = _load(args.base, args.new, args.store, args.runs_dir)
        if not args.force:
            _comparable(base, new)
    except (UsageError, ThresholdError) as e:
        print(f"compare: {e}", file=sys.stderr)
        return 2
    findings = compare_runs(base, new, thresholds)
    shown = findings if args.all else [f for f in findings if f.status not in QUIET]
    if shown:
        print(table(shown))
    print(summary(base, new, findings))
    if args.csv:
        write_csv(args.csv, findings)
    return 1 if any(f.gating for f in findings) else 0


def _load(base: str, new: str, store: Path, runs_dir: Path) -> tuple[Run, Run]:
    """Both runs; the store and runs directory are read only when an id needs them."""
    runs: dict[str, Run] = {}
    if not all(a.endswith(".jsonl") or Path(a).is_file() for a in (base, new)):
        runs = load_runs(store, runs_dir)
    where = f"{store} or {runs_dir}/"
    return _resolve(base, runs, where), _resolve(new, runs, where)
