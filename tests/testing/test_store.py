"""The SQLite store: a case is stored whole or not at all, never twice; readers never write."""

import sqlite3

import pytest
import torch

from aoq.testing.records import Record, new_run
from aoq.testing.store import Store, complete


def _case(run_id, case_id, statuses=("pass", "pass")):
    recs = [Record(run_id, case_id, f"c{i}", s, metrics={"x": 1.5}) for i, s in enumerate(statuses)]
    return recs + [Record(run_id, case_id, "cell", "pass", tolerance={"floor": 3.0})]


def test_round_trip_and_complete_cases(tmp_path):
    run = new_run("conformance", "cpu", torch.device("cpu"), "cpu", quick=True)
    with Store(tmp_path / "r.sqlite") as s:
        s.add_run(run)
        s.add_records(_case(run.run_id, "a/bf16/cpu/M1"))
        s.add_records(_case(run.run_id, "b/bf16/cpu/M1"))
        assert s.run(run.run_id) == run and [r.run_id for r in s.runs()] == [run.run_id]
        back = s.records(run.run_id)
        assert back == _case(run.run_id, "a/bf16/cpu/M1") + _case(run.run_id, "b/bf16/cpu/M1")
        assert s.complete_cases(run.run_id) == {"a/bf16/cpu/M1", "b/bf16/cpu/M1"}


def test_a_case_is_written_whole_or_not_at_all(tmp_path):
    with Store(tmp_path / "r.sqlite") as s:
        s.add_records(_case("r", "a"))
        with pytest.raises(sqlite3.IntegrityError):  # a duplicate check inside the batch
            s.add_records([Record("r", "b", "x", "pass"), Record("r", "a", "cell", "pass")])
        assert s.complete_cases("r") == {"a"} and len(s.records("r")) == 3
        s.add_records(_case("r", "a"), replace=True)  # merging overlapping files
        assert len(s.records("r")) == 3


def test_incomplete_cases_are_dropped(tmp_path):
    recs = _case("r", "a") + [Record("r", "b", "c0", "fail")]
    assert {r.case_id for r in complete(recs)} == {"a"}
    with Store(tmp_path / "r.sqlite") as s:
        s.add_records(recs)
        assert s.drop_incomplete("r") == 1 and s.complete_cases("r") == {"a"}


def test_read_only_store_cannot_write(tmp_path):
    Store(tmp_path / "r.sqlite").close()
    with Store(tmp_path / "r.sqlite", read_only=True) as s, pytest.raises(sqlite3.OperationalError):
        s.add_records(_case("r", "a"))
