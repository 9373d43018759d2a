"""kernels/decode_mma.py with MX fp4 and fp8 weights (WFMT 4, 5; e5m2 8): the codes and their
block's power of two assembled into bf16 pairs (kernels/bf16_codes.fp4_codes; fp16 x: those as
float32, rounded once to fp16), checked against the emulated path's weights
(aoq.formats.mx.mx_dequantize to x's dtype): bit for bit with one-hot activations, for every
code and E8M0 byte, on both the one-multiply path and the BIG one (scales above 2**1, NaN).
Under TRITON_INTERPRET=1 (the float path) and on a GPU (the inline assembly)."""

import functools

import pytest
import torch
from _mx_cases import DEV, GPU, NEEDS_KERNELS, OUT, one_hot_decodes, random_decode, same
from _pairwise import pairwise
from aoq.kernels import decode_mma as dm
from aoq.kernels._common import WeightFormat

from aoq.formats.mx import MXElem, mx_dequantize, pack_mx_codes
from aoq.tensors.mx import big_scale_flag
from aoq.testing.metrics import max_rel_error

pytestmark = NEEDS_KERNELS
FP4 = WeightFormat.MX_FP4
FP8 = WeightFormat.MX_FP8
E5M2 = WeightFormat.MX_FP8_E5M2
SMALL = [0, 1, 2, 60, 100, 126, 127, 128]
"""E8M0 bytes whose 2**(b - 1) is a bf16: one multiply (fp4; fp8's limit is 134)."""
LARGE = [129, 130, 200, 252]
"""Bytes that need fp4's second multiply (every fp4 value stays finite up to 252)."""
FP8_SMALL = [0, 1, 2, 60, 100, 127, 130, 134]
FP8_LARGE = [135, 136, 200, 246]
"""fp8 e4m3: one multiply up to 134; every value finite up to 246 (448 * 2**119)."""
E5M2_SMALL = [0, 1, 2, 60, 100, 127, 140, 142]
E5M2_LARGE = [143, 150, 200, 239]
"""fp8 e5m2: one multiply up to 142; every value finite up to 239 (57344 * 2**112)."""
ELEMS = {FP4: MXElem.FP4_E2M1, FP8: MXElem.FP8_E4M3, E5M2: MXElem.FP8_E5M2}
LIMIT = {FP4: 128, FP8: 134, E5M2: 142}
FORMATS = pytest.mark.parametrize("wfmt", [FP4, FP8, E5M2], ids=["fp4", "fp8", "e5m2"])
WFMTS = {"fp4": FP4, "fp8": FP8, "e5m2": E5M2}
XDTS = {"bf16": torch.bfloat16, "fp16": torch.float16}
BIG = {"one-multiply": False, "big": True}
HOST = {"host-flag": True, "device-flag": False}
LAYOUT = {"row-major": False, "group-major": True}
TILES = {
    "default": None, "step128": {"STEP_K": 128}, "x-operand-a": {"WT": False, "num_warps": 4},
    "per-block": {"WIDE": False}, "wide": {"WIDE": True},
    "wide-step128-x-a": {"WIDE": True, "STEP_K": 128, "WT": False, "num_warps": 4},
}  # fmt: skip


def _flag(scale: torch.Tensor, host: bool = True, wfmt=FP4) -> torch.Tensor:
    """The weight's BIG flag as MXWeight.build_derived computes it (its length the answer:
    the kernel compiled for one path), or (``host`` False) as under CUDA graph capture: the
    answer on the device, read by the kernel."""
    if host:
        return big_scale_flag(scale, LIMIT[wfmt])
    return (scale > LIMIT[wfmt]).any().to(torch.int32).reshape(1)


def _codes(wfmt, n: int, k: int, g: torch.Generator) -> torch.Tensor:
    """Random codes, row 0 every code in turn: fp4's 16; e4m3's 254 (the NaN codes 0x7F and
    0xFF are not served: MXWeight.build_derived); e5m2's 248 (nor are its Inf and NaN)."""
    if wfmt is FP4:
        codes = torch.randint(0, 16, (n, k), generator=g, dtype=torch.uint8)
        codes[0] = torch.arange(k, dtype=torch.uint8) % 16
        return codes
    special = 0x7F if wfmt is FP8 else 0x7C
    finite = torch.tensor([c for c in range(256) if c & special != special], dtype=torch.uint8)
    codes = finite[torch.randint(0, len(finite), (n, k), generator=g)]
    codes[0] = finite[torch.arange(k) % len(finite)]
    return codes


