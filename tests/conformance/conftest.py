"""The suite under test is the top-level ``conformance`` package, not this test folder of the
same name: put the repository root first on sys.path, so ``import conformance`` finds it
however pytest was started (``python -m pytest`` adds the working directory; ``pytest`` does
not, and ``pythonpath = ["tests"]`` would make this folder a namespace package instead)."""

import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[2])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
if "conformance" in sys.modules and not hasattr(sys.modules["conformance"], "__file__"):
    del sys.modules["conformance"]  # a namespace package of this folder, imported too early
