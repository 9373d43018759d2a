"""The dashboard's pages from a small synthetic set of runs: every page renders with the nav,
hostile strings are escaped on every page, nothing is fetched from anywhere, the output is
the same bytes for the same runs, each page's CSV holds its table, and legacy bench runs are
adapted to the benchrows schema."""

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
import site_runs
from site_runs import HOSTILE, embedded

from aoq.testing.benchrows import parse_case
from aoq.testing.records import JsonlWriter
from reports.data import bench_records, latest, load_runs, previous
from reports.pages import PAGES
from reports.render import render_site

NAMES = [p.name for p in PAGES]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("site")
    store, runs = site_runs.write(tmp)
    pages = render_site(store, runs, tmp / "site")
    return {name: path.read_text(encoding="utf-8") for name, path in pages.items()}


def test_every_page_renders_with_the_nav(site):
    assert list(site) == NAMES == [
        "index", "accuracy", "speed", "regressions", "targets", "platforms", "training"
    ]  # fmt: skip
    for name, html in site.items():
        links = re.findall(r'<nav aria-label="pages">(.*?)</nav>', html, re.S)[0]
        assert re.findall(r'href="([^"]+)"', links) == [f"{n}.html" for n in NAMES]
        assert f'href="{name}.html" aria-current="page"' in links
        assert html.count("<h1>") == 1 and 'data-page="' + name + '"' in html


@pytest.mark.parametrize("name", NAMES)
def test_hostile_strings_are_escaped(site, name):
    html = site[name]
    assert HOSTILE not in html and "<script>window.__pwned" not in html
    assert 'onerror="window' not in html
    # the page's own scripts only: the CSV JSON, the shared JS, and the accuracy page's two
    assert len(re.findall(r"<script\b", html)) == (4 if name == "accuracy" else 2)


def test_hostile_strings_shown_as_text(site):
    escaped = "&lt;script&gt;window.__pwned=1&lt;/script&gt;"
    for name in ("accuracy", "speed", "training", "index"):
        assert escaped in site[name] or "\\u003cscript\\u003e" in site[name], name
    assert escaped in site["accuracy"] and escaped in site["training"]