def _weight(n: int, k: int, bytes_: list[int], bs: int = 32, seed: int = 0, wfmt=FP4,
            dtype=torch.bfloat16):  # fmt: skip
    """Random codes (:func:`_codes`) and E8M0 bytes drawn from ``bytes_`` -> (packed codes,
    bytes [N, K / bs], the emulated ``dtype`` weight as float32). With bytes above the one-multiply
    limit: row 1's first block holds one largest code (fp4 6.0, e4m3 448, e5m2 57344) under byte 253
    (inf: it overflows) among zeros, row 2's second block is NaN (byte 255)."""
    g = torch.Generator().manual_seed(seed)
    codes = _codes(wfmt, n, k, g)
    pick = torch.randint(0, len(bytes_), (n, k // bs), generator=g)
    scale = torch.tensor(bytes_, dtype=torch.uint8)[pick]
    if max(bytes_) > LIMIT[wfmt]:
        codes[1, :bs], codes[1, 3], scale[1, 0] = 0, {FP4: 7, FP8: 0x7E, E5M2: 0x7B}[wfmt], 253
        scale[2, 1] = 255
    elem = ELEMS[wfmt]
    if wfmt is not FP4:  # the reference takes float8 codes
        codes = codes.view(torch.float8_e4m3fn if wfmt is FP8 else torch.float8_e5m2)
    want = mx_dequantize(codes, scale, elem, bs, 1, dtype).float()
    return pack_mx_codes(codes, elem).to(DEV), scale.to(DEV), want


BYTES = {
    (FP4, False): SMALL, (FP4, True): SMALL + LARGE, (FP8, False): FP8_SMALL,
    (FP8, True): FP8_SMALL + FP8_LARGE, (E5M2, False): E5M2_SMALL,
    (E5M2, True): E5M2_SMALL + E5M2_LARGE,
}  # fmt: skip


# every format x scale path (one multiply, BIG) x activation dtype: every code under every
# byte, rounded to x's dtype, is what this test pins, so that product stays whole, and so
# does format x scale path x where the BIG flag is known (the host: BIG 0 or 1 compiled; the
# device: BIG 2, read by the kernel); the scales' layout (row- or group-major strides) meets
# every value of the others: 12 of 48 cases
@pytest.mark.parametrize(
    "wfmt,big,xdt,group_major,host",
    pairwise(WFMTS, BIG, XDTS, LAYOUT, HOST, full=[(0, 1, 2), (0, 1, 4)]),
)
def test_one_hot_is_each_emulated_weight_exactly(wfmt, big, group_major, host, xdt):
    """Row r of x is e_k for 16 columns k at a time: y[r, n] = the emulated path's weight
    [n, k] in x's dtype (float32 products of exact values: one term and zeros), every code
    under every byte (subnormal code 0.5 at b = 0: 2**-128; in fp16 the small bytes round
    to zero or fp16 subnormals and the large ones overflow, as the reference's cast), with
    the scales row-major or group-major. An infinite weight (overflow) comes out as inf
    where x selects it and NaN elsewhere in its row (0 * inf), a NaN block makes its row
    NaN: as the reference's. The BIG flag known on the host (one compiled path) or read by
    the kernel."""
    n, k = 72, 128 if wfmt is FP4 else 256
    q, s, want = _weight(n, k, BYTES[wfmt, big], wfmt=wfmt, dtype=xdt)
    sc = s.t().contiguous().t() if group_major else s
    flag = _flag(s, host, wfmt)
    assert flag.numel() == (1 if not host else 2 if big else 0)
    for k0, x, y in one_hot_decodes(q, sc, flag, k // 32, wfmt, n, k, xdt):
        assert same(y, x.float().cpu() @ want.T), k0
        if k0 == 0 and big:  # (in fp16 more of row 1 overflows: 0 * inf makes y[3, 1] NaN)
            assert y[0, 2].isnan() and (xdt != torch.bfloat16 or y[3, 1].item() == float("inf"))


@pytest.mark.parametrize("big", [False, True], ids=["one-multiply", "big"])
@FORMATS
def test_wide_steps_one_hot_is_each_emulated_weight_exactly(big, wfmt):
    """WIDE (a step's four blocks decoded at once, each code by its own block's byte, on one
    MMA over the step): every code under every byte is the emulated path's weight, as the
    per-block steps' (a block given the wrong byte would read a power of two off)."""
    n, k = 72, 128 if wfmt is FP4 else 256
    q, s, want = _weight(n, k, BYTES[wfmt, big], wfmt=wfmt)
    tile = {"WIDE": True, "STEP_K": 128}
    for k0, x, y in one_hot_decodes(q, s, _flag(s, True, wfmt), k // 32, wfmt, n, k,
                                    torch.bfloat16, tile):  # fmt: skip
        assert same(y, x.float().cpu() @ want.T), k0


# every format x activation dtype, each with every tile (steps of four blocks, of two, x as
# operand A, per block, WIDE at two and four blocks), row count (1 and 5 padded, 16 a full
# tile) and split, each pair once: 19 of 216 cases (each code's bit-exact decode: test_one_hot)
@pytest.mark.parametrize(
    "wfmt,xdt,tile,m,split", pairwise(WFMTS, XDTS, TILES, [1, 5, 16], [1, 3], full=2)
)
def test_matches_emulated_matmul(m, split, tile, wfmt, xdt):
    """Random activations and a quantized random weight (unaligned N, a bias, K split in
    ranges; steps of two and four blocks; either MMA orientation): the emulated path's
    float32-accumulated product, up to summation order and one rounding to x's dtype."""
    flag_of = functools.partial(_flag, wfmt=wfmt)
    want, y = random_decode(ELEMS[wfmt], wfmt, flag_of, m, split, xdt, tile)
    assert max_rel_error(want, y) < 4e-3


def test_serves_bf16_and_fp16_activations_and_the_flag():
    x = torch.zeros(1, 256, dtype=torch.bfloat16, device=DEV)
    q, s, _ = _weight(8, 256, SMALL)
    flag = _flag(s)
    assert dm.serves(x, q, 8, FP4, s, flag)
    assert dm.serves(x.half(), q, 8, FP4, s, flag)  # fp16 pairs rounded from float32
    assert not dm.serves(x.float(), q, 8, FP4, s, flag)
    assert not dm.serves(x, q, 8, FP4, s, None)  # no flag: unknown scales
    assert not dm.serves(x, q, 8, FP4, s, flag.float())
    assert dm.serves(x, q, 8, FP4, s, _flag(s, host=False))
    assert not dm.serves(x, q, 8, FP4, s, torch.zeros(3, dtype=torch.int32, device=DEV))
    assert not dm.serves(x, q, 16, FP4, s, flag)  # blocks of 16
    q8, s8, _ = _weight(8, 256, FP8_SMALL, wfmt=FP8)
    qe, se, _ = _weight(8, 256, E5M2_SMALL, wfmt=E5M2)
    assert dm.serves(x, qe, 8, E5M2, se, _flag(se, wfmt=E5M2))
    assert dm.serves(x, q8, 8, FP8, s8, _flag(s8, wfmt=FP8))


@pytest.mark.parametrize("m", [1, 8])
@pytest.mark.parametrize("big", [False, True], ids=["one-multiply", "big"])
@FORMATS
def test_eight_rows_are_sixteen_rows_bit_for_bit(m, big, wfmt):
    """x padded to 8 rows (tile ROWS 8, M <= 8) gives the 16-row tile's output bit for bit,
    on either path of the block scale (on a GPU; under the interpreter up to float32
    summation order: numpy's dot sums in an order that follows the shape). Bytes just past
    the one-multiply limit, so no sum overflows (whose inf or NaN would follow the order)."""
    n, k = 72, 256
    small = {FP4: SMALL, FP8: FP8_SMALL, E5M2: E5M2_SMALL}[wfmt]
    q, s, _ = _weight(n, k, small + [LIMIT[wfmt] + 1] * big, wfmt=wfmt)
    sg = s.t().contiguous().t()
    x = torch.randn(m, k, generator=torch.Generator().manual_seed(m)).to(torch.bfloat16)
    ys = []
    for rows in (16, 8):
        ys.append(torch.empty(m, n, dtype=OUT, device=DEV))
        dm.decode_mma(x.to(DEV), q, sg, _flag(s, wfmt=wfmt), None, ys[-1], k // 32, wfmt, 3,
                      tile={"ROWS": rows})  # fmt: skip
    assert torch.equal(ys[0].isnan(), ys[1].isnan())
    a, b = ys[0].nan_to_num(), ys[1].nan_to_num()
    assert torch.equal(a, b) if GPU else max_rel_error(a, b) < 1e-6


@pytest.mark.parametrize("tile_b, tile_r", [(64, 64), (32, 64), (32, 32)])
@pytest.mark.parametrize("big", [False, True], ids=["one-multiply", "big"])
def test_fp4_codes_in_tiles_are_the_row_major_codes(tile_b, tile_r, big):
    """MX fp4 codes in tile_uint4's order (a probe: MXTensor ships them row-major;
    ``python -m bench.decode_rows --formats mxfp4 --extra '{"mxfp4": [{"TILED": true}]}'``
    times it) give the row-major codes' bits: the same bytes read from where they moved."""
    from aoq.formats.packing import tile_uint4

    n, k, m = 128, 1024, 3
    q, s, _ = _weight(n, k, SMALL + [LIMIT[FP4] + 1] * big)
    x = torch.randn(m, k, generator=torch.Generator().manual_seed(3)).to(torch.bfloat16).to(DEV)
    want = torch.empty(m, n, dtype=OUT, device=DEV)
    # (the per-block steps, as the tiled codes take: WIDE sums in another order)
    dm.decode_mma(x, q, s, _flag(s), None, want, k // 32, FP4, 2, tile={"WIDE": False})
    y = torch.empty(m, n, dtype=OUT, device=DEV)
    dm.decode_mma(x, tile_uint4(q, tile_b, tile_r), s, _flag(s), None, y, k // 32, FP4, 2,
                  tile={"TILE_B": tile_b, "TILE_R": tile_r}, tiled=True)  # fmt: skip
    assert torch.equal(y.nan_to_num(), want.nan_to_num())
    assert torch.equal(y.isnan(), want.isnan())
