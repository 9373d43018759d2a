"""bench/cases.py, bench/baselines.py and bench/session.py: what a run times, its floors and
its budget, without timing anything."""

import subprocess
import sys

import pytest
import torch

from aoq.testing.benchrows import parse_case
from aoq.testing.cases import config_ids, inference_configs
from bench import baselines as bl
from bench import cases
from bench.session import (
    COMPILE_KIND,
    GOAL_COMPILE_KIND,
    BenchSession,
    Budget,
    Options,
)

REPO = __import__("pathlib").Path(__file__).resolve().parents[2]


def test_gpu_matrix_is_every_config_at_every_llm_shape():
    cells = [c for c in cases.linear_cases("cuda", quick=False) if c.side == "aoq"]
    ids = config_ids(inference_configs())
    bf16 = [c for c in cells if c.dtype_name == "bf16"]
    assert {c.shape.m for c in bf16} == {1, 4, 16, 64, 128, 2048, 4096}
    assert {(c.shape.k, c.shape.n) for c in bf16} == set(cases.GPU_KN)
    goal = {(8192, 8192), (4096, 14336), (14336, 4096)}  # issue 3's: run before the others
    first_other = next(i for i, c in enumerate(bf16) if (c.shape.k, c.shape.n) not in goal)
    assert all((c.shape.k, c.shape.n) not in goal for c in bf16[first_other:])
    assert len(bf16) == len(ids) * 28  # 4 K x N, 7 M
    others = [c for c in cells if c.dtype_name != "bf16"]
    assert {c.dtype_name for c in others} == {"fp16", "fp32"}
    assert {c.shape for c in others} == set(cases.OTHER_DTYPE_SHAPES)
    assert len({c.id for c in cells}) == len(cells)


def test_ids_are_benchrows_ids_and_baselines_come_first():
    run = cases.linear_cases("cuda", quick=True)
    assert run[0].config is None and run[0].id == "linear/bf16/cuda/M1-K4096-N4096/bf16"
    cell = next(c for c in run if c.side == "aoq")
    assert cell.baseline_id == run[0].id
    assert run.index(cell) > run.index(next(c for c in run if c.side == "torchao"))
    case = parse_case(cell.case("graph").case_id)
    assert case is not None and case.side == "aoq" and case.shape == "M1-K4096-N4096"
    for k in cases.kernel_cases("cuda", quick=False) + cases.training_cases("cuda", False):
        assert parse_case(k.case("eager").case_id) is not None
    host = cases.host_cases("cuda")
    assert host[0].id.startswith("host/linear/") and host[1].baseline_id == host[0].id


def test_quick_cpu_is_small():
    linear = cases.linear_cases("cpu", quick=True)
    assert {c.dtype_name for c in linear} == {"bf16"}
    assert max(c.shape.k * c.shape.n for c in linear) <= 256 * 256


def test_floor_is_the_slower_of_bandwidth_and_the_fastest_peak():
    ceil = {"copy_GBps": 1000.0, "bf16_TFLOPs": 100.0, "fp32_TFLOPs": 200.0, "int8_TOPs": 400.0}
    # 1 MB at 1000 GB/s = 1 µs; 1e9 flops at the best of bf16/fp32 (200 TF) = 5 µs
    assert bl.floor_us(ceil, ("bf16_TFLOPs", "fp32_TFLOPs"), 10**6, 10**9) == pytest.approx(5.0)
    assert bl.floor_us(ceil, ("int8_TOPs",), 10**7, 10**9) == pytest.approx(10.0)
    assert bl.floor_us(ceil, (), 10**6, 0) == pytest.approx(1.0)  # a memory-bound kernel
    assert bl.floor_us({}, (), 10**6, 0) is None
    assert bl.floor_us({"copy_GBps": 1.0}, ("fp8_TFLOPs",), 1, 1) is None


