"""The repository root on sys.path, so that ``import reports`` is the package and not this
test folder: pyproject's ``pythonpath = ["tests"]`` makes tests/reports a namespace package
named ``reports`` when pytest runs as ``.venv/bin/pytest`` (``python -m pytest`` adds the
working directory, which hides the clash)."""

import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[2])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
