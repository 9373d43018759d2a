"""A small synthetic set of runs, one of every kind the dashboard shows, written through the
real formats (SQLite store and JSONL files), with a hostile string wherever a record holds
text. Shared by test_pages.py and test_report_render.py."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from aoq.testing.benchrows import BenchCase, latency_record
from aoq.testing.records import JsonlWriter, Record, RunInfo
from aoq.testing.store import Store

HOSTILE = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'
SHAPE = "M1-K256-N256"
SOURCE = "conformance/profiles/cpu.toml#override-1 (why)"


def run_info(run_id: str, kind: str, backend: str, started: str, arch: str = "cpu", **extra):
    return RunInfo(
        run_id,
        kind,
        started,
        "abc1234def5678",
        "host<b>",
        backend,
        f"device {HOSTILE}",
        arch,
        "2.13.0",
        "3.6.0",
        {"quick": False, **extra},
    )


def case(run_id: str, config: str, dtype: str, backend: str, status: str, reason=None, db=30.0):
    """One conformance case: output, sqnr and kernel checks, then its cell summary."""
    cid = f"{config}/{dtype}/{backend}/{SHAPE}"
    common = {"config": config, "dtype": dtype, "shape": SHAPE}
    return [
        Record(
            run_id,
            cid,
            "output",
            status,
            **common,
            metrics={"rel_err": 0.00123456, "budget": 0.004},
            tolerance={"rel_factor": 2.0, "rel_min": 1e-6},
            tolerance_source=SOURCE,
            reason=reason,
        ),
        Record(
            run_id,
            cid,
            "sqnr",
            "pass",
            **common,
            metrics={"db": db},
            tolerance={"floor": 25.0},
            tolerance_source="conformance/profiles/default.toml",
        ),
        Record(run_id, cid, "kernel", "pass", **common, kernel="aten._int_mm"),
        Record(
            run_id,
            cid,
            "cell",
            status,
            **common,
            kernel="aten._int_mm",
            reason=reason,
            metrics={"checks": {"output": status, "sqnr": "pass", "kernel": "pass"}},
        ),
    ]


def legacy_bench(run_id: str) -> list[Record]:
    """bench/linear_speed.py rows as committed before aoq.testing.benchrows."""
    shape = "M1-K8192-N8192"
    out = [Record(run_id, "ceiling/copy_GBps", "ceiling", "pass", metrics={"value": 4000.0})]
    for mode, bf16, aoq, alt, peer in (
        ("graph", 34.0, 27.0, 95.0, 216.0),
        ("eager", 37.0, 49.0, 103.0, 224.0),
    ):
        out += [
            Record(
                run_id,
                f"bf16/{shape}/{mode}",
                "latency",
                "pass",
                "bf16",
                "bfloat16",
                shape,
                "aten.linear",
                {"p20": bf16, "p50": bf16, "p80": bf16, "reps": 30},
            ),
            Record(
                run_id,
                f"int8wo/bf16/cuda/{shape}/triton.int8wo.decode/{mode}",
                "latency",
                "pass",
                "int8wo",
                "bfloat16",
                shape,
                "triton.int8wo.decode",
                {
                    "p50": aoq,
                    "chosen": True,
                    "speedup_vs_bf16": bf16 / aoq,
                    "roofline": 16.0 / aoq,
                    "floor_us": 16.0,
                },
            ),
            Record(
                run_id,
                f"int8wo/bf16/cuda/{shape}/cublas.int8wo.dequant_mm/{mode}",
                "latency",
                "pass",
                "int8wo",
                "bfloat16",
                shape,
                "cublas.int8wo.dequant_mm",
                {"p50": alt, "chosen": False, "speedup_vs_bf16": bf16 / alt},
            ),
            Record(
                run_id,
                f"torchao/int8wo/{shape}/eager/{mode}",
                "latency",
                "pass",
                "int8wo",
                None,
                shape,
                "torchao.eager",
                {"p50": peer},
            ),
        ]
    out.append(
        Record(
            run_id,
            f"torchao/w8a8/{shape}",
            "latency",
            "skip",
            "w8a8",
            None,
            shape,
            reason=f"KeyError {HOSTILE}",
        )
    )
    out.append(
        Record(
            run_id,
            f"int8wo/bf16/cuda/{shape}/vs_torchao",
            "vs_peer",
            "pass",
            "int8wo",
            None,
            shape,
            metrics={"ratio": 8.0},
        )
    )
    return out


def new_bench(run_id: str, slow: float = 1.0) -> list[Record]:
    """benchrows-schema rows with samples; ``slow`` scales aoq's timings."""
    out = []
    for shape, aoq, bf16, peer in (
        ("M1-K4096-N4096", 20.0, 30.0, 60.0),
        ("M4096-K4096-N4096", 400.0, 300.0, 500.0),
    ):
        for side, center in (("aoq", aoq * slow), ("bf16", bf16), ("torchao", peer)):
            c = BenchCase("int4wo-g128", "bf16", "cuda", shape, side, "graph")
            samples = [center * (1 + 0.001 * (i % 5)) for i in range(20)]
            extra = {}
            if side == "aoq":
                extra = {
                    "speedup_vs_bf16": bf16 / center,
                    "speedup_vs_peer": peer / center,
                    "roofline": 0.5 / slow,
                }
            out.append(latency_record(run_id, c, samples, kernel=f"triton.{side}", **extra))
    return out


