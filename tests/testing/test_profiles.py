"""Tolerance profiles: layered data, every override with a reason, round trips never loosened."""

from pathlib import Path

import pytest

from aoq.testing.profiles import ProfileError, load_profile

REPO = Path(__file__).resolve().parents[2]
DEFAULT = (REPO / "conformance/profiles/default.toml").read_text()


@pytest.fixture()
def prof(tmp_path):
    (tmp_path / "default.toml").write_text(DEFAULT)

    def write(name: str, text: str) -> Path:
        (tmp_path / name).write_text(text)
        return tmp_path

    return write


def test_shipped_profiles_load_for_every_backend():
    for backend, arch in [
        ("cpu", "cpu"),
        ("interpret", "cpu"),
        ("cuda", "sm90"),
        ("rocm", "gfx942"),
    ]:
        p = load_profile(REPO / "conformance/profiles", backend, arch)
        assert p.files[0].endswith("profiles/default.toml")
        assert p.tolerance("output", "int8wo", "bf16", "M1-K256-N256").values["rel_factor"] > 0


def test_layers_apply_in_order_and_record_their_source(prof):
    d = prof("cuda.toml", '[[override]]\nkey = "output.rel_factor"\nvalue = 3.0\nreason = "r1"\n')
    prof(
        "cuda-sm90.toml",
        '[[override]]\nkey = "output.rel_factor"\nvalue = 4.0\n'
        'dtype = "bf16"\nreason = "hopper bf16 epilogue"\n',
    )
    p = load_profile(d, "cuda", "sm90")
    bf16 = p.tolerance("output", "int8wo", "bf16", "M1")
    fp32 = p.tolerance("output", "int8wo", "fp32", "M1")
    assert bf16.values["rel_factor"] == 4.0 and "cuda-sm90.toml#override-1" in bf16.source
    assert "hopper bf16 epilogue" in bf16.source
    assert fp32.values["rel_factor"] == 3.0 and "cuda.toml#override-1" in fp32.source
    assert (
        load_profile(d, "cuda", "sm80").tolerance("output", "x", "bf16", "M1").values["rel_factor"]
        == 3.0
    )


def test_feature_layers_are_read_only_where_the_machine_has_the_feature(prof):
    """``<backend>+<feature>.toml`` comes last, and only for a feature the worker reported; the
    shipped cpu+slow-fp8-gemm excuses the fp8 W8A8 kernel checks and nothing else."""
    d = prof("cpu.toml", "")
    prof(
        "cpu+slow-x.toml",
        '[[xfail]]\nconfig = "fp8-*"\ncheck = "*kernel"\nreason = "slow x here"\n',
    )
    assert load_profile(d, "cpu", "cpu").expectation("fp8-row", "bf16", "M1", "kernel") is None
    p = load_profile(d, "cpu", "cpu", {"slow-x": "probe says so"})
    assert p.files[-1].endswith("cpu+slow-x.toml")
    exp = p.expectation("fp8-row", "bf16", "M1", "model_kernel")
    assert exp is not None and exp.kind == "xfail" and "cpu+slow-x.toml#xfail-1" in exp.source
    assert p.expectation("fp8-row", "bf16", "M1", "output") is None
    assert load_profile(d, "cpu", "cpu", ["no-such-file"]).files == p.files[:-1]
    shipped = load_profile(REPO / "conformance/profiles", "cpu", "cpu", ["slow-fp8-gemm"])
    for config in ("fp8-row", "fp8-row-fast", "fp8-tensor"):
        for check in ("kernel", "model_kernel"):
            assert shipped.expectation(config, "fp32", "M1-K256-N256", check).kind == "xfail"
        for check in ("output", "sqnr", "save_load", "cross_device"):
            assert shipped.expectation(config, "fp32", "M1-K256-N256", check) is None
    assert shipped.expectation("fp8wo", "fp32", "M1-K256-N256", "kernel") is None
    with pytest.raises(ProfileError, match="round-trip"):
        prof("cpu+bad.toml", '[[xfail]]\ncheck = "save_load"\nreason = "no"\n')
        load_profile(d, "cpu", "cpu", ["bad"])


def test_longest_prefix_floor_and_missing_floor_is_a_clear_error(prof):
    p = load_profile(prof("cpu.toml", ""), "cpu", "cpu")
    assert p.tolerance("sqnr", "w8a8-static", "bf16", "M1").values["floor"] == 34.0
    assert p.tolerance("sqnr", "w8a8", "bf16", "M1").values["floor"] == 39.0
    with pytest.raises(ProfileError, match="no \\[sqnr.floor\\] entry .* 'int3wo'"):
        p.tolerance("sqnr", "int3wo", "bf16", "M1")


