"""aoq/tensors/int4.py: the tiled packing of W4A16 codes (attr ``packing``), which follows the
device through quantize_, moves, copy_ and both checkpoint routes."""

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import aoq
from aoq.formats.packing import pack_uint4, untile_uint4
from aoq.tensors import ActQuant, Int4Tensor
from aoq.testing.metrics import bit_equal

CUDA, CPU, META = torch.device("cuda"), torch.device("cpu"), torch.device("meta")
CONFIG = aoq.Int4WeightOnlyConfig(group_size=64)


def _pair(n: int = 128, k: int = 256, gs: int = 64) -> tuple[Int4Tensor, Int4Tensor]:
    w = torch.randn(n, k)
    args = (w, gs, ActQuant.NONE, "int4wo-g64", "{}")
    return Int4Tensor.from_float(*args), Int4Tensor.from_float(*args, packing="tiled")


def _same_values(a: Int4Tensor, b: Int4Tensor) -> None:
    ca, cb = a.canonical_tensors(), b.canonical_tensors()
    assert ca.keys() == cb.keys()
    assert all(bit_equal(ca[f], cb[f]) for f in ca)
    x = torch.randn(3, a.shape[1])
    assert bit_equal(F.linear(x, a), F.linear(x, b))


def _cpu_is_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """The packing rule answers for the CPU what it answers for a GPU (no GPU here)."""
    rule = Int4Tensor.packing_on

    def as_gpu(device, n, k, group_size, act):
        return rule(CUDA if device.type == "cpu" else device, n, k, group_size, act)

    monkeypatch.setattr(Int4Tensor, "packing_on", staticmethod(as_gpu))


def test_tiled_holds_the_plain_codes_in_tile_order():
    plain, tiled = _pair()
    assert plain.packing == "plain" and tiled.packing == "tiled"
    assert not torch.equal(tiled.qdata, plain.qdata)
    assert torch.equal(untile_uint4(tiled.qdata), plain.qdata)
    assert torch.equal(tiled.codes(), plain.codes())
    assert bit_equal(tiled.dequantize(), plain.dequantize())
    assert torch.equal(tiled.canonical_tensors()["qdata"], plain.qdata)
    _same_values(tiled, plain)


def test_only_gpu_w4a16_in_whole_tiles_is_tiled():
    assert Int4Tensor.packing_on(CUDA, 128, 256, 128, ActQuant.NONE) == "tiled"
    assert Int4Tensor.packing_on(CUDA, 128, 256, 128, ActQuant.INT8_DYNAMIC) == "plain"
    assert Int4Tensor.packing_on(CUDA, 100, 256, 128, ActQuant.NONE) == "plain"
    assert Int4Tensor.packing_on(CUDA, 128, 512, 256, ActQuant.NONE) == "plain"
    assert Int4Tensor.packing_on(CPU, 128, 256, 128, ActQuant.NONE) == "plain"
    assert Int4Tensor.packing_on(META, 128, 256, 128, ActQuant.NONE) is None  # keeps its own
    assert not Int4Tensor.tiles(torch.randn(128, 256), 128, ActQuant.NONE)  # CPU weights: plain
    _, tiled = _pair()
    with pytest.raises(ValueError, match="tiled packing is for W4A16"):
        tiled.replace(act=ActQuant.INT8_DYNAMIC, zero_point=None)
    wide = Int4Tensor.from_float(torch.randn(128, 512), 256, ActQuant.NONE, "c", "{}")
    for to_tiled in (lambda: wide.replace(packing="tiled"), lambda: wide.relayout(packing="tiled")):
        with pytest.raises(ValueError, match="tiled packing is for W4A16"):
            to_tiled()  # groups of 256 cross a tile's 128 codes
    with pytest.raises(ValueError, match="not one of"):
        tiled.replace(packing="twisted")
    with pytest.raises(TypeError, match="takes packing"):
        tiled.relayout(order="rows")


def test_relayout_converts_and_shares_scales():
    plain, tiled = _pair()
    assert plain.relayout(packing="plain") is plain and plain.for_device() is plain
    again = plain.relayout(packing="tiled")
    assert again.packing == "tiled" and torch.equal(again.qdata, tiled.qdata)
    assert again.scale is plain.scale and again.zero_point is plain.zero_point
    back = again.relayout(packing="plain")
    assert back.packing == "plain" and torch.equal(back.qdata, plain.qdata)


def test_a_move_to_the_cpu_puts_the_rows_back():
    plain, tiled = _pair()
    for moved in (tiled.to("cpu", copy=True), tiled.to(torch.bfloat16)):
        assert moved.packing == "plain" and torch.equal(moved.qdata, plain.qdata)
        assert torch.equal(moved.codes(), tiled.codes())
        assert bit_equal(moved.dequantize(torch.float32), tiled.dequantize(torch.float32))
    # the meta device runs no kernels: a tensor moved there keeps its packing
    assert tiled.to("meta").packing == "tiled" and plain.to("meta").packing == "plain"