class _Links(HTMLParser):
    """Every src/href attribute value of real tags (not text that looks like one)."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.urls += [v or "" for k, v in attrs if k in ("src", "href", "xlink:href")]


@pytest.mark.parametrize("name", NAMES)
def test_self_contained(site, name):
    html = site[name]
    assert "default-src 'none'" in html
    parser = _Links()
    parser.feed(html)
    assert parser.urls  # the nav at least
    for url in parser.urls:
        assert re.fullmatch(r"#.*|[a-z]+\.html", url), url
    assert not re.search(r"(?:src|href)=[\"']?(?:https?:)?//", html)
    assert not re.search(r"@import|url\(", html)


def test_rendering_is_deterministic(tmp_path):
    store, runs = site_runs.write(tmp_path)
    a = render_site(store, runs, tmp_path / "a")
    b = render_site(store, runs, tmp_path / "b")
    for name in NAMES:
        assert a[name].read_bytes() == b[name].read_bytes(), name
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == sorted(f"{n}.html" for n in NAMES)


def test_overview_lists_what_changed(site):
    csv = embedded(site["index"], "csv-data")
    rows = [dict(zip(csv["columns"], r, strict=True)) for r in csv["rows"]]
    moved = [r for r in rows if r["case"] == "w8a8/bf16/cpu/M1-K256-N256"]
    assert moved == [{**moved[0], "change": "changed", "before": "fail", "after": "pass"}]
    assert any(r["change"] == "new" and r["case"].startswith("evil") for r in rows)
    assert "conformance &middot; cuda-sm90" in site["index"]
    assert "compile &middot; cpu" in site["index"]


def test_speed_page_rows_and_charts(site):
    csv = embedded(site["speed"], "csv-data")
    rows = [dict(zip(csv["columns"], r, strict=True)) for r in csv["rows"]]
    assert {r["run_id"] for r in rows} == {"b2"}  # the newest bench run that timed linears
    decode = next(r for r in rows if r["shape"] == "M1-K4096-N4096")
    assert decode["speedup_vs_bf16"] == pytest.approx(1.0, rel=0.01)  # 30 / (20 * 1.5)
    assert decode["peer_us"] == pytest.approx(60.06, rel=0.01) and decode["n_samples"] == 20
    assert decode["peer"] == "torchao"  # the fixture's run has no compiled side
    assert site["speed"].count('<svg class="chart"') == 3
    assert "speedup vs bf16 F.linear" in site["speed"] and "% of roofline" in site["speed"]


def test_an_only_run_lays_over_the_full_run_on_the_speed_page(tmp_path):
    """A newer ``--only`` bench run replaces the rows it timed and leaves the full run's
    others; the section names it with its scope."""
    store, runs_dir = site_runs.write(tmp_path)
    info = site_runs.run_info("b3", "bench", "cuda", "2026-01-21", "sm90",
                              argv=["bench", "--only", "int8wo/*/M1-K4096-N4096/*"])  # fmt: skip
    only = [r for r in site_runs.new_bench("b3", slow=0.5) if "M1-K4096-N4096" in r.case_id]
    with JsonlWriter(info, runs_dir) as w:
        w.write_many(only)
    html = render_site(store, runs_dir, tmp_path / "site")["speed"].read_text()
    csv = embedded(html, "csv-data")
    rows = [dict(zip(csv["columns"], r, strict=True)) for r in csv["rows"]]
    by_shape = {r["shape"]: r["run_id"] for r in rows}
    assert by_shape["M1-K4096-N4096"] == "b3" and set(by_shape.values()) == {"b2", "b3"}
    assert "1 partial run" in html and "int8wo/*/M1-K4096-N4096/*" in html


def test_the_peer_column_names_the_faster_side_and_what_was_not_timed():
    """A skipped torch.compile is named beside the eager side it left as the peer, so a reader
    sees that "vs peer" was not against torchao's best; with both timed the faster one wins."""
    from aoq.testing.benchrows import BenchCase, latency_record
    from reports.pages.speed import peer_side

    def row(side: str, us: float, status: str = "pass"):
        c = BenchCase("int8wo", "bf16", "cuda", "M1-K8192-N8192", side, "graph")
        return latency_record("r", c, [us] * 5, status=status)

    eager, compiled = row("torchao", 230.0), row("torchao-compile", 25.9)
    skipped = row("torchao-compile", 0.0, status="skip")
    assert peer_side({"torchao": eager, "torchao-compile": compiled}) == (
        pytest.approx(25.9),
        "torchao-compile",
    )
    assert peer_side({"torchao": eager, "torchao-compile": skipped}) == (
        pytest.approx(230.0),
        "torchao (torchao-compile not timed)",
    )
    assert peer_side({"torchao": eager}) == (pytest.approx(230.0), "torchao")
    assert peer_side({"torchao-compile": skipped}) == (None, "")


def test_legacy_bench_run_on_the_speed_page(tmp_path):
    info = site_runs.run_info("b0", "bench", "cuda", "2026-01-18", "sm90")
    with JsonlWriter(info, tmp_path / "runs") as w:
        w.write_many(site_runs.legacy_bench("b0"))
    html = render_site(None, tmp_path / "runs", tmp_path / "site")["speed"].read_text()
    csv = embedded(html, "csv-data")
    rows = {r[4]: dict(zip(csv["columns"], r, strict=True)) for r in csv["rows"]}
    assert rows["graph"]["speedup_vs_bf16"] == pytest.approx(34 / 27)
    assert rows["graph"]["speedup_vs_peer"] == pytest.approx(216 / 27)
    assert rows["eager"]["alternatives"] == {"cublas.int8wo.dequant_mm": 103.0}
    assert "copy_GBps 4000" in html


def test_legacy_bench_adapter(tmp_path):
    info = site_runs.run_info("b0", "bench", "cuda", "2026-01-18", "sm90")
    with JsonlWriter(info, tmp_path) as w:
        w.write_many(site_runs.legacy_bench("b0"))
    [run] = load_runs(None, tmp_path).values()
    recs = {r.case_id: r for r in bench_records(run)}
    aoq = recs["int8wo/bf16/cuda/M1-K8192-N8192/aoq/graph"]
    assert aoq.kernel == "triton.int8wo.decode" and aoq.metrics["p50_us"] == 27.0
    assert aoq.metrics["speedup_vs_peer"] == pytest.approx(8.0)
    assert "chosen" not in aoq.metrics and "p50" not in aoq.metrics
    assert recs["int8wo/bf16/cuda/M1-K8192-N8192/bf16/graph"].metrics["p50_us"] == 34.0
    assert recs["int8wo/bf16/cuda/M1-K8192-N8192/torchao/eager"].metrics["p50_us"] == 224.0
    skipped = recs["w8a8/bf16/cuda/M1-K8192-N8192/torchao/graph"]
    assert skipped.status == "skip" and HOSTILE in skipped.reason
    assert "ceiling/copy_GBps" in recs  # ceilings pass through
    assert not any(r.check == "vs_peer" for r in recs.values())  # derived: dropped
    timed = [r for r in recs.values() if r.check == "latency"]
    assert all(parse_case(r.case_id) is not None for r in timed)


