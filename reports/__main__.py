"""``python -m reports``: render the conformance report from stored runs.

    python -m reports [--store reports/results.sqlite] [--runs-dir reports/runs]
                      [--out reports/site/index.html] [--run RUN_ID ...] [--check]

Each backend/arch column shows its newest conformance run unless ``--run`` names one;
``--check`` then opens the page in headless Chromium (page loads, no console errors) and
saves a screenshot beside it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from reports.render import render_report


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m reports",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--store", type=Path, default=Path("reports/results.sqlite"))
    p.add_argument("--runs-dir", type=Path, default=Path("reports/runs"))
    p.add_argument("--out", type=Path, default=Path("reports/site/index.html"))
    p.add_argument("--run", action="append", default=[], metavar="RUN_ID")
    p.add_argument("--check", action="store_true", help="load it in headless Chromium")
    args = p.parse_args(argv)
    out = render_report(args.store, args.runs_dir, args.out, args.run)
    print(f"report: {out.resolve().as_uri()}")
    if args.check:
        from reports.browser import BrowserError, check_page

        try:
            result = check_page(out, out.with_name("screenshot.png"))
        except BrowserError as e:
            print(f"browser check failed: {e}", file=sys.stderr)
            return 1
        print(
            f"chromium: loaded, {len(result.console_errors)} console errors; "
            f"screenshot {result.screenshot}"
        )
        for line in result.console_errors:
            print(f"  {line}", file=sys.stderr)
        return 1 if result.console_errors else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
