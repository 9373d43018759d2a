"""decode_mma.py's tiles per weight format (TILE, TILED_TILE, ROWS_TILE past 16 rows) and the
activation dtypes each format takes (X_DTYPES), with the measurements behind them. Split from
the kernel file to keep each file readable; decode_mma.py re-exports them."""

from __future__ import annotations

import functools

import torch
from aoq.kernels._common import INTERPRET, WeightFormat

TILE = {
    WeightFormat.UINT4: {"BLOCK_N": 64, "STEP_K": 128, "num_warps": 2, "num_stages": 3,
                         "per_sm": 6, "exact": True, "WT": True, "PREF": True, "rows8": True,
                         "KINT": True, "SK": True},
    WeightFormat.INT4_SYM: {"BLOCK_N": 64, "STEP_K": 64, "num_warps": 2, "num_stages": 3,
                            "per_sm": 10, "WT": True, "PREF": True, "rows8": True, "IMMA": True},
    WeightFormat.MX_FP4: {"BLOCK_N": 64, "STEP_K": 64, "num_warps": 2, "num_stages": 3,
                          "per_sm": 10, "WT": True, "PREF": True, "rows8": True,
                          "at8": {"WIDE": True}},
    WeightFormat.NVFP4: {"BLOCK_N": 64, "STEP_K": 64, "num_warps": 2, "num_stages": 3,
                          "per_sm": 10, "WT": True, "PREF": True, "rows8": True, "NVX": True,
                          "WIDE": True, "at8": {"STEP_K": 128}},
    WeightFormat.MX_FP8: {"BLOCK_N": 64, "STEP_K": 128, "num_warps": 2, "num_stages": 3,
                          "per_sm": 4, "WT": True, "PREF": True, "WIDE": True, "rows8": True},
    WeightFormat.MX_FP8_E5M2: {"BLOCK_N": 64, "STEP_K": 128, "num_warps": 2, "num_stages": 3,
                          "per_sm": 4, "WT": True, "PREF": True, "WIDE": True, "rows8": True},
    WeightFormat.MX_INT8: {"BLOCK_N": 64, "STEP_K": 128, "num_warps": 2, "num_stages": 3,
                           "per_sm": 4, "WT": True, "PREF": True, "rows8": True, "WIDE": True},
    WeightFormat.MX_FP6_E3M2: {"BLOCK_N": 64, "STEP_K": 128, "num_warps": 2, "num_stages": 3,
                               "per_sm": 8, "WT": True, "rows8": True, "at8": {"num_stages": 2}},
    WeightFormat.MX_FP6_E2M3: {"BLOCK_N": 64, "STEP_K": 128, "num_warps": 2, "num_stages": 3,
                               "per_sm": 8, "WT": True, "rows8": True, "at8": {"num_stages": 2}},
    WeightFormat.INT8: {"BLOCK_N": 32, "STEP_K": 256, "num_warps": 2, "num_stages": 3,
                        "per_sm": 4, "WT": True, "rows8": True},
    WeightFormat.FP8: {"BLOCK_N": 32, "STEP_K": 256, "num_warps": 2, "num_stages": 4,
                       "per_sm": 4, "WT": True, "rows8": True},
}  # fmt: skip
"""Per weight format: outputs per program (BLOCK_N), K per loop step (int4: whole groups, at
least one), warps, pipeline depth, split-K programs per SM (splitk.split_k; ``exact``: any
split up to one full wave, not only powers of two), orientation (WT), scale prefetch
(PREF). H200 graph replays at M 1 and 16 over 8192^2, 4096 x 14336, 14336 x 4096
(bench/NOTES.md, sessions 14 to 16; W4A8 at M 16, x quantized):
- UINT4: 20.2-20.9 us against 24.2-25.0 (4 warps, x as operand A); part-group steps lost.
  Six programs an SM fit (164 registers x 64 threads); a split that fills exactly that one
  wave (6 at 8192^2, 3 at 4096 x 14336, 12 at 14336 x 4096) against the power of two
  below 7 (4, 4, 8): 19.3 / 18.7 / 18.0 us against 21.0 / 19.7 / 18.7 at M 1 (session 16).
- SK (UINT4): stream-K (decode_mma_sk.py) where split-K fills under decode_mma_sk.MIN_FILL
  of the wave (8192 x 28672 on an H100: 448 column tiles, split 1, 57 %): tiled codes M 1
  50.3-50.9 -> 48.9-49.0 us, M 16 55.8-56.5 -> 55.2; on an H200 46.5-47.0 -> 41.6-42.7 and
  54.7-54.8 -> 52.5-53.5 (session 38). Not where split-K fills 85 %
  or more (every goal shape): there it gained nothing at M 1 and lost at M 16. A forced split
  (tests, probes) keeps split-K; an int SK forces that many programs (probes, tests).
- INT4_SYM (W4A8, 2 <= M <= 16, groups of 32): two groups a step from group-major scales,
  23.3-25.2 us against 35.3-38.2 (session 9's 128 x 128, 4 warps); row-major scales
  34.1-36.7; other tiles slower. With the codes in tiles of 64 (or 16) rows x one group
  (TILED with TILE_B 16: each group's rows one 1 KB run), one group a step and 5 pipelined
  stages, M 16 takes 21.4 / 19.1-19.5 / 19.2-19.5 us against 26.2 / 23.5 / 24.2 (H100,
  session 27), but the M = 1 GEMV reads those tiles 5-25 % slower than row-major codes,
  whatever its tile: the packing stays row-major (bench/NOTES.md, session 27). Since
  session 40 symmetric W4A8 on CUDA reads those row-major codes 16 rows x 8 groups a step
  in w4a8_mma.py instead (M16 kernel 21.2 / 17.8 / 20.6 us against this tile's 26.5 / 23.8 /
  24.1), and zero-point activations too since session 41; this tile keeps ROCm and groups
  other than 32.
- KINT (UINT4): the K splits interleaved, split s taking steps s, s + S, ... (S splits), so
  a column tile's splits read side by side; the partition is the same for every layout and
  ROWS, so they keep one another's bits. H100, tiled codes, M 1 (M 16), session 27: 17.2 /
  15.6 / 15.8 -> 16.6 / 15.4 / 15.5 us (19.0 / 18.2 / 18.2 -> 18.6 / 17.5 / 17.0); row-major
  19.7 -> 19.2 at 8192^2 (M 16 22.5 -> 20.8). W4A8 lost with it (26.7 -> 29.0 at M 16).
- MX_FP8: 30.4 / 27.8 / 26.7 us at M 1 against 30.7 / 30.0 / 26.7 for 4 stages at 4 an SM;
  24 other tiles (32-128 rows, 64-128 K, 3-4 stages, no PREF) no faster (session 17).
- INT8 / FP8: 19.3-21.2 / 19.4-21.0 us at M 1 against 19.5-21.3 / 19.4-21.2 (64 x 128 or
  64 x 256 on 4 warps); M 16 19.4-22.7 / 20.4-22.6 against 20.9-23.2 / 21.2-22.8. On an
  H100 with 8 rows (session 19): int8 3 stages 27.6 / 23.6 / 24.7 us against 4 stages 27.7
  / 24.4 / 25.2; fp8 32 x 256 27.4 / 24.0 / 24.7 against 64 x 128 28.4 / 26.3 / 26.5
  (a plain read of the int8 bytes: 24.5 / 22.0 / 22.3).
- MX_FP6 (decode_mma_fp6.py; H100, session 31, M 1 / M 16 graph replays): 30.6 / 28.4 /
  28.4 us and 36.7 / 33.2 / 33.4 at this tile; 2 stages 28.8 / 25.7 / 25.5 at M 1 but 39.5 /
  36.6 / 35.6 at M 16 (hence ``at8``'s depth: TILE's keys where x pads to 8 rows), 4 stages 40-54,
  BLOCK_N 32 27-30 at M 1 and 44-48 at M 16, BLOCK_N 128 30-42, 6 or 12 an SM within 2 us
  either way. The bare read of the codes: 20.1 / 17.2 / 17.3 us.
- NVFP4 ``NVX`` (bf16 x; nvfp4_codes.nvfp4_exact_codes): each code times its block's e4m3
  value, exact in bf16, and the tensor scale once on the float32 sums, in place of each code
  times the float32 step e4m3 * ts rounded to bf16 (the emulated path's weight; fp16 x keeps
  it). sm90 loop 589 -> 426 instructions; H100 graph replays (session 34), M 1: 38.5 / 36.5 /
  34.5 -> 31.9 / 30.2 / 28.4 us, M 16: 39.4 / 38.5 / 35.2 -> 34.7 / 33.3 / 31.4 (MX fp4 in
  the same call: 22.4 / 20.2 / 21.2 and 25.2 / 23.2 / 23.4). x padded to 8 rows takes
  128-code steps (``at8``; four groups, eight blocks: _common.block_columns8): H200 M1 22.4 /
  21.4 us against 24.7 / 23.8 at 8192^2 / 4096 x 14336; at 16 rows they lost (29.9 / 28.9
  against 27.3 / 26.8; bench/NOTES.md session 54).
- MX_INT8 (WFMT 10; mx_decode sends MX int8 here since session 36) and MX_FP8's ``POST`` (a
  probe): the codes' own values on the MMA, each block's scale on its float32 product tile
  (decode_mma_steps._post_scaled_step), so no BIG path and x padded to 8 rows. sm90 loop per
  64 x 128 step: int8 533 instructions at 8 rows (615 at 16), e4m3 under POST 528 (609)
  against the scaled-code path's 545 at 16 rows; per-channel int8 / e4m3 (32 x 256 at 8
  rows) 399. H100 graph replays (``python -m bench.decode_rows``, session 36), M 1, 8192^2 /
  4096 x 14336 / 14336 x 4096, one call: MX int8 here 34.3 / 32.0 / 30.0 us at 4 an SM
  against mx_decode's own tile 39.8 / 34.7 / 36.9 (M 16: 36.7 / 34.7 / 33.4 against 41.3 /
  36.5 / 38.3); on an H200 29.7 / 28.5 / 24.6 against 38.1 / 33.4 / 34.7. POST lost to MX fp8's
  scaled codes at 4 an SM (34.4 / 32.6 / 29.7 against 33.1 / 30.9 / 29.7): not taken.
- per_sm 4 for the MX 8-bit formats (session 36): their 64 x 128 step at 3 stages takes 48 KB
  of shared memory on sm90 (40 KB at 8 rows), so 4 programs fit an SM, not the 8 they aimed
  for. H100, M 1 (M 16), 8 -> 4: MX fp8 e4m3 35.6 / 32.4 / 31.8 -> 33.1 / 30.9 / 29.7 us
  (39.4 / 35.8 / 35.1 -> 35.8 / 33.1 / 32.1), e5m2 35.3 / 33.1 / 32.3 -> 33.3 / 30.9 / 29.9;
  MX int8 36.1 / 32.3 / 34.4 -> 33.6 / 31.6 / 30.0. H200: within 1.2 us either way at 4096 x
  14336 (28.5 against 27.3 for int8), 0.5-2.7 us better at the other two. 3, 5 and 6 an SM
  and 2 or 4 stages no better; BLOCK_N 32 up to 1.2 us faster for int8 at M 1 but 2-7 us
  slower at M 16 (fp8: slower at both); 32 x 256 steps (no PREF) 45-77 us.
- ROWS (a tile key): the rows x is padded to, 16, or 8 at M <= 8 where ``rows8`` (on NVIDIA
  and the interpreter; AMD has no n = 8 MMA): half the MMAs, x loads and x and accumulator
  registers of 16 (sm90: int4's loop 393 -> 342 instructions, 168 -> 128 registers; int8
  473 -> 399, 112 -> 80). The same bits as 16 rows (tests/kernels/test_decode_mma_rows.py, on an
  H100). H100 graph replays, 16 -> 8 rows at M 1 (``python -m bench.decode_rows``, session
  19): int4 21.3 / 19.5 / 19.2 -> 20.2 / 18.6 / 18.4 us, int8 28.6 / 26.1 / 26.0 -> 28.0 /
  24.5 / 25.4, fp8 28.8 / 26.8 / 26.8 -> 28.9 / 26.0 / 26.2, W4A8 24.9 / 23.4 / 22.7 ->
  24.0 / 22.1 / 21.9, MX fp4 24.5 / 22.2 / 22.6 -> 23.0 / 20.8 / 21.5; MX fp8 36.2 / 33.1 /
  32.5 -> 38.2 / 33.2 / 32.9 (slower then; with WIDE faster, below). per_sm 8 with 8 rows
  (int4 fits eight programs an SM): 20.7 / 18.2 / 18.8, no better overall.
- WIDE (decode_mma_wide.py: a step's blocks decoded at once, each code by its own block's
  scale, one MMA over the step; session 53, the scales spread by _common.block_columns): MX
  e4m3 (and e5m2, the same step) and MX int8 (bf16 x: each code times its block's bf16 step)
  at 16 rows, MX fp4 at 8 only (``at8``). H200 graph replays, ``python -m bench.decode_rows
  --formats mxfp4,mxfp8,mxint8 --ms 1,16 --shapes 8192x8192,4096x14336 --no-defaults
  --extra '{..: [{"WIDE": true}]}'``, µs at 8192^2 / 4096 x 14336, TILE -> WIDE: e4m3 M 1
  29.3 / 28.5 -> 24.8 / 23.5, M 16 31.3 / 30.7 -> 26.0 / 24.9 (64-code steps 31.5 / 28.6);
  int8 M 1 29.4 / 28.2 -> 24.5 / 23.6, M 16 32.0 / 31.6 -> 27.5 / 26.7; fp4 M 1 21.9 / 20.0
  -> 19.9 / 19.0 (8 an SM the same), M 16 23.4 / 22.2 -> 23.8 / 23.0 (so not at 16 rows).
  Session 52's select a column had lost at these rows (fp4 M 1 21.8 -> 30.4). With WIDE,
  e4m3 at M 1 padded to 8 rows (``rows8``, which had lost without it): 24.7 / 23.5 -> 23.5 /
  22.0 (a second call; e5m2's WIDE tile 24.7 / 23.5 against 29.2 / 28.5 there)."""


