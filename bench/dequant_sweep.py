"""Tile sweep of the weight dequantize kernel (the first half of the prefill ``dequant_mm``
path: codes -> bf16 weight, then cuBLAS), on a GPU.

    python bench/dequant_sweep.py [--formats int8,fp8,int4,w4a8] [--tiles 32x128x4,64x256x8]

For each format and weight shape (K x N of the bench), each tile (BLOCK_N x BLOCK_K x warps)
is timed as a CUDA-graph replay (triton.testing.do_bench_cudagraph, median) and reported as
µs and GB/s of codes read plus bf16 written; the bits are checked against the current tile.
``w4a8``: W4A8's weights (symmetric int4 in groups of 32, float32 scales), dequantized as its
prefill path does (zero points 8); ``128x32x4`` is the one-group tile it used to take.
A last column puts the best tile in context: dequantize + bf16 matmul at M=4096 against the
bf16 matmul alone.
"""

from __future__ import annotations

import argparse

import torch
import triton
from aoq.kernels._launch import launch
from aoq.kernels.weight_dequant import _dequantize_kernel, _format, dequantize_weight_triton
from triton.testing import do_bench_cudagraph

SHAPES = ((8192, 8192), (4096, 14336), (14336, 4096))
TILES = ("32x128x4", "64x128x4", "32x256x4", "64x256x4", "64x256x8", "128x128x8", "128x256x8",
         "16x512x4", "32x512x8")  # fmt: skip


def _weights(fmt: str, n: int, k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    dev = "cuda"
    if fmt == "int8":
        return (
            torch.randint(-127, 128, (n, k), dtype=torch.int8, device=dev),
            torch.rand(n, 1, device=dev),
            None,
        )
    if fmt == "fp8":
        q = torch.randn(n, k, device=dev).to(torch.float8_e4m3fn)
        return q, torch.rand(n, 1, device=dev), None
    q = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, device=dev)
    if fmt == "w4a8":  # symmetric groups of 32: q + 8 stored, the zero points all 8
        g = k // 32
        return q, torch.rand(n, g, device=dev), torch.full((n, g), 8, dtype=torch.uint8, device=dev)
    g = k // 128
    return (
        q,
        torch.rand(n, g, device=dev),
        torch.randint(0, 16, (n, g), dtype=torch.uint8, device=dev),
    )


def _dequant(q, s, z, k, tile: str) -> torch.Tensor:  # type: ignore[no-untyped-def]
    bn, bk, warps = (int(v) for v in tile.split("x"))
    n = q.shape[0]
    groups = s.shape[-1]
    out = torch.empty((n, k), dtype=torch.bfloat16, device=q.device)
    launch(_dequantize_kernel, (triton.cdiv(n, bn), triton.cdiv(k, bk)),
           q, s, z if z is not None else s, out, n, k, groups, q.stride(0),
           WFMT=int(_format(q, k)), GROUP_SIZE=k // groups, BLOCK_N=bn, BLOCK_K=bk,
           num_warps=warps)  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--formats", default="int8,fp8,int4")
    ap.add_argument("--tiles", default=",".join(TILES))
    args = ap.parse_args(argv)
    for fmt in args.formats.split(","):
        for k, n in SHAPES:
            q, s, z = _weights(fmt, n, k)
            want = dequantize_weight_triton(q, s, z, k, torch.bfloat16)
            nbytes = q.numel() * q.element_size() + n * k * 2
            best = None
            for tile in args.tiles.split(","):
                got = _dequant(q, s, z, k, tile)
                if not torch.equal(got, want):
                    print(f"{fmt} K{k} N{n} {tile}: bits differ from the current tile")
                    continue
                us = do_bench_cudagraph(lambda a=(q, s, z, k, tile): _dequant(*a)) * 1e3
                rate = nbytes / us / 1e3
                print(f"{fmt:<5} K{k:<6} N{n:<6} {tile:<10} {us:7.1f} us {rate:6.0f} GB/s")
                best = min(best or (us, tile), (us, tile))
            x = torch.randn(4096, k, device="cuda", dtype=torch.bfloat16)
            mm = do_bench_cudagraph(lambda a=(x, want): torch.nn.functional.linear(*a)) * 1e3
            assert best is not None
            print(f"  best {best[1]}: dequant {best[0]:.1f} us + bf16 mm {mm:.1f} us at M=4096 "
                  f"-> {mm / (mm + best[0]):.3f}x bf16\n", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
