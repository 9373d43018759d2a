"""index.html: the newest run of every kind per backend with its counts (a GPU bench run's
also how many speed goals it meets: reports.goals), what changed since that backend's
previous run of the same kind (cases whose status moved, cases new or no longer run), and
links to the pages that show more."""

from __future__ import annotations

from typing import Any

from reports import goals
from reports.data import RED, Run
from reports.site import Site, counts, first_line, git_short, summaries, table, when

KINDS = (  # kind, page that shows it, word for its cases
    ("conformance", "accuracy.html", "cases"),
    ("compile", "targets.html", "kernel × target"),
    ("bench", "speed.html", "rows"),
    ("training", "training.html", "curves"),
)
COMPARED = ("conformance", "compile", "training")  # bench changes are the regressions page's


def changes(base: Run, new: Run) -> list[dict[str, Any]]:
    """Cases of ``new`` whose summary status differs from ``base``'s, or that only one ran."""
    before = {r.case_id: r for r in summaries(base)}
    after = {r.case_id: r for r in summaries(new)}
    out = []
    for case in sorted(before.keys() | after.keys()):
        b, a = before.get(case), after.get(case)
        if b is not None and a is not None and b.status == a.status:
            continue
        change = "changed" if b and a else ("new" if a else "not run")
        said = next((r for r in (a, b) if r is not None and r.status != "pass"), None)
        out.append(
            {
                "case": case,
                "before": b.status if b else "",
                "after": a.status if a else "",
                "change": change,
                "reason": ((said.reason if said else None) or "")[:400],  # in full: accuracy
                "short": "",
            }
        )
    worse = [r for r in out if r["after"] in RED]  # what went red first, then the rest
    return worse + [r for r in out if r["after"] not in RED]


def context(site: Site) -> dict[str, Any]:
    tiles, runs, rows = [], [], []
    for kind, link, noun in KINDS:
        for run in site.latest(kind):
            head = site.run_row(run)
            runs.append(head)
            base = site.previous(run) if kind in COMPARED else None
            diff = changes(base, run) if base else []
            moved = [d for d in diff if d["change"] == "changed"]
            tiles.append(
                {
                    **head,
                    "link": link,
                    "noun": noun,
                    "n": sum(counts(summaries(run)).values()),
                    "base": base.info.run_id if base else None,
                    "base_when": when(base.info.started) if base else "",
                    "base_git": git_short(base.info.git_sha) if base else "",
                    "changed": len(moved),
                    "new": sum(d["change"] == "new" for d in diff),
                    "gone": sum(d["change"] == "not run" for d in diff),
                    "goals": goals.tally(goals.check(run)) if kind == "bench" else {},
                }
            )
            for d in diff:
                d["short"] = first_line(d["reason"])
                rows.append(
                    {
                        **d,
                        "kind": kind,
                        "label": run.label,
                        "run": run.info.run_id,
                        "base": base.info.run_id if base else "",
                    }
                )
    columns = ["kind", "label", "case", "change", "before", "after", "reason", "base", "run"]
    return {
        "tiles": tiles,
        "runs": runs,
        "changes": rows,
        "labels": sorted({r["label"] for r in rows}),
        "csv": {
            **table("aoq-changes.csv", columns, ([r[c] for c in columns] for r in rows)),
            "table": "changes",
        },
    }
