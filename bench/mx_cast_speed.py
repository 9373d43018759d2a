"""MX cast bandwidth on one GPU: every cast at 8192 x 8192 bf16 against device-copy bandwidth.

    python bench/mx_cast_speed.py --out DIR [--variants b512h2w8,l2g4r1w4,...] [--elems ...]

Times aoq's MX casts (kernels/mx_cast.py) along dim 0 and dim 1 for each element format,
``mx_qdq`` for fp8_e4m3, fp8 through the integer rounding path as well as the float8
conversion, and each ``--variants`` tile (``b<blocks>h<pieces>w<warps>`` for dim 1,
``l<lanes>g<groups>r<rows>w<warps>`` for dim 0; see kernels/mx_cast.py) for the
``--sweep-elems``. Each row is CUDA-graph replays of a pass over 3 rotating inputs (384 MiB,
past any L2), device events around each replay; the device copy is measured in the same run.

Rows (aoq.testing.benchrows, a JsonlWriter run of kind "bench" in DIR): ``ceiling/copy_GBps``
and one timed row per variant, config slot ``mx_cast.dim0.fp8_e4m3`` (default tile),
``mx_cast.dim0.fp8_e4m3.intround`` (integer rounding), ``mx_cast.dim0.fp8_e4m3.l2g4r1w4``
(a swept tile), ``mx_qdq.dim1.fp8_e4m3``; metrics: p20/p50/p80 and samples, ``bytes`` (read
bf16 + write codes + scales), ``GBps``, ``frac_of_copy``, ``floor_us`` (bytes at copy
bandwidth), ``roofline`` and ``tile``. Default-tile casts are judged against 80% of copy
(status fail below it); a swept tile whose bits differ from the default's is a fail; a
variant that raises is an error row and the run goes on.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import statistics
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: import bench.* from the repository root
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
from aoq.kernels import mx_cast as k
from aoq.kernels.mx_ops import Dim1Tile, Tile, cast_tile, parse_tile

from aoq.backends import platform_of
from aoq.formats.mx import MXElem
from aoq.testing.benchrows import BenchCase, latency_record
from aoq.testing.metrics import bit_equal
from aoq.testing.records import JsonlWriter, Record, new_run
from bench.rows import ceiling_record, missing_record
from bench.timing import Rotation, device_time

N = 8192
BACKEND = "rocm" if torch.version.hip is not None else "cuda"
COPIES = 3
TARGET = 0.8
SHAPE = f"{N}x{N}"
ELEMS = "fp8_e4m3,fp8_e5m2,fp6_e2m3,fp6_e3m2,fp4_e2m1,int8"
VARIANTS = (
    "b128h2w4,b256h1w4,b256h4w4,b512h2w4,b512h2w8,l4g8r1w4,l4g8r1w8,l4g2r2w4,l2g4r1w4,l8g4r1w4"
)
"""The sweep of the command in the report: each dim's neighbours of the default tiles."""


