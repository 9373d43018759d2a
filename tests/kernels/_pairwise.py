"""Parameter sets that cover every pair of values instead of every combination, for the
interpreter's kernel tests (each case a few seconds on CI's two cores): a kernel's branches
are each one parameter's value (a format, a tile key, a split, a row padding) or where two
meet (that format on that tile), so the pairs are what must each run once. The full product
ran each branch dozens of times over and took most of ``make kernels-interpret``."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

PLAIN = (str, int, float, bool, type(None))


def pairwise(
    *factors: Sequence[Any] | Mapping[str, Any], full: int | Sequence[Sequence[int]] = 1
) -> list[Any]:
    """pytest.param rows of the product of ``factors`` holding every pair of values of any
    two factors, and every combination of the first ``full`` factors (those whose interplay
    the test is about, e.g. format x scale path x dtype of a bit-exact one-hot test; or of
    each group of factor indices in ``full``), at least once. A factor is its values (ints,
    strings, None: their own ids) or a mapping of ids to values. A greedy cover: each row
    the first of the product's rows that covers the most of what is left (ties: the one
    whose pairs ran least), so the set is the same on every run (pytest-xdist workers
    collect it separately) and follows the factors' order."""
    levels = [list(f.items()) if isinstance(f, Mapping) else _plain(f) for f in factors]
    rows = list(itertools.product(*(range(len(f)) for f in levels)))
    groups = [range(full)] if isinstance(full, int) else full

    def covers(row: tuple[int, ...]) -> set[tuple[int, ...]]:
        pairs = itertools.combinations(range(len(row)), 2)
        whole = {(-1 - g, *(row[i] for i in idx)) for g, idx in enumerate(groups)}
        return {(i, row[i], j, row[j]) for i, j in pairs} | whole

    left = set().union(*(covers(r) for r in rows))
    seen = dict.fromkeys(left, 0)  # how often each is covered: ties go to the rarest pairs
    chosen = []
    while left:
        best = max(rows, key=lambda r: (len(covers(r) & left), -sum(seen[c] for c in covers(r))))
        chosen.append(best)
        left -= covers(best)
        for c in covers(best):
            seen[c] += 1
    return [
        pytest.param(*(f[i][1] for f, i in zip(levels, row, strict=True)),
                     id="-".join(f[i][0] for f, i in zip(levels, row, strict=True)))
        for row in chosen
    ]  # fmt: skip


def _plain(values: Sequence[Any]) -> list[tuple[str, Any]]:
    if not all(isinstance(v, PLAIN) for v in values):
        raise TypeError(f"{values!r}: pass a mapping of ids to values for other than plain ones")
    return [(str(v), v) for v in values]
