"""Reading stored runs and shaping them for the pages. Imports no kernels: only the record
schema, the store and pandas.

Runs come from the SQLite store (read only) and from every ``*.jsonl`` under the runs
directory (committed GPU runs, shards not merged yet); a run found in both is one run, and a
record is one (run, case, check). The pages show, per backend and arch, the newest run of
each kind (or the runs asked for). Bench runs written before ``aoq.testing.benchrows``
(``bench/linear_speed.py`` ids) are adapted to that schema by :func:`bench_records`.
"""

from __future__ import annotations

import dataclasses
import math
import re
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
        """The matrix column: backend, plus the arch where it says more (sm90, gfx942), plus
        for speed runs the GPU model (an H100 and an H200 share sm90 and its tolerances, not
        their timings: each bench run's baseline is the same model's)."""
        i = self.info
        label = i.backend if i.arch in ("cpu", i.backend) else f"{i.backend}-{i.arch}"
        model = gpu_model(i.device) if i.kind == "bench" and i.backend != "cpu" else None
        return f"{label}-{model}" if model else label


_MODEL = re.compile(r"[A-Z]{0,4}\d{2,4}[A-Z]{0,2}")


def gpu_model(device: str) -> str | None:
    """The model in a device name: "NVIDIA H100 80GB HBM3" -> "H100", "NVIDIA H200" ->
    "H200", "AMD Instinct MI300X" -> "MI300X", "NVIDIA A100-SXM4-80GB" -> "A100"; None when
    no word is one."""
    for word in re.split(r"[\s-]+", device):
        if _MODEL.fullmatch(word):
            return word
    return None


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


def by_age(runs: Iterable[Run]) -> list[Run]:
    return sorted(runs, key=lambda r: (r.info.started, r.info.run_id))


def scope(info: RunInfo) -> list[str]:
    """What a run was limited to: its ``--only`` globs (conformance keeps them in ``extra``,
    bench's command line holds them) and a conformance shard; [] for a run of everything."""
    globs = [str(g) for g in info.extra.get("only") or []]
    argv = [str(a) for a in info.extra.get("argv") or []]
    for i, a in enumerate(argv):
        if a == "--only" and i + 1 < len(argv):
            globs.append(argv[i + 1])
        elif a.startswith("--only="):
            globs.append(a.split("=", 1)[1])
    if info.extra.get("shard"):
        globs.append(f"shard {info.extra['shard']}")
    return list(dict.fromkeys(globs))


def latest(runs: dict[str, Run], kind: str, wanted: Iterable[str] = (), where=None) -> list[Run]:
    """The newest run of ``kind`` per backend/arch label (those ``where(run)`` accepts),
    unless a run of ``wanted`` claims the label; cpu first, then by label. A partial run
    (:func:`scope`: ``--only`` or a shard) newer than a label's run of everything does not
    hide it: it is laid over it case by case (:func:`overlay`), so a re-run of a few configs
    updates those cells and leaves the rest of the matrix shown."""
    wanted = list(wanted)
    missing = [w for w in wanted if w not in runs]
    if missing:
        raise SystemExit(f"runs not found in the store or runs directory: {missing}")
    columns: dict[str, Run] = {}
    over: dict[str, list[Run]] = {}
    for run in by_age(runs.values()) + [runs[w] for w in wanted]:
        if run.info.kind != kind or (where is not None and not where(run)):
            continue
        base = columns.get(run.label)
        if base is not None and run.info.run_id not in wanted and _lays_over(run, base):
            over[run.label].append(run)
        else:
            columns[run.label], over[run.label] = run, []
    shown = (overlay(run, over[label]) for label, run in columns.items())
    return sorted(shown, key=lambda r: (r.info.backend != "cpu", r.label))


def _lays_over(run: Run, base: Run) -> bool:
    """A partial run over a base of everything (or of the same partial kind) at the same
    shapes (quick runs time other shapes: they never mix with full ones)."""
    quick = bool(run.info.extra.get("quick")) == bool(base.info.extra.get("quick"))
    return bool(scope(run.info)) and quick


def overlay(base: Run, newer: list[Run]) -> Run:
    """``base`` with each later run's records in place of its own for every case that run has
    (all of a case's checks: none of an older run's stays beside them), oldest first. The
    result keeps ``base``'s info, its ``extra["overlaid"]`` naming the runs laid over it (id,
    started, git, scope); each record keeps its own run id."""
    if not newer:
        return base
    records = list(base.records)
    for run in newer:
        fresh: dict[str, list[Record]] = {}
        for r in run.records:
            fresh.setdefault(r.case_id, []).append(r)
        merged = []
        for r in records:  # a case's new records stand where its old ones stood
            if r.case_id not in fresh:
                merged.append(r)
            elif fresh[r.case_id]:
                merged += fresh[r.case_id]
                fresh[r.case_id] = []
        records = merged + [r for rs in fresh.values() for r in rs]  # then the new cases
    laid = [
        {"run_id": r.info.run_id, "started": r.info.started, "git_sha": r.info.git_sha,
         "scope": scope(r.info)}
        for r in newer
    ]  # fmt: skip
    info = dataclasses.replace(base.info, extra={**base.info.extra, "overlaid": laid})
    return Run(info, records)