@pytest.mark.parametrize(
    "text, match",
    [
        (
            '[[override]]\nkey = "roundtrip.bit_exact"\nvalue = 0\nreason = "rocm differs"\n',
            "bit-exact everywhere",
        ),
        ('[[xfail]]\ncheck = "save_load"\nreason = "flaky on rocm"\n', "round-trip"),
        ('[[xfail]]\nconfig = "fp8*"\nreason = "covers every check"\n', "round-trip"),
        ('[[xfail]]\ncheck = "pre*"\nreason = "prequant flaky"\n', "round-trip"),
        ('[[override]]\nkey = "output.rel_factor"\nvalue = 3.0\n', "reason"),
        ('[[override]]\nkey = "output.rel_factor"\nvalue = 3.0\nreason = "  "\n', "reason"),
        ('[[override]]\nkey = "output.atol"\nvalue = 1.0\nreason = "x"\n', "not defined"),
        ('[[override]]\nkey = "output.rel_factor"\nvalue = "big"\nreason = "x"\n', "number"),
        ('[[override]]\nkey = "output.sum_error_coeff"\nvalue = 0\nreason = "x"\n', "positive"),
        ('[[skip]]\ncheck = "save_load"\nreason = "slow on rocm"\n', "round-trip"),
        ('[[skip]]\ncheck = "pre*"\nconfig = "w8a8*"\nreason = "x"\n', "round-trip"),
        ('[[skip]]\nreason = "x"\nplatform = "y"\n', "unknown fields"),
        ("[output]\nrel_factor = 9.0\n", "only \\[\\[override\\]\\]"),
        ("[[xfail]\n", "not valid TOML"),
    ],
)
def test_bad_profiles_are_rejected(prof, text, match):
    d = prof("rocm.toml", text)
    with pytest.raises(ProfileError, match=match):
        load_profile(d, "rocm", "gfx942")


def test_default_may_not_turn_off_bit_exact_round_trips(tmp_path):
    (tmp_path / "default.toml").write_text(DEFAULT.replace("bit_exact = true", "bit_exact = false"))
    with pytest.raises(ProfileError, match="bit_exact must be true"):
        load_profile(tmp_path, "cpu", "cpu")


def test_round_trip_tolerance_is_always_bit_exact(prof):
    loose = (
        '[[override]]\nkey = "output.sum_error_coeff"\nvalue = 50.0\nreason = "loose"\n'
        '[[override]]\nkey = "output.rel_factor"\nvalue = 50.0\nreason = "loose"\n'
        '[[skip]]\ncheck = "cross_device"\nreason = "not across devices here"\n'
    )
    p = load_profile(prof("cuda.toml", loose), "cuda", "sm90")
    for check in ("save_load", "pretrained", "prequant_bias", "pack"):
        for k in (None, 4096):
            assert p.tolerance(check, "int8wo", "fp32", "M1", k).values == {"bit_exact": True}
        assert p.expectation("int8wo", "fp32", "M1", check) is None


def test_output_floor_grows_with_sqrt_k_in_units_of_float32_eps(prof):
    p = load_profile(prof("cpu.toml", ""), "cpu", "cpu")
    eps = 2.0**-23
    for check in ("output", "cross_device"):
        t = p.tolerance(check, "int8wo", "fp32", "M1-K4096-N4096", 4096)
        assert t.values["k"] == 4096 and t.values["sum_error_coeff"] == pytest.approx(0.2041)
        assert t.values["rel_min"] == pytest.approx(2.0 * 0.2041 * 64 * eps)
    small = p.tolerance("output", "int8wo", "fp32", "M1-K256-N256", 256).values["rel_min"]
    large = p.tolerance("output", "int8wo", "fp32", "M1-K4096-N4096", 4096).values["rel_min"]
    assert large / small == pytest.approx(4.0)  # sqrt(4096 / 256)
    # what the fixed 1e-6 floor failed on the H200 (int8wo/int4wo fp32, K=4096, loaded on the
    # CPU: 1.12e-6 and 1.13e-6) is inside the derived floor; K=256 is held tighter than 1e-6
    assert 1.14e-6 < large < 4e-6 and small < 1e-6
    # without K (the model case) no floor is derived
    assert "rel_min" not in p.tolerance("output", "int8wo", "fp32", "model-minilm").values


def test_the_floor_coefficient_matches_an_in_order_float32_sum():
    """sum_error_coeff is the expected norm-wise relative error of a float32 dot product added
    in order, in units of sqrt(K) eps32: sqrt(1/6)/2. Measure it."""
    import torch

    coeff = load_profile(REPO / "conformance/profiles", "cpu", "cpu").base["output.sum_error_coeff"]
    assert coeff == pytest.approx(6**-0.5 / 2, rel=1e-3)
    g = torch.Generator().manual_seed(0)
    for k in (256, 4096):
        x, w = torch.randn(4, k, generator=g), torch.randn(64, k, generator=g)
        exact = x.double() @ w.double().t()
        acc = torch.zeros(4, 64)
        for i in range(k):  # float32, one product at a time: the order a GEMV loop adds in
            acc += x[:, i : i + 1] * w[:, i]
        rel = float((acc.double() - exact).norm() / exact.norm())
        assert 0.3 * coeff < rel / (k**0.5 * 2.0**-23) < 1.5 * coeff, (k, rel)


def test_expectations_xfail_and_whole_case_skip(prof):
    d = prof(
        "cpu.toml",
        '[[xfail]]\nconfig = "int4wo-*"\nshape = "*-N200"\ncheck = "kernel"\n'
        'reason = "needs N % 16"\n[[skip]]\ndtype = "fp16"\nconfig = "fp8*"\nreason = "no"\n'
        '[[skip]]\ncheck = "*"\nconfig = "mx*"\nreason = "a whole case may be skipped"\n',
    )
    p = load_profile(d, "cpu", "cpu")
    e = p.expectation("int4wo-g128", "bf16", "M7-K256-N200", "kernel")
    assert e is not None and e.kind == "xfail" and e.source.endswith("cpu.toml#xfail-1")
    assert p.expectation("int4wo-g128", "bf16", "M7-K256-N200", "output") is None
    assert p.expectation("fp8wo", "fp16", "M1", None).kind == "skip"
    assert p.expectation("fp8wo", "bf16", "M1", None) is None
    assert p.expectation("mx-int8", "bf16", "M1", None).kind == "skip"