def test_peaks_follow_the_scheme():
    by_id = {c.id: c for c in inference_configs()}
    assert bl.peaks(by_id["w8a8"], "bf16")[0] == "int8_TOPs"
    assert bl.peaks(by_id["fp8-row"], "fp16")[0] == "fp8_TFLOPs"
    assert bl.peaks(by_id["int4wo-g128"], "bf16") == ("bf16_TFLOPs", "fp32_TFLOPs")
    assert bl.peaks(None, "fp32") == ("fp32_TFLOPs", "fp32_TFLOPs")


def test_tensor_bytes_counts_a_subclass_by_its_parts():
    import aoq

    layer = torch.nn.Linear(256, 256, bias=False)
    dense = bl.tensor_bytes(layer.weight)
    aoq.quantize_(layer, aoq.Int8WeightOnlyConfig())
    assert dense == 256 * 256 * 4
    assert 256 * 256 <= bl.tensor_bytes(layer.weight) < dense / 3  # int8 codes + scales


def test_compile_only_where_it_can_pay_off():
    run = {c.id: c for c in cases.linear_cases("cuda", quick=False)}
    compiled = [c for c in run.values() if c.side == "torchao-compile"]
    timed = [c for c in compiled if bl.peer_skip(c, False, "0.18") is None]
    assert {c.config_id for c in timed} == set(bl.TORCHAO_CONFIGS) - set(bl.COMPILE_NEVER)
    assert {c.shape.m for c in timed} == set(bl.COMPILE_M)
    assert {c.dtype_name for c in timed} == {"bf16"}
    assert len(timed) <= 48  # 6 configs x 8 cells: the compile budget of a full run (README)
    assert "not installed" in bl.peer_skip(compiled[0], False, None)
    mx = next(c for c in run.values() if c.side == "torchao" and c.config_id.startswith("mx"))
    assert "no torchao counterpart" in bl.peer_skip(mx, False, "0.18")


def test_budget_skips_late_tests_and_plans_compiles():
    now = [0.0]
    b = Budget(100.0, prior_s=1.0, clock=lambda: now[0])
    assert not b.expired() and b.left() == 100.0
    b.add("cell/aoq", 2.0)
    assert b.mean("cell/aoq") == 2.0 and b.mean("skip") == 0.01 and b.mean("compile") == 15.0
    remaining = ["cell/aoq"] * 30 + ["peer/torchao-compile"] * 5
    assert b.eta(remaining) == 60.0  # compiles are not in the ETA: they are planned
    assert b.affords("compile", remaining)  # 100 - 60 >= 15
    now[0] = 30.0
    assert not b.affords("compile", remaining)  # 70 - 60 < 15
    now[0] = 100.0
    assert b.expired()
    assert Budget(None, 1.0, clock=lambda: 1e9).left() == float("inf")
    early = Budget(100.0, 1.0, clock=lambda: 50.0, start=20.0)  # the command started at 20
    assert early.elapsed() == 30.0 and early.left() == 70.0


def test_goal_compiles_are_the_decode_goal_cells():
    """The torch.compile cells behind issue 3's "1.3x torchao" decode goals: int8wo and fp8wo
    at M = 1 on the three large shapes (int4's compile never pays, W4A8 has no torchao side)."""
    run = cases.linear_cases("cuda", quick=False)
    goal = {(c.config_id, c.shape.id) for c in run if bl.goal_compile(c)}
    assert goal == {
        (cfg, f"M1-K{k}-N{n}")
        for cfg in ("int8wo", "fp8wo")
        for k, n in ((8192, 8192), (4096, 14336), (14336, 4096))
    }
    assert all(bl.peer_skip(c, False, "0.18") is None for c in run if bl.goal_compile(c))