def test_a_move_to_a_gpu_tiles_the_codes(monkeypatch):
    model = aoq.quantize_(nn.Linear(256, 128), CONFIG)  # quantized on the CPU: plain
    _cpu_is_a_gpu(monkeypatch)
    codes = model.weight.codes()
    model.to(torch.bfloat16)  # nn.Module._apply, as model.cuda() moves it
    assert isinstance(model.weight, nn.Parameter) and model.weight.packing == "tiled"
    assert torch.equal(model.weight.codes(), codes)
    plain, tiled = _pair()
    for moved in (plain.to("cpu", copy=True), plain.to(torch.bfloat16)):
        assert moved.packing == "tiled" and torch.equal(moved.qdata, tiled.qdata)
        assert torch.equal(moved.codes(), plain.codes())
    w4a8 = Int4Tensor.from_float(torch.randn(128, 256), 64, ActQuant.INT8_DYNAMIC, "c", "{}")
    rows96 = Int4Tensor.from_float(torch.randn(96, 256), 64, ActQuant.NONE, "c", "{}")
    for t in (w4a8, rows96):  # W4A8, and rows not a multiple of 64: plain on a GPU too
        assert t.to(torch.bfloat16).packing == "plain"
    assert aoq.quantize_(nn.Linear(256, 128), CONFIG).weight.packing == "tiled"  # one rule


@pytest.mark.parametrize("dst_packing", ["tiled", "plain"])
def test_copy_converts_the_source_to_the_destination_packing(dst_packing):
    plain, tiled = _pair()
    src = plain if dst_packing == "tiled" else tiled
    dst = _pair()[0].relayout(packing=dst_packing)  # other values
    src_qdata = src.qdata.clone()
    dst.copy_(src)
    assert dst.packing == dst_packing and torch.equal(src.qdata, src_qdata)
    _same_values(dst, src)
    with pytest.raises(TypeError, match="same shape and settings"):
        dst.copy_(src.replace(config_id="other"))


def test_load_state_dict_copies_a_plain_checkpoint_into_a_tiled_model(monkeypatch):
    lin = nn.Linear(256, 128)
    sd = aoq.quantize_(copy.deepcopy(lin), CONFIG).state_dict()
    _cpu_is_a_gpu(monkeypatch)
    model = aoq.quantize_(nn.Linear(256, 128), CONFIG)
    model.load_state_dict(sd)  # no assign: copy_
    assert model.weight.packing == "tiled" and sd["weight"].packing == "plain"
    _same_values(model.weight, sd["weight"])


@pytest.mark.parametrize("saved_on", ["gpu", "cpu"])
def test_checkpoints_load_into_the_packing_of_their_device(tmp_path, monkeypatch, saved_on):
    """Saved tiled (on a GPU), loaded on the CPU: plain; saved plain, loaded on a GPU: tiled."""
    if saved_on == "gpu":
        _cpu_is_a_gpu(monkeypatch)
    model = aoq.quantize_(nn.Linear(256, 128), CONFIG)
    torch.save(model.state_dict(), tmp_path / "sd.pt")
    aoq.save_pretrained(model, tmp_path / "pretrained")
    monkeypatch.undo()
    if saved_on == "cpu":
        _cpu_is_a_gpu(monkeypatch)
    saved = model.weight
    assert saved.packing == ("tiled" if saved_on == "gpu" else "plain")
    with torch.device("meta"):
        a, b = nn.Linear(256, 128), nn.Linear(256, 128)
    a.load_state_dict(torch.load(tmp_path / "sd.pt", weights_only=True), assign=True)
    aoq.load_pretrained(b, tmp_path / "pretrained")
    x = torch.randn(5, 256)
    for loaded in (a, b):
        assert loaded.weight.packing == ("plain" if saved_on == "gpu" else "tiled")
        _same_values(loaded.weight, saved)
        assert bit_equal(loaded(x), model(x))


def test_old_checkpoints_are_plain():
    _, tiled = _pair()
    # a checkpoint written before the attr existed: its attrs lack "packing"
    old = {n: v for n, v in tiled.attrs().items() if n != "packing"}
    parts = {"zero_point": tiled.zero_point, "act_scale": None, **old}
    plain_q = pack_uint4(tiled.codes())
    t = Int4Tensor(tiled.shape, tiled.dtype, qdata=plain_q, scale=tiled.scale, **parts)
    assert t.packing == "plain" and torch.equal(t.codes(), tiled.codes())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU: no CUDA device here")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
def test_quantized_on_the_cpu_then_moved_to_a_gpu_is_tiled(dtype):
    lin = nn.Linear(256, 128).to(dtype)
    on_gpu = aoq.quantize_(copy.deepcopy(lin).cuda(), CONFIG)
    moved = aoq.quantize_(lin, CONFIG).cuda()
    assert on_gpu.weight.packing == moved.weight.packing == "tiled"
    mine, theirs = moved.weight.tensors(), on_gpu.weight.tensors()
    assert mine.keys() == theirs.keys() and all(bit_equal(mine[f], theirs[f]) for f in mine)
    x = torch.randn(3, 256, dtype=dtype, device="cuda")
    assert bit_equal(moved(x), on_gpu(x))
    back = moved.cpu().weight
    assert back.packing == "plain" and torch.equal(back.codes(), on_gpu.weight.codes().cpu())
