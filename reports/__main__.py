"""``python -m reports``: render the dashboard (reports/site/*.html) from stored runs.

    python -m reports [--store reports/results.sqlite | --no-store] [--runs-dir reports/runs]
                      [--out reports/site/] [--run RUN_ID ...] [--check]

Pages: index (overview), accuracy, speed, regressions, targets, platforms, training. Each
backend shows its newest run of each kind unless ``--run`` names one. ``--no-store`` renders
the committed runs only (what the published site shows). ``--check`` then opens every page
in headless Chromium (loads, no console error, no failed load) and saves a screenshot per
page in <out>/screenshots/.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from reports.render import DEFAULT_OUT, render_site


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["compare"]:
        from reports.compare import main as compare

        return compare(argv[1:])
    p = argparse.ArgumentParser(
        prog="python -m reports",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--store", type=Path, default=Path("reports/results.sqlite"))
    p.add_argument("--runs-dir", type=Path, default=Path("reports/runs"))
    p.add_argument("--no-store", action="store_true", help="only the runs directory")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the site's directory")
    p.add_argument("--run", action="append", default=[], metavar="RUN_ID")
    p.add_argument("--check", action="store_true", help="load it in headless Chromium")
    args = p.parse_args(argv)
    out = args.out.parent if args.out.suffix == ".html" else args.out  # an old --out x.html
    pages = render_site(None if args.no_store else args.store, args.runs_dir, out, args.run)
    print(f"site: {pages['index'].resolve().as_uri()} ({len(pages)} pages)")
    return check(pages, out / "screenshots") if args.check else 0


def check(pages: dict[str, Path], screenshots: Path) -> int:
    """Every page in headless Chromium; 1 if any page failed to load or logged an error."""
    from reports.browser import BrowserError, check_pages

    try:
        results = check_pages(pages, screenshots)
    except BrowserError as e:
        print(f"browser check failed: {e}", file=sys.stderr)
        return 1
    bad = 0
    for name, result in results.items():
        print(f"chromium {name}: {len(result.console_errors)} errors; {result.screenshot}")
        for line in result.console_errors:
            print(f"  {line}", file=sys.stderr)
        bad += bool(result.console_errors)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