def test_goal_compiles_are_reserved_before_other_compiles():
    """Other compiles run only where every later goal compile still fits; a goal compile
    does not count its own reservation."""
    now = [0.0]
    b = Budget(100.0, prior_s=1.0, clock=lambda: now[0])
    b.add("cell/aoq", 2.0)
    b.add("compile", 10.0)
    rest = ["cell/aoq"] * 30 + [GOAL_COMPILE_KIND] * 3 + [COMPILE_KIND] * 4
    assert b.eta(rest) == 60.0 + 30.0  # three goal compiles at the compile mean
    assert b.affords("compile", rest)  # 100 - 90 >= 10
    now[0] = 5.0
    assert not b.affords("compile", rest)  # an other compile now would crowd out a goal one
    assert b.affords("compile", rest[:-7] + [GOAL_COMPILE_KIND] * 2)  # 95 - 80 >= 10
    session = BenchSession(Options("cpu", budget_s=100.0, store=None, torchao=False))
    session.budget = b
    session.remaining = [GOAL_COMPILE_KIND, *rest[:-7], GOAL_COMPILE_KIND, GOAL_COMPILE_KIND]
    assert session.affords_compile()  # the running test is remaining[0]: not reserved twice


def test_goal_compiles_go_before_ordinary_tests():
    """A goal compile needs room only beside the later goal compiles (ordinary tests at the
    end are skipped for budget instead); any other compile still waits for every later test."""
    now = [0.0]
    b = Budget(100.0, prior_s=1.0, clock=lambda: now[0])
    b.add("cell/aoq", 2.0)
    b.add("compile", 5.0)
    now[0] = 80.0
    session = BenchSession(Options("cpu", budget_s=100.0, store=None, torchao=False))
    session.budget = b
    later = ["cell/aoq"] * 30 + [GOAL_COMPILE_KIND] * 2  # ETA 60 + 10 against 20 left
    session.remaining = [GOAL_COMPILE_KIND, *later]
    assert session.affords_compile()  # 20 - 10 >= 5
    session.remaining = [COMPILE_KIND, *later]
    assert not session.affords_compile()  # 20 - 70 < 5
    now[0] = 92.0
    session.remaining = [GOAL_COMPILE_KIND, *later]
    assert not session.affords_compile()  # 8 - 10 < 5: the later goal compiles keep theirs


def test_gpu_suite_collects_without_a_gpu():
    """The cuda suite imports and parametrizes on a CPU machine (what the H200 run collects)."""
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "bench", "--collect-only", "-q", "-p", "no:cacheprovider",
         "--bench-backend", "cuda", "--bench-only", "int4wo-g128/*/M1-K4096-N4096/*"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    ids = [line for line in out.stdout.splitlines() if "::" in line]
    names = [i.split("::")[1].split("[")[0] for i in ids]
    # per dtype: the baseline the cell needs comes along, first; then the peers, then aoq
    assert names == ["test_baseline", "test_peer", "test_peer", "test_aoq"] * 3, ids


def test_main_builds_the_pytest_command_and_delegates_containers(monkeypatch):
    import ci.container
    from bench import __main__ as entry

    args = entry._parser().parse_args(["--quick", "--only", "int8wo/*", "--no-torchao"])
    cmd = entry.pytest_args(args, "cpu", ["--quick"])
    assert cmd[0].endswith("bench") and "--bench-backend=cpu" in cmd
    assert {"--bench-quick", "--bench-only=int8wo/*", "--bench-no-torchao"} <= set(cmd)
    assert "--bench-budget-s=50" in cmd  # the quick CPU default
    gpu = entry.pytest_args(entry._parser().parse_args([]), "cuda", [])
    assert "--bench-budget-s=480" in gpu
    none = entry.pytest_args(entry._parser().parse_args(["--budget-s", "0"]), "cuda", [], 5.0)
    assert not any(a.startswith(("--bench-budget-s", "--bench-started")) for a in none)
    timed = entry.pytest_args(entry._parser().parse_args([]), "cuda", [], 12.5)
    assert "--bench-started=12.5" in timed
    seen = []
    monkeypatch.setattr(ci.container, "module_in_container", lambda *a: seen.append(a) or 0)
    assert entry.main(["--container", "--backend", "cuda", "--quick"]) == 0
    assert seen == [("bench", ["--container", "--backend", "cuda", "--quick"])]
