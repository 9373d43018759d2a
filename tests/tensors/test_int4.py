"""aoq/tensors/int4.py: the tiled packing of W4A16 codes (attr ``packing``)."""

import io

import pytest
import torch

from aoq.formats.packing import pack_uint4, untile_uint4
from aoq.tensors import ActQuant, Int4Tensor
from aoq.testing.metrics import bit_equal


def _pair(n: int = 128, k: int = 256, gs: int = 64) -> tuple[Int4Tensor, Int4Tensor]:
    w = torch.randn(n, k)
    args = (w, gs, ActQuant.NONE, "int4wo-g64", "{}")
    return Int4Tensor.from_float(*args), Int4Tensor.from_float(*args, packing="tiled")


def test_tiled_holds_the_plain_codes_in_tile_order():
    plain, tiled = _pair()
    assert plain.packing == "plain" and tiled.packing == "tiled"
    assert not torch.equal(tiled.qdata, plain.qdata)
    assert torch.equal(untile_uint4(tiled.qdata), plain.qdata)
    assert torch.equal(tiled.codes(), plain.codes())
    assert bit_equal(tiled.dequantize(), plain.dequantize())
    assert torch.equal(tiled.canonical_tensors()["qdata"], plain.qdata)
    x = torch.randn(3, 256)
    assert bit_equal(torch.nn.functional.linear(x, tiled), torch.nn.functional.linear(x, plain))


def test_only_gpu_w4a16_in_whole_tiles_is_tiled():
    w = torch.randn(128, 256)
    assert not Int4Tensor.tiles(w, 128, ActQuant.NONE)  # CPU weights stay plain
    _, tiled = _pair()
    with pytest.raises(ValueError, match="tiled packing is for W4A16"):
        tiled.replace(act=ActQuant.INT8_DYNAMIC, zero_point=None)
    with pytest.raises(ValueError, match="tiled packing is for W4A16"):
        wide = Int4Tensor.from_float(torch.randn(128, 512), 256, ActQuant.NONE, "c", "{}")
        wide.replace(packing="tiled")  # groups of 256 cross a tile's 128 codes
    with pytest.raises(ValueError, match="not one of"):
        tiled.replace(packing="twisted")


def test_packing_round_trips_and_old_checkpoints_are_plain():
    _, tiled = _pair()
    buf = io.BytesIO()
    torch.save({"w": tiled}, buf)
    buf.seek(0)
    back = torch.load(buf, weights_only=True)["w"]
    assert back.packing == "tiled" and torch.equal(back.qdata, tiled.qdata)
    # a checkpoint written before the attr existed: its attrs lack "packing"
    old = {n: v for n, v in tiled.attrs().items() if n != "packing"}
    parts = {"zero_point": tiled.zero_point, "act_scale": None, **old}
    plain_q = pack_uint4(tiled.codes())
    t = Int4Tensor(tiled.shape, tiled.dtype, qdata=plain_q, scale=tiled.scale, **parts)
    assert t.packing == "plain" and torch.equal(t.codes(), tiled.codes())
