"""The JsonlWriter extensions the conformance runner relies on: a case written in one go, a
named (shard) file, and reopening after a torn line."""

import torch

from aoq.testing.records import JsonlWriter, Record, new_run, read_jsonl


def test_write_many_named_file_and_reopen_after_torn_line(tmp_path):
    run = new_run("conformance", "cpu", torch.device("cpu"), "cpu")
    name = f"{run.run_id}.shard-1of2.jsonl"
    with JsonlWriter(run, tmp_path, name) as w:
        w.write_many(
            [Record(run.run_id, "a", "output", "pass"), Record(run.run_id, "a", "cell", "pass")]
        )
    assert w.path.name == name
    with open(w.path, "a") as f:
        f.write('{"type": "record", "case_id": "b", "che')  # killed mid-line
    with JsonlWriter(run, tmp_path, name) as w2:
        w2.write(Record(run.run_id, "b", "cell", "fail"))
    back, records = read_jsonl(w2.path)
    assert back == run and [(r.case_id, r.check) for r in records] == [
        ("a", "output"), ("a", "cell"), ("b", "cell")]  # fmt: skip
