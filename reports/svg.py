"""Inline SVG charts written in Python: no library, no network, the same bytes for the same data.

    bar_chart    horizontal bars, one group per category and one bar per series; linear or log
                 axis; bars grow from ``base`` (0, or 1.0 for a speedup so slower goes left)
    line_chart   lines with markers over x (a run index or any number), optional vertical
                 marks (detected steps), linear or log y
    small_multiples  several charts laid out in one SVG grid

Every chart carries a <title> (the accessible name) and each bar or marker its own <title>
(the hover tooltip). All text goes through ``html.escape``; the result is ``Markup`` so a
template inserts it as is.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Sequence
from html import escape

from markupsafe import Markup

PALETTE = ("#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#7f7f7f", "#f0e442")
CHAR_W = 6.2  # px per character of 11px text, for label space
DASHES = ("", "6 3", "2 2", "8 3 2 3", "4 4", "1 3")
TITLE_W = 7.4  # px per character of the 13px bold title


@dataclasses.dataclass(frozen=True)
class Series:
    """A named run of values: one per category (bars) or one per ``xs`` entry (lines)."""

    name: str
    values: Sequence[float | None]
    xs: Sequence[float] | None = None
    style: int | None = None
    """Colour (and dash) index; default its position. Fix it to keep one colour per name
    across the charts of a page."""

    def look(self, position: int) -> int:
        return position if self.style is None else self.style


def num(v: float) -> str:
    """A short tick or value label: 0.5, 12, 1.5k, 3e-05."""
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1e5 or a < 1e-3:
        return f"{v:.0e}".replace("e+0", "e").replace("e-0", "e-").replace("e+", "e")
    if a >= 1e3:
        return f"{v / 1e3:.3g}k"
    return f"{v:.3g}"


def _nice(step: float) -> float:
    mag = 10 ** math.floor(math.log10(step))
    for m in (1, 2, 5, 10):
        if step <= m * mag:
            return m * mag
    return 10 * mag


def ticks(lo: float, hi: float, log: bool = False, n: int = 5) -> list[float]:
    """Round tick values covering [lo, hi]; log: powers of ten (1, 2, 5 times a power of ten
    when the range spans at most two decades, every other power beyond eight)."""
    if log:
        if lo <= 0 or hi <= 0:
            raise ValueError(f"a log axis needs positive bounds, got [{lo}, {hi}]")
        a, b = math.floor(math.log10(lo) + 1e-9), math.ceil(math.log10(hi) - 1e-9)
        b = max(b, a + 1)
        every = 2 if b - a > 8 else 1
        out = [10.0**e for e in range(a, b + 1, every)]
        if b - a <= 2:  # 1-2-5 ticks, trimmed to the ones just outside [lo, hi]
            out = sorted({m * 10.0**e for e in range(a, b + 1) for m in (1, 2, 5)})
            out = [t for t in out if t <= 10.0**b]
            first = max(i for i, t in enumerate(out) if t <= lo * (1 + 1e-9))
            last = min(i for i, t in enumerate(out) if t >= hi * (1 - 1e-9))
            out = out[first : last + 1]
        return out
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    step = _nice((hi - lo) / max(n, 1))
    start = math.floor(lo / step + 1e-9) * step
    out, t = [], start
    while t < hi + step * 0.999:
        out.append(round(t, 12))
        t += step
    return out


class _Axis:
    """Maps values to pixels over [p0, p1] on a linear or log scale."""

    def __init__(self, values: Sequence[float], p0: float, p1: float, log: bool, base=None):
        vals = [v for v in values if v is not None and (v > 0 or not log)]
        if base is not None:
            vals.append(base)
        if not vals:
            vals = [1.0] if log else [0.0, 1.0]
        lo, hi = min(vals), max(vals)
        if not log:
            lo = min(lo, 0.0)
        self.ticks = ticks(lo, hi, log)
        self.lo, self.hi = self.ticks[0], self.ticks[-1]
        self.p0, self.p1, self.log = p0, p1, log

    def __call__(self, v: float) -> float:
        if self.log:
            v = max(v, self.lo)
            f = (math.log10(v) - math.log10(self.lo)) / (math.log10(self.hi) - math.log10(self.lo))
        else:
            f = (v - self.lo) / ((self.hi - self.lo) or 1.0)
        return round(self.p0 + f * (self.p1 - self.p0), 1)


def _text(x: float, y: float, s: str, anchor: str = "start", cls: str = "", extra: str = "") -> str:
    c = f' class="{cls}"' if cls else ""
    return f'<text x="{x:g}" y="{y:g}" text-anchor="{anchor}"{c}{extra}>{escape(s)}</text>'


def title_lines(title: str, width: float) -> list[str]:
    """The title in one line, or two broken at a separator (the second cut from the left:
    a row id's tail says most) when it is wider than the chart."""
    room = max(8, int((width - 16) / TITLE_W))
    if len(title) <= room:
        return [title]
    cut = max((i for i, ch in enumerate(title[:room]) if ch in "/ ·:"), default=room - 1)
    first, rest = title[: cut + 1].rstrip(), title[cut + 1 :].lstrip()
    if len(rest) > room:
        rest = "…" + rest[-(room - 1) :]
    return [first, rest]


def _open(title: str, width: float, height: float) -> tuple[list[str], int]:
    """The <svg> start, its accessible <title> and the drawn title; and how many pixels the
    drawn title takes beyond one line (the caller moves the plot down by that)."""
    lines = title_lines(title, width)
    extra = 14 * (len(lines) - 1)
    parts = [  # the first <title> child is the chart's accessible name
        f'<svg class="chart" width="{width:g}" height="{height + extra:g}" viewBox="0 0 '
        f'{width:g} {height + extra:g}" role="img">',
        f"<title>{escape(title)}</title>",
    ]
    parts += [_text(8, 16 + 14 * i, line, cls="ttl") for i, line in enumerate(lines)]
    return parts, extra


def tick_labels(values: Sequence[float]) -> list[str]:
    """Labels for ticks, with as many digits as it takes to tell them apart."""
    labels = [num(v) for v in values]
    digits = 3
    while len(set(labels)) < len(labels) and digits < 10:
        digits += 1
        labels = [f"{v:.{digits}g}" for v in values]
    return labels


def _dash(i: int) -> str:
    """Line series after the first are dashed too: told apart without colour."""
    pattern = DASHES[i % len(DASHES)]
    return f' stroke-dasharray="{pattern}"' if pattern else ""


def _legend(series: Sequence[Series], x: float, y: float, line: bool = False) -> list[str]:
    out = []
    for position, s in enumerate(series):
        i = s.look(position)
        color = PALETTE[i % len(PALETTE)]
        if line:
            out.append(
                f'<line x1="{x:g}" y1="{y - 4:g}" x2="{x + 14:g}" y2="{y - 4:g}" '
                f'stroke="{color}" stroke-width="2"{_dash(i)}/>'
            )
        else:
            out.append(f'<rect x="{x:g}" y="{y - 9:g}" width="12" height="10" fill="{color}"/>')
        out.append(_text(x + 18, y, s.name))
        x += 30 + CHAR_W * len(s.name)
    return out


def bar_chart(
    title: str,
    categories: Sequence[str],
    series: Sequence[Series],
    *,
    log: bool = False,
    base: float | None = None,
    x_label: str = "",
    width: int = 640,
    bar_h: int = 9,
    value_fmt=num,
) -> Markup:
    """Horizontal grouped bars. ``base``: where bars start (default the axis minimum); a
    dashed line marks it when it is inside the axis (1.0 for speedups)."""
    label_w = min(260, max(40, CHAR_W * max((len(c) for c in categories), default=4)) + 10)
    left, right, top = label_w + 8, width - 56, 44 + 14 * (len(title_lines(title, width)) - 1)
    group = bar_h * max(len(series), 1) + 6
    plot_h = group * max(len(categories), 1)
    axis = _Axis([v for s in series for v in s.values if v is not None], left, right, log, base)
    start = axis(base if base is not None else axis.lo)
    parts, _ = _open(title, width, 44 + plot_h + 40)  # its height grows with a 2-line title
    parts += _legend(series, left, top - 12)
    for t, name in zip(axis.ticks, tick_labels(axis.ticks), strict=True):
        x = axis(t)
        parts.append(f'<line class="grid" x1="{x:g}" y1="{top}" x2="{x:g}" y2="{top + plot_h}"/>')
        parts.append(_text(x, top + plot_h + 14, name, "middle", "tick"))
    if x_label:
        parts.append(_text((left + right) / 2, top + plot_h + 32, x_label, "middle", "lbl"))
    for ci, cat in enumerate(categories):
        y0 = top + ci * group + 3
        shown = cat if len(cat) * CHAR_W <= label_w else cat[: int(label_w / CHAR_W) - 1] + "…"
        parts.append(
            _text(left - 6, y0 + group / 2, shown, "end", "cat", ' dominant-baseline="middle"')
        )
        for position, s in enumerate(series):
            si = s.look(position)
            v = s.values[ci] if ci < len(s.values) else None
            y = y0 + si * bar_h
            tip = f"{cat} — {s.name}: " + ("no data" if v is None else value_fmt(v))
            if v is None or (log and v <= 0):
                parts.append(_text(start + 3, y + bar_h - 1, "n/a", cls="na"))
                continue
            x = axis(v)
            x0, w = min(x, start), max(abs(x - start), 1.0)
            parts.append(
                f'<rect x="{x0:g}" y="{y:g}" width="{w:g}" height="{bar_h - 1}" '
                f'fill="{PALETTE[si % len(PALETTE)]}"><title>{escape(tip)}</title></rect>'
            )
            tx = x + 3 if x >= start else x - 3
            parts.append(_text(tx, y + bar_h - 1, value_fmt(v), "start" if x >= start else "end"))
    if base is not None and axis.lo < base < axis.hi:
        parts.append(
            f'<line class="ref" x1="{start:g}" y1="{top - 4}" x2="{start:g}" '
            f'y2="{top + plot_h + 4}"/>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def line_chart(
    title: str,
    series: Sequence[Series],
    *,
    x_label: str = "",
    y_label: str = "",
    x_labels: dict[float, str] | None = None,
    marks: Sequence[tuple[float, str]] = (),
    log: bool = False,
    width: int = 760,
    height: int = 300,
    markers: bool = True,
    max_markers: int = 60,
) -> Markup:
    """Lines over x (each series' ``xs``, default 0..n-1) with circle markers (skipped when a
    series is longer than ``max_markers``: a 300-step loss curve), vertical dashed ``marks``
    (x, label), and ``x_labels`` naming chosen x ticks (run ids, commits)."""
    extra = 14 * (len(title_lines(title, width)) - 1)
    legend = len(series) > 1  # one series: its name is the y label's business
    left, right = 64, width - 16
    top, bottom = (44 if legend else 30) + extra, height - 44 + extra
    xs_all = [x for s in series for x in (s.xs or range(len(s.values)))]
    ys_all = [v for s in series for v in s.values if v is not None]
    xa = _Axis(xs_all or [0.0, 1.0], left, right, False)
    if x_labels:  # categorical x: the named positions, the axis spanning exactly them
        xa.ticks = sorted(x_labels)
        xa.lo, xa.hi = (xa.ticks[0] - 0.5, xa.ticks[-1] + 0.5) if xa.ticks else (0, 1)
    ya = _Axis(ys_all, bottom, top, log)
    if not log and ys_all:  # a loss curve does not start at zero: fit the data
        lo, hi = min(ys_all), max(ys_all)
        pad = (hi - lo) * 0.05 or abs(hi) * 0.05 or 1.0
        ya.ticks = ticks(lo - pad, hi + pad)
        ya.lo, ya.hi = ya.ticks[0], ya.ticks[-1]
    parts, _ = _open(title, width, height)
    if legend:
        parts += _legend(series, left, top - 12, line=True)
    for t, name in zip(ya.ticks, tick_labels(ya.ticks), strict=True):
        y = ya(t)
        parts.append(f'<line class="grid" x1="{left}" y1="{y:g}" x2="{right}" y2="{y:g}"/>')
        parts.append(_text(left - 6, y + 4, name, "end", "tick"))
    every = max(1, math.ceil(len(xa.ticks) * 70 / (right - left)))  # labels must not overlap
    for t in xa.ticks[::every]:
        x = xa(t)
        name = (x_labels or {}).get(t, num(t))
        parts.append(_text(x, bottom + 14, name, "middle", "tick"))
    parts.append(f'<line class="axis" x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}"/>')
    if x_label:
        parts.append(_text((left + right) / 2, bottom + 32, x_label, "middle", "lbl"))
    if y_label:
        parts.append(
            _text(
                14,
                (top + bottom) / 2,
                y_label,
                "middle",
                "lbl",
                f' transform="rotate(-90 14 {(top + bottom) / 2:g})"',
            )
        )
    for x, label in marks:
        px = xa(x)
        parts.append(
            f'<line class="mark" x1="{px:g}" y1="{top}" x2="{px:g}" y2="{bottom}">'
            f"<title>{escape(label)}</title></line>"
        )
        parts.append(_text(px + 3, top + 10, label, cls="marklbl"))
    for position, s in enumerate(series):
        si = s.look(position)
        color = PALETTE[si % len(PALETTE)]
        xs = list(s.xs) if s.xs is not None else list(range(len(s.values)))
        pts = [(xa(x), ya(v), x, v) for x, v in zip(xs, s.values, strict=False) if v is not None]
        if len(pts) > 1:
            d = " ".join(f"{px:g},{py:g}" for px, py, _, _ in pts)
            parts.append(
                f'<polyline points="{d}" fill="none" stroke="{color}" stroke-width="1.5"'
                f"{_dash(si)}/>"
            )
        if markers and len(pts) <= max_markers:
            for px, py, x, v in pts:
                name = (x_labels or {}).get(x, num(x))
                tip = f"{s.name} @ {name}: {num(v)}"
                parts.append(
                    f'<circle cx="{px:g}" cy="{py:g}" r="3" fill="{color}">'
                    f"<title>{escape(tip)}</title></circle>"
                )
    parts.append("</svg>")
    return Markup("".join(parts))


def _size(chart: str) -> tuple[float, float]:
    m = re.search(r'width="([\d.]+)" height="([\d.]+)"', chart)
    if m is None:
        raise ValueError("not a chart of this module: no width/height on its <svg>")
    return float(m[1]), float(m[2])


def small_multiples(title: str, charts: Sequence[str], columns: int = 3) -> Markup:
    """Charts (each an <svg> with width/height) in a grid inside one <svg>."""
    sizes = [_size(c) for c in charts]
    cw = max((w for w, _ in sizes), default=0.0)
    rows = [sizes[i : i + columns] for i in range(0, len(sizes), columns)]
    heights = [max(h for _, h in row) for row in rows]
    width, height = cw * min(columns, len(charts)) or 100, sum(heights) + 24
    parts, extra = _open(title, width, height)
    y = 24.0 + extra
    for r, row_h in enumerate(heights):
        for c in range(len(rows[r])):
            svg = charts[r * columns + c]
            inner = f'<svg class="sub" x="{c * cw:g}" y="{y:g}" '  # "chart" is the page's CSS
            parts.append(str(svg).replace('<svg class="chart" ', inner, 1))
        y += row_h
    parts.append("</svg>")
    return Markup("".join(parts))