TILED_TILE = {"PREF": False, "LOOP_STAGES": 3}
"""int4 codes in tile order (aoq.formats.packing.tile_uint4): each step's 64 rows x 128 codes
are one 4 KB run. Its scales and zero points (as packing.pack_zero_words: 32-bit loads,
which cp.async can copy) go through Triton's pipeliner with the codes, two steps ahead,
instead of PREF's one. H100, M = 1 (M = 16), K x N 8192^2 / 4096 x 14336 / 14336 x 4096,
graph replays (``python -m bench.decode_rows``, session 20): row-major codes with PREF 20.3
/ 18.3 / 18.5 us (23.2 / 20.7 / 20.9); tiled with PREF 18.4 / 17.2 / 17.3 (20.1 / 19.1 /
19.3); tiled with this 17.5-17.6 / 16.3-16.4 / 16.4-16.7 (19.8-20.2 / 19.2-19.3 / 19.0);
row-major with this 20.7 / 18.3 / 19.0 (within noise of PREF). 4 or 5 stages were slower
(21.4, 24.8 at 8192^2 row-major)."""

X_DTYPES = {
    WeightFormat.UINT4: (torch.bfloat16, torch.float16),
    WeightFormat.MX_FP4: (torch.bfloat16, torch.float16),
    WeightFormat.MX_FP8: (torch.bfloat16, torch.float16),
    WeightFormat.MX_FP8_E5M2: (torch.bfloat16, torch.float16),
    WeightFormat.MX_INT8: (torch.bfloat16, torch.float16, torch.int8),
    WeightFormat.NVFP4: (torch.bfloat16, torch.float16),
    WeightFormat.MX_FP6_E3M2: (torch.bfloat16, torch.float16),
    WeightFormat.MX_FP6_E2M3: (torch.bfloat16, torch.float16),
    WeightFormat.INT4_SYM: (torch.int8,),
    WeightFormat.INT8: (torch.bfloat16, torch.float16),
    WeightFormat.FP8: (torch.bfloat16, torch.float16),
}
"""Activation dtypes per weight format (others: bf16 only; MX int8's int8: its codes with their
E8M0 bytes, decode_mma's ``x_block_scale``, on the integer MMA). int4's q - z are exact in fp16
too, made by their own PTX (bf16_codes: fp16 1024.0 in place of bf16 128.0): the float code
path cost 58-67 % more than the PTX at M1 (bench/NOTES.md session 25), and fp16 ran the FMA
decode before (4096^2 M1: 10.4 us against bf16's 7.1, run a858d0). Per-channel int8 and
e4m3 codes are exact in fp16 as in bf16, and their float code path (fp16 x takes it: the PTX
makes bf16) cost nothing at M1 on an H100: int8 27.1 / 23.6 / 24.2 us with PTX, 27.0 / 23.5
/ 24.2 with the float path, fp8 26.9 / 24.1 / 24.3 against 26.7 / 24.2 / 24.1 (8192^2 /
4096 x 14336 / 14336 x 4096, bf16 x, session 25), where fp16 ran the FMA decode before
(4096^2 M1: int8wo 10.8 us against bf16's 9.5, fp8wo 10.0 against 9.4, run a858d0). MX fp4
and fp8 with fp16 x: their PTX's values as float32, rounded once to fp16 (bf16_codes), the
emulated path's fp16 weights; before, the FMA decode (MX fp8 at 4096^2 M1: 22.6 us, 0.77x
fp16 F.linear, run a858d0)."""


