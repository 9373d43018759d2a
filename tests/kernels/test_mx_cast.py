"""aoq::mx_cast / aoq::mx_qdq: the ops against aoq.formats.mx, opcheck, and the Triton kernels
bit for bit against the reference (codes packed along the blocked dim, scales, qdq values),
under the interpreter (in this process when TRITON_INTERPRET=1 is set, else in a subprocess
that sets it before anything defines a kernel) and on a GPU when one is present; and the
compiled kernels' shape on sm90 without a GPU (no shared memory where none is meant)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from aoq.kernels import mx_cast as k
from aoq.kernels.mx_ops import mx_cast_reference, mx_qdq_reference, parse_tile
from formats.test_mx_oracle import make_data
from interpreter_env import skip_if_numpy_too_new

from aoq.formats.mx import MXElem, mx_dequantize, mx_quantize, unpack_mx_codes
from aoq.testing.metrics import bit_equal

ELEMS = [e.value for e in MXElem]
RULES = ["floor", "rceil"]
# tiles the bench sweeps: every one must give the reference's bits (dim 1, then dim 0)
TILES = ["b64h1w2", "b128h4w4", "l2g2r1w2", "l8g1r2w2", "l4g2r4w4"]


def _cases(elem: str, dim: int, dtypes: bool, device: str) -> list[tuple[str, torch.Tensor]]:
    """The oracle's hard blocks for ``elem`` (NaN/Inf/subnormal/zero blocks, ties, +-max) laid
    along ``dim`` ([96, 128] for dim 1, its transpose for dim 0: 96 columns or 384 blocks, no
    multiple of a tile), optionally other dtypes at an unaligned [64, 96], and an empty one."""
    x = torch.from_numpy(make_data(elem)).to(device)  # [R, 128] float32, blocks along dim 1
    x = x[: x.shape[0] // 32 * 32]
    out = [("oracle", x if dim == 1 else x.t())]
    for dtype in (torch.bfloat16, torch.float16, torch.float64) if dtypes else ():
        out.append((str(dtype), (torch.randn(64, 96, device=device) * 3).to(dtype)))
    out.append(("M0", torch.randn(0, 64, device=device)))
    return out


def _matches(x: torch.Tensor, elem: str, bs: int, dim: int, rule: str, **kw: object) -> bool:
    codes, scale = k.mx_cast_triton(x, elem, bs, dim, rule, **kw)  # type: ignore[arg-type]
    rc, rs = mx_cast_reference(x.cpu(), elem, bs, dim, rule)
    q, _ = k.mx_cast_triton(x, elem, bs, dim, rule, True, **kw)  # type: ignore[arg-type]
    rq = mx_qdq_reference(x.cpu(), elem, bs, dim, rule)
    return bit_equal(codes.cpu(), rc) and bit_equal(scale.cpu(), rs) and bit_equal(q.cpu(), rq)


def check_kernel_matches_reference(
    device: str, full: bool = True, hw_fp8: bool = False, elems: list[str] = ELEMS
) -> list[str]:
    """Codes, scales and qdq bits equal the reference's for every elem x dim x case, both
    rules, default tiles; then other tiles and block sizes on a subset. ``full=False`` (GPUs,
    where each constexpr combination compiles): RCEIL and the other dtypes only for fp8_e4m3
    and int8 (the RCEIL subnormal edge). ``hw_fp8``: fp8 through the GPU's conversion."""
    bad = []
    for elem in elems:
        more = full or elem in ("fp8_e4m3", "int8")
        for dim in (0, 1):
            for i, (name, x) in enumerate(_cases(elem, dim, more, device)):
                # the oracle's blocks get both rules, the other dtypes one each
                rules = RULES if name == "oracle" and more else [RULES[i % 2]]
                for rule in rules:
                    if x.shape[dim] % 32 == 0 and not _matches(x, elem, 32, dim, rule):
                        bad.append(f"{name}/{elem}/{rule}/dim{dim}")
    x = torch.from_numpy(make_data("fp6_e2m3")).to(device)[:64]  # [64, 128]
    for tile in TILES:
        dim = 1 if tile.startswith("b") else 0
        for elem in ("fp6_e2m3", "fp4_e2m1") if full else ("fp6_e2m3",):
            if not _matches(x, elem, 32, dim, "rceil", tile=parse_tile(tile), hw_fp8=hw_fp8):
                bad.append(f"tile {tile}/{elem}")
    for bs in (8, 16, 64) if full else (16,):
        for dim in (0, 1):
            if not _matches(x, "fp6_e3m2", bs, dim, "floor", hw_fp8=hw_fp8):
                bad.append(f"block {bs}/dim{dim}")
    return bad + check_packed_matches_reference(device, full, elems)


