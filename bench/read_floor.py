"""The read floors bench.decode_rows sets beside each decode kernel: the graph-replay time of
a kernel that only reads a weight's bytes once, with plain loads (``read_us``) or through
the tensor-memory accelerator (``read_tma_us``, sm90 on)."""

from __future__ import annotations

import functools
from typing import Any

import torch
import triton
import triton.language as tl

from bench.decode_sweep import graph_us


@triton.jit
def _read_kernel(p, out, n, BLOCK: tl.constexpr):
    """Sum ``n`` int32 words, grid-strided: reads only (the floor of a kernel that reads
    the weight once)."""
    start = tl.program_id(0) * BLOCK
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.int32)
    for off in range(start, n, tl.num_programs(0) * BLOCK):
        acc += tl.load(p + off + offs, mask=off + offs < n, other=0)
    tl.store(out + tl.program_id(0), tl.sum(acc))


def read_us(nbytes: int, copies: int = 8) -> float:
    """Graph-replay µs to read ``nbytes`` once (rotating ``copies`` buffers past L2)."""
    n = -(-nbytes // 4)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    bufs = [torch.ones(n, dtype=torch.int32, device="cuda") for _ in range(copies)]
    out = torch.empty(sms * 8, dtype=torch.int32, device="cuda")

    def call(b: torch.Tensor) -> Any:
        return _read_kernel[(sms * 8,)](b, out, n, BLOCK=4096, num_warps=8)

    return graph_us([functools.partial(call, b) for b in bufs])


@triton.jit
def _read_tma_kernel(desc, out, rows, BLOCK: tl.constexpr, STAGES: tl.constexpr):
    """Sum ``rows`` rows of 32 int32 words through a tensor descriptor, grid-strided: the
    read floor of a kernel whose copies are TMA's (sm90 on)."""
    acc = tl.zeros([BLOCK, 32], tl.int32)
    step = tl.num_programs(0) * BLOCK
    for r in tl.range(tl.program_id(0) * BLOCK, rows, step, num_stages=STAGES):
        acc += desc.load([r, 0])
    tl.store(out + tl.program_id(0), tl.sum(acc))


def read_tma_us(nbytes: int, copies: int = 8, per_sm: int = 4, stages: int = 3) -> float | None:
    """Graph-replay µs to read ``nbytes`` once through TMA (16 KB blocks, ``per_sm``
    programs an SM, ``stages`` in flight each), or None before sm90."""
    if torch.cuda.get_device_capability() < (9, 0):
        return None
    from triton.tools.tensor_descriptor import TensorDescriptor

    rows = -(-nbytes // 128)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    bufs = [torch.ones(rows, 32, dtype=torch.int32, device="cuda") for _ in range(copies)]
    out = torch.empty(sms * per_sm, dtype=torch.int32, device="cuda")

    def call(d: Any) -> Any:
        return _read_tma_kernel[(sms * per_sm,)](d, out, rows, BLOCK=128, STAGES=stages,
                                                 num_warps=4)  # fmt: skip

    descs = [TensorDescriptor(b, [rows, 32], [32, 1], [128, 32]) for b in bufs]
    return graph_us([functools.partial(call, d) for d in descs])
