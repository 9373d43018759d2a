"""What every page builder gets: the loaded runs, the runs asked for, and small shared helpers
(number formatting, run summaries, the CSV table a page embeds).

A page builder is ``context(site: Site) -> dict`` (reports/pages/); it reads runs from here and
returns plain values for its template. Nothing here depends on the time of rendering: the same
runs give the same bytes.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from aoq.testing.records import Record
from aoq.testing.store import SUMMARY_CHECK
from reports.data import ORDER, Run, latest, previous, worst

STATUSES = tuple(ORDER)


def fmt(value: Any) -> str:
    """Compact, readable numbers: 4 significant digits, inf/nan spelled out."""
    if isinstance(value, bool) or value is None:
        return str(value).lower()
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)
        return f"{value:.4g}"
    if isinstance(value, dict):
        return ", ".join(f"{k}={fmt(v)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(fmt(v) for v in value)
    return str(value)


def rounded(value: Any, digits: int = 6) -> Any:
    """Floats to ``digits`` significant digits (the page's data, not the store's), recursively."""
    if isinstance(value, float) and math.isfinite(value) and value != 0:
        return float(f"{value:.{digits}g}")
    if isinstance(value, dict):
        return {k: rounded(v, digits) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v, digits) for v in value]
    return value


def when(iso: str) -> str:
    """'2026-11-21T07:08:40+00:00' -> '2026-11-21 07:08 UTC' (runs are stamped in UTC)."""
    m = re.match(r"(\d{4}-\d\d-\d\d)T(\d\d:\d\d)", iso)
    return f"{m[1]} {m[2]} UTC" if m else iso


def first_line(text: str | None, limit: int = 200) -> str:
    """A reason for a table cell: its first line, cut at ``limit`` characters."""
    line = (text or "").strip().split("\n", 1)[0]
    return line if len(line) <= limit else line[: limit - 1] + "…"


def git_short(sha: str) -> str:
    return sha[:12] + ("-dirty" if sha.endswith("-dirty") else "")


def summaries(run: Run) -> list[Record]:
    """One record per case: the ``cell`` summaries where the run writes them, else all."""
    cells = [r for r in run.records if r.check == SUMMARY_CHECK]
    return cells or list(run.records)


def counts(records: Iterable[Record]) -> dict[str, int]:
    statuses = [r.status for r in records]
    return {s: statuses.count(s) for s in STATUSES if statuses.count(s)}


@dataclasses.dataclass
class Site:
    """All loaded runs; ``wanted`` run ids replace the newest run of their kind and label."""

    runs: dict[str, Run]
    wanted: Sequence[str] = ()

    def latest(self, kind: str, where: Callable[[Run], bool] | None = None) -> list[Run]:
        return latest(self.runs, kind, self.wanted, where)

    def previous(self, run: Run) -> Run | None:
        return previous(self.runs, run)

    def run_row(self, run: Run) -> dict[str, Any]:
        """A run's header line for a runs table."""
        i = run.info
        c = counts(summaries(run))
        return {
            "label": run.label,
            "kind": i.kind,
            "run_id": i.run_id,
            "device": i.device,
            "arch": i.arch,
            "torch": i.torch,
            "triton": i.triton or "-",
            "git": git_short(i.git_sha),
            "started": when(i.started),
            "quick": bool(i.extra.get("quick")),
            "host": i.host,
            "counts": c,
            "status": worst(c) if c else "skip",
            "overlaid": [
                {
                    "run_id": o["run_id"],
                    "started": when(o["started"]),
                    "git": git_short(o["git_sha"]),
                    "scope": ", ".join(o["scope"]),
                }
                for o in i.extra.get("overlaid", [])
            ],
        }


def table(name: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> dict[str, Any]:
    """The CSV a page offers: its file name, header and rows (the page's JS writes the file)."""
    return {"name": name, "columns": list(columns), "rows": [list(r) for r in rows]}
