"""reports/goals.py: each speed goal read from a bench run's rows, met or missed per cell, a
torchao ratio whose compiled side was skipped for budget never counted as met, and nothing
for CPU runs."""

from site_runs import run_info

from aoq.testing.benchrows import BenchCase, latency_record
from aoq.testing.records import Record
from reports import goals
from reports.data import Run


def _row(config: str, shape: str, side: str = "aoq", status: str = "pass", reason=None, **m):
    case = BenchCase(config, "bf16", "cuda", shape, side, "graph")
    return latency_record("g1", case, [10.0] * 5, status=status, reason=reason, **m)


def _run(records: list[Record], backend: str = "cuda") -> Run:
    return Run(run_info("g1", "bench", backend, "2026-11-26", arch="sm90"), records)


def _goal(rows: list[dict], name: str) -> dict:
    return next(r for r in rows if r["goal"] == name)


def test_decode_goal_met_missed_and_not_measured():
    recs = [
        _row("int4wo-g128", "M1-K8192-N8192", speedup_vs_bf16=3.02),
        _row("int4wo-g128", "M1-K4096-N14336", speedup_vs_bf16=2.92),
        # 14336 x 4096 not timed: that cell is "not measured"
        _row("w4a8-g32", "M16-K8192-N8192", speedup_vs_bf16=2.2),
        _row("w4a8-g32", "M16-K4096-N14336", speedup_vs_bf16=2.13),
        _row("w4a8-g32", "M16-K14336-N4096", speedup_vs_bf16=2.125),
        _row("fp8-row", "M4096-K8192-N8192", status="fail", speedup_vs_bf16=9.0),
    ]
    rows = goals.check(_run(recs))
    int4 = _goal(rows, "int4 weight-only decode M1 vs bf16")
    assert [c["state"] for c in int4["cells"]] == ["met", "missed", "not measured"]
    assert int4["verdict"] == "missed at 1 of 3" and int4["target"] == "≥ 3×"
    w4a8 = _goal(rows, "W4A8 decode M16 vs bf16")  # 2.5 x 0.85, the bound included
    assert w4a8["verdict"] == "met" and w4a8["target"] == "≥ 2.125×"
    fp8 = _goal(rows, "fp8 W8A8 row prefill M4096 vs bf16")  # a failed row measures nothing
    assert fp8["verdict"] == "not measured"


def test_a_peer_ratio_against_eager_torchao_only_is_an_upper_bound():
    skipped = "budget: not enough left for a torch.compile"
    recs = [
        _row("int8wo", "M1-K8192-N8192", speedup_vs_peer=1.33),
        _row("int8wo", "M1-K4096-N14336", speedup_vs_peer=10.6),
        _row("int8wo", "M1-K4096-N14336", "torchao-compile", "skip", skipped),
        _row("int8wo", "M1-K14336-N4096", speedup_vs_peer=1.1),
        _row("int8wo", "M1-K14336-N4096", "torchao-compile", "skip", skipped),
    ]
    peer = _goal(goals.check(_run(recs)), "int8 weight-only decode M1 vs torchao")
    assert [c["state"] for c in peer["cells"]] == ["met", "upper bound", "missed"]
    assert peer["verdict"] == "missed at 1 of 3"
    open_ = _goal(goals.check(_run(recs[:3])), "int8 weight-only decode M1 vs torchao")
    assert open_["verdict"] == "open"  # nothing missed, one cell only bounded


def test_activation_and_host_goals():
    act = _row("act_quant.int8_row", "M8192-K8192", roofline=0.79)
    host = [
        Record(
            "g1",
            f"{cfg}/bf16/cuda/M1-K1024-N1024/aoq/eager",
            "host_overhead",
            "pass",
            config=cfg,
            metrics={"over_bf16_us": over},
        )  # fmt: skip
        for cfg, over in (("int8wo", 6.2), ("fp8wo", 13.5))
    ]
    rows = goals.check(_run([act, *host]))
    got = _goal(rows, "activation quantization int8_row, share of copy bandwidth")
    assert got["verdict"] == "missed at 1 of 1" and got["target"] == "≥ 80%"
    h = rows[-1]
    assert [(c["label"], c["state"]) for c in h["cells"]] == [
        ("int8wo", "met"),
        ("fp8wo", "missed"),
    ]
    assert h["target"] == "≤ 10" and h["verdict"] == "missed at 1 of 2"


def test_cpu_runs_are_not_held_to_the_gpu_goals():
    assert goals.check(_run([_row("int8wo", "M1-K8192-N8192", speedup_vs_bf16=9.0)], "cpu")) == []


def test_tally_counts_each_verdict():
    rows = [{"verdict": v} for v in ("met", "missed at 1 of 3", "missed at 3 of 3", "open")]
    assert goals.tally(rows) == {"met": 1, "missed": 2, "open": 1}
    assert goals.tally([]) == {}
