"""What a person watching a bench run reads: one line per timed test, and at the end the
ceilings, a table of speedups (config x dtype by M) and the kernels, training and host rows."""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from typing import Any

from aoq.testing.benchrows import LATENCY, parse_case
from aoq.testing.records import STATUSES, Record

HOST = "host_overhead"
HOST_GOAL_US = 10.0
"""aoq's eager host time per quantized linear we aim for."""


def clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m}m{s:02d}s"


def progress_line(
    done: int, total: int, test_id: str, note: str, elapsed: float, eta: float
) -> str:
    width = len(str(total))
    return f"[{done:>{width}}/{total} {clock(elapsed)} ~{clock(eta)} left] {test_id}  {note}"


def note(
    p50: dict[str, float],
    bf16: dict[str, float] | None = None,
    peer: dict[str, float] | None = None,
    floor: float | None = None,
) -> str:
    """``graph 27.2us eager 49.3us x1.26 bf16 x0.30 peer roof 60%``: the p50 of each timed
    mode, and the ratios in the first (graph on GPUs)."""
    parts = [f"{mode} {v:.1f}us" for mode, v in p50.items()]
    if not p50:
        return "no mode could be timed"
    mode, v = next(iter(p50.items()))
    if bf16 and bf16.get(mode):
        parts.append(f"x{bf16[mode] / v:.2f} bf16")
    if peer and peer.get(mode):
        parts.append(f"x{peer[mode] / v:.2f} peer")
    if floor:
        parts.append(f"roof {floor / v:.0%}")
    return " ".join(parts)


def _geo(values: list[float]) -> float | None:
    values = [v for v in values if v and v > 0]
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else None


def _fmt(v: float | None, pattern: str = "{:.2f}") -> str:
    return pattern.format(v) if v is not None else "-"


def _m(shape: str) -> int:
    return int(shape.split("-")[0][1:])


def linear_table(
    rows: list[tuple[Any, dict[str, Any]]], eager_only: frozenset[str] = frozenset()
) -> list[str]:
    """config x dtype: speedup vs bf16 per M (geometric mean over K x N), vs peer, roofline.
    ``eager_only``: the row keys (``BenchCase.row_key``) whose torch.compile peer was skipped
    for budget; a config with such a cell compared to eager torchao gets a ``*``."""
    ms = sorted({_m(c.shape) for c, _ in rows})
    cells: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    starred: set[tuple[str, str]] = set()
    for c, m in rows:
        got = cells[(c.config, c.dtype)]
        if c.row_key in eager_only and m.get("peer") == "torchao":
            starred.add((c.config, c.dtype))
        got[f"M{_m(c.shape)}"].append(m.get("speedup_vs_bf16", 0.0))
        got["peer"].append(m.get("speedup_vs_peer", 0.0))
        got["roof"].append(m.get("roofline", 0.0))
    width = max([len(c) for c, _ in cells] + [6])
    head = f"{'config':<{width}} {'dtype':<5} " + " ".join(f"{'M' + str(m):>7}" for m in ms)
    lines = [head + f" {'vs peer':>8} {'roofline':>9}"]
    for (config, dtype), got in cells.items():
        cols = " ".join(f"{_fmt(_geo(got[f'M{m}'])):>7}" for m in ms)
        roof = [v for v in got["roof"] if v]
        med = statistics.median(roof) if roof else None
        star = "*" if (config, dtype) in starred else ""
        lines.append(
            f"{config:<{width}} {dtype:<5} {cols} {_fmt(_geo(got['peer'])) + star:>8} "
            f"{_fmt(med, '{:.0%}'):>9}"
        )
    if starred:
        lines.append(
            "* some cells against eager torchao only: their torch.compile was skipped for "
            "budget (time them with --only)"
        )
    return lines


def summary_table(records: list[Record], ceilings: dict[str, float], gpu: bool) -> str:
    mode = "graph" if gpu else "wall"
    out = ["ceilings: " + ", ".join(f"{k} {v:.4g}" for k, v in ceilings.items())]
    linear, kernels, training, host = [], [], [], []
    eager_only = frozenset(
        c.row_key
        for r in records
        if (c := parse_case(r.case_id)) is not None
        and c.side == "torchao-compile"
        and r.status == "skip"
        and (r.reason or "").startswith("budget")
    )
    for r in records:
        c = parse_case(r.case_id)
        if c is None or r.status != "pass" or c.side != "aoq":
            continue
        if r.check == HOST:
            over = r.metrics.get("over_bf16_us")
            extra = "" if over is None else f"  ({over:+.1f} us over bf16 F.linear)"
            extra += "" if r.metrics.get("meets_goal") else "  over the goal"
            host.append(f"  {c.config:<22} {r.metrics['p50_us']:8.1f} us{extra}")
        elif r.check != LATENCY:
            continue
        elif "-H" in c.shape:  # a training step: timed eagerly only
            training.append(
                f"  {c.config:<28} {c.shape:<20} {r.metrics['p50_us'] / 1e3:8.2f} ms "
                f"x{r.metrics.get('speedup_vs_bf16', math.nan):.2f} bf16"
            )
        elif c.mode != mode:
            continue
        elif "-N" in c.shape:
            linear.append((c, r.metrics))
        else:
            roof = r.metrics.get("roofline")
            kernels.append(
                f"  {c.config:<26} {c.shape:<12} {r.metrics['p50_us']:9.1f} us "
                f"{_fmt(roof, '{:.0%}'):>5} of copy bandwidth"
            )
    if linear:
        out += ["", f"aoq linear speedup vs bf16 F.linear ({mode}; geometric mean over K x N):"]
        out += linear_table(linear, eager_only)
    if kernels:
        out += ["", "kernels:", *kernels]
    if training:
        out += ["", "training step (eager):", *training]
    if host:
        out += [
            "",
            f"aoq eager host time per quantized linear (goal: <= {HOST_GOAL_US:g} us over bf16):",
        ]
        out += host
    counts = Counter(r.status for r in records)
    out += [
        "",
        f"{len(records)} rows: " + ", ".join(f"{s} {counts[s]}" for s in STATUSES if counts[s]),
    ]
    errors = [r for r in records if r.status in ("error", "fail")]
    out += [
        f"  {r.status}: {r.case_id}: {(r.reason or '').splitlines()[0][:160]}" for r in errors[:20]
    ]
    return "\n".join(out)
