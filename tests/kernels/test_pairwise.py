"""tests/kernels/_pairwise.py: the parameter sets the interpreter's kernel tests run cover
every pair of values of any two factors, and the whole product of the factors named full."""

import itertools
import random

import pytest
from _pairwise import pairwise


def _rows(params):
    return [p.values for p in params]


@pytest.mark.parametrize("seed", range(20))
def test_every_pair_and_every_full_combination_is_covered(seed):
    rng = random.Random(seed)
    factors = [list(range(rng.randint(1, 4))) for _ in range(rng.randint(2, 5))]
    full = rng.randint(1, len(factors))
    rows = _rows(pairwise(*factors, full=full))
    for i, j in itertools.combinations(range(len(factors)), 2):
        for a, b in itertools.product(factors[i], factors[j]):
            assert any(r[i] == a and r[j] == b for r in rows), (i, j, a, b)
    heads = {tuple(r[:full]) for r in rows}
    assert heads == set(itertools.product(*factors[:full]))
    assert len(rows) <= len(list(itertools.product(*factors)))


def test_groups_of_factors_kept_whole_and_ids_from_mappings():
    params = pairwise({"a": 1, "b": 2}, [0, 1, 2], {"x": "x", "y": "y"}, full=[(0, 2)])
    rows = _rows(params)
    assert {(r[0], r[2]) for r in rows} == {(1, "x"), (1, "y"), (2, "x"), (2, "y")}
    assert all(p.id.count("-") == 2 for p in params)
    assert [p.id for p in params] == [p.id for p in pairwise(
        {"a": 1, "b": 2}, [0, 1, 2], {"x": "x", "y": "y"}, full=[(0, 2)])]  # fmt: skip


def test_other_than_plain_values_need_ids():
    with pytest.raises(TypeError, match="mapping of ids"):
        pairwise([object()], [1])