def check_packed_matches_reference(device: str, full: bool, elems: list[str]) -> list[str]:
    """The two-elements-a-word path (kernels/mx_packed.py; sm90's paired instructions on a
    GPU, their float32 emulation under the interpreter): the oracle's hard blocks rounded to
    bf16 (ties, subnormals, NaN/Inf blocks, +-max), both dims and rules, an unaligned shape
    (masked tiles), other tiles and block sizes."""
    bad = []
    kw = {"packed": True, "hw_fp8": False}
    for elem in elems:
        x = torch.from_numpy(make_data(elem)).to(device)
        x = x[: x.shape[0] // 32 * 32].to(torch.bfloat16)
        for dim in (0, 1):
            for rule in RULES:
                if not _matches(x if dim == 1 else x.t(), elem, 32, dim, rule, **kw):
                    bad.append(f"packed/{elem}/{rule}/dim{dim}")
            y = (torch.randn(64, 96, device=device) * 3).to(torch.bfloat16)
            if not _matches(y if dim == 1 else y.t(), elem, 32, dim, "floor", **kw):
                bad.append(f"packed/{elem}/unaligned/dim{dim}")
    x = torch.from_numpy(make_data("fp6_e2m3")).to(device)[:64].to(torch.bfloat16)
    for tile in TILES:
        dim = 1 if tile.startswith("b") else 0
        for elem in ("fp6_e2m3", "fp4_e2m1", "int8") if full else ("fp6_e2m3",):
            if not _matches(x, elem, 32, dim, "rceil", tile=parse_tile(tile), **kw):
                bad.append(f"packed/tile {tile}/{elem}")
    for bs in (8, 16, 64) if full else (16,):
        for dim in (0, 1):
            if not _matches(x, "fp6_e3m2", bs, dim, "floor", **kw):
                bad.append(f"packed/block {bs}/dim{dim}")
    return bad


INTERPRETED = r"""
import importlib, sys
sys.path[:0] = sys.argv[1:3]
print("BAD", getattr(importlib.import_module(sys.argv[3]), sys.argv[4])("cpu"))
"""


def run_interpreted(module: str, check: str) -> None:
    """``module.check("cpu")`` (a list of what went wrong) under the Triton interpreter: in
    this process if it defined its kernels for the interpreter, else in a subprocess that
    sets TRITON_INTERPRET=1 before anything defines a kernel."""
    if k.INTERPRET:
        assert getattr(sys.modules[module], check)("cpu") == []
        return
    here = Path(__file__).parent
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    out = subprocess.run(
        [sys.executable, "-c", INTERPRETED, str(here), str(here.parent), module, check],
        capture_output=True,
        text=True,
        env=env,
    )
    if out.returncode:
        skip_if_numpy_too_new(out.stderr)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "BAD []" in out.stdout, out.stdout[-3000:]


def test_triton_kernel_bit_exact_under_the_interpreter():
    run_interpreted(__name__, "check_kernel_matches_reference")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_triton_kernel_bit_exact_on_gpu():
    assert check_kernel_matches_reference("cuda", full=False) == []


@pytest.mark.skipif(
    not (torch.cuda.is_available() and k.has_fp8_cvt(torch.device("cuda"))),
    reason="needs an NVIDIA GPU with direct float32 -> float8 conversions (sm90+)",
)
def test_hardware_fp8_rounding_bit_exact_on_gpu():
    fp8 = ["fp8_e4m3", "fp8_e5m2"]
    assert check_kernel_matches_reference("cuda", full=False, hw_fp8=True, elems=fp8) == []


@pytest.mark.parametrize("elem", ELEMS)
@pytest.mark.parametrize("dim", [0, 1])
def test_ops_are_the_reference_on_cpu(elem, dim):
    """The CPU ops are the reference: codes packed as MXTensor.qdata, unpacking to
    mx_quantize's codes; qdq = dequantize(quantize)."""
    x = torch.randn(64, 96) * 10
    codes, scale = torch.ops.aoq.mx_cast(x, elem, 32, dim, "floor")
    rc, rs = mx_quantize(x, elem, 32, dim, "floor")
    unpacked = unpack_mx_codes(codes.movedim(dim, -1), elem).movedim(-1, dim)
    assert bit_equal(unpacked.view(torch.uint8), rc.view(torch.uint8)) and bit_equal(scale, rs)
    assert codes.shape[dim] == x.shape[dim] * MXElem(elem).spec.bits // 8
    q = torch.ops.aoq.mx_qdq(x.to(torch.bfloat16), elem, 32, dim, "rceil")
    rc, rs = mx_quantize(x.to(torch.bfloat16), elem, 32, dim, "rceil")
    assert bit_equal(q, mx_dequantize(rc, rs, elem, 32, dim, dtype=torch.bfloat16))


DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dim", [0, 1])
def test_opcheck(device, dim):
    x = torch.randn(64, 96, device=device)
    torch.library.opcheck(torch.ops.aoq.mx_cast.default, (x, "fp4_e2m1", 32, dim, "floor"))
    torch.library.opcheck(torch.ops.aoq.mx_cast.default, (x, "fp6_e2m3", 32, dim, "floor"))
    torch.library.opcheck(torch.ops.aoq.mx_qdq.default, (x, "fp8_e4m3", 32, dim, "rceil"))


def test_packed_path_takes_bf16_only():
    x = torch.randn(32, 64)
    with pytest.raises(ValueError, match="packed=True takes bf16 input"):
        k.mx_cast_triton(x, "fp4_e2m1", 32, 1, packed=True)
    with pytest.raises(ValueError, match="packed=True takes bf16 input"):
        k.mx_cast_triton(x.to(torch.bfloat16), "fp8_e4m3", 32, 1, packed=True, hw_fp8=True)


def test_clear_errors():
    with pytest.raises(ValueError, match="not divisible by block_size=32; pad dim 0"):
        torch.ops.aoq.mx_cast(torch.randn(40, 64), "fp8_e4m3", 32, 0, "floor")
    with pytest.raises(ValueError, match="2-D"):
        torch.ops.aoq.mx_qdq(torch.randn(2, 32, 32), "fp8_e4m3", 32, 1, "floor")
    with pytest.raises(ValueError, match="unknown MX element 'fp5'"):
        torch.ops.aoq.mx_qdq(torch.randn(32, 32), "fp5", 32, 1, "floor")
    with pytest.raises(ValueError, match="dim=2"):
        torch.ops.aoq.mx_qdq(torch.randn(32, 32), "fp8_e4m3", 32, 2, "floor")
    with pytest.raises(ValueError, match="fp6_e2m3 packs 4 codes together along dim 1"):
        torch.ops.aoq.mx_cast(torch.randn(4, 6), "fp6_e2m3", 2, 1, "floor")
    with pytest.raises(ValueError, match="or l<lanes>g<groups>r<rows>w<warps>"):
        parse_tile("l4g4w4")
    if not k.INTERPRET:
        with pytest.raises(RuntimeError, match="TRITON_INTERPRET=1"):
            k.mx_cast_triton(torch.randn(32, 32), "fp8_e4m3", 32, 1)


@pytest.mark.skipif(k.INTERPRET, reason="kernels defined for the interpreter do not compile")
@pytest.mark.parametrize("dim", [0, 1])
def test_default_tiles_compile_to_a_streaming_kernel_on_sm90(dim):
    """What made the first kernels slow, checked in the sm90 assembly (no GPU needed): 16-byte
    loads, no spills, and no shared-memory round trip of the data (dim 0 reduced its blocks
    across warps through shared memory; only the scale bytes, 1/32 of the codes, may pass
    through a small buffer)."""
    from aoq.kernels.targets import compile_spec, mx_cast_spec

    spec = mx_cast_spec(f"mx_cast.dim{dim}.fp8_e4m3", dim, "fp8_e4m3", "sm90")
    row = compile_spec(spec, "sm90", asm=True)
    assert row["ok"], row
    ptx = row.pop("asm")
    assert row["spills"] == 0 and row["shared"] <= 512, row
    assert re.search(r"ld\.global(\.\w+)*\.v4\.b32", ptx), "no 16-byte loads"
    assert "cvt.rn.satfinite.e4m3x2.f32" in ptx  # the hardware fp8 rounding, 2 per instruction
