"""Regression thresholds (``bench/thresholds.toml``): a default per kind of metric and per-row
speed overrides, each with the measured reason it exists."""

from __future__ import annotations

import dataclasses
import fnmatch
import math
from pathlib import Path
from typing import Any

import tomllib


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