ROWS_TILE = {
    WeightFormat.UINT4: {32: {"ROWS": 32, "per_sm": 4, "SK": False},
                         64: {"ROWS": 64, "BLOCK_N": 128, "num_warps": 4, "WT": False,
                              "per_sm": 2, "SK": False},
                         128: {"ROWS": 128, "BLOCK_N": 128, "num_warps": 8, "WT": False,
                               "per_sm": 1, "SK": False}},
    WeightFormat.INT8: {32: {"ROWS": 32, "BLOCK_N": 64, "STEP_K": 128},
                        64: {"ROWS": 64, "BLOCK_N": 128, "STEP_K": 128, "num_warps": 4,
                             "WT": False, "per_sm": 2},
                        128: {"ROWS": 128, "BLOCK_N": 256, "STEP_K": 64, "num_warps": 8,
                              "num_stages": 4, "WT": False, "per_sm": 1},
                        256: {"ROWS": 256, "BLOCK_N": 128, "STEP_K": 64, "num_warps": 8,
                              "num_stages": 4, "WT": False, "per_sm": 1}},
    WeightFormat.FP8: {32: {"ROWS": 32, "BLOCK_N": 64, "STEP_K": 128},
                       64: {"ROWS": 64, "BLOCK_N": 128, "STEP_K": 64, "num_warps": 4,
                            "WT": False, "per_sm": 2},
                       128: {"ROWS": 128, "BLOCK_N": 256, "STEP_K": 64, "num_warps": 8,
                             "WT": False, "per_sm": 1},
                       256: {"ROWS": 256, "BLOCK_N": 128, "STEP_K": 64, "num_warps": 8,
                             "WT": False, "per_sm": 1}},
    WeightFormat.INT4_SYM: {32: {"ROWS": 32, "BLOCK_N": 128, "per_sm": 4},
                            64: {"ROWS": 64, "per_sm": 4}},
    # MX and NVFP4 (session 51): int4's tiles for the nibble formats, e4m3's (weight-only)
    # for the byte ones; 128 rows only for MX fp4, e4m3 and e5m2 (below)
    WeightFormat.MX_FP4: {32: {"ROWS": 32, "BLOCK_N": 128, "per_sm": 4},
                          64: {"ROWS": 64, "BLOCK_N": 128, "STEP_K": 128, "num_warps": 4,
                               "WT": False, "per_sm": 2, "WIDE": True},
                          128: {"ROWS": 128, "BLOCK_N": 128, "num_warps": 8, "WT": False,
                                "per_sm": 1, "WIDE": True}},
    WeightFormat.NVFP4: {32: {"ROWS": 32, "BLOCK_N": 128, "per_sm": 8, "WIDE": True},
                         64: {"ROWS": 64, "BLOCK_N": 128, "STEP_K": 128, "num_warps": 4,
                              "WT": False, "per_sm": 2, "WIDE": True}},
    WeightFormat.MX_FP8: {32: {"ROWS": 32},
                          64: {"ROWS": 64, "BLOCK_N": 128, "STEP_K": 128, "num_warps": 4,
                               "WT": False, "per_sm": 2, "WIDE": True},
                          128: {"ROWS": 128, "BLOCK_N": 256, "STEP_K": 128, "num_warps": 8,
                                "WT": False, "per_sm": 1, "WIDE": True, "STEP_K_DEV": 64}},
    # MX fp6's loop takes the weights as operand A only (WT)
    WeightFormat.MX_FP6_E3M2: {32: {"ROWS": 32, "per_sm": 4}, 64: {"ROWS": 64, "per_sm": 2}},
    WeightFormat.MX_FP6_E2M3: {32: {"ROWS": 32, "per_sm": 4}, 64: {"ROWS": 64, "per_sm": 2}},
}  # fmt: skip
"""Weight-only, W4A8, MX and NVFP4 decode past 16 rows (x padded to the smallest key that
holds its rows: 32, 64, 128 (not W4A8, NVFP4, MX int8 or fp6), and for int8 / e4m3 256), on
top of TILE: the decode kernel's split-K
over K keeps every SM busy, where the prefill kernel's [BLOCK_M, BLOCK_N] tiles over all of K
give too few programs (64-128 at 8192^2). Each x step is read by every column tile, so the
wider x gets, the more rows a tile takes: at 64 rows x outweighs the codes 4 to 1 at 64 rows a
tile, hence 128 rows on 4 warps with x as the MMA's A operand (WT off; the weights' side would
pick wgmma, see decode_mma's WT check), and 128-256 on 8 warps past 64 rows. H200 graph replays
over 8 copies, µs at 8192^2 / 4096 x 14336 / 14336 x 4096 against bf16 F.linear
(bench/NOTES.md, sessions 44 and 45):
- M 32: int4 23.1 / 22.8 / 20.8 (1.47 / 1.38 / 1.59x; the prefill kernel it replaces 103.7
  / 71.2 / 204.5: 0.33 / 0.43 / 0.16x), int8 26.2 / 25.7 / 23.8 (1.30 / 1.23 / 1.40x; was 70.4
  / 40.3), fp8 24.8 / 24.0 / 22.2 (1.37 / 1.31 / 1.49x; was 66.7 / 37.1). TILE's own tile at
  32 rows: int8 38.5 / 37.5 / 34.3, fp8 41.2 / 40.5 / 36.5 (32-row column tiles); int4 at 3
  an SM 27.8 / 28.6 / 25.2, BLOCK_N 128 23.4 / 22.9 / 21.8.
- M 64: int4 32.4 / 32.0 / 30.3 (1.14 / 1.04 / 1.19x; was 102 / 70), int8 33.7 / 33.1 /
  30.9 (1.10 / 1.00 / 1.17x; was 71.2 / 40.8), fp8 with 64-code steps 34.7 / 32.2 / 30.0
  (1.06 / 1.03 / 1.20x; was 67.3 / 37.9; 128-code steps 42.9 / 42.4 / 38.6). 64-row column
  tiles 38-44, one program an SM 35-39, 256-row tiles on 8 warps 32-79, 4 stages no better.
- M 128 (x padded to 128, so 65-128 rows cost about the same): int4 62.1 / 62.4 / 56.5
  (0.64 / 0.57 / 0.69x; the prefill kernel 103.7 / 70.3 / 218.8, dequantize + cuBLAS 90.7 /
  79.7 / 83.9), int8 256-row column tiles at 4 stages 51.4 / 51.0 / 47.0 (0.76 / 0.69 /
  0.83x; prefill 72.8 / 53.0 / 122.7), fp8 48.9 / 47.7 / 43.9 (0.81 / 0.75 / 0.89x; prefill
  69.5 / 48.4 / 117.5). Slower: int4 256-row column tiles (115-128: 128 x 256 float32 sums
  on 8 warps), 4 warps (163-186), 256-code steps (68-76); 8-bit 128-code steps, 32-code
  steps, 128-row column tiles, 2 an SM.
- M 256 (int8 / e4m3): int8 82.2 / 75.3 / 73.5 (0.70 / 0.68 / 0.76x; prefill 110.9 / 104.2 /
  126.3, dequantize + cuBLAS 116.6 / 102.8 / 99.5), fp8 80.3 / 73.1 / 70.8 (0.71 / 0.70 /
  0.80x; prefill 97.4 / 99.1 / 122.6). int4 at 256 rows took 131-305 (dequantize + cuBLAS:
  84-112): the dispatch sends int4's 129-256 rows there instead.
- W4A8 (INT4_SYM, int8 x codes; the integer MMA where x is symmetric): M 32 at 128-row
  column tiles 27.4 / 26.9 / 25.3 µs (1.25 / 1.23 / 1.33x; the prefill kernel it replaces
  136.0 / 85.6 / 238.7, the generic decode kernel 88.2 / 80.3 / 124.3; TILE's 64-row tiles
  30.4 / 29.8 / 27.1), M 64 at TILE's tile 39.7 / 39.6 / 35.6 (0.91 / 0.82 / 1.00x; prefill
  135.4 / 87.8 / 239.1, dequantize + cuBLAS 97.4 / 85.8 / 90.8; x as the A operand on 4
  warps 52-58, without the integer MMA 49-56). At 128 rows 120-198 µs, against dequantize
  + cuBLAS's 86-100: the dispatch sends W4A8's 65+ rows there on sm90. The activation
  kernel's time is in each.
So past 64 rows the weight-only kernel does its math at 240-280 TFLOP/s for int4 at 128
rows, 320-350 for the 8-bit codes at 128 and 410-430 at 256, where bf16's cuBLAS runs 420-600
(each step's dequantized weights go through shared memory to the MMA): faster than every
other kernel here, not yet than bf16 (bench/NOTES.md, session 45).
- MX and NVFP4 (session 51; ``python -m bench.band_sweep --configs mxwo-fp4_e2m1,nvfp4wo,
  mxwo-fp8_e4m3,mx-int8,mxwo-fp6_e3m2 --ms 32,64,128 --shapes 8192x8192,4096x14336``, µs
  at 8192^2 / 4096 x 14336, this tile / the emulated path it replaces): M 32 fp4 32.4 / 32.2
  against 88.4 / 78.3, NVFP4 45.7 / 45.0 against 88.9 / 79.2, e4m3 37.0 / 36.2 against 100.1
  / 88.2, int8 40.7 / 40.0 against 97.7 / 86.1, fp6 41.5 / 41.4 against 163.6 / 145.1; M 64
  49.3 / 48.9, 57.0 / 56.2, 48.3 / 47.2, 54.7 / 54.3, 72.5 / 68.6 against 80-166; M 128 fp4
  73.4 / 71.6 against 90.4 / 80.0 and e4m3 63.4 / 62.3 against 102.0 / 89.3 (kept), NVFP4
  78.0 / 84.5 against 91.0 / 80.7, int8 175 / 174 against 100 / 88, fp6 280 / 302 against
  166 / 147 (dropped: those stop at 64 rows). e5m2 takes e4m3's tiles, not timed.
- WIDE (session 52; decode_mma_wide.py): at 64 and 128 rows, where x is the MMA's A operand on
  4-8 warps (wgmma, the weights through shared memory), MX fp4 / fp8 and NVFP4 take a step's
  groups on one MMA. ``python -m bench.decode_rows --formats mxfp4,nvfp4,mxfp8 --ms
  1,16,32,64`` (and ``--ms 128``) with ``--extra`` variants WIDE and WIDE with 128-code
  steps, µs at 8192^2 / 4096 x 14336, H200: M 64 fp4 49.2 / 49.2 -> 41.8 / 41.0 (WIDE, 128),
  NVFP4 57.1 / 56.8 -> 52.8 / 52.1 (WIDE; its steps hold two groups), e4m3 48.5 / 47.4 ->
  40.8 / 39.6 (WIDE, 128); M 128 fp4 73.3 / 72.0 -> 63.5 / 60.8 (WIDE). e4m3 at 128 rows:
  63.0 / 61.7 -> 59.2 / 58.5 with 128-code steps, but that tile takes 224 KB of shared
  memory a loop on sm90, and the kernel compiled for a BIG flag read on the device holds
  both loops (320 KB: it would not launch); 64-code steps lost (65.6 / 64.7). Session 53
  (block_columns): 63.5 / 62.0 -> 61.0 / 59.8 (64-code steps), 55.8 / 54.9 (128), so the
  tile takes 128-code steps and ``STEP_K_DEV`` 64 where the flag is read on the device
  (graph capture before the weight's layout was built: 224 KB then 2 x 64-code loops). Not at 32
  rows and fewer (mma.sync, the weights as A from registers): fp4 M 1 21.8 -> 30.4, M 32
  32.8 -> 38.3 (NVFP4 at M 1 and 16 gained 0.8-1.2). Those timings spread the scales over
  the step's columns by a select a column; by _common.block_columns instead (its join and
  reshape take the MMA operand's layout; the select sent NVFP4's decoded codes through
  shared memory), same command, one later call: M 64 fp4 37.4 / 37.1, e4m3 37.4 / 36.6,
  NVFP4 50.9 / 49.9; and NVFP4's decode tile takes WIDE: M 1 31.3 / 30.0 -> 24.8 / 23.9,
  M 16 34.1 / 32.8 -> 27.3 / 26.7 (not its 32-row tile, slower there with the select; not
  retimed). At 32 rows (same command, ``--ms
  32,24``, tile variants): fp4 on 128-column tiles 32.8 / 32.2 -> 28.7 / 27.7 (M 24: 31.9 /
  31.7 -> 28.6 / 27.5), NVFP4 at 8 an SM 45.5 / 44.9 -> 40.7 / 39.1 (M 24: 44.9 / 44.2 ->
  40.3 / 38.4); e4m3's tile was the fastest of ten (128-column tiles 38.2 / 36.5, 8 an SM
  43.7 / 40.5, POST 37.1 / 36.2, 64-code steps 40.2 / 37.9). Session 53 (block_columns):
  NVFP4 at 32 rows WIDE on 128-column tiles 38.8 / 37.3 against 40.8 / 39.3 (WIDE on 64
  columns 47.0 / 44.6); MX int8 at 64 rows (bf16 x) WIDE with 128-code steps 36.1 / 35.3
  against 51.6 / 51.4 (64-code steps 41.2 / 39.2); at 32 rows (TILE's WIDE) MX e4m3 37.1 /
  36.2 -> 31.0 / 29.7 (0.94 / 0.88x -> 1.12 / 1.08x bf16), MX int8 37.9 / 36.7 -> 33.4 / 32.4
  (128-column tiles 67-83: not those). Session 54: NVFP4's 64-row tile on 128-code steps
  (four groups, _common.block_columns8) 43.9 / 42.7 / 40.6 against 51.6 / 50.6 / 45.7 at
  8192^2 / 4096 x 14336 / 14336 x 4096 (its 32-row tile spilled 556 bytes on them: not
  taken); past 64 rows MX fp4 and NVFP4 go to kernels/wt_rows_mx.py first.
Stream-K (SK) stays with 16 rows, where it was timed. Only sm90 was timed, so only sm90
(and the interpreter, which tests them) takes them: :func:`max_rows`."""
# e5m2 shares e4m3's tiles; MX int8 takes e4m3's 128-row one with WIDE's 64-code steps (bf16
# x: BF16_ONLY_ROWS; H200 57.4 / 56.7 us at 8192^2 / 4096 x 14336 against the emulated path's
# 101.2 / 88.4, 128-code steps 57.9 / 56.8, session 53)
ROWS_TILE[WeightFormat.MX_FP8_E5M2] = ROWS_TILE[WeightFormat.MX_FP8]
ROWS_TILE[WeightFormat.MX_INT8] = {
    32: {"ROWS": 32},
    64: {"ROWS": 64, "BLOCK_N": 128, "STEP_K": 128, "num_warps": 4, "WT": False, "per_sm": 2,
         "WIDE": True},
    128: {"ROWS": 128, "BLOCK_N": 256, "STEP_K": 64, "num_warps": 8, "WT": False, "per_sm": 1,
          "WIDE": True},
}  # fmt: skip
BF16_ONLY_ROWS = {WeightFormat.MX_INT8: 64}
"""Formats whose tiles past this many rows serve bf16 x only: MX int8's 128-row tile is fast
by its WIDE steps (each code times its block's bf16 step), which fp16 x does not take; with
fp16 x it would scale each block's product tile (POST), 175 us at 128 rows on an H200 where the
emulated path read 100 (session 51)."""


