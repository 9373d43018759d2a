"""Regression detection: a new run against its baseline, steps in history, missing data.

Speed. A GPU timing moves between two runs of unchanged code (launch jitter, clocks, the
neighbours on the host): on the H200 the median eager decode row moved 3-5 % between two
back-to-back runs. So a row regresses only when BOTH say so: its p50 is slower by more than
the row's threshold, AND a one-sided Mann-Whitney U test on the samples says the new samples
really are larger (p < alpha). The threshold keeps tiny but real shifts from paging anyone
(thousands of samples make any shift significant); the test keeps large but noisy moves out.
A rank test, because timings are skewed with long tails: no normality to assume. Samples are
taken as independent; drift inside a run makes p optimistic, which the threshold absorbs.

Accuracy. Conformance metrics are seeded and deterministic, so there is no test to run: a
check going from pass to fail/error/crash regresses, and so does a metric that drifts by more
than its threshold while still passing (SQNR dB lost, more of the output error budget used,
model cosine lost) -- caught before it crosses the floor.

Missing. A row that stops reporting is how a broken benchmark hides (a peer library deleted a
dashboard that had been broken, unnoticed, for months): missing rows and backends gate.

Pure python on stored records; no kernels, no scipy. The test is reports/mannwhitney.py,
the thresholds file's loader reports/thresholds.py, series and steps reports/history.py.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from aoq.testing.benchrows import p50_us, samples_us
from aoq.testing.records import Record
from aoq.testing.store import SUMMARY_CHECK
from reports.data import RED, Run, by_age
from reports.history import NOT_RUN, Point, Step, as_number, detect_steps, history, records_of
from reports.mannwhitney import EXACT_MAX, mann_whitney_greater, smallest_p
from reports.thresholds import Override, ThresholdError, Thresholds, load_thresholds

__all__ = [  # statistics, thresholds and history live in their own modules; names stay here
    "EXACT_MAX", "NOT_RUN", "Override", "Point", "Step", "ThresholdError", "Thresholds",
    "detect_steps", "history", "load_thresholds", "mann_whitney_greater", "smallest_p",
]  # fmt: skip

GATING = ("regression", "missing")
STATUS_ORDER = ("regression", "missing", "improvement", "unconfirmed", "noise", "new", "ok")
"""Worst first: the order a table of findings is read in."""
_TELLING = ("regression", "missing", "improvement")
"""Findings that say what happened to a case; its cell summary then has nothing to add."""
STALE_AFTER = dt.timedelta(hours=12)
"""A nightly's jobs start within hours of each other: a backend whose newest run is this much
older than the newest run of its kind missed at least one night."""


@dataclasses.dataclass(frozen=True)
class Finding:
    row: str
    """The case id (speed, a whole case) or ``case_id:check`` (one check of a case)."""
    backend: str
    """The run's label (``cuda-sm90``, ``cpu``)."""
    kind: str
    """speed | accuracy | missing | step"""
    status: str
    """regression | improvement | ok | noise | unconfirmed | missing | new"""
    base: float | None
    """Baseline value: p50 in µs, SQNR in dB, share of the error budget, cosine."""
    new: float | None
    change: float | None
    """+ = worse: relative for speed (0.12 = 12 % slower), absolute for accuracy (dB lost)."""
    p_value: float | None
    threshold: float
    reason: str

    @property
    def gating(self) -> bool:
        """Whether this finding fails a comparison (the CLI's exit status, the nightly)."""
        return self.status in GATING


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (STATUS_ORDER.index(f.status), f.backend, f.row))


# --- comparing two runs ----------------------------------------------------------------------


def _budget_share(m: dict[str, Any]) -> float | None:
    err, budget = as_number(m.get("rel_err")), as_number(m.get("budget"))
    return err / budget if err is not None and budget else None


@dataclasses.dataclass(frozen=True)
class _Metric:
    """A conformance metric that can drift while its check still passes."""

    name: str
    value: Callable[[dict[str, Any]], float | None]
    worse: Callable[[float, float], float]
    """(base, new) -> how much worse new is (+ = worse)."""
    threshold: Callable[[Thresholds], float]


_METRICS = {
    "sqnr": _Metric(
        "SQNR dB", lambda m: as_number(m.get("db")), lambda b, n: b - n, lambda t: t.sqnr_db
    ),
    "output": _Metric("error budget used", _budget_share, lambda b, n: n - b, lambda t: t.margin),
    "model_cosine": _Metric(
        "model cosine", lambda m: as_number(m.get("mean")), lambda b, n: b - n, lambda t: t.cosine
    ),
}


