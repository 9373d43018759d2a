"""bench/rows_ab.py: each way sets wt_rows as named, serves from 65 rows (wt_rows_mx too), and
restores it."""

import torch
from aoq.kernels import wt_rows, wt_rows_mx
from aoq.kernels._common import INTERPRET, WeightFormat

from bench import rows_ab


def test_each_way_sets_wt_rows_and_restores_it():
    before = wt_rows.ENABLED, wt_rows.X_DESC_ROWS, dict(wt_rows.MIN_ROWS)
    before_mx = dict(wt_rows_mx.MIN_ROWS), dict(wt_rows_mx.X_DESC_ROWS)
    x, q = torch.empty(65, 256, dtype=torch.bfloat16), torch.empty(128, 256, dtype=torch.int8)
    for name, (enabled, desc_rows) in rows_ab.WAYS.items():
        with rows_ab.way(name):
            assert (enabled, desc_rows) == (wt_rows.ENABLED, wt_rows.X_DESC_ROWS)
            assert set(wt_rows.MIN_ROWS.values()) == set(wt_rows_mx.MIN_ROWS.values()) == {65}
            assert set(wt_rows_mx.X_DESC_ROWS.values()) == {desc_rows}
            # CPU tensors: served only under the interpreter, and only when enabled
            assert wt_rows.serves(x, q, 1, WeightFormat.INT8) is (enabled and INTERPRET)
        assert before == (wt_rows.ENABLED, wt_rows.X_DESC_ROWS, wt_rows.MIN_ROWS)
        assert before_mx == (wt_rows_mx.MIN_ROWS, wt_rows_mx.X_DESC_ROWS)
    assert not wt_rows.serves(x, q, 1, WeightFormat.INT8)  # 65 rows: decode_mma's again
