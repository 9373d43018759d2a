"""The matrix: one source of cases, readable ids, every shape kind, whole-cell shards."""

import re

import pytest

from aoq.testing import matrix
from aoq.testing.cases import inference_configs


def test_ids_read_like_config_dtype_backend_shape():
    cases = matrix.cases("cuda")
    ids = [c.id for c in cases]
    assert len(ids) == len(set(ids))
    assert "int4wo-g128/bf16/cuda/M1-K4096-N4096" in ids
    for i in ids:
        assert re.fullmatch(
            r"[\w.-]+/(bf16|fp16|fp32)/cuda/(M[\dx]+-K\d+-N\d+(-strided)?|model-minilm)", i
        ), i


def test_every_registered_config_dtype_and_shape_kind_is_there():
    cases = matrix.cases("cpu")
    assert {c.config.id for c in cases} == {c.id for c in inference_configs()}
    assert {c.dtype for c in cases} == {"bf16", "fp16", "fp32"}
    kinds = {c.shape.kind for c in cases if c.shape}
    assert {"aligned", "unaligned-K", "unaligned-N", "M1", "M0", "3d", "strided"} <= kinds
    assert sum(c.shape is None for c in cases) == len(inference_configs()) * 3  # model cases
    m0 = next(c.shape for c in cases if c.shape and c.shape.kind == "M0")
    assert m0.m == 0 and next(c.shape for c in cases if c.shape and c.shape.kind == "3d").lead == (
        2,
        5,
    )


def test_quick_and_interpret_subsets_are_smaller():
    full, quick = matrix.cases("cpu"), matrix.cases("cpu", quick=True)
    assert set(c.id for c in quick) < set(c.id for c in full)
    assert sum(c.shape is None for c in quick) == len(inference_configs())  # bf16 models
    interp = matrix.cases("interpret", quick=True)
    assert all(c.shape is not None and c.shape.k <= 256 for c in interp)


def test_case_json_round_trip():
    for case in matrix.cases("interpret"):
        assert matrix.Case.from_json(case.to_json()) == case


def test_shards_partition_whole_cells():
    cases = matrix.cases("cpu", quick=True)
    parts = [matrix.shard(cases, i, 3) for i in (1, 2, 3)]
    assert sorted(c.id for p in parts for c in p) == sorted(c.id for c in cases)
    cells = [{c.cell for c in p} for p in parts]
    assert not (cells[0] & cells[1]) and not (cells[1] & cells[2])


def test_only_filter_and_shard_parse():
    got = matrix.cases("cpu", only=["int8wo/fp32/*", "*/M1-*"])
    assert all(c.id.startswith("int8wo/fp32/") or "/M1-" in c.id for c in got)
    assert matrix.parse_shard("2/4") == (2, 4)
    for bad in ("0/2", "3/2", "x"):
        with pytest.raises(ValueError, match="--shard"):
            matrix.parse_shard(bad)
    with pytest.raises(ValueError, match="backend"):
        matrix.cases("tpu")


def test_injected_cases_are_marked_and_unknown_ones_rejected():
    base = matrix.cases("cpu", only=["int8wo/fp32/cpu/M1-*"])
    got = matrix.inject(base, ["abort"])
    assert got[-1].id == "int8wo/fp32/cpu/M1-K256-N256+abort"
    with pytest.raises(ValueError, match="unknown injection"):
        matrix.inject(base, ["explode"])