@dataclasses.dataclass(frozen=True)
class _Pair:
    """What the comparisons of one pair of runs share."""

    label: str
    kind: str
    """What a changed check of these runs is: speed (bench runs) or accuracy."""
    thresholds: Thresholds

    def finding(self, row: str, status: str, reason: str, **values: Any) -> Finding:
        kind = "missing" if status == "missing" else self.kind
        fields = {"base": None, "new": None, "change": None, "p_value": None, "threshold": 0.0}
        return Finding(row, self.label, kind, status, reason=reason, **{**fields, **values})


def _timed(rec: Record) -> bool:
    return rec.status not in NOT_RUN and p50_us(rec.metrics) is not None


def _first_line(text: str | None) -> str:
    return (text or "").strip().split("\n", 1)[0][:160]


def compare_runs(base: Run, new: Run, thresholds: Thresholds) -> list[Finding]:
    """Every row of either run, worst first. Rows match by case id (and check); the caller
    pairs runs of one kind and backend label (the CLI refuses others unless forced)."""
    pair = _Pair(new.label, "speed" if new.info.kind == "bench" else "accuracy", thresholds)
    old, cur = _cases(base), _cases(new)
    out: list[Finding] = []
    for case_id in sorted(old.keys() | cur.keys()):
        out += _compare_case(pair, case_id, old.get(case_id, {}), cur.get(case_id, {}))
    return sort_findings(out)


def _cases(run: Run) -> dict[str, dict[str, Record]]:
    out: dict[str, dict[str, Record]] = defaultdict(dict)
    for rec in records_of(run):
        out[rec.case_id][rec.check] = rec
    return out


def _compare_case(
    pair: _Pair, case_id: str, old: dict[str, Record], new: dict[str, Record]
) -> list[Finding]:
    """One finding per check; a case gone or new as a whole is one finding, and its
    ``cell`` summary speaks only when no check of it changed (a crash leaves only the cell)."""
    if not new:
        if all(r.status == "skip" for r in old.values()):
            return []
        p50 = next((p50_us(r.metrics) for r in old.values() if _timed(r)), None)
        return [pair.finding(case_id, "missing", "absent from the new run", base=p50)]
    if not old:
        return [pair.finding(case_id, "new", "not in the baseline run")]
    cell = new.get(SUMMARY_CHECK)
    not_run = cell is not None and cell.status in NOT_RUN
    out = []
    for check in sorted((old.keys() | new.keys()) - {SUMMARY_CHECK}):
        if check in new or not not_run:  # a crashed or skipped case's checks are absent
            out.append(_compare_record(pair, old.get(check), new.get(check)))
    if SUMMARY_CHECK in old and not any(f and f.status in _TELLING for f in out):
        out.append(_compare_record(pair, old[SUMMARY_CHECK], cell))
    return [f for f in out if f is not None]


def _compare_record(pair: _Pair, rb: Record | None, rn: Record | None) -> Finding | None:
    if rb is None:
        assert rn is not None
        row = rn.case_id if _timed(rn) else f"{rn.case_id}:{rn.check}"
        return pair.finding(row, "new", f"not in the baseline run ({rn.status})")
    if _timed(rb):
        if rn is None or not _timed(rn):
            gone = f"{rn.status}: {_first_line(rn.reason)}" if rn else "absent"
            return pair.finding(
                rb.case_id, "missing", f"{gone} in the new run", base=p50_us(rb.metrics)
            )
        return _speed(pair, rb, rn)
    if rn is None:
        if rb.status == "skip":
            return None
        return pair.finding(f"{rb.case_id}:{rb.check}", "missing", "absent from the new run")
    return _check(pair, rb, rn)


