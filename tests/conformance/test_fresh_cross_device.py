"""conformance/fresh.py's cross_device check: a GPU checkpoint loaded on the CPU takes the CPU's
int4 packing, and its values, not its bytes, must match what was saved."""

import torch
from torch import nn

import aoq
import conformance.fresh as fresh
from conformance.checks import state_digests, without_layout


def _tiled_case(tmp_path):
    """What a cuda worker saves for an int4 weight: codes in tile order (faked on the CPU)."""
    torch.manual_seed(0)
    q = aoq.quantize_(nn.Linear(256, 128), aoq.Int4WeightOnlyConfig(group_size=64))
    q.weight = nn.Parameter(q.weight.relayout(packing="tiled"), requires_grad=False)
    x = torch.randn(3, 256)
    with torch.no_grad():
        io = {"x": x, "y": q(x)}
    torch.save(q.state_dict(), tmp_path / "sd.pt")
    spec = {"k": 256, "n": 128, "dtype": "fp32", "backend": "cuda", "threads": None}
    spec["digests"] = state_digests(q.state_dict())
    spec["output_tol"] = {"rel_factor": 2.0, "rel_min": 1e-6}
    return q, spec, io


def test_layout_is_a_digest_of_its_own(tmp_path):
    q, spec, _ = _tiled_case(tmp_path)
    plain = state_digests({"weight": q.weight.relayout(packing="plain")})
    tiled = state_digests({"weight": q.weight})
    assert plain["weight:layout"] != tiled["weight:layout"]
    assert without_layout(plain) == without_layout(tiled)
    assert plain["weight:qdata"] == tiled["weight:qdata"]  # the canonical bytes


def test_cross_device_compares_values_and_same_device_the_layout_too(tmp_path):
    _, spec, io = _tiled_case(tmp_path)
    r = fresh.cross_device(tmp_path, spec, io)
    assert r.status == "pass", r.reason
    # loaded on this CPU the weight is plain: a same-device check says its layout changed
    r = fresh.save_load(tmp_path, spec, io)
    assert r.status == "fail" and "weight:layout" in r.reason
    spec["digests"]["weight:scale"] = "0" * 20  # a value that differs is still red
    r = fresh.cross_device(tmp_path, spec, io)
    assert r.status == "fail" and "weight:scale" in r.reason
