"""aoq/testing/goals.py: the speed goals as data name configs the bench times, and the cells
the torchao goals compare."""

from aoq.testing.goals import GOALS, peer_cells


def test_every_goal_names_a_config_the_bench_times():
    from aoq.testing.cases import config_ids, inference_configs

    ids = set(config_ids(inference_configs()))
    for g in GOALS:
        assert g.config in ids or g.config.startswith("act_quant."), g


def test_peer_cells_are_the_torchao_goals_at_m1():
    shapes = ("M1-K8192-N8192", "M1-K4096-N14336", "M1-K14336-N4096")
    want = {(c, s) for c in ("int4wo-g128", "int8wo", "fp8wo") for s in shapes}
    assert peer_cells() == want
