"""The report: self-contained, every hostile string escaped, cells with their tolerance and
source, newest run per backend, CSV beside it; and, where Chromium exists, the page loads
with no console error and its filters work."""

import csv
import dataclasses
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from aoq.testing.records import JsonlWriter, Record, RunInfo
from aoq.testing.store import Store
from reports.browser import check_page, find_chromium
from reports.render import render_report

REPO = Path(__file__).resolve().parents[2]
HOSTILE = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'


def _run(run_id: str, backend: str, started: str, arch: str = "cpu") -> RunInfo:
    return RunInfo(
        run_id,
        "conformance",
        started,
        "abc123",
        "host<b>",
        backend,
        f"device {HOSTILE}",
        arch,
        "2.13.0",
        "3.6.0",
        {"quick": False},
    )


def _case(run_id: str, config: str, dtype: str, backend: str, status: str, reason=None):
    cid = f"{config}/{dtype}/{backend}/M1-K256-N256"
    out = Record(
        run_id,
        cid,
        "output",
        status,
        config,
        dtype,
        "M1-K256-N256",
        metrics={"rel_err": 0.00123456, "budget": 0.004},
        tolerance={"rel_factor": 2.0, "rel_min": 1e-6},
        tolerance_source="conformance/profiles/cpu.toml#override-1 (why)",
        reason=reason,
    )
    kernel = Record(
        run_id, cid, "kernel", "pass", config, dtype, "M1-K256-N256", kernel="aten._int_mm"
    )
    cell = Record(
        run_id,
        cid,
        "cell",
        status,
        config,
        dtype,
        "M1-K256-N256",
        kernel="aten._int_mm",
        reason=reason,
    )
    return [out, kernel, cell]


@pytest.fixture()
def stored(tmp_path):
    """An old and a new cpu run in the store, a cuda run only as a committed JSONL."""
    old, new = _run("old", "cpu", "2026-01-01T00:00:00+00:00"), _run("new", "cpu", "2026-02-01")
    with Store(tmp_path / "r.sqlite") as s:
        for run, status in ((old, "fail"), (new, "pass")):
            s.add_run(run)
            s.add_records(_case(run.run_id, "w8a8", "bf16", "cpu", status))
        s.add_records(_case("new", f"evil{HOSTILE}", "fp32", "cpu", "crash", reason=HOSTILE))
    gpu = dataclasses.replace(_run("gpu", "cuda", "2026-01-15", arch="sm90"), device="H100")
    with JsonlWriter(gpu, tmp_path / "runs") as w:
        w.write_many(_case("gpu", "w8a8", "bf16", "cuda", "xfail", reason="known"))
    out = render_report(tmp_path / "r.sqlite", tmp_path / "runs", tmp_path / "site/index.html")
    return out


def test_hostile_strings_are_escaped_everywhere(stored):
    html = stored.read_text()
    assert HOSTILE not in html and "<script>window.__pwned" not in html
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in html
    assert 'onerror="window' not in html
    assert "\\u003cscript\\u003e" in html  # inside the embedded JSON, too
    assert len(re.findall(r"<script\b", html)) == 3  # the page's own: two JSON blocks, one JS


def test_self_contained_and_shows_cells_with_tolerance_and_source(stored):
    html = stored.read_text()
    assert not re.search(r"(src|href)=\"(https?:)?//", html)
    assert "default-src 'none'" in html
    assert 'id="w8a8/bf16/cpu"' in html and 'id="w8a8/bf16/cuda-sm90"' in html
    assert "rel_factor=2, rel_min=1e-06" in html and "cpu.toml#override-1 (why)" in html
    assert "rel_err=0.001235" in html and "aten._int_mm" in html
    assert "new" in html and ">old<" not in html  # the newest cpu run wins its column


def test_csv_beside_the_page(stored):
    rows = list(csv.DictReader(io.StringIO((stored.parent / "results.csv").read_text())))
    assert {r["backend"] for r in rows} == {"cpu", "cuda-sm90"}
    assert any(r["reason"] == HOSTILE for r in rows)


def test_cli_picks_named_runs(stored, tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "reports",
            "--store",
            str(tmp_path / "r.sqlite"),
            "--runs-dir",
            str(tmp_path / "runs"),
            "--out",
            str(tmp_path / "o.html"),
            "--run",
            "old",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert "<code>old</code>" in (tmp_path / "o.html").read_text()


@pytest.mark.skipif(find_chromium() is None, reason="chromium is not installed")
def test_page_in_headless_chromium(stored):
    checks = {
        "pwned": "String(window.__pwned)",
        "cells": "document.querySelectorAll('details.cell').length",
        "after_filter": "(() => { const s = document.getElementById('f-status'); s.value = 'crash';"
        " s.dispatchEvent(new Event('input')); return [...document"
        ".querySelectorAll('details.cell')].filter(d => !d.hidden).length; })()",
    }
    result = check_page(stored, stored.with_name("shot.png"), evaluate=checks)
    assert result.console_errors == []
    assert result.evaluated["pwned"] == "undefined"
    assert result.evaluated["cells"] == 3 and result.evaluated["after_filter"] == 1
    assert result.screenshot is not None and result.screenshot.stat().st_size > 10_000
