"""The one-sided Mann-Whitney U test of reports/regress.py: does one set of timing samples tend
to be larger than another? A rank test, because timings are skewed with long tails. Pure
python; agrees with ``scipy.stats.mannwhitneyu(x, y, alternative="greater")``."""

from __future__ import annotations

import math
from collections.abc import Sequence

EXACT_MAX = 10
"""The exact null distribution when both samples have at most this many values."""


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
