"""Tolerance profiles: data, layered, every change with its reason.

``default.toml`` < ``<backend>.toml`` < ``<backend>-<arch>.toml`` (e.g. ``rocm-gfx942.toml``)
< ``<backend>+<feature>.toml`` for each *platform feature* the run's worker reported: a fact of
this machine beyond its backend and arch, with the probe's reason (e.g. ``cpu+slow-fp8-gemm``:
torch's CPU fp8 GEMM is unvectorized on this CPU, so aoq records a fallback where it would
run ``aten._scaled_mm``; conformance.worker.platform_features). Such a file is read only on a
machine that has the feature, so what it excuses must still pass everywhere else.
``default.toml`` holds the base values as tables; every other file may only hold entries that
say why::

    [[override]]                        # change a value, optionally for some cases only
    key = "sqnr.floor.fp8-"             # a key that default.toml defines
    value = 24.0
    config = "fp8-*"                    # fnmatch filters on config id, dtype, shape: optional
    reason = "hipBLASLt's fp8 epilogue rounds scales to bf16"

    [[xfail]]                           # a known failure: shown as xfail; passing is red
    check = "kernel"                    # a check name or a pattern
    shape = "*-N200"
    reason = "aten._weight_int4pack_mm_for_cpu needs N % 16 == 0"

    [[skip]]                            # a case or check that does not apply here
    config = "fp8*"
    reason = "sm80 has no fp8 tensor cores"

Save/load round trips are bit-exact everywhere and no profile may loosen them: an override of a
``roundtrip`` key, or an xfail or a skip naming a round-trip check, is rejected when the profile
loads (a skip of a whole case, where the case does not apply, stays possible). (A peer
library once loosened a ROCm save/load test to 1e-2 instead of finding the cause.)
"""

from __future__ import annotations

import dataclasses
import fnmatch
import math
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import tomllib

ROUNDTRIP_CHECKS = ("save_load", "pretrained", "prequant_bias")
"""Checks that compare a checkpoint with itself: bit-exact, never loosened or excused."""
EPS_FLOAT32 = 2.0**-23
"""float32's machine epsilon: the accumulator of every kernel, so the unit of the output floor."""
_ENTRY_KINDS = ("override", "xfail", "skip")
_FILTERS = ("config", "dtype", "shape", "check")


class ProfileError(ValueError):
    """A profile file that cannot be used: names the file, the entry and the fix."""


@dataclasses.dataclass(frozen=True)
class Entry:
    """One ``[[override]]``, ``[[xfail]]`` or ``[[skip]]`` of a profile file."""

    kind: str
    source: str
    """``path#kind-N``: where it was written, for the report."""
    reason: str
    filters: dict[str, str]
    key: str | None = None
    value: Any = None

    def matches(self, config: str, dtype: str, shape: str, check: str | None = None) -> bool:
        have = {"config": config, "dtype": dtype, "shape": shape, "check": check}
        for name, pattern in self.filters.items():
            value = have[name]
            if value is not None and not fnmatch.fnmatchcase(value, pattern):
                return False
        return True


@dataclasses.dataclass(frozen=True)
class Tolerance:
    """The effective tolerance of one check and where each part of it came from."""

    values: dict[str, Any]
    source: str


@dataclasses.dataclass(frozen=True)
class Expectation:
    kind: str
    """xfail | skip"""
    reason: str
    source: str


