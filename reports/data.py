"""Reading stored runs and shaping them for the page. Imports no kernels: only the record
schema, the store and pandas.

Runs come from the SQLite store (read only) and from every ``*.jsonl`` under the runs
directory (committed GPU runs, shards not merged yet); a run found in both is one run, and a
record is one (run, case, check). The page shows, per backend and arch, the newest
conformance run (or the runs asked for), and the newest compile-target run.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from aoq.testing.records import Record, RunInfo, read_jsonl
from aoq.testing.store import SUMMARY_CHECK, Store

RED = ("fail", "error", "crash")
ORDER = ("crash", "error", "fail", "xfail", "pass", "skip")


@dataclasses.dataclass
class Run:
    info: RunInfo
    records: list[Record]

    @property
    def label(self) -> str:
        """The matrix column: backend, plus the arch where it says more (sm90, gfx942)."""
        i = self.info
        return i.backend if i.arch in ("cpu", i.backend) else f"{i.backend}-{i.arch}"


def load_runs(store: Path | None, runs_dir: Path | None) -> dict[str, Run]:
    runs: dict[str, Run] = {}
    seen: dict[str, set[tuple[str, str]]] = {}

    def add(info: RunInfo, records: Iterable[Record]) -> None:
        run = runs.setdefault(info.run_id, Run(info, []))
        keys = seen.setdefault(info.run_id, set())
        for r in records:
            if (r.case_id, r.check) not in keys:
                keys.add((r.case_id, r.check))
                run.records.append(r)

    if store is not None and store.exists():
        try:
            with Store(store, read_only=True) as s:
                for info in s.runs():
                    add(info, s.records(info.run_id))
        except sqlite3.DatabaseError as e:
            raise SystemExit(f"{store}: not a results store ({e})") from e
    if runs_dir is not None and runs_dir.is_dir():
        for path in sorted(runs_dir.glob("*.jsonl")):
            info, records = read_jsonl(path)
            add(info, records)
    return runs


def pick(runs: dict[str, Run], wanted: Iterable[str] = ()) -> tuple[list[Run], Run | None]:
    """(conformance runs to show, compile-target run). Each backend/arch column shows its
    newest run, unless a run of ``wanted`` claims it."""
    wanted = list(wanted)
    missing = [w for w in wanted if w not in runs]
    if missing:
        raise SystemExit(f"runs not found in the store or runs directory: {missing}")
    by_age = sorted(runs.values(), key=lambda r: r.info.started)
    columns: dict[str, Run] = {}
    target: Run | None = None
    for run in by_age + [runs[w] for w in wanted]:
        if run.info.kind == "conformance":
            columns[run.label] = run
        elif run.info.kind == "compile":
            target = run
    shown = sorted(columns.values(), key=lambda r: (r.info.backend != "cpu", r.label))
    return shown, target


def frame(runs: list[Run]) -> pd.DataFrame:
    """One row per record of the shown runs, with the run's column label."""
    rows = []
    for run in runs:
        for r in run.records:
            rows.append({**dataclasses.asdict(r), "backend": run.label})
    cols = [f.name for f in dataclasses.fields(Record)] + ["backend"]
    return pd.DataFrame(rows, columns=cols)


def worst(statuses: Iterable[str]) -> str:
    present = set(statuses)
    for s in ORDER:
        if s in present and s != "skip":
            return s
    return "skip"


def cells(df: pd.DataFrame) -> pd.DataFrame:
    """One row per config x dtype x backend: its worst case status and counts by status."""
    summary = df[df["check"] == SUMMARY_CHECK]
    if summary.empty:
        return pd.DataFrame(columns=["config", "dtype", "backend", "status", "n", "counts"])
    grouped = summary.groupby(["config", "dtype", "backend"], sort=False)["status"]
    out = grouped.agg(
        status=worst,
        n="size",
        counts=lambda s: dict(s.value_counts()),
    ).reset_index()
    return out


def csv_text(df: pd.DataFrame) -> str:
    """The shown records as CSV (metrics and tolerance as JSON text)."""
    if df.empty:
        return ""
    out = df.copy()
    for col in ("metrics", "tolerance"):
        out[col] = out[col].map(lambda v: "" if v is None else json.dumps(v, sort_keys=True))
    return out.to_csv(index=False)
