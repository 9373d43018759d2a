"""The results store: SQLite, written case by case, holding ``records.RunInfo`` / ``Record``.

Default ``reports/results.sqlite``. One table of runs, one of records keyed by
(run_id, case_id, check), so a record cannot be stored twice. A conformance case writes all
its records, ending with its ``cell`` summary, in ONE transaction: a case is in the store
completely or not at all, which is what lets ``--resume`` finish a killed run with no case
lost or duplicated. Several processes (pytest-xdist workers, shards on one host) may write
at once: WAL mode and a busy timeout serialise them.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from aoq.testing.records import Record, RunInfo

SUMMARY_CHECK = "cell"
"""The record that closes a conformance case: its overall status, kernel and reason."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, kind TEXT, started TEXT, git_sha TEXT, host TEXT, backend TEXT,
    device TEXT, arch TEXT, torch TEXT, triton TEXT, extra TEXT, schema INTEGER
);
CREATE TABLE IF NOT EXISTS records (
    run_id TEXT NOT NULL, case_id TEXT NOT NULL, "check" TEXT NOT NULL, status TEXT NOT NULL,
    config TEXT, dtype TEXT, shape TEXT, kernel TEXT, metrics TEXT, tolerance TEXT,
    tolerance_source TEXT, reason TEXT, time TEXT,
    PRIMARY KEY (run_id, case_id, "check")
);
"""
_RUN_FIELDS = [f.name for f in dataclasses.fields(RunInfo)]
_RECORD_FIELDS = [f.name for f in dataclasses.fields(Record)]
_JSON_FIELDS = ("extra", "metrics", "tolerance")


class Store:
    """A SQLite results store (created on first use)."""

    def __init__(
        self, path: str | os.PathLike[str] = "reports/results.sqlite", read_only: bool = False
    ) -> None:
        """``read_only``: for readers such as the report (never creates or changes a file)."""
        self.path = Path(path)
        if read_only:
            uri = f"{self.path.resolve().as_uri()}?mode=ro"
            self.db = sqlite3.connect(uri, uri=True, timeout=60, isolation_level=None)
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        self.db.execute("PRAGMA busy_timeout = 60000")
        self._retry_locked(lambda: self.db.execute("PRAGMA journal_mode = WAL"))
        self._retry_locked(lambda: self.db.executescript(_SCHEMA))

    @staticmethod
    def _retry_locked(step: Callable[[], object], seconds: float = 60.0) -> None:
        """Run ``step``, retrying while another process holds the lock. Switching a new file to
        WAL takes an exclusive lock that busy_timeout does not wait for: two workers creating
        the store at once (pytest-xdist shards) would otherwise fail with 'database is locked'."""
        deadline = time.monotonic() + seconds
        delay = 0.01
        while True:
            try:
                step()
                return
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) or time.monotonic() > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.5)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing ----------------------------------------------------------------------------

    def add_run(self, run: RunInfo, replace: bool = False) -> None:
        """Insert the run's header (a resumed run keeps the header it had unless
        ``replace``: a merged run's header names its shards)."""
        row = dataclasses.asdict(run)
        row["extra"] = json.dumps(row["extra"], sort_keys=True)
        cols = ", ".join(_RUN_FIELDS)
        marks = ", ".join("?" for _ in _RUN_FIELDS)
        self.db.execute(
            f"INSERT OR {'REPLACE' if replace else 'IGNORE'} INTO runs ({cols}) VALUES ({marks})",
            [row[f] for f in _RUN_FIELDS],
        )

    def add_records(self, records: Iterable[Record], replace: bool = False) -> None:
        """All or nothing, in one transaction. A (run, case, check) already stored raises
        sqlite3.IntegrityError unless ``replace`` (merging files that overlap)."""
        rows = []
        for r in records:
            d = dataclasses.asdict(r)
            for f in ("metrics", "tolerance"):
                d[f] = json.dumps(d[f], sort_keys=True, allow_nan=True)
            rows.append([d[f] for f in _RECORD_FIELDS])
        cols = ", ".join(f'"{f}"' for f in _RECORD_FIELDS)
        marks = ", ".join("?" for _ in _RECORD_FIELDS)
        verb = "INSERT OR REPLACE" if replace else "INSERT"
        with self._transaction():
            self.db.executemany(f"{verb} INTO records ({cols}) VALUES ({marks})", rows)

    def _transaction(self) -> Any:
        db = self.db

        class _Tx:
            def __enter__(self) -> None:
                db.execute("BEGIN IMMEDIATE")

            def __exit__(self, exc_type: object, *rest: object) -> None:
                db.execute("ROLLBACK" if exc_type else "COMMIT")

        return _Tx()

    def drop_incomplete(self, run_id: str) -> int:
        """Delete records of cases that have no summary record (none should exist; a crash
        of a writer that bypassed ``add_records`` could leave some). Returns how many."""
        with self._transaction():
            cur = self.db.execute(
                "DELETE FROM records WHERE run_id = ? AND case_id NOT IN (SELECT case_id FROM "
                'records WHERE run_id = ? AND "check" = ?)',
                (run_id, run_id, SUMMARY_CHECK),
            )
        return cur.rowcount

    # -- reading ----------------------------------------------------------------------------

    def run(self, run_id: str) -> RunInfo | None:
        cur = self.db.execute(
            f"SELECT {', '.join(_RUN_FIELDS)} FROM runs WHERE run_id = ?", (run_id,)
        )
        row = cur.fetchone()
        if row is None:
            return None
        d = dict(zip(_RUN_FIELDS, row, strict=True))
        d["extra"] = json.loads(d["extra"] or "{}")
        return RunInfo(**d)

    def runs(self) -> list[RunInfo]:
        ids = [r[0] for r in self.db.execute("SELECT run_id FROM runs ORDER BY started, run_id")]
        return [r for r in (self.run(i) for i in ids) if r is not None]

    def records(self, run_id: str) -> list[Record]:
        cols = ", ".join(f'"{f}"' for f in _RECORD_FIELDS)
        cur = self.db.execute(
            f"SELECT {cols} FROM records WHERE run_id = ? ORDER BY rowid", (run_id,)
        )
        out = []
        for row in cur:
            d = dict(zip(_RECORD_FIELDS, row, strict=True))
            d["metrics"] = json.loads(d["metrics"] or "{}")
            d["tolerance"] = json.loads(d["tolerance"]) if d["tolerance"] else None
            out.append(Record(**d))
        return out

    def complete_cases(self, run_id: str) -> set[str]:
        cur = self.db.execute(
            'SELECT case_id FROM records WHERE run_id = ? AND "check" = ?', (run_id, SUMMARY_CHECK)
        )
        return {r[0] for r in cur}


def complete(records: Iterable[Record]) -> list[Record]:
    """The records of cases that reached their summary record; a case cut off mid-way (a torn
    JSONL tail) is dropped whole, to be run again."""
    records = list(records)
    done = {r.case_id for r in records if r.check == SUMMARY_CHECK}
    return [r for r in records if r.case_id in done]
