"""Ahead-of-time compilation (no GPU needed): a subset of targets in CI, one NVIDIA and one
AMD (the full set: ``python -m aoq.kernels.targets``, about a minute on 2 cores)."""

import pytest
from aoq.kernels import targets

CI_TARGETS = ("sm90", "gfx942")


@pytest.mark.parametrize("target", CI_TARGETS)
def test_every_kernel_compiles_with_matrix_instructions(target):
    for spec, row in zip(targets.specs(target), targets.compile_target(target), strict=True):
        status, reason = targets._status(spec, target, row)
        assert status in ("pass", "xfail"), (spec.name, reason)
        if status == "pass":
            assert row["spills"] == 0, (spec.name, row)


def test_expected_impossibility_is_recorded():
    fp8 = [s for s in targets.specs("sm80") if s.fp8][0]
    assert targets._status(fp8, "sm80", {"ok": False, "error": "x"}) == (
        "xfail",
        targets.NO_FP8["sm80"],
    )
    assert targets._status(fp8, "sm80", {"ok": True})[0] == "fail"