@dataclasses.dataclass(frozen=True)
class Variant:
    dim: int
    elem: str
    qdq: bool = False
    tile: Tile | None = None
    hw_fp8: bool | None = None  # None: the launcher's choice (float8 conversion on sm90+)
    packed: bool | None = None  # None: the launcher's choice (bf16 pairs on sm90+)

    @property
    def config(self) -> str:
        """The bench row's config slot."""
        name = f"{'mx_qdq' if self.qdq else 'mx_cast'}.dim{self.dim}.{self.elem}"
        if self.hw_fp8 is False:
            name += ".intround"
        if self.packed is False:
            name += ".f32path"
        return f"{name}.{self.tile.label}" if self.tile else name

    @property
    def judged(self) -> bool:
        return not self.qdq and self.tile is None and self.hw_fp8 is None and self.packed is None

    def nbytes(self) -> int:
        bits = MXElem(self.elem).spec.bits
        write = N * N * 2 if self.qdq else N * N * bits // 8 + N * N // 32
        return N * N * 2 + write

    def run(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        return k.mx_cast_triton(
            x, self.elem, 32, self.dim, "rceil", self.qdq, self.tile, self.hw_fp8, self.packed
        )


def variants(elems: list[str], sweep: list[str], tiles: list[Tile]) -> list[Variant]:
    out = []
    for dim in (1, 0):
        out += [Variant(dim, e) for e in elems]
        out += [Variant(dim, "fp8_e4m3", hw_fp8=False), Variant(dim, "fp8_e4m3", qdq=True)]
        out += [Variant(dim, e, packed=False) for e in ("fp4_e2m1", "fp6_e2m3") if e in elems]
        for t in tiles:
            if isinstance(t, Dim1Tile) == (dim == 1):
                out += [Variant(dim, e, tile=t) for e in sweep]
    return out


def copy_ceiling(run_id: str) -> tuple[float, Record]:
    """Device-copy bandwidth, bytes read + written (1 GiB each way: no cache holds it), timed
    eagerly as the bench harness does (bench/session.py): captured in a CUDA graph the same
    copy_ (a memcpy node) ran at 2764 GB/s on an H200 (run 3fb529), against 4255 GB/s eager
    (runs bbd8a5, 191da5), which undersold every cast's fraction of copy."""
    src = torch.empty(1 << 29, dtype=torch.bfloat16, device="cuda").normal_()
    dst = torch.empty_like(src)
    timed = device_time(Rotation([lambda: dst.copy_(src)]), graph=False, reps=20, cap_s=2.0)
    gbps = 2 * src.numel() * 2 / statistics.median(timed.samples_us) / 1e3
    return gbps, ceiling_record(run_id, "copy_GBps", gbps, timed)


def measure(v: Variant, xs: list[torch.Tensor], copy_gbps: float, run_id: str, ref: Any) -> Record:
    case = BenchCase(v.config, "bf16", BACKEND, SHAPE, "aoq", "graph")
    kernel = f"aoq::{'mx_qdq' if v.qdq else 'mx_cast'}"
    tile = v.tile or cast_tile(v.dim, (N, N), 32, MXElem(v.elem), 8)
    out = v.run(xs[0])
    torch.cuda.synchronize()
    timed = device_time(Rotation([functools.partial(v.run, x) for x in xs]), graph=True, reps=30)
    p50 = statistics.median(timed.samples_us)
    gbps = v.nbytes() / p50 / 1e3
    floor = v.nbytes() / copy_gbps / 1e3
    status, reason, tol = "pass", None, None
    same = ref is None or all(
        bit_equal(a, b) for a, b in zip(out, ref, strict=True) if a is not None
    )
    if not same:
        status, reason = "fail", f"tile {tile.label}: bits differ from the default tile's"
    elif v.judged:
        tol = {"min_frac_of_copy": TARGET}
        if gbps < TARGET * copy_gbps:
            status, reason = "fail", f"{gbps / copy_gbps:.0%} of copy bandwidth, below {TARGET:.0%}"
    rec = latency_record(
        run_id, case, timed.samples_us, kernel=kernel, status=status, reason=reason,
        bytes=v.nbytes(), GBps=gbps, frac_of_copy=gbps / copy_gbps, floor_us=floor,
        roofline=floor / p50, tile=tile.label, **timed.extra,
    )  # fmt: skip
    return dataclasses.replace(rec, tolerance=tol)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", default="reports/runs", help="directory of the run's JSONL")
    p.add_argument("--elems", default=ELEMS, help="element formats at the default tiles")
    p.add_argument("--variants", default=VARIANTS, help="tiles to time besides the defaults")
    p.add_argument("--sweep-elems", default="fp8_e4m3,fp4_e2m1", help="elements of --variants")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("mx_cast_speed needs a CUDA (or ROCm) GPU", file=sys.stderr)
        return 2
    dev = torch.device("cuda")
    tiles = [parse_tile(t) for t in args.variants.split(",") if t]
    todo = variants(args.elems.split(","), args.sweep_elems.split(","), tiles)
    plat = platform_of(dev)
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    run = new_run("bench", plat.backend.value, dev, plat.arch, argv=sys.argv, sm_count=sms)
    torch.manual_seed(0)
    xs = [torch.randn(N, N, device=dev, dtype=torch.bfloat16) for _ in range(COPIES)]
    refs: dict[tuple, Any] = {}
    with JsonlWriter(run, args.out) as out:
        print(run.device, run.run_id)
        copy_gbps, rec = copy_ceiling(run.run_id)
        out.write(rec)
        print(f"copy: {copy_gbps:.0f} GB/s (read + write)")
        print(f"{'config':<40}{'tile':<12}{'p50 us':>9}{'GB/s':>8}{'of copy':>9}  status")
        for v in todo:
            try:
                ref = None
                if v.tile is not None:  # a swept tile must give the default tile's bits
                    key = (v.dim, v.elem, v.qdq, v.hw_fp8, v.packed)
                    if key not in refs:
                        refs[key] = dataclasses.replace(v, tile=None).run(xs[0])
                    ref = refs[key]
                rec = measure(v, xs, copy_gbps, run.run_id, ref)
            except Exception as e:  # noqa: BLE001 - one failing variant is a row, not the end
                case = BenchCase(v.config, "bf16", BACKEND, SHAPE, "aoq", "graph")
                rec = missing_record(run.run_id, case.case_id, "latency", "error", e)
            out.write(rec)
            m = rec.metrics
            row = (
                f"{m['tile']:<12}{m['p50_us']:>9.1f}{m['GBps']:>8.0f}{m['frac_of_copy']:>9.0%}"
                if "p50_us" in m
                else f"{'':<38}"
            )
            print(f"{v.config:<40}{row}  {rec.status} {rec.reason or ''}")
    print("wrote", out.path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
