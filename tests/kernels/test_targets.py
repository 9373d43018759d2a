"""Ahead-of-time compilation (no GPU needed): a subset of targets in CI, one NVIDIA and one
AMD (the full set: ``python -m aoq.kernels.targets``, its targets side by side, minutes on 2 cores
with a cold Triton cache)."""

import re

import pytest
from aoq.kernels import targets

CI_TARGETS = ("sm90", "gfx942")


@pytest.mark.parametrize("target", CI_TARGETS)
def test_every_kernel_compiles_with_matrix_instructions(target):
    for spec, row in zip(targets.specs(target), targets.compile_target(target), strict=True):
        status, reason = targets._status(spec, target, row)
        assert status in ("pass", "xfail"), (spec.name, reason)
        if status == "pass":
            assert row["spills"] <= spec.spill_budget, (spec.name, row)
            # ptxas issuing a kernel's wgmma one at a time: never silently slow
            assert not row.get("wgmma_serialized"), (spec.name, row["wgmma_serialized"])
            # (MX e4m3's 128-row tile at 128-code steps: 320 KB with both BIG loops)
            assert row["shared"] <= targets.MAX_SHARED.get(target, row["shared"]), (spec.name, row)


def test_ptxas_wgmma_serialization_is_read_from_its_log():
    """ptxas -v's C7515 note (what three sm90 kernels printed until session 56) -> its reason."""
    log = (
        "ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async instructions are "
        "serialized due to non wgmma instructions defining accumulator registers of a wgmma "
        "between start and end of the pipeline stage in the function '_wt_rows_fp6_kernel'\n"
        "ptxas info    : Used 128 registers"
    )
    m = targets.WGMMA_SERIALIZED.search(log)
    assert m and m.group(1).startswith("non wgmma instructions defining accumulator")
    assert m.group(1).endswith("pipeline stage")
    assert targets.WGMMA_SERIALIZED.search("ptxas info    : Used 128 registers") is None


def test_expected_impossibility_is_recorded():
    fp8 = [s for s in targets.specs("sm80") if s.fp8][0]
    assert targets._status(fp8, "sm80", {"ok": False, "error": "x"}) == (
        "xfail",
        targets.NO_FP8["sm80"],
    )
    assert targets._status(fp8, "sm80", {"ok": True})[0] == "fail"


def test_a_known_triton_failure_is_an_xfail_until_it_compiles():
    """A spec's ``fails_on`` (wt_rows_fp6's K = 32 probe steps on sm100, where Triton 3.6
    aborts): an xfail with its reason while the compile fails; a fail once it compiles, so the
    entry is dropped. Its FRAG steps, the default, compile there and carry no entry."""
    import dataclasses

    spec = next(s for s in targets.specs("sm100") if s.name == "mxwo_fp6_e3m2.rows")
    assert spec.fails_on == {} and spec.constexprs["FRAG"]
    probe = dataclasses.replace(spec, fails_on={"sm100": "Triton 3.6 aborts"})
    reason = probe.fails_on["sm100"]
    assert targets._status(probe, "sm100", {"ok": False, "error": "x"}) == ("xfail", reason)
    assert targets._status(probe, "sm100", {"ok": True, "mma": ["tcgen05.mma"]})[0] == "fail"
    assert "sm90" not in probe.fails_on


def _mx_mm(target: str, name: str) -> targets.Spec:
    return next(s for s in targets.specs(target) if s.name == name)


@pytest.mark.parametrize("name", ["mx_mm.fp8", "mx_mm.fp4"])
def test_mx_mm_compiles_to_the_block_scaled_mma_on_sm100(name):
    """The native MX GEMM on sm100: tl.dot_scaled becomes tcgen05.mma ... .block_scale
    (kind::mxf8f6f4 for fp8, kind::mxf4 for fp4), with no spills."""
    row = targets.compile_spec(_mx_mm("sm100", name), "sm100", asm=True)
    if not row["ok"] and re.search(r"ptxas|sm_100|not supported", row.get("error", "")):
        pytest.skip(f"this triton cannot compile for sm100 here: {row['error']}")
    assert row["ok"], row
    kind = "mxf8f6f4" if name.endswith("fp8") else "mxf4"
    assert re.search(rf"tcgen05\.mma\.cta_group::1\.kind::{kind}\.block_scale", row["asm"]), row
    assert targets._status(_mx_mm("sm100", name), "sm100", row) == ("pass", None)
    assert row["spills"] == 0, row


