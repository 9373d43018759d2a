"""Shards of one run -> one run: ``python -m conformance merge RUN_ID``.

Each shard (``--shard i/n --run-id RUN_ID``, on one host or many; or one pytest-xdist worker)
writes ``<runs>/<RUN_ID>.shard-<i>of<n>.jsonl``. Merging checks that every shard 1..n is there
and that no case appears twice, writes ``<RUN_ID>.jsonl`` (the first shard's header, with every
shard's host and device under ``extra.shards``), stores the records and removes the shard
files.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from aoq.testing.records import JsonlWriter, Record, RunInfo, read_jsonl
from aoq.testing.store import SUMMARY_CHECK, Store, complete

_SHARD = re.compile(r"\.shard-(\d+)of(\d+)\.jsonl$")


class MergeError(ValueError):
    """Shards that do not make one whole run: says which shard or case."""


def shard_files(runs_dir: Path, run_id: str) -> dict[int, tuple[int, Path]]:
    out: dict[int, tuple[int, Path]] = {}
    for p in sorted(runs_dir.glob(f"{run_id}.shard-*.jsonl")):
        m = _SHARD.search(p.name)
        if m:
            out[int(m.group(1))] = (int(m.group(2)), p)
    return out


def merge(
    runs_dir: Path,
    run_id: str,
    store_path: Path | None,
    keep: bool = False,
    require_all: bool = True,
) -> Path:
    """``require_all=False`` (pytest-xdist): a worker that got no test wrote no shard."""
    files = shard_files(runs_dir, run_id)
    if not files:
        raise MergeError(f"no shard files {run_id}.shard-*.jsonl in {runs_dir}")
    counts = {n for n, _ in files.values()}
    if len(counts) != 1:
        raise MergeError(f"shards disagree on their count: {sorted(counts)}")
    (n,) = counts
    missing = sorted(set(range(1, n + 1)) - set(files))
    if missing and require_all:
        raise MergeError(f"run {run_id}: shards {missing} of {n} are missing in {runs_dir}")
    header: RunInfo | None = None
    shards: list[dict[str, object]] = []
    records: list[Record] = []
    seen: dict[str, int] = {}
    for i in sorted(files):
        run, recs = read_jsonl(files[i][1])
        header = header or run
        shards.append({"shard": i, "host": run.host, "device": run.device, "arch": run.arch})
        for r in complete(recs):
            if r.check == SUMMARY_CHECK:
                if r.case_id in seen:
                    raise MergeError(f"case {r.case_id} is in shards {seen[r.case_id]} and {i}")
                seen[r.case_id] = i
            records.append(r)
    assert header is not None
    header = dataclasses.replace(header, extra={**header.extra, "shards": shards})
    out = runs_dir / f"{run_id}.jsonl"
    if out.exists():
        raise MergeError(f"{out} exists already; merging would duplicate it")
    tmp = runs_dir / f"{run_id}.merging"
    tmp.unlink(missing_ok=True)
    with JsonlWriter(header, runs_dir, tmp.name) as w:
        w.write_many(records)
    tmp.replace(out)
    if store_path is not None:
        ingest(store_path, header, records)
    if not keep:
        for _, p in files.values():
            p.unlink()
    return out


def ingest(store_path: Path, run: RunInfo, records: list[Record]) -> None:
    """Put a run's records into the store; ones it holds already are replaced by equal ones."""
    with Store(store_path) as store:
        store.add_run(run, replace=True)
        store.add_records(records, replace=True)
