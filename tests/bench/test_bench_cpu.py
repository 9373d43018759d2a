"""``python -m bench --backend cpu --quick`` end to end: the run's JSONL and store rows follow
aoq.testing.benchrows (what `reports` and `reports compare` read)."""

import os

import pytest

from aoq.testing.benchrows import CEILING, LATENCY, parse_case
from aoq.testing.cases import VARIANTS, config_ids, inference_configs
from aoq.testing.store import Store

SUMMARY = ("p20_us", "p50_us", "p80_us", "min_us", "n", "samples_us")


def test_run_header_says_where_and_with_what(quick):
    _, _, run, _, _ = quick
    assert run.kind == "bench" and run.backend == "cpu" and run.arch == "cpu"
    assert run.extra["quick"] is True and run.extra["argv"][0] == "bench"
    machine = run.extra["machine"]
    assert {"cpu", "cpu_count", "torch", "triton", "git_sha", "torchao", "aoq_env"} <= set(machine)


def test_timed_rows_follow_the_schema(quick):
    _, _, _, records, _ = quick
    timed = [r for r in records if r.check in (LATENCY, "host_overhead")]
    assert timed
    for r in timed:
        case = parse_case(r.case_id)
        assert case is not None and case.mode == "wall", r.case_id
        assert (r.config, r.dtype, r.shape) == (case.config, case.dtype, case.shape)
        if r.status == "pass":
            assert set(SUMMARY) <= set(r.metrics), r.case_id
            assert len(r.metrics["samples_us"]) == r.metrics["n"] >= 5
            assert r.metrics["p20_us"] <= r.metrics["p50_us"] <= r.metrics["p80_us"]
        else:
            assert r.status == "skip" and r.reason, r.case_id


def test_every_config_has_aoq_bf16_and_peer_rows(quick):
    _, _, _, records, _ = quick
    rows = {r.case_id: r for r in records if r.check == LATENCY}
    configs = config_ids(inference_configs())
    cells = [(c, s) for c in configs for s in ("M1-K256-N256", "M32-K256-N256")]
    for config, shape in cells:
        stem = f"{config}/bf16/cpu/{shape}"
        aoq, bf16 = rows[f"{stem}/aoq/wall"], rows[f"{stem}/bf16/wall"]
        assert aoq.status == "pass" and aoq.kernel, stem
        assert {"speedup_vs_bf16", "roofline", "floor_us", "bytes", "flops"} <= set(aoq.metrics)
        assert aoq.metrics["speedup_vs_bf16"] == pytest.approx(
            bf16.metrics["p50_us"] / aoq.metrics["p50_us"]
        )
        assert bf16.kernel == "aten.linear"
        for side in ("torchao", "torchao-compile"):  # no torchao in the dev venv
            peer = rows[f"{stem}/{side}/wall"]
            assert peer.status in ("pass", "skip", "error") and (
                peer.status == "pass" or peer.reason
            )


def test_ceilings_kernels_training_and_host_rows(quick):
    _, _, _, records, _ = quick
    ceilings = {r.case_id: r for r in records if r.check == CEILING and r.status == "pass"}
    for name in ("copy_GBps", "bf16_TFLOPs", "fp32_TFLOPs"):
        assert ceilings[f"ceiling/{name}"].metrics["value"] > 0
    ids = {r.case_id for r in records if r.status == "pass"}
    assert any(i.startswith("act_quant.int8_row/") for i in ids)
    assert any(i.startswith("mx_cast.dim1.fp8_e4m3/") for i in ids)
    assert any(i.startswith("mxtrain-fp8_e4m3/") and "/aoq/" in i for i in ids)
    host = [r for r in records if r.check == "host_overhead" and "/aoq/" in r.case_id]
    assert len(host) == len(inference_configs()) - len(VARIANTS)  # quick: the defaults
    assert all("meets_goal" in r.metrics for r in host)


def test_store_holds_the_same_rows_and_the_summary_is_printed(quick):
    proc, out, run, records, seconds = quick
    with Store(out / "results.sqlite") as store:
        assert store.run(run.run_id) is not None
        assert len(store.records(run.run_id)) == len(records)
    assert "aoq linear speedup vs bf16 F.linear" in proc.stdout
    assert "us over bf16 F.linear)" in proc.stdout  # the host rows, against bf16's own host time
    assert seconds < 120, f"the quick CPU bench took {seconds:.0f}s"


def test_machine_names_the_aoq_switches_set(monkeypatch):
    """A run timed under an A/B switch says so in its header (the sha override aside)."""
    from bench.machine import switches

    for k in [k for k in os.environ if k.startswith("AOQ_")]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("AOQ_FUSED_MAX_M", "16")
    monkeypatch.setenv("AOQ_GIT_SHA", "abc")
    monkeypatch.setenv("NOT_AOQ", "1")
    assert switches() == {"AOQ_FUSED_MAX_M": "16"}
