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

Pure python (statistics, math) on stored records; no kernels, no scipy.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import fnmatch
import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import tomllib

from aoq.testing.benchrows import p50_us, samples_us
from aoq.testing.records import Record
from aoq.testing.store import SUMMARY_CHECK
from reports.data import RED, Run, bench_records, by_age

GATING = ("regression", "missing")
STATUS_ORDER = ("regression", "missing", "improvement", "unconfirmed", "noise", "new", "ok")
"""Worst first: the order a table of findings is read in."""
NOT_RUN = ("skip", "error", "crash")
"""Statuses of a record that measured nothing."""
EXACT_MAX = 10
"""Mann-Whitney: the exact null distribution when both samples have at most this many values."""
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


# --- Mann-Whitney U --------------------------------------------------------------------------


def _doubled_midranks(values: Sequence[float]) -> tuple[list[int], list[int]]:
    """Twice the mid-rank of each value (ties share the mean rank; doubled, it is an
    integer), and the size of each group of ties."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0] * len(values)
    ties = []
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = i + j + 2  # (i+1 + j+1) / 2, doubled
        ties.append(j - i + 1)
        i = j + 1
    return ranks, ties


def _exact_p(ranks: list[int], n1: int, observed: int) -> float:
    """P(rank sum of n1 values drawn from ``ranks`` >= observed), counting every subset:
    ways[k][s] = subsets of k ranks summing to s, built one rank at a time. Exact, ties
    included (their mid-ranks are what is permuted)."""
    top = sum(ranks)
    ways = [[0] * (top + 1) for _ in range(n1 + 1)]
    ways[0][0] = 1
    for r in ranks:
        for k in range(n1, 0, -1):
            below, row = ways[k - 1], ways[k]
            for s in range(top - r, -1, -1):
                if below[s]:
                    row[s + r] += below[s]
    return sum(ways[n1][observed:]) / math.comb(len(ranks), n1)


def mann_whitney_greater(x: Sequence[float], y: Sequence[float]) -> float:
    """One-sided p-value of "values of x tend to be larger than those of y" (x = the new
    samples, y = the baseline's, for "new is slower").

    U = R_x - n_x (n_x + 1) / 2, R_x the rank sum of x among all values (ties: mid-ranks).
    Both samples of at most EXACT_MAX values: the exact permutation distribution of R_x.
    Otherwise the normal approximation with the tie-corrected variance
    n_x n_y / 12 * ((N + 1) - sum(t^3 - t) / (N (N - 1))) and a continuity correction of
    0.5: what ``scipy.stats.mannwhitneyu(x, y, alternative="greater")`` computes.
    """
    n1, n2 = len(x), len(y)
    if not n1 or not n2:
        raise ValueError(f"both samples need values (got {n1} and {n2})")
    ranks, ties = _doubled_midranks([*x, *y])
    doubled_sum = sum(ranks[:n1])
    if n1 <= EXACT_MAX and n2 <= EXACT_MAX:
        return _exact_p(ranks, n1, doubled_sum)
    n = n1 + n2
    u = doubled_sum / 2 - n1 * (n1 + 1) / 2
    var = n1 * n2 / 12 * ((n + 1) - sum(t**3 - t for t in ties) / (n * (n - 1)))
    if var <= 0:  # every value equal: no evidence either way
        return 1.0
    z = (u - n1 * n2 / 2 - 0.5) / math.sqrt(var)
    return 0.5 * math.erfc(z / math.sqrt(2))


def smallest_p(n1: int, n2: int) -> float:
    """The smallest p-value samples of these sizes can give (x entirely above y): when it is
    not below alpha, no difference can ever be confirmed."""
    return mann_whitney_greater(range(n2, n2 + n1), range(n2))


# --- thresholds ------------------------------------------------------------------------------


class ThresholdError(ValueError):
    """A thresholds file that cannot be used: names the file, the entry and the fix."""


@dataclasses.dataclass(frozen=True)
class Override:
    pattern: str
    """fnmatch over the row (case id); ``*`` also crosses ``/``."""
    threshold: float
    reason: str


@dataclasses.dataclass(frozen=True)
class Thresholds:
    speed: float = 0.05
    """A row may be this much slower (relative p50) before it can regress."""
    alpha: float = 0.01
    """Mann-Whitney significance level."""
    sqnr_db: float = 0.5
    margin: float = 0.1
    """Output check: how much more of its error budget (rel_err / budget) a case may use."""
    cosine: float = 0.001
    overrides: tuple[Override, ...] = ()
    """Speed rows only; the last matching override wins (general first, specific below)."""

    def for_row(self, row: str) -> tuple[float, Override | None]:
        hit = None
        for o in self.overrides:
            if fnmatch.fnmatchcase(row, o.pattern):
                hit = o
        return (hit.threshold if hit else self.speed), hit


_TABLES = {  # [table] key -> Thresholds field
    "speed": {"threshold": "speed", "alpha": "alpha"},
    "accuracy": {"sqnr_db": "sqnr_db", "margin": "margin", "cosine": "cosine"},
}
_OVERRIDE_FIELDS = ("rows", "threshold", "reason")


def _positive(where: str, value: Any, upper: float = math.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < upper:
        bound = f"between 0 and {upper:g}" if upper < math.inf else "a positive number"
        raise ThresholdError(f"{where} = {value!r}: must be {bound}")
    return float(value)


def load_thresholds(path: Path | None) -> Thresholds:
    """``bench/thresholds.toml`` (None: the defaults). Layout::

        [speed]                  # threshold = 0.05, alpha = 0.01
        [accuracy]               # sqnr_db = 0.5, margin = 0.1, cosine = 0.001
        [[override]]             # a looser (or tighter) speed threshold for some rows
        rows = "*/M1-*/*/eager"
        threshold = 0.15
        reason = "why, with the measurement"

    Unknown keys and overrides without a reason are errors: a threshold nobody can explain
    is how real regressions get waved through."""
    if path is None:
        return Thresholds()
    try:
        doc = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise ThresholdError(f"{path}: cannot read ({e.strerror}); pass --thresholds") from e
    except tomllib.TOMLDecodeError as e:
        raise ThresholdError(f"{path}: not valid TOML: {e}") from e
    unknown = sorted(set(doc) - {*_TABLES, "override"})
    if unknown:
        raise ThresholdError(f"{path}: unknown tables {unknown}; allowed speed, accuracy, override")
    values: dict[str, Any] = {}
    for table, keys in _TABLES.items():
        for key, value in doc.get(table, {}).items():
            if key not in keys:
                raise ThresholdError(f"{path}: [{table}] {key!r} is unknown; allowed {list(keys)}")
            upper = 1.0 if key == "alpha" else math.inf
            values[keys[key]] = _positive(f"{path}: [{table}] {key}", value, upper)
    overrides = []
    for i, item in enumerate(doc.get("override", []), 1):
        where = f"{path}: override {i} ({item.get('rows', '?')!r})"
        unknown = sorted(set(item) - set(_OVERRIDE_FIELDS))
        if unknown:
            raise ThresholdError(f"{where}: unknown keys {unknown}; allowed {_OVERRIDE_FIELDS}")
        reason = item.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            raise ThresholdError(
                f'{where}: no reason; add reason = "..." saying why these rows need another '
                "threshold, with the measurement"
            )
        rows = item.get("rows")
        if not isinstance(rows, str) or not rows:
            raise ThresholdError(f'{where}: needs rows = "<fnmatch pattern over case ids>"')
        threshold = _positive(f"{where} threshold", item.get("threshold"))
        overrides.append(Override(rows, threshold, reason.strip()))
    return Thresholds(**values, overrides=tuple(overrides))


# --- comparing two runs ----------------------------------------------------------------------


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _budget_share(m: dict[str, Any]) -> float | None:
    err, budget = _num(m.get("rel_err")), _num(m.get("budget"))
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
        "SQNR dB", lambda m: _num(m.get("db")), lambda b, n: b - n, lambda t: t.sqnr_db
    ),
    "output": _Metric("error budget used", _budget_share, lambda b, n: n - b, lambda t: t.margin),
    "model_cosine": _Metric(
        "model cosine", lambda m: _num(m.get("mean")), lambda b, n: b - n, lambda t: t.cosine
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


def _records(run: Run) -> list[Record]:
    """Bench runs in the benchrows schema (legacy ids adapted), so rows match across runs."""
    return bench_records(run) if run.info.kind == "bench" else run.records


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
    for rec in _records(run):
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


# --- history ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Point:
    run_id: str
    started: str
    git_sha: str
    value: float
    samples: list[float]


@dataclasses.dataclass(frozen=True)
class Step:
    index: int
    """Index in the series of the first point on the new level."""
    run_id: str
    before: float
    after: float
    change: float
    """after / before - 1 (for latency: + = slower)."""


def _bench_point(rec: Record) -> tuple[str, float, list[float]] | None:
    v = p50_us(rec.metrics)
    if v is None or rec.status in NOT_RUN:
        return None
    return rec.case_id, v, samples_us(rec.metrics)


def _sqnr_point(rec: Record) -> tuple[str, float, list[float]] | None:
    db = _num(rec.metrics.get("db")) if rec.check == "sqnr" else None
    if db is None or not math.isfinite(db) or rec.status in NOT_RUN:
        return None
    return f"{rec.case_id}:sqnr", db, []


_SERIES = {"bench": _bench_point, "conformance": _sqnr_point}


def history(runs: Iterable[Run], kind: str = "bench") -> dict[tuple[str, str], list[Point]]:
    """(backend label, row) -> its points, oldest first: p50 µs (and samples) of each timed
    row of bench runs; SQNR dB of each case of conformance runs, row ``case_id:sqnr`` as in
    compare_runs' findings."""
    point = _SERIES.get(kind)
    if point is None:
        raise ValueError(f"no history for {kind!r} runs; kinds with one: {list(_SERIES)}")
    out: dict[tuple[str, str], list[Point]] = defaultdict(list)
    for run in by_age(r for r in runs if r.info.kind == kind):
        i = run.info
        for rec in _records(run):
            got = point(rec)
            if got is not None:
                row, value, samples = got
                out[(run.label, row)].append(Point(i.run_id, i.started, i.git_sha, value, samples))
    return dict(out)


def _rel(value: float, ref: float) -> float:
    if ref == 0:
        return 0.0 if value == 0 else math.copysign(math.inf, value)
    return (value - ref) / abs(ref)


def detect_steps(points: list[Point], threshold: float = 0.05, min_run: int = 2) -> list[Step]:
    """Level shifts that persist, not single blips.

    Walk the series holding the current level: the median of the points accepted onto it
    since the last step. A point within ``threshold`` (relative) of the level joins it. A
    point beyond it opens a candidate: when it and the next ``min_run - 1`` points all lie
    beyond the threshold on the same side, and within the threshold of their own median, the
    level has moved -- a Step at the first of them (before: the old level, after: their
    median) and they start the new level. Otherwise the point was a blip: passed over,
    never joining a level, so one outlier neither raises an alarm nor drags the level.

    Not steps: a shift seen only in the last ``min_run - 1`` points (it may still be a
    blip), and a slow drift of a fraction of the threshold per run (the level follows it).
    """
    if min_run < 1:
        raise ValueError(f"min_run={min_run}: a step needs at least one point on its new level")
    values = [p.value for p in points]
    steps: list[Step] = []
    level = values[:1]
    i = 1
    while i < len(values):
        ref = statistics.median(level)
        if abs(_rel(values[i], ref)) <= threshold:
            level.append(values[i])
            i += 1
            continue
        window = values[i : i + min_run]
        mid = statistics.median(window)
        moved = [_rel(v, ref) for v in window]
        same_side = all(m > threshold for m in moved) or all(m < -threshold for m in moved)
        if (
            len(window) == min_run
            and same_side
            and all(abs(_rel(v, mid)) <= threshold for v in window)
        ):
            steps.append(Step(i, points[i].run_id, ref, mid, _rel(mid, ref)))
            level = list(window)
            i += min_run
        else:
            i += 1
    return steps


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
