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
    """Graph-replay µs to read ``nbytes`` once (rotating ``copies`` buffers past L2): 8
    programs an SM, 4096 words a block, 8 warps (:func:`read_static_us`)."""
    return read_static_us(nbytes, copies)


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


@triton.jit
def _read_dyn_kernel(p, out, ticket, n, chunks, BLOCK: tl.constexpr):
    """Sum ``n`` int32 words in ``chunks`` chunks of BLOCK, each program taking its next
    chunk from an atomic counter (``ticket[0]``) until none is left; the last program to
    finish (``ticket[1]`` counts them) sets both back to zero for the next launch."""
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.int32)
    u = tl.atomic_add(ticket, 1)
    while u < chunks:
        base = u.to(tl.int64) * BLOCK
        acc += tl.load(p + base + offs, mask=base + offs < n, other=0)
        u = tl.atomic_add(ticket, 1)
    if tl.atomic_add(ticket + 1, 1) == tl.num_programs(0) - 1:
        tl.atomic_xchg(ticket, 0)
        tl.atomic_xchg(ticket + 1, 0)
    tl.store(out + tl.program_id(0), tl.sum(acc))


def read_dyn_us(nbytes: int, copies: int = 8, per_sm: int = 8, block: int = 1024,
                warps: int = 4) -> float:  # fmt: skip
    """Graph-replay µs to read ``nbytes`` once with chunks of ``block`` int32 words handed
    out by an atomic counter to ``per_sm`` programs an SM (the floor without a static
    partition's uneven end)."""
    n = -(-nbytes // 4)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    bufs = [torch.ones(n, dtype=torch.int32, device="cuda") for _ in range(copies)]
    out = torch.empty(sms * per_sm, dtype=torch.int32, device="cuda")
    ticket = torch.zeros(2, dtype=torch.int32, device="cuda")

    def call(b: torch.Tensor) -> Any:
        return _read_dyn_kernel[(sms * per_sm,)](b, out, ticket, n, -(-n // block), BLOCK=block,
                                                 num_warps=warps)  # fmt: skip

    us = graph_us([functools.partial(call, b) for b in bufs])
    if int(out.sum()) != n or int(ticket.abs().sum()) != 0:  # every word once, tickets reset
        raise RuntimeError(f"read_dyn: summed {int(out.sum())} of {n} words, ticket {ticket}")
    return us


def read_static_us(nbytes: int, copies: int = 8, per_sm: int = 8, block: int = 4096,
                   warps: int = 8) -> float:  # fmt: skip
    """Graph-replay µs to read ``nbytes`` once with ``_read_kernel`` at ``per_sm`` programs an
    SM, ``block`` int32 words a block and ``warps`` warps (rotating ``copies`` buffers past
    L2)."""
    n = -(-nbytes // 4)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    bufs = [torch.ones(n, dtype=torch.int32, device="cuda") for _ in range(copies)]
    out = torch.empty(sms * per_sm, dtype=torch.int32, device="cuda")

    def call(b: torch.Tensor) -> Any:
        return _read_kernel[(sms * per_sm,)](b, out, n, BLOCK=block, num_warps=warps)

    return graph_us([functools.partial(call, b) for b in bufs])


def main() -> None:
    """``python -m bench.read_floor``: the read floors side by side at int4's goal-shape bytes
    and bf16's, each summed value checked."""
    sizes = {"int4 8192^2": 35_651_584, "int4 4096x14336": 31_195_136, "bf16 8192^2": 134_217_728,
             "bf16 4096x14336": 117_440_512}  # fmt: skip
    for name, nbytes in sizes.items():
        line = f"{name:16s} read {read_us(nbytes):6.1f}"
        for per_sm, block, warps in ((8, 1024, 8), (16, 1024, 4), (4, 4096, 8)):
            line += (
                f" | static {per_sm}x{block} {read_static_us(nbytes, 8, per_sm, block, warps):6.1f}"
            )
        for per_sm, block, warps in (
            (8, 1024, 4),
            (8, 2048, 4),
            (16, 1024, 4),
            (4, 4096, 8),
            (8, 4096, 8),
        ):
            line += f" | dyn {per_sm}x{block} {read_dyn_us(nbytes, 8, per_sm, block, warps):6.1f}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