def compile_run(run_id: str) -> list[Record]:
    out = []
    for target in ("sm80", "sm90", "gfx942"):
        cid = f"fp8.prefill/{target}"
        if target == "sm80":
            m = {"mma": None, "regs": None, "spills": None, "shared": None, "seconds": 0.0}
            status, reason = "xfail", "sm80 has no float8 conversion or MMA instructions"
        else:
            mma = ["wgmma.mma_async"] if target == "sm90" else ["v_mfma"]
            m = {
                "mma": mma,
                "regs": 128,
                "spills": 3 if target == "gfx942" else 0,
                "shared": 98304,
                "seconds": 0.1,
            }
            status, reason = "pass", None
        for check in ("compile", "cell"):
            out.append(
                Record(
                    run_id,
                    cid,
                    check,
                    status,
                    "fp8.prefill",
                    None,
                    target,
                    "fp8.prefill",
                    m,
                    reason=reason,
                )
            )
    return out


def training_run(run_id: str) -> list[Record]:
    out = []
    for config, drift, status in (
        ("float", 0.0, "pass"),
        ("mxfp8", 0.01, "pass"),
        ("mxfp6", 0.03, "pass"),
        ("mxfp4", 2.0, "xfail"),
    ):
        loss = [3.0 - i * 0.01 + drift * i / 50 for i in range(50)]
        out.append(
            Record(
                run_id,
                f"toy/{config}",
                "loss_curve",
                status,
                config,
                "fp32",
                metrics={"loss": loss, "eval_loss": loss[-1], "rel_vs_float": drift},
                tolerance={"rel_eval_loss": 0.05},
                reason=HOSTILE if status == "xfail" else None,
            )
        )
    return out


def write(tmp: Path) -> tuple[Path, Path]:
    """(store, runs dir): an old and a new cpu conformance run in the store (a status change
    and a hostile config in the new one), a cuda-sm90 run as JSONL, compile, training, a
    legacy bench run and two benchrows-schema runs (the second slower)."""
    store, runs = tmp / "r.sqlite", tmp / "runs"
    old = run_info("old", "conformance", "cpu", "2026-01-01T00:00:00+00:00")
    new = run_info("new", "conformance", "cpu", "2026-02-01T00:00:00+00:00")
    with Store(store) as s:
        s.add_run(old)
        s.add_records(case("old", "w8a8", "bf16", "cpu", "fail", reason="too far off"))
        s.add_run(new)
        s.add_records(case("new", "w8a8", "bf16", "cpu", "pass"))
        s.add_records(case("new", f"evil{HOSTILE}", "fp32", "cpu", "crash", reason=HOSTILE))
    gpu = run_info("gpu", "conformance", "cuda", "2026-01-15T00:00:00+00:00", "sm90")
    bench = {"arch": "sm90"}
    files = [
        (
            dataclasses.replace(gpu, device="H100"),
            case("gpu", "w8a8", "bf16", "cuda", "xfail", reason="known", db=27.0),
        ),
        (run_info("tgt", "compile", "cpu", "2026-01-16T00:00:00+00:00"), compile_run("tgt")),
        (
            run_info("trn", "training", "cpu", "2026-01-17T00:00:00+00:00", task="toy"),
            training_run("trn"),
        ),
        (
            run_info("b0", "bench", "cuda", "2026-01-18", **bench, command="bench/linear_speed.py"),
            legacy_bench("b0"),
        ),
        (
            run_info("b1", "bench", "cuda", "2026-01-19", **bench, argv=["bench/run.py"]),
            new_bench("b1"),
        ),
        (
            run_info("b2", "bench", "cuda", "2026-01-20", **bench, argv=["bench/run.py"]),
            new_bench("b2", slow=1.5),
        ),
    ]
    for info, records in files:
        with JsonlWriter(info, runs) as w:
            w.write_many(records)
    return store, runs


def embedded(html: str, element_id: str) -> dict:
    """The JSON a page embeds in <script type="application/json" id=...>."""
    start = html.index(f'id="{element_id}">') + len(f'id="{element_id}">')
    return json.loads(html[start : html.index("</script>", start)])