def _speed(pair: _Pair, rb: Record, rn: Record) -> Finding:
    threshold, override = pair.thresholds.for_row(rb.case_id)
    b, n = p50_us(rb.metrics) or 0.0, p50_us(rn.metrics) or 0.0
    values = {"base": b, "new": n, "threshold": threshold}
    if b <= 0:
        return pair.finding(rb.case_id, "unconfirmed", f"baseline p50 is {b} µs", **values)
    change = n / b - 1
    if rb.check == "ceiling":  # the machine's copy/GEMM rates: context, never aoq's fault
        return pair.finding(
            rb.case_id, "ok" if abs(change) <= threshold else "noise",
            f"a ceiling of the machine moved {change:+.1%} (informational, never gating)",
            change=change, **values,
        )  # fmt: skip
    if bool(rb.metrics.get("paired")) != bool(rn.metrics.get("paired")):
        how = "the new" if rn.metrics.get("paired") else "the baseline"
        return pair.finding(
            rb.case_id, "unconfirmed",
            f"p50 {change:+.1%}, but only {how} run timed it in turns with bf16 (a GPU at its "
            "power limit runs both slower): a change of method, not of aoq; compare paired runs",
            change=change, **values,
        )  # fmt: skip
    sb, sn = samples_us(rb.metrics), samples_us(rn.metrics)
    p = None
    if sb and sn:
        p = mann_whitney_greater(sn, sb) if change > 0 else mann_whitney_greater(sb, sn)
    status, why = _speed_status(change, threshold, p, len(sb), len(sn), pair.thresholds.alpha)
    if override is not None:
        why += f" (threshold of {override.pattern!r})"
    return pair.finding(rb.case_id, status, why, change=change, p_value=p, **values)


def _speed_status(
    change: float, threshold: float, p: float | None, n_base: int, n_new: int, alpha: float
) -> tuple[str, str]:
    moved = f"p50 {abs(change):.1%} {'slower' if change > 0 else 'faster'}"
    if abs(change) <= threshold:
        return "ok", f"{moved}, within {threshold:.0%}"
    if p is None:
        return "unconfirmed", f"{moved}; a run has no samples (legacy row): rerun to confirm"
    if p < alpha:
        return "regression" if change > 0 else "improvement", f"{moved}, Mann-Whitney p={p:.2g}"
    if smallest_p(n_base, n_new) >= alpha:
        return "unconfirmed", f"{moved}; {n_base} vs {n_new} samples cannot reach p < {alpha:g}"
    return "noise", f"{moved}, but Mann-Whitney p={p:.2g} >= {alpha:g}"


def _check(pair: _Pair, rb: Record, rn: Record) -> Finding:
    """A status transition, else a metric's drift beyond its threshold, else ok."""
    row = f"{rb.case_id}:{rb.check}"
    status, why = _transition(rb, rn)
    metric = _METRICS.get(rb.check)
    if metric is None:
        return pair.finding(row, status, why)
    b, n = metric.value(rb.metrics), metric.value(rn.metrics)
    threshold = metric.threshold(pair.thresholds)
    change = None
    if b is not None and n is not None:
        change = 0.0 if b == n else metric.worse(b, n)  # b == n: also inf == inf (exact)
        if status == "ok":
            status, why = _drift(f"{metric.name} {b:.4g} → {n:.4g}", change, threshold, b)
    return pair.finding(row, status, why, base=b, new=n, change=change, threshold=threshold)


def _transition(rb: Record, rn: Record) -> tuple[str, str]:
    moved = f"{rb.status} → {rn.status}"
    if rb.status == "pass" and rn.status in RED:
        return "regression", f"{moved}: {_first_line(rn.reason)}"
    if rb.status == "pass" and rn.status == "skip":
        return "missing", f"{moved}: {_first_line(rn.reason)}"
    if rb.status in RED and rn.status == "pass":
        return "improvement", moved
    return "ok", moved if rb.status != rn.status else rn.status


def _drift(moved: str, change: float, threshold: float, base: float) -> tuple[str, str]:
    if math.isnan(change):  # NaN now: broken, unless it was NaN before too
        return ("ok" if math.isnan(base) else "regression"), moved
    if change > threshold:
        return "regression", f"{moved}, worse by {change:.3g} > {threshold:g}"
    if change < -threshold:
        return "improvement", f"{moved}, better by {-change:.3g} > {threshold:g}"
    return "ok", f"{moved}, within {threshold:g}"


# --- steps in history ------------------------------------------------------------------------


