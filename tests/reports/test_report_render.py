"""The accuracy page and the CLI: cells with their tolerance, its source and the kernel, the
newest run per backend (or the runs named), ``--out`` a directory; and, where Chromium
exists, every page loads with no console error, hostile strings stay inert, and the filters,
the lazily drawn cell tables, sorting and the CSV work."""

import subprocess
import sys
from pathlib import Path

import pytest
import site_runs
from site_runs import HOSTILE, SOURCE, embedded

from reports.browser import Browser, check_pages, find_chromium
from reports.render import render_report, render_site

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture()
def stored(tmp_path):
    return site_runs.write(tmp_path)


@pytest.fixture()
def pages(stored, tmp_path):
    return render_site(*stored, tmp_path / "site")


def test_cells_show_metrics_tolerance_source_and_kernel(pages):
    html = pages["accuracy"].read_text()
    assert 'id="w8a8/bf16/cpu"' in html and 'id="w8a8/bf16/cuda-sm90"' in html
    data = embedded(html, "acc-data")
    s = data["s"]
    [case] = [c for c in data["cases"] if s[c[4]] == "w8a8/bf16/cpu/M1-K256-N256"]
    assert [s[i] for i in case[:4]] == ["cpu", "w8a8", "bf16", "M1-K256-N256"]
    assert s[case[5]] == "new"  # the newest cpu run wins its column
    summary, output = case[6][0], case[6][1]
    assert s[summary[0]] == "cell" and s[summary[2]] == "aten._int_mm"
    assert "checks" not in (summary[3] or {})  # the summary's check list is the rows below
    assert s[output[0]] == "output" and output[3] == {"rel_err": 0.00123456, "budget": 0.004}
    assert s[output[4]] == '{"rel_factor": 2.0, "rel_min": 1e-06}' and s[output[5]] == SOURCE
    assert "\\u003cscript\\u003e" in html and HOSTILE not in html
    assert ">old<" not in html


def test_csv_columns_of_the_records(pages):
    csv = embedded(pages["accuracy"].read_text(), "csv-data")
    assert csv["columns"][:5] == ["run_id", "backend", "case_id", "check", "status"]
    assert "tolerance_source" in csv["columns"] and csv["rows"] == []  # built by the page's JS


def test_render_report_names_a_page_of_the_site(stored, tmp_path):
    out = render_report(*stored, tmp_path / "x" / "report.html")
    assert out == tmp_path / "x" / "index.html" and (tmp_path / "x" / "speed.html").exists()


def test_cli_out_directory_and_named_runs(stored, tmp_path):
    store, runs = stored
    cmd = [sys.executable, "-m", "reports", "--store", str(store), "--runs-dir", str(runs)]
    out = subprocess.run(
        [*cmd, "--out", str(tmp_path / "o"), "--run", "old"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert "7 pages" in out.stdout
    assert "<code>old</code>" in (tmp_path / "o" / "accuracy.html").read_text()
    no_store = subprocess.run(
        [*cmd, "--no-store", "--out", str(tmp_path / "n")], cwd=REPO, capture_output=True
    )
    assert no_store.returncode == 0
    accuracy = (tmp_path / "n" / "accuracy.html").read_text()
    assert "<code>gpu</code>" in accuracy and "<code>new</code>" not in accuracy


@pytest.mark.skipif(find_chromium() is None, reason="chromium is not installed")
def test_every_page_in_headless_chromium(pages, tmp_path):
    results = check_pages(pages, tmp_path / "shots")
    assert list(results) == list(pages)
    for name, result in results.items():
        assert result.console_errors == [], name
        assert result.screenshot == tmp_path / "shots" / f"{name}.png"
        assert result.screenshot.stat().st_size > 5_000


@pytest.mark.skipif(find_chromium() is None, reason="chromium is not installed")
def test_accuracy_page_scripts_in_headless_chromium(pages):
    checks = {
        "pwned": "String(window.__pwned)",
        "cells": "document.querySelectorAll('details.cell').length",
        "after_filter": "(() => { const s = document.getElementById('f-status'); s.value = 'crash';"
        " s.dispatchEvent(new Event('input')); return [...document"
        ".querySelectorAll('details.cell')].filter(d => !d.hidden).length; })()",
        "drawn": "(() => { const d = [...document.querySelectorAll('details.cell')]"
        ".find(d => !d.hidden); d.open = true; d.dispatchEvent(new Event('toggle'));"
        " return [d.querySelectorAll('tr').length, d.querySelector('td.reason').textContent]; })()",
        "csv": "window.aoqCsv().rows.length",
        "pwned_after": "String(window.__pwned)",
    }
    with Browser() as b:
        result = b.open(pages["accuracy"], evaluate=checks)
    assert result.console_errors == []
    got = result.evaluated
    assert got["pwned"] == got["pwned_after"] == "undefined"
    assert got["cells"] == 3 and got["after_filter"] == 1
    assert got["drawn"] == [5, HOSTILE]  # header, summary, 3 checks; the reason as text
    assert got["csv"] == 3 * 4  # every check of the three cases


@pytest.mark.skipif(find_chromium() is None, reason="chromium is not installed")
def test_tables_sort_filter_and_export_in_headless_chromium(pages):
    checks = {
        "sorted": "(() => { const th = document.querySelector('#compile thead th:nth-child(2)');"
        " th.click(); th.click(); return [...document.querySelectorAll('#compile tbody tr')]"
        ".map(r => r.cells[1].textContent); })()",
        "filtered": "(() => { const s = document.querySelector('.filters select[data-key=status]');"
        " s.value = 'xfail'; s.dispatchEvent(new Event('input'));"
        " return document.querySelector('.filters .count').textContent; })()",
        "csv_rows": "(() => { let rows; const orig = URL.createObjectURL; URL.createObjectURL ="
        " (b) => { rows = b; return 'about:blank'; }; document.querySelector('button.csv')"
        ".click(); URL.createObjectURL = orig; return rows.size; })()",
    }
    with Browser() as b:
        result = b.open(pages["targets"], evaluate=checks)
    assert result.console_errors == []
    assert result.evaluated["sorted"] == ["sm90", "sm80", "gfx942"]  # descending
    assert result.evaluated["filtered"] == "1 of 3 rows"
    header_and_one_row = len("kernel,target,status") < result.evaluated["csv_rows"] < 400
    assert header_and_one_row


@pytest.mark.skipif(find_chromium() is None, reason="chromium is not installed")
def test_browser_check_reports_errors_and_failed_loads(tmp_path):
    page = tmp_path / "broken.html"
    page.write_text(
        '<!DOCTYPE html><html><body><img src="missing.png">'
        '<script>console.error("boom"); document.body.dataset.ready = "1";</script>'
        "</body></html>"
    )
    [result] = check_pages({"broken": page}).values()
    assert any("console.error: boom" in e for e in result.console_errors)
    assert any(e.startswith("failed load") for e in result.console_errors)
