import json

import pytest
import torch

from aoq.testing.records import JsonlWriter, Record, new_run, read_jsonl


def test_write_then_read_and_torn_last_line(tmp_path):
    run = new_run("conformance", "cpu", torch.device("cpu"), "cpu", argv=["x"])
    with JsonlWriter(run, tmp_path) as w:
        w.write(Record(run.run_id, "int8wo/bf16/cpu/M1", "sqnr", "pass", metrics={"sqnr": 40.5}))
        w.write(Record(run.run_id, "int8wo/bf16/cpu/M1", "kernel", "fail", reason="fallback"))
    with open(w.path, "a") as f:
        f.write('{"type": "record", "run_id": ')  # a writer killed mid-line
    back, records = read_jsonl(w.path)
    assert back == run and [r.check for r in records] == ["sqnr", "kernel"]
    assert records[0].metrics == {"sqnr": 40.5} and records[0].time


def test_resume_appends_without_second_header(tmp_path):
    run = new_run("bench", "cpu", torch.device("cpu"), "cpu")
    JsonlWriter(run, tmp_path).close()
    with JsonlWriter(run, tmp_path) as w:
        w.write(Record(run.run_id, "c", "latency", "pass"))
    lines = [json.loads(x) for x in w.path.read_text().splitlines()]
    assert [x["type"] for x in lines] == ["run", "record"]


def test_rejects_bad_status_and_foreign_records(tmp_path):
    with pytest.raises(ValueError, match="status"):
        Record("r", "c", "x", "green")
    run = new_run("bench", "cpu", torch.device("cpu"), "cpu")
    with JsonlWriter(run, tmp_path) as w, pytest.raises(ValueError, match="written to"):
        w.write(Record("other", "c", "x", "pass"))