def step_findings(
    series: dict[tuple[str, str], list[Point]],
    threshold: float = 0.05,
    min_run: int = 2,
    higher_is_worse: bool = True,
) -> list[Finding]:
    """detect_steps over every series of ``history``, as findings of kind "step": a
    regression when the level moved the bad way (up for latency; pass
    ``higher_is_worse=False`` for SQNR). Old steps stay in history: filter by run."""
    out = []
    for (label, row), points in sorted(series.items()):
        for s in detect_steps(points, threshold, min_run):
            worse = s.change if higher_is_worse else -s.change
            at = points[s.index]
            why = (
                f"level moved {s.change:+.1%} at {at.run_id} (git {at.git_sha[:12]}) "
                f"and held for {min_run}+ runs"
            )
            status = "regression" if worse > 0 else "improvement"
            out.append(
                Finding(row, label, "step", status, s.before, s.after, worse, None, threshold, why)
            )
    return sort_findings(out)


# --- missing data ----------------------------------------------------------------------------


def suite(run: Run) -> str:
    """The series a bench run belongs to: the script it came from when it was a script
    (``linear_speed.py``, ``mx_training.py``: runs before ``python -m bench``), else its
    selection (:func:`selection`; '' for the full matrix); '' for other kinds. A run's
    baseline comes from its own suite, so a subset run is never compared with a full one."""
    if run.info.kind != "bench":
        return ""
    extra = run.info.extra
    command = [str(a) for a in (extra.get("argv") or str(extra.get("command", "")).split())]
    first = command[0] if command else ""
    if first.endswith(".py"):
        return Path(first).name
    return " ".join(selection(command))


def selection(argv: list[str]) -> list[str]:
    """What a ``python -m bench`` command line chose to time (``--quick``, ``--only`` globs,
    ``--no-torchao``): runs of one selection are one series; the full matrix is ``[]``."""
    out: list[str] = []
    args = iter(argv)
    for a in args:
        if a in ("--quick", "--no-torchao"):
            out.append(a)
        elif a == "--only":
            out.append(f"--only={next(args, '')}")
        elif a.startswith("--only="):
            out.append(a)
    return sorted(out)


def _started(run: Run) -> dt.datetime:
    t = dt.datetime.fromisoformat(run.info.started)
    return t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)


def missing_data(runs: Iterable[Run], latest: dict[str, Run] | None = None) -> list[Finding]:
    """Rows and whole backends that stopped reporting; every finding gates.

    History sets the expectations: each (kind, backend label) that has run is expected to
    run again, and each run to report the rows of the run before it in its series (same
    kind, label and bench suite). ``latest`` is "now" (any dict of runs, e.g. ``load_runs``
    of tonight's files): a (kind, label) of ``runs`` with none in it has stopped reporting.
    Without it, a (kind, label) whose newest run is over STALE_AFTER older than the newest
    run of its kind has stopped, and "now" is each series' newest run -- where it ran with
    its backend's newest (a retired bench script is not missing data).
    """
    everything = {r.info.run_id: r for r in runs}
    series: dict[tuple[str, str, str], list[Run]] = defaultdict(list)
    last: dict[tuple[str, str], Run] = {}  # (kind, label) -> its newest run
    for run in by_age(everything.values()):
        series[(run.info.kind, run.label, suite(run))].append(run)
        last[(run.info.kind, run.label)] = run
    if latest is None:
        newest: dict[str, dt.datetime] = {}
        for (kind, _), run in last.items():
            newest[kind] = max(newest.get(kind, _started(run)), _started(run))
        stopped = {k for k, run in last.items() if newest[k[0]] - _started(run) > STALE_AFTER}
        current = [
            members[-1]
            for (kind, label, _), members in series.items()
            if (kind, label) not in stopped
            and _started(last[(kind, label)]) - _started(members[-1]) <= STALE_AFTER
        ]
    else:
        current = by_age(latest.values())
        stopped = set(last) - {(r.info.kind, r.label) for r in current}
    out = []
    for kind, label in sorted(stopped):
        info = last[(kind, label)].info
        why = f"no {kind} run from {label} since {info.started} ({info.run_id})"
        out.append(
            Finding(f"{kind} run", label, "missing", "missing", None, None, None, None, 0.0, why)
        )
    for run in current:
        mine = series.get((run.info.kind, run.label, suite(run)), [])
        older = [
            r for r in mine if (r.info.started, r.info.run_id) < (run.info.started, run.info.run_id)
        ]
        if older:
            pair = f" ({older[-1].info.run_id} -> {run.info.run_id})"
            found = compare_runs(older[-1], run, Thresholds())
            out += [
                dataclasses.replace(f, reason=f.reason + pair)
                for f in found
                if f.status == "missing"
            ]
    return sort_findings(out)