def rows_tile(wfmt: WeightFormat, m: int) -> dict:
    """ROWS_TILE's overrides for ``m`` rows: its smallest padding that holds them (none up to
    16, nor for other formats, nor past the format's largest)."""
    if m <= 16 or wfmt not in ROWS_TILE:
        return {}
    return next((t for rows, t in sorted(ROWS_TILE[wfmt].items()) if m <= rows), {})


def max_rows(wfmt: WeightFormat, device: torch.device, x_dtype: torch.dtype | None = None) -> int:
    """The most rows of x decode_mma takes for ``wfmt`` on ``device``: ROWS_TILE's largest
    padding (int4 128, int8 / e4m3 256, W4A8 64, MX fp4 / fp8 / int8 128, NVFP4 and MX fp6
    64; MX int8 with x other than bf16 64: BF16_ONLY_ROWS; ``x_dtype`` None: any x) where the
    device was timed (NVIDIA sm90; the interpreter's CPU tensors), else 16."""
    if wfmt not in ROWS_TILE:
        return 16
    most = max(ROWS_TILE[wfmt])
    if x_dtype not in (None, torch.bfloat16):
        most = min(most, BF16_ONLY_ROWS.get(wfmt, most))
    if device.type != "cuda":  # (CPU tensors: the interpreter's, else no kernel runs)
        return most if INTERPRET else 16
    return most if _sm90(device.index if device.index is not None else -1) else 16


@functools.cache
def _sm90(index: int) -> bool:
    """Whether CUDA device ``index`` (-1: the current one) is NVIDIA sm90 (cached: asked per
    call past 16 rows)."""
    if torch.version.hip is not None:
        return False
    return torch.cuda.get_device_capability(None if index < 0 else index) == (9, 0)
