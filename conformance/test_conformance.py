"""The matrix as pytest tests, one per config/dtype/backend cell (see conftest.py)."""

from __future__ import annotations

from typing import Any

import pytest

from aoq.testing import matrix
from conformance.progress import RED


def test_cell(aoq_cell: str, aoq_session: Any) -> None:
    cases = [c for c in aoq_session.cases if c.cell == aoq_cell]
    if not cases:
        pytest.fail(f"no case of cell {aoq_cell} in this session: nothing was checked", False)
    records = aoq_session.run_cases(cases, quiet=True)
    ids = {c.id for c in cases}
    mine = [r for r in records if r.case_id in ids and r.check == "cell"]
    if {r.case_id for r in mine} != ids:
        pytest.fail(
            f"cell {aoq_cell}: cases without a result: {sorted(ids - {r.case_id for r in mine})}",
            False,
        )
    red = [r for r in mine if r.status in RED]
    if red:
        pytest.fail("\n".join(f"{r.status}: {r.case_id}: {r.reason}" for r in red), False)
    if mine and all(r.status == "skip" for r in mine):
        pytest.skip(mine[0].reason or "every case skipped")


def test_matrix_ids_are_unique(aoq_session: Any) -> None:
    ids = [c.id for c in aoq_session.cases]
    assert len(ids) == len(set(ids)) and all(
        c.backend in matrix.BACKENDS for c in aoq_session.cases
    )