def test_mx_mm_is_an_expected_emulation_where_the_mma_takes_no_scales():
    """sm80/sm89/sm90/gfx90a/gfx942 have no block-scaled MMA: an emulated compile (bf16
    wgmma) or a failed one is xfail with the reason; a block-scaled instruction there would
    mean the expectation is wrong."""
    spec = _mx_mm("sm90", "mx_mm.fp4")
    emulated = {"ok": True, "mma": ["wgmma.mma_async"]}
    assert targets._status(spec, "sm90", emulated) == ("xfail", targets.NO_BLOCK_SCALED["sm90"])
    assert targets._status(spec, "gfx942", {"ok": False, "error": "x"})[0] == "xfail"
    assert targets._status(spec, "sm90", {"ok": True, "mma": ["block_scale"]})[0] == "fail"
    assert targets._status(spec, "sm100", emulated)[0] == "fail"  # sm100 must be native


def test_chained_split_kernels_trigger_and_the_reduction_waits():
    """On sm90 every ``*_chained`` split kernel starts with griddepcontrol.launch_dependents
    (splitk.trigger) and ``splitk.reduce_pdl`` waits (griddepcontrol.wait); the plain
    reduction kernel neither. Targets without PDL have no chained specs."""
    specs = {s.name: s for s in targets.specs("sm90")}
    names = [n for n in specs if n.endswith("_chained")]
    assert len(names) >= 7, names
    for name in [*names, "splitk.reduce_pdl", "splitk.reduce"]:
        row = targets.compile_spec(specs[name], "sm90", asm=True)
        assert row["ok"] and row["spills"] == 0, (name, row.get("error"))
        triggers = "griddepcontrol.launch_dependents" in row["asm"]
        waits = "griddepcontrol.wait" in row["asm"]
        assert triggers == name.endswith("_chained"), name
        assert waits == (name == "splitk.reduce_pdl" or "_pdl_" in name), name
    assert not [s for s in targets.specs("gfx942") if s.name.endswith("_chained")]


def test_a_worker_may_take_long_but_no_kernel_may():
    """The timeout bounds each kernel's wait (a line), not the worker: three lines 2 s apart
    pass a 5 s timeout; a worker silent past it is killed and reported (rc -1)."""
    import sys

    slow = "import time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(2)\n"
    lines, _, rc = targets._run_worker([sys.executable, "-c", slow], timeout=5.0)
    assert rc == 0 and [ln.strip() for ln in lines] == ["0", "1", "2"]
    hang = "import time\nprint('{\"start\": 0}', flush=True)\ntime.sleep(30)\n"
    lines, err, rc = targets._run_worker([sys.executable, "-c", hang], timeout=5.0)
    assert rc == -1 and err == "timed out" and lines == ['{"start": 0}\n']


def test_dependent_launch_specs_wait_before_they_read():
    """Every ``*_pdl`` spec on sm90 (the decode kernels launched with programmatic dependent
    launch, the weight-only and MX ones among them: _common.DECODE_PDL) waits
    (griddepcontrol.wait); targets without PDL have none."""
    specs = [s for s in targets.specs("sm90") if s.name.endswith("_pdl")]
    names = {s.name for s in specs}
    assert {"int4wo.decode_mma_tiled_m8_pdl", "int8wo.gemv_static_pdl"} <= names, names
    for spec in specs:
        row = targets.compile_spec(spec, "sm90", asm=True)
        assert row["ok"] and "griddepcontrol.wait" in row["asm"], spec.name
    assert not [s for s in targets.specs("gfx942") if s.name.endswith("_pdl")]


def test_w4a8_rows_pipelines_its_scales():
    """kernels/w4a8_mma.py's loop carries its own num_stages (tl.range): Triton 3.6 then
    copies the float32 scales ahead with cp.async like the codes and x, where under the
    launch's num_stages alone it loaded them in the step (LDG: a DRAM latency a step, 3 us of
    21 at M 16 on an H100, bench/NOTES.md session 40). Compiled for sm90, no GPU."""
    from bench import sass

    (spec,) = sass.pick("sm90", ["w4a8.mma_rows"])
    res = sass.look(spec, "sm90", n_loops=1)
    assert res["ok"] and res["spills"] == 0
    (main,) = res["loops"]
    assert main["mix"]["IMMA"] >= 8 and main["mix"]["LDGSTS"] >= 12, main["mix"]
    assert "LDG" not in main["mix"], main["mix"]
