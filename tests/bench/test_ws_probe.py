"""bench/ws_probe.py's kernel: x and the codes through tensor descriptors, both orientations,
every format, split or not, with and without warp specialization, against the float64 product
of the same dequantized weights (the probe's error column is this check).

Runs under TRITON_INTERPRET=1 on CPU tensors (make kernels-interpret), where the
warp-specialized loop runs as the plain one, and on a GPU; the plain CPU unit run skips it."""

import pytest
import torch
from aoq.kernels._common import INTERPRET

from bench import wt_probe as wp

GPU = torch.cuda.is_available() and not INTERPRET
pytestmark = pytest.mark.skipif(
    not (INTERPRET or GPU), reason="needs TRITON_INTERPRET=1 before import, or a GPU"
)
DEV = "cuda" if GPU else "cpu"


@pytest.mark.parametrize(
    ("fmt", "swap", "split", "ws", "desc"),
    [("int8", 1, 1, 1, 1), ("int8", 0, 2, 0, 2), ("fp8", 1, 2, 0, 1), ("fp8", 0, 1, 1, 2),
     ("int4", 1, 2, 1, 2), ("int4", 0, 1, 0, 1), ("int8", 1, 2, 0, 2)],
)  # fmt: skip
def test_partials_sum_to_the_float64_product(fmt, swap, split, ws, desc):
    """desc 1: the host's tensor descriptors; 2: each program makes its own."""
    torch.manual_seed(0)
    x = torch.randn(5, 256, device=DEV).to(torch.bfloat16)
    q, s, z, deq = wp.make_weight(fmt, 128, 256, DEV)
    cfg = {"ws": ws, "swap": swap, "BLOCK_N": 64, "BLOCK_K": 128, "warps": 4, "stages": 2}
    cfg["desc"] = desc
    got, _ = wp.run(x, (q, s, z), fmt, dict(cfg, split=split))
    want = x.double() @ deq.T
    assert ((got.double() - want).norm() / want.norm()).item() < 1e-5


def test_every_variant_passes_descriptors_and_pairs_each_tile_with_and_without_ws():
    from bench import ws_probe  # noqa: PLC0415

    for fmt in ("int8", "fp8", "int4"):
        cfgs = ws_probe.variants(fmt)
        assert all("ws" in c for c in cfgs)
        plain = [{**c, "ws": 0} for c in cfgs if c["ws"]]
        assert sorted(map(str, plain)) == sorted(str(c) for c in cfgs if not c["ws"])


def test_ws_desc_and_where_keep_what_they_name():
    import argparse

    from bench import ws_probe  # noqa: PLC0415

    args = argparse.Namespace(ws="off", desc="device", where="swap=1,BLOCK_K=128,stages=3")
    cfgs = ws_probe.kept(args)("int8")
    assert cfgs and all(c["ws"] == 0 and c["desc"] == 2 and c["swap"] == 1 for c in cfgs)
    assert {c["BLOCK_K"] for c in cfgs} == {128} and {c["stages"] for c in cfgs} == {3}
    assert {c["BLOCK_N"] for c in cfgs} == {64, 128}
    both = argparse.Namespace(ws="both", desc="both", where="")
    assert len(ws_probe.kept(both)("int4")) == len(ws_probe.variants("int4"))
