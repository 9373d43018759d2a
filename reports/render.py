"""Render the dashboard: one self-contained HTML file per page (inline CSS, JS and SVG, no
network, opens from file://), jinja2 with autoescape, a shared nav bar and CSV download.

Pages (reports/pages/, one module each, templates in reports/templates/ on base.html.j2):
index (overview), accuracy, speed, regressions, targets, platforms, training. The output is
a function of the runs only (no render time, sorted), so re-rendering unchanged runs gives
unchanged files: the site in reports/site/ is committed.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import jinja2

from reports.data import load_runs
from reports.pages import PAGES
from reports.site import Site

TEMPLATES = Path(__file__).resolve().parent / "templates"
DEFAULT_OUT = Path("reports/site")


def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,  # every value is escaped: record text may hold anything
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def render_pages(site: Site, out_dir: Path) -> dict[str, Path]:
    """Write every page of ``site`` into ``out_dir``; {page name: path}, nav order."""
    env = environment()
    nav = [{"name": p.name, "title": p.title, "file": f"{p.name}.html"} for p in PAGES]
    out_dir.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    for page in PAGES:
        ctx = page.context(site)
        html = env.get_template(f"{page.name}.html.j2").render(
            page=page.name, title=page.heading, nav=nav, **ctx
        )
        path = out_dir / f"{page.name}.html"
        path.write_text(html, encoding="utf-8")
        written[page.name] = path
    return written


def render_site(
    store: Path | None, runs_dir: Path | None, out_dir: Path, wanted: Iterable[str] = ()
) -> dict[str, Path]:
    """Load the runs (store and runs directory) and write every page into ``out_dir``."""
    return render_pages(Site(load_runs(store, runs_dir), list(wanted)), out_dir)


def render_report(
    store: Path | None, runs_dir: Path | None, out: Path, wanted: Iterable[str] = ()
) -> Path:
    """The site for callers that name a page (``python -m conformance --report x.html``): the
    pages go into that file's folder; returns the overview page."""
    out_dir = out.parent if out.suffix == ".html" else out
    return render_site(store, runs_dir, out_dir, wanted)["index"]
