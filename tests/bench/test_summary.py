"""bench/summary.py: the end-of-run table's "vs peer" says when it was against eager torchao
because the run skipped torch.compile for budget."""

from aoq.testing.benchrows import BenchCase, latency_record
from bench.summary import summary_table


def _rows(compile_status: str, compile_reason: str | None, peer: str, peer_us: float):
    cell = dict(config="int8wo", dtype="bf16", backend="cuda", shape="M1-K8192-N8192")
    aoq = BenchCase(**cell, side="aoq", mode="graph")
    comp = BenchCase(**cell, side="torchao-compile", mode="graph")
    samples = [27.0] * 5
    return [
        latency_record(
            "r",
            aoq,
            samples,
            kernel="triton.int8wo.decode",
            peer=peer,
            speedup_vs_peer=peer_us / 27.0,
            speedup_vs_bf16=1.8,
        ),
        latency_record(
            "r",
            comp,
            [peer_us] * 5 if compile_status == "pass" else [1.0],
            status=compile_status,
            reason=compile_reason,
        ),
    ]


def test_vs_peer_is_starred_where_compile_was_skipped_for_budget():
    text = summary_table(
        _rows("skip", "budget: not enough left for a torch.compile", "torchao", 233.0),
        {},
        gpu=True,
    )
    line = next(x for x in text.splitlines() if x.startswith("int8wo"))
    assert line.split()[-2] == "8.63*", line
    assert "torch.compile was skipped for budget" in text


def test_no_star_when_the_compiled_peer_ran_or_was_skipped_on_purpose():
    for rows in (
        _rows("pass", None, "torchao-compile", 25.9),
        _rows("skip", "torchao's int4 (tinygemm) is one kernel in eager", "torchao", 22.4),
    ):
        text = summary_table(rows, {}, gpu=True)
        line = next(x for x in text.splitlines() if x.startswith("int8wo"))
        assert "*" not in line and "skipped for budget" not in text, text
