"""A CUDA graph's kernels in time, from the profiler (torch.profiler, CUPTI): for a list of
calls captured as one graph and replayed, each kernel's median duration and, for each pair of
kernels that follow each other, the median gap from the first one's end to the next one's
start. A negative gap is a kernel placed before the one ahead of it ended (programmatic
dependent launch: its programs resident and waiting). ``python -m bench.decode_rows
--timeline`` prints it beside each variant's time (bench/NOTES.md, session 43)."""

from __future__ import annotations

import json
import os
import statistics
import tempfile
from collections.abc import Callable
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

from bench.decode_sweep import capture


def _short(name: str) -> str:
    """A Triton kernel's name without its leading underscores and ``_kernel``."""
    return name.strip("_").removesuffix("_kernel")[:28]


def _kernels(trace: dict[str, Any]) -> list[dict[str, Any]]:
    evs = [e for e in trace.get("traceEvents", []) if e.get("cat") == "kernel"]
    return sorted(evs, key=lambda e: e["ts"])


def summarize(events: list[dict[str, Any]], skip: int, calls: int) -> dict[str, Any]:
    """Medians over ``events`` (sorted by start; µs) past the first ``skip``, which cover
    ``calls`` calls: ``span_us`` (first start to last end, a call), per kernel its duration,
    per pair of consecutive kernels the gap."""
    body = events[skip:]
    if not body or calls < 1:
        return {"span_us": None, "durations_us": {}, "gaps_us": {}}
    durs: dict[str, list[float]] = {}
    gaps: dict[str, list[float]] = {}
    for i, e in enumerate(body, start=skip):
        durs.setdefault(_short(e["name"]), []).append(e["dur"])
        if i:
            prev = events[i - 1]
            pair = f"{_short(prev['name'])}->{_short(e['name'])}"
            gaps.setdefault(pair, []).append(e["ts"] - (prev["ts"] + prev["dur"]))
    return {
        "span_us": (body[-1]["ts"] + body[-1]["dur"] - body[0]["ts"]) / calls,
        "durations_us": {k: statistics.median(v) for k, v in durs.items()},
        "gaps_us": {k: statistics.median(v) for k, v in gaps.items()},
    }


def graph_timeline(calls: list[Callable[[], Any]], replays: int = 4) -> dict[str, Any]:
    """Capture ``calls`` as one graph (decode_sweep.capture, 0.3 s of replays), replay it
    ``replays`` times under the profiler and summarize every replay but the first."""
    graph = capture(calls, warm_s=0.3)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(replays):
            graph.replay()
        torch.cuda.synchronize()
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = _kernels(json.load(f))
    finally:
        os.unlink(path)
    return summarize(events, len(events) // replays, len(calls) * (replays - 1))


def describe(t: dict[str, Any]) -> str:
    """One line: span a call, each kernel's duration, each pair's gap (µs)."""
    if t["span_us"] is None:
        return "no kernels traced"
    parts = [f"span/call {t['span_us']:.2f}"]
    parts += [f"{k} {v:.2f}" for k, v in t["durations_us"].items()]
    parts += [f"{k} {v:+.2f}" for k, v in t["gaps_us"].items()]
    return "; ".join(parts)
