"""The dashboard's pages, in nav order: each module has ``context(site) -> dict`` for its
template ``reports/templates/<name>.html.j2``."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from reports.pages import accuracy, overview, platforms, regressions, speed, targets, training
from reports.site import Site


@dataclasses.dataclass(frozen=True)
class Page:
    name: str
    """The file stem: ``<name>.html`` and ``<name>.html.j2``."""
    title: str
    """The nav bar's word."""
    heading: str
    context: Callable[[Site], dict[str, Any]]


PAGES = (
    Page("index", "Overview", "aoq dashboard", overview.context),
    Page("accuracy", "Accuracy", "Accuracy: config × dtype × backend", accuracy.context),
    Page("speed", "Speed", "Speed: vs bf16, vs torchao, % of roofline", speed.context),
    Page(
        "regressions", "Regressions", "Regressions: latest run vs its baseline", regressions.context
    ),
    Page("targets", "Compile targets", "Compile targets: kernel × target", targets.context),
    Page("platforms", "Platforms", "Platform diff: one cell across backends", platforms.context),
    Page("training", "Training", "MX training: loss curves", training.context),
)