def test_latest_and_previous(tmp_path):
    store, runs_dir = site_runs.write(tmp_path)
    runs = load_runs(store, runs_dir)
    assert [r.info.run_id for r in latest(runs, "conformance")] == ["new", "gpu"]
    assert [r.info.run_id for r in latest(runs, "conformance", ["old"])] == ["old", "gpu"]
    assert previous(runs, runs["new"]).info.run_id == "old"
    assert previous(runs, runs["old"]) is None and previous(runs, runs["b2"]).info.run_id == "b1"
    with pytest.raises(SystemExit, match="nope"):
        latest(runs, "bench", ["nope"])


def test_regressions_page(site):
    csv = embedded(site["regressions"], "csv-data")
    rows = [dict(zip(csv["columns"], r, strict=True)) for r in csv["rows"]]
    slower = [r for r in rows if r["new_run"] == "b2" and r["status"] == "regression"]
    assert {r["row"] for r in slower} == {
        "int4wo-g128/bf16/cuda/M1-K4096-N4096/aoq/graph",
        "int4wo-g128/bf16/cuda/M4096-K4096-N4096/aoq/graph",
    }
    assert all(r["change"] == pytest.approx(0.5, abs=0.01) and r["gating"] for r in slower)
    assert any(r["status"] == "improvement" and r["run_kind"] == "conformance" for r in rows)
    assert 'class="sub"' in site["regressions"]  # the history small multiples


def test_targets_page(site):
    html = site["targets"]
    assert "not supported" in html and "sm80 has no float8 conversion" in html
    assert "wgmma" in html and "mfma" in html and "spills 3" in html
    csv = embedded(html, "csv-data")
    assert [r[:3] for r in csv["rows"]] == [
        ["fp8.prefill", "sm80", "xfail"], ["fp8.prefill", "sm90", "pass"],
        ["fp8.prefill", "gfx942", "pass"],
    ]  # fmt: skip


def test_platforms_page_flags_disagreement(site):
    csv = embedded(site["platforms"], "csv-data")
    rows = [dict(zip(csv["columns"], r, strict=True)) for r in csv["rows"]]
    [w8a8] = [r for r in rows if r["config"] == "w8a8"]
    assert w8a8["cpu_status"] == "pass" and w8a8["cuda-sm90_status"] == "xfail"
    assert w8a8["status_differs"] and w8a8["sqnr_drift"]  # 30 dB vs 27 dB
    assert "disagree" in site["platforms"]


def test_training_page(site):
    html = site["training"]
    assert "float vs MXFP8 vs MXFP6" in html and "minus float" in html
    csv = embedded(html, "csv-data")
    rows = {r[2]: dict(zip(csv["columns"], r, strict=True)) for r in csv["rows"]}
    assert list(rows) == ["float", "mxfp8", "mxfp6", "mxfp4"]
    assert rows["mxfp4"]["status"] == "xfail" and rows["mxfp8"]["steps"] == 50
    assert rows["float"]["final_loss"] == pytest.approx(
        sum(3.0 - i * 0.01 for i in range(40, 50)) / 10
    )


def test_empty_store_renders_every_page(tmp_path):
    pages = render_site(None, tmp_path / "none", tmp_path / "site")
    assert set(pages) == set(NAMES)
    assert "no runs stored yet" in pages["index"].read_text()
    assert "not available" in pages["targets"].read_text()


def test_page_files_are_named_after_the_pages():
    templates = Path(__file__).resolve().parents[2] / "reports" / "templates"
    assert all((templates / f"{n}.html.j2").exists() for n in NAMES)