def _flatten(table: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in table.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


@dataclasses.dataclass
class Profile:
    """The layered profile of one backend (and arch)."""

    files: list[str]
    base: dict[str, Any]
    """Flattened default values, e.g. ``{"output.rel_factor": 2.0, "sqnr.floor.int8wo": 40}``."""
    base_source: str
    entries: list[Entry]

    # -- lookups ----------------------------------------------------------------------------

    def _value(self, key: str, config: str, dtype: str, shape: str) -> tuple[Any, str]:
        value, source = self.base[key], self.base_source
        for e in self.entries:
            if e.kind == "override" and e.key == key and e.matches(config, dtype, shape):
                value, source = e.value, f"{e.source} ({e.reason})"
        return value, source

    def _prefixed(self, table: str, config: str) -> str | None:
        """The key of ``table`` whose suffix is the longest prefix of ``config``."""
        best = [k for k in self.base if k.startswith(table + ".")]
        hits = [k for k in best if config.startswith(k[len(table) + 1 :])]
        return max(hits, key=len) if hits else None

    def tolerance(
        self, check: str, config: str, dtype: str, shape: str, k: int | None = None
    ) -> Tolerance | None:
        """Effective tolerance of ``check`` for one case; None when the check has none.

        ``k``: the case's reduction length. The output checks' floor grows with it (see
        default.toml's [output]): with ``k`` the values carry ``rel_min``, the floor itself.

        Raises ProfileError when a floor the check needs is missing (a new config must get
        its floors, measured, in default.toml)."""
        if check in ROUNDTRIP_CHECKS or check == "pack":
            return Tolerance({"bit_exact": True}, self.base_source)
        if check in ("output", "cross_device"):
            keys = {"rel_factor": "output.rel_factor", "sum_error_coeff": "output.sum_error_coeff"}
        elif check == "compile":
            keys = {"rel_max": f"compile.rel_max.{dtype}"}
        elif check in ("sqnr", "model_cosine"):
            table = "sqnr.floor" if check == "sqnr" else "model.cosine_floor"
            key = self._prefixed(table, config)
            if key is None:
                raise ProfileError(
                    f"no [{table}] entry in {self.base_source} matches config {config!r}; "
                    "add its floor (measured, with a comment) to default.toml"
                )
            keys = {"floor": key}
        else:
            return None
        values, sources = {}, []
        for name, key in keys.items():
            if key not in self.base:
                raise ProfileError(f"{self.base_source} has no {key!r}, needed by {check}")
            values[name], src = self._value(key, config, dtype, shape)
            sources.append(src)
        if "sum_error_coeff" in values and k is not None:
            values["k"] = k
            values["rel_min"] = output_floor(values["rel_factor"], values["sum_error_coeff"], k)
        return Tolerance(values, "; ".join(dict.fromkeys(sources)))

    def expectation(
        self, config: str, dtype: str, shape: str, check: str | None
    ) -> Expectation | None:
        """The last matching xfail/skip entry (most specific file wins); ``check=None`` asks
        whether the whole case is skipped."""
        found = None
        for e in self.entries:
            if e.kind == "override":
                continue
            if check is None and (e.kind != "skip" or e.filters.get("check", "*") != "*"):
                continue
            if e.matches(config, dtype, shape, check):
                found = Expectation(e.kind, e.reason, e.source)
        return found


def output_floor(rel_factor: float, sum_error_coeff: float, k: int) -> float:
    """The floor of the output budget: ``rel_factor`` times the expected relative error of a
    float32 dot product of length ``k`` added in order, ``sum_error_coeff * sqrt(k) * eps32``."""
    return float(rel_factor * sum_error_coeff * math.sqrt(max(k, 1)) * EPS_FLOAT32)


# --- loading -----------------------------------------------------------------------------


def _read(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise ProfileError(f"{path}: not valid TOML: {e}") from e


def _entries(path: Path, doc: dict[str, Any], base: dict[str, Any], label: str) -> list[Entry]:
    out = []
    for kind in _ENTRY_KINDS:
        items = doc.get(kind, [])
        if not isinstance(items, list):
            raise ProfileError(f"{label}: '{kind}' must be an array of tables ([[{kind}]])")
        for i, item in enumerate(items, 1):
            where = f"{label}#{kind}-{i}"
            reason = item.get("reason")
            if not isinstance(reason, str) or not reason.strip():
                raise ProfileError(f'{where}: every {kind} needs a non-empty reason = "..."')
            allowed = (
                set(_FILTERS) | {"reason"} | ({"key", "value"} if kind == "override" else set())
            )
            unknown = sorted(set(item) - allowed)
            if unknown:
                raise ProfileError(f"{where}: unknown fields {unknown}; allowed {sorted(allowed)}")
            filters = {f: str(item[f]) for f in _FILTERS if f in item}
            entry = Entry(kind, where, reason.strip(), filters, item.get("key"), item.get("value"))
            _check_entry(entry, base)
            out.append(entry)
    return out


def _check_entry(e: Entry, base: dict[str, Any]) -> None:
    if e.kind == "override":
        if "check" in e.filters:
            raise ProfileError(f"{e.source}: an override names a key, not a check")
        if not isinstance(e.key, str) or e.key not in base:
            raise ProfileError(
                f"{e.source}: key {e.key!r} is not defined in default.toml; known keys: "
                f"{sorted(base)}"
            )
        if e.key.startswith("roundtrip."):
            raise ProfileError(
                f"{e.source}: save/load round trips are bit-exact everywhere; {e.key} cannot be "
                f"overridden (reason given: {e.reason!r}). Find the cause instead."
            )
        if not isinstance(e.value, (int, float)) or isinstance(e.value, bool):
            raise ProfileError(f"{e.source}: value {e.value!r} of {e.key} must be a number")
        if e.key.startswith("output.") and not e.value > 0:
            raise ProfileError(f"{e.source}: {e.key} = {e.value!r} must be positive")
    elif e.kind == "xfail":
        pattern = e.filters.get("check", "*")
        excused = [c for c in ROUNDTRIP_CHECKS if fnmatch.fnmatchcase(c, pattern)]
        if excused:
            raise ProfileError(
                f"{e.source}: an xfail may not cover the bit-exact round-trip checks {excused} "
                f"(check = {pattern!r}); name the checks it covers, and fix round trips instead"
            )
    elif "check" in e.filters and e.filters["check"] != "*":  # a skip of some checks only
        skipped = [c for c in ROUNDTRIP_CHECKS if fnmatch.fnmatchcase(c, e.filters["check"])]
        if skipped:
            raise ProfileError(
                f"{e.source}: a skip may not cover the bit-exact round-trip checks {skipped} "
                f"(check = {e.filters['check']!r}); skip the whole case where it does not apply, "
                "else fix the round trip"
            )


def load_profile(
    directory: str | os.PathLike[str], backend: str, arch: str, features: Iterable[str] = ()
) -> Profile:
    """The profile for ``backend`` on ``arch``: default.toml, then ``<backend>.toml``, then
    ``<backend>-<arch>.toml``, then ``<backend>+<feature>.toml`` for each of ``features`` (in
    sorted order), each optional except the first."""
    root = Path(directory)
    default = root / "default.toml"
    if not default.is_file():
        raise ProfileError(f"{default} is missing: every profile starts from it")
    doc = _read(default)
    tables = {k: v for k, v in doc.items() if k not in _ENTRY_KINDS}
    base = _flatten(tables)
    if base.get("roundtrip.bit_exact") is not True:
        raise ProfileError(f"{default}: [roundtrip] bit_exact must be true; it is not a setting")
    unknown_top = sorted(
        k for k in tables if k not in ("output", "sqnr", "compile", "model", "roundtrip")
    )
    if unknown_top:
        raise ProfileError(f"{default}: unknown tables {unknown_top}")
    label = _label(default)
    entries = _entries(default, doc, base, label)
    files = [label]
    for name in (
        f"{backend}.toml",
        f"{backend}-{arch}.toml",
        *(f"{backend}+{f}.toml" for f in sorted(set(features))),
    ):
        path = root / name
        if not path.is_file() or (name == f"{backend}-{arch}.toml" and arch == backend):
            continue
        more = _read(path)
        stray = sorted(k for k in more if k not in _ENTRY_KINDS)
        if stray:
            raise ProfileError(
                f"{path}: only [[override]], [[xfail]] and [[skip]] entries (each with a reason) "
                f"may appear outside default.toml; found {stray}"
            )
        entries += _entries(path, more, base, _label(path))
        files.append(_label(path))
    return Profile(files, base, label, entries)


def _label(path: Path) -> str:
    """A short, stable name for the report: ``<dir's parent>/<dir>/<file>``, e.g.
    ``conformance/profiles/cuda.toml``, wherever the run was started."""
    return "/".join(path.resolve().parts[-3:])
