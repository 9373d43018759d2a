"""reports.svg: charts are valid XML with an accessible title and a tooltip per mark, text is
escaped, log axes get round ticks, and small multiples place each chart in its own cell."""

import xml.etree.ElementTree as ET

import pytest

from reports import svg

HOSTILE = '<script>alert(1)</script>&"'


def parse(markup) -> ET.Element:
    return ET.fromstring(str(markup))


@pytest.mark.parametrize(
    ("lo", "hi", "expected"),
    [
        (0.25, 1.67, [0.2, 0.5, 1.0, 2.0]),  # under two decades: 1-2-5, trimmed to the data
        (0.31, 25.2, [0.1, 1.0, 10.0, 100.0]),
        (1.0, 1000.0, [1.0, 10.0, 100.0, 1000.0]),
        (3.0, 3.5, [2.0, 5.0]),
        (1e-5, 1e5, [1e-5, 1e-3, 0.1, 10.0, 1e3, 1e5]),  # ten decades: every other one
    ],
)
def test_log_ticks(lo, hi, expected):
    assert svg.ticks(lo, hi, log=True) == pytest.approx(expected)


def test_linear_ticks_are_round_and_cover_the_range():
    assert svg.ticks(0, 97) == [0, 20, 40, 60, 80, 100]
    assert svg.ticks(2.4, 11.1) == [2, 4, 6, 8, 10, 12]
    with pytest.raises(ValueError, match="positive"):
        svg.ticks(0, 10, log=True)


def test_tick_labels_tell_close_values_apart():
    assert svg.tick_labels([62.89, 62.9, 62.91]) == ["62.89", "62.9", "62.91"]
    assert svg.num(1500) == "1.5k" and svg.num(3e-5) == "3e-5" and svg.num(0.5) == "0.5"


def test_bar_chart_log_axis_is_valid_xml_with_escaped_text():
    chart = svg.bar_chart(
        f"speedup {HOSTILE}",
        ["int8wo · M1", HOSTILE],
        [svg.Series("graph", [2.5, 0.4]), svg.Series("eager", [None, 12.0])],
        log=True,
        base=1.0,
        x_label="× faster",
    )
    root = parse(chart)
    assert root.tag == "svg" and root.get("role") == "img"
    assert root[0].tag == "title" and root[0].text == f"speedup {HOSTILE}"
    ticks = [t.text for t in root.iter("text") if t.get("class") == "tick"]
    assert ticks == ["0.1", "1", "10", "100"]
    tips = [t.text for r in root.iter("rect") for t in r.iter("title")]
    assert tips == ["int8wo · M1 — graph: 2.5", f"{HOSTILE} — graph: 0.4", f"{HOSTILE} — eager: 12"]
    assert any(t.text == "n/a" for t in root.iter("text"))  # the missing value, said
    assert any(line.get("class") == "ref" for line in root.iter("line"))  # the 1.0 line
    assert "<script>" not in str(chart)


def test_bars_grow_from_the_base_both_ways():
    root = parse(svg.bar_chart("t", ["a", "b"], [svg.Series("s", [4.0, 0.25])], log=True, base=1))
    rects = list(root.iter("rect"))[1:]  # the legend swatch first
    ref = next(line for line in root.iter("line") if line.get("class") == "ref")
    x1 = float(ref.get("x1"))
    assert float(rects[0].get("x")) == pytest.approx(x1)  # faster: right of 1
    right = float(rects[1].get("x")) + float(rects[1].get("width"))
    assert right == pytest.approx(x1)  # slower: left of 1


def test_line_chart_markers_marks_and_run_labels():
    chart = svg.line_chart(
        "p50 of a row",
        [svg.Series("p50 µs", [10.0, 10.2, 13.0, 13.1])],
        x_labels={0.0: "abc1234", 1.0: "def5678", 2.0: "0123456", 3.0: HOSTILE},
        marks=[(2.0, "step +29%")],
        y_label="µs",
    )
    root = parse(chart)
    circles = list(root.iter("circle"))
    assert len(circles) == 4
    assert circles[3].find("title").text == f"p50 µs @ {HOSTILE}: 13.1"
    mark = next(line for line in root.iter("line") if line.get("class") == "mark")
    assert mark.find("title").text == "step +29%"
    assert float(mark.get("x1")) == pytest.approx(float(circles[2].get("cx")))
    assert len(list(root.iter("polyline"))) == 1


def test_line_chart_long_series_without_markers_and_dashed_second_line():
    a, b = [float(i) for i in range(300)], [float(i) * 1.1 for i in range(300)]
    root = parse(svg.line_chart("loss", [svg.Series("a", a), svg.Series("b", b)], log=True))
    assert not list(root.iter("circle"))
    lines = list(root.iter("polyline"))
    assert lines[0].get("stroke-dasharray") is None and lines[1].get("stroke-dasharray")


def test_long_titles_wrap_on_two_lines():
    title = "cuda-sm90 int4wo-g128/bf16/cuda/M4096-K4096-N4096/aoq/graph"
    lines = svg.title_lines(title, 330)
    assert len(lines) == 2 and "".join(lines) == title  # broken at a "/"
    assert lines[1].endswith("aoq/graph")


def test_small_multiples_place_each_chart_in_a_grid():
    charts = [svg.line_chart(f"c{i}", [svg.Series("s", [1, 2])], width=200, height=100)
              for i in range(5)]  # fmt: skip
    root = parse(svg.small_multiples("all", charts, columns=2))
    subs = [e for e in root if e.tag == "svg"]
    assert [(s.get("x"), s.get("y")) for s in subs] == [
        ("0", "24"), ("200", "24"), ("0", "124"), ("200", "124"), ("0", "224")
    ]  # fmt: skip
    assert root.get("width") == "400" and all(s.get("class") == "sub" for s in subs)
