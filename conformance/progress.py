"""What a person watching a run sees: a progress bar with counts by status, the estimated time
left (ETA), red cases as they happen, and a summary table (config x dtype) at the end."""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import IO

from aoq.testing.records import STATUSES, Record

RED = ("fail", "error", "crash")
_ORDER = ("crash", "error", "fail", "xfail", "pass", "skip")
_MARK = {
    "pass": "ok",
    "fail": "FAIL",
    "error": "ERROR",
    "crash": "CRASH",
    "skip": "skip",
    "xfail": "xfail",
}


def worst(statuses: list[str]) -> str:
    """A case's or cell's status: the reddest present; skip only when nothing else is."""
    for s in _ORDER:
        if s in statuses and s != "skip":
            return s
    return "skip"


class Progress:
    """Counts finished cases; redraws one line on a terminal, prints a line every
    ``every`` seconds otherwise (CI logs), and always prints red cases. ``eta()``: the
    runner's estimate of the seconds left (None until it has measured a case); without one the
    estimate is the pace of finished cases."""

    def __init__(
        self,
        total: int,
        label: str,
        out: IO[str] = sys.stderr,
        every: float = 10.0,
        quiet: bool = False,
        eta: Callable[[], float | None] | None = None,
    ) -> None:
        self.total, self.label, self.out, self.every = total, label, out, every
        self.quiet, self.eta = quiet, eta
        self.counts: Counter[str] = Counter()
        self.start = time.monotonic()
        self.last = 0.0
        self.tty = out.isatty()

    @property
    def done(self) -> int:
        return sum(self.counts.values())

    def _line(self) -> str:
        width = 24
        filled = int(width * self.done / self.total) if self.total else width
        bar = "#" * filled + "." * (width - filled)
        counts = " ".join(f"{s} {self.counts[s]}" for s in STATUSES if self.counts[s])
        elapsed = time.monotonic() - self.start
        eta = ""
        if self.done < self.total:
            left = self.eta() if self.eta is not None else None
            if left is None and self.done:
                left = elapsed / self.done * (self.total - self.done)
            if left is not None:
                eta = f", ETA ~{_clock(left)}"
        return f"{self.label} [{bar}] {self.done}/{self.total} {counts} ({elapsed:.0f}s{eta})"

    def update(self, case_id: str, status: str, reason: str | None) -> None:
        self.counts[status] += 1
        if self.quiet:
            return
        if status in RED:
            first = (reason or "").splitlines()[0] if reason else ""
            self._print(f"  {_MARK[status]:5} {case_id}: {first[:160]}")
        now = time.monotonic()
        if self.tty:
            self.out.write("\r" + self._line()[:200].ljust(120))
            self.out.flush()
        elif now - self.last >= self.every or self.done == self.total:
            self.last = now
            self.out.write(self._line() + "\n")
            self.out.flush()

    def _print(self, text: str) -> None:
        if self.tty:
            self.out.write("\r" + " " * 120 + "\r")
        self.out.write(text + "\n")
        self.out.flush()

    def finish(self) -> None:
        if self.tty and not self.quiet:
            self.out.write("\r" + self._line()[:200].ljust(120) + "\n")
            self.out.flush()


def _clock(seconds: float) -> str:
    """``42s``, ``3m05s``."""
    s = max(0, round(seconds))
    return f"{s}s" if s < 60 else f"{s // 60}m{s % 60:02d}s"


def summary_table(records: list[Record]) -> str:
    """config x dtype, each entry the cell's worst status and its case counts, then totals."""
    cells = [r for r in records if r.check == "cell"]
    configs = list(dict.fromkeys(r.config or "?" for r in cells))
    order = {"bf16": 0, "fp16": 1, "fp32": 2}
    dtypes = sorted({r.dtype or "?" for r in cells}, key=lambda d: (order.get(d, 9), d))
    by: dict[tuple[str, str], list[str]] = {}
    for r in cells:
        by.setdefault((r.config or "?", r.dtype or "?"), []).append(r.status)
    width = max([len(c) for c in configs] + [6])
    lines = [f"{'config':<{width}}  " + "  ".join(f"{d:<16}" for d in dtypes)]
    for c in configs:
        row = []
        for d in dtypes:
            got = by.get((c, d), [])
            if not got:
                row.append(f"{'-':<16}")
                continue
            n_ok = sum(s in ("pass", "skip", "xfail") for s in got)
            row.append(f"{_MARK[worst(got)]} {n_ok}/{len(got)}".ljust(16))
        lines.append(f"{c:<{width}}  " + "  ".join(row))
    totals = Counter(r.status for r in cells)
    lines.append("")
    lines.append(
        f"{len(cells)} cases: " + ", ".join(f"{s} {totals[s]}" for s in STATUSES if totals[s])
    )
    return "\n".join(lines)


def red_list(records: list[Record], limit: int = 40) -> str:
    red = [r for r in records if r.check == "cell" and r.status in RED]
    lines = [f"red cases ({len(red)}):"] if red else []
    for r in red[:limit]:
        first = (r.reason or "").splitlines()[0] if r.reason else ""
        lines.append(f"  {_MARK[r.status]:5} {r.case_id}: {first[:200]}")
    if len(red) > limit:
        lines.append(f"  ... and {len(red) - limit} more (see the report)")
    return "\n".join(lines)
