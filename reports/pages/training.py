"""training.html: MX training convergence from ``kind="training"`` runs (records with check
``loss_curve``: ``metrics.loss`` per step, ``eval_loss``, ``rel_vs_float``) — the loss
curves of every config, float vs MXFP8 vs MXFP6 up close, one small chart per config against
float, a table of final losses with the tolerance each is held to; and the step times of MX
training from the newest bench run that has them."""

from __future__ import annotations

from typing import Any

from aoq.testing.benchrows import p50_us
from reports import svg
from reports.data import by_age
from reports.site import Site, fmt, rounded, table

CURVE = "loss_curve"
FOCUS = ("float", "mxfp8", "mxfp6")
WIDTH = 640  # two charts side by side on a 1400 px page
SMOOTH = 10  # steps in the moving average drawn (the table uses the raw values)
COLUMNS = [
    "backend",
    "task",
    "config",
    "status",
    "steps",
    "final_loss",
    "eval_loss",
    "rel_vs_float",
    "tolerance",
    "reason",
    "run_id",
]


def smooth(values: list[float], k: int = SMOOTH) -> list[float]:
    out, acc = [], 0.0
    for i, v in enumerate(values):
        acc += v
        if i >= k:
            acc -= values[i - k]
        out.append(acc / min(i + 1, k))
    return out


def _charts(label: str, curves: dict[str, list[float]]) -> list[Any]:
    if not curves:
        return []
    smoothed = {c: smooth(v) for c, v in curves.items()}
    every = [svg.Series(c, v, style=i) for i, (c, v) in enumerate(smoothed.items())]
    span = [x for v in smoothed.values() for x in v if x > 0]
    log = bool(span) and max(span) / min(span) > 4
    out = [
        svg.line_chart(
            f"{label}: training loss, every config ({SMOOTH}-step mean)",
            every,
            x_label="step",
            markers=False,
            y_label="loss",
            log=log,
            width=WIDTH,
        )
    ]
    focus = [s for s in every if s.name in FOCUS]
    if len(focus) > 1:
        out.append(
            svg.line_chart(
                f"{label}: float vs MXFP8 vs MXFP6 ({SMOOTH}-step mean)",
                focus,
                x_label="step",
                markers=False,
                y_label="loss",
                width=WIDTH,
            )
        )
    ref = next((s for s in focus if s.name == "float"), None)
    if ref is not None and len(focus) > 1:  # the curves above overlap: their gap, enlarged
        gaps = [
            svg.Series(
                s.name,
                [v - r for v, r in zip(smoothed[s.name], smoothed["float"], strict=False)],
                style=s.style,
            )
            for s in focus
            if s is not ref
        ]
        out.append(
            svg.line_chart(
                f"{label}: MXFP8 and MXFP6 minus float ({SMOOTH}-step mean)",
                gaps,
                x_label="step",
                markers=False,
                y_label="loss − float loss",
                width=WIDTH,
            )
        )
    if "float" in curves and len(curves) > 2:
        ref = next(s for s in every if s.name == "float")
        small = [
            svg.line_chart(s.name, [ref, s], width=330, height=190, x_label="step", markers=False)
            for s in every
            if s is not ref
        ]
        out.append(svg.small_multiples(f"{label}: each config against float", small, columns=4))
    return out


def context(site: Site) -> dict[str, Any]:
    sections, rows = [], []
    for run in site.latest("training", where=lambda r: any(x.check == CURVE for x in r.records)):
        task = str(run.info.extra.get("task", ""))
        curves = {}
        for r in run.records:
            if r.check != CURVE:
                continue
            loss = [float(v) for v in r.metrics.get("loss") or []]
            curves[r.config or r.case_id] = loss
            tail = loss[-SMOOTH:]
            rows.append(
                {
                    "backend": run.label,
                    "task": task,
                    "config": r.config or r.case_id,
                    "status": r.status,
                    "steps": len(loss),
                    "final_loss": sum(tail) / len(tail) if tail else None,
                    "eval_loss": r.metrics.get("eval_loss"),
                    "rel_vs_float": r.metrics.get("rel_vs_float"),
                    "tolerance": fmt(r.tolerance or {}),
                    "reason": r.reason or "",
                    "run_id": run.info.run_id,
                }
            )
        sections.append(
            {
                "run": site.run_row(run),
                "task": task,
                "charts": _charts(f"{run.label} {task}".strip(), curves),
            }
        )
    steps = []
    for run in by_age(r for r in site.runs.values() if r.info.kind == "bench"):
        got = [r for r in run.records if r.check == "step_time"]
        if got:
            steps = [
                {
                    "backend": run.label,
                    "run_id": run.info.run_id,
                    "case": r.case_id,
                    "config": r.config or "bf16",
                    "kernel": r.kernel or "",
                    "p50_us": p50_us(r.metrics),
                    "ratio": r.metrics.get("ratio_vs_bf16"),
                    "status": r.status,
                }
                for r in got
            ]
    return {
        "sections": sections,
        "rows": rows,
        "steps": steps,
        "csv": {
            **table("aoq-training.csv", COLUMNS, ([rounded(r[c]) for c in COLUMNS] for r in rows)),
            "table": "final",
        },
    }