def previous(runs: dict[str, Run], run: Run) -> Run | None:
    """The run of the same kind and label just before ``run`` (its baseline): the newest run
    of everything before it where there is one, else the newest partial run."""
    older = [
        r
        for r in by_age(runs.values())
        if r.info.kind == run.info.kind
        and r.label == run.label
        and (r.info.started, r.info.run_id) < (run.info.started, run.info.run_id)
    ]
    whole = [r for r in older if not scope(r.info)]
    return (whole or older)[-1] if older else None


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


# --- bench rows ---------------------------------------------------------------------------
# Legacy ids (bench/linear_speed.py before aoq.testing.benchrows), adapted to the schema:
#   bf16/<shape>/<mode>                         -> <config>/bf16/<backend>/<shape>/bf16/<mode>
#                                                  (one copy per config timed at that shape)
#   <config>/bf16/<be>/<shape>/<kernel>/<mode>  -> .../aoq/<mode> for the chosen kernel; the
#                                                  others go to metrics["alternatives"]
#   torchao/<config>/<shape>/<variant>/<mode>   -> .../torchao[-compile]/<mode>
#   torchao/<config>/<shape>[/<variant>]        -> a skip/error peer row for both modes
#   <config>/.../vs_torchao (check vs_peer)     -> dropped: speedup_vs_peer says it
_LEGACY_TIMES = {"p20": "p20_us", "p50": "p50_us", "p80": "p80_us", "reps": "n"}


def _timed(metrics: dict) -> dict:
    return {_LEGACY_TIMES.get(k, k): v for k, v in metrics.items() if k != "chosen"}


def bench_records(run: Run) -> list[Record]:
    """The run's records with every timed row in the ``benchrows`` schema (legacy ids
    adapted, see above); other records (ceilings, bandwidth, step times) as they are."""
    from aoq.testing.benchrows import BenchCase, parse_case

    backend = run.info.backend
    out: list[Record] = []
    aoq: dict[tuple[str, str, str], dict] = {}  # (config, shape, mode) -> chosen row fields
    alts: dict[tuple[str, str, str], dict[str, float | None]] = {}
    bf16: dict[tuple[str, str], Record] = {}
    peers: list[tuple[BenchCase, Record]] = []
    for r in run.records:
        p = r.case_id.split("/")
        if r.check == "vs_peer" or (r.check == "latency" and parse_case(r.case_id)):
            if r.check == "latency":
                out.append(r)
            continue
        if r.check != "latency":
            out.append(r)
        elif len(p) == 3 and p[0] == "bf16":
            bf16[(p[1], p[2])] = r
        elif p[0] == "torchao":
            side = "torchao-compile" if p[3:4] == ["compile"] else "torchao"
            modes = [p[4]] if len(p) == 5 else ["graph", "eager"]
            for mode in modes:
                peers.append((BenchCase(p[1], "bf16", backend, p[2], side, mode), r))
        elif len(p) == 6:
            key = (p[0], p[3], p[5])
            if r.metrics.get("chosen"):
                aoq[key] = {"dtype": p[1], "record": r}
            else:
                alts.setdefault(key, {})[p[4]] = r.metrics.get("p50")
    peer_p50: dict[tuple[str, str, str], float] = {}
    for case, r in peers:
        out.append(
            dataclasses.replace(
                r, case_id=case.case_id, dtype=case.dtype, metrics=_timed(r.metrics)
            )
        )
        v = r.metrics.get("p50")
        k = (case.config, case.shape, case.mode)
        if r.status == "pass" and isinstance(v, (int, float)):
            peer_p50[k] = min(peer_p50.get(k, math.inf), v)
    for (config, shape, mode), hit in sorted(aoq.items()):
        r, dtype = hit["record"], hit["dtype"]
        metrics = _timed(r.metrics)
        if (config, shape, mode) in peer_p50 and metrics.get("p50_us"):
            metrics["speedup_vs_peer"] = peer_p50[(config, shape, mode)] / metrics["p50_us"]
        if alts.get((config, shape, mode)):
            metrics["alternatives"] = dict(sorted(alts[(config, shape, mode)].items()))
        case = BenchCase(config, dtype, backend, shape, "aoq", mode)
        out.append(dataclasses.replace(r, case_id=case.case_id, metrics=metrics, dtype=dtype))
        base = bf16.get((shape, mode))
        if base is not None:
            case = BenchCase(config, dtype, backend, shape, "bf16", mode)
            out.append(
                dataclasses.replace(
                    base,
                    case_id=case.case_id,
                    config=config,
                    dtype=dtype,
                    metrics=_timed(base.metrics),
                )
            )
    return out
