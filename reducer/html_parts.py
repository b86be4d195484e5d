"""Building blocks of the HTML report: styles, bars with intervals, the difference chart. Pure.

Charts are HTML and CSS, not SVG text: a label is ordinary text that wraps, so no model
name or assertion is ever cut, at any width. Every value is escaped by the caller's helpers.
"""

from __future__ import annotations

import re
from html import escape

_NUMBER = re.compile(r"^[-+$]?[\d.,]+(%| pts)?(/[\d.,]+)?$")
"""A short figure (``12``, ``45.0%``, ``+3.1 pts``, ``2/5``): right-aligned and kept on one line."""

CSS = """
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;padding:1rem;max-width:1100px;
color:#1d1d1f;overflow-wrap:anywhere}
h1{font-size:1.5rem;margin:.5rem 0}h2{margin-top:2rem;border-bottom:1px solid #d0d7de;padding-bottom:.2rem}
h3{font-size:1.05rem;margin:1.2rem 0 .4rem}
.verdict{display:inline-block;padding:.1rem .6rem;border-radius:4px;color:#fff;font-weight:600}
.PASS{background:#1a7f37}.FAIL{background:#cf222e}.WARN{background:#9a6700}.BLOCKED{background:#57606a}
table{border-collapse:collapse;margin:.5rem 0;width:100%}
td,th{border:1px solid #d0d7de;padding:.25rem .45rem;text-align:left;vertical-align:top}
th{background:#f6f8fa}td.num{text-align:right;white-space:nowrap}td.cell{text-align:center;white-space:nowrap}
.ev{font-family:ui-monospace,monospace;font-size:12px;white-space:pre-wrap;color:#3d444d;margin:.2rem 0 .4rem}
.pass{color:#1a7f37;font-weight:600}.fail{color:#cf222e;font-weight:600}.muted{color:#57606a}
.bars{margin:.5rem 0}.bar-row{display:grid;grid-template-columns:minmax(7rem,15rem) 1fr 7.5rem;gap:.5rem;
align-items:center;margin:.25rem 0}
.track{position:relative;height:18px;background:#eaeef2;border-radius:3px}
.fill{position:absolute;left:0;top:0;bottom:0;background:#2da44e;border-radius:3px}
.fill.old{background:#8c959f}
.whisker{position:absolute;top:8px;height:2px;background:#1f2328}
.whisker::before,.whisker::after{content:"";position:absolute;top:-4px;width:2px;height:10px;background:#1f2328}
.whisker::before{left:0}.whisker::after{right:0}
.diff .track{background:linear-gradient(90deg,#fbe9eb 0 50%,#e6f4ea 50% 100%)}
.zero{position:absolute;left:50%;top:-3px;bottom:-3px;width:1px;background:#57606a}
.dot{position:absolute;top:3px;width:12px;height:12px;margin-left:-6px;border-radius:50%;background:#0969da}
.legend{font-size:12px;color:#57606a}
details{border:1px solid #d0d7de;border-radius:4px;padding:.3rem .6rem;margin:.3rem 0}
summary{cursor:pointer}
@media (max-width:640px){
 body{padding:.6rem}
 .bar-row{grid-template-columns:1fr 6.5rem}.bar-row .label{grid-column:1 / -1}
 table.stack,table.stack tbody,table.stack tr,table.stack td{display:block;width:100%}
 table.stack tr:first-child{display:none}
 table.stack tr{border:1px solid #d0d7de;margin:.4rem 0}
 table.stack td{border:none;border-bottom:1px solid #eaeef2;text-align:left;white-space:normal}
 table.stack td::before{content:attr(data-label) ": ";font-weight:600;color:#57606a}
}
"""


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def pts(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.1f} pts"


def pval(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


def clamp(x: float) -> float:
    return max(0.0, min(1.0, x))


def bar(label: str, rate: float | None, low: float | None, high: float | None, *, old: bool = False) -> str:
    """One labelled bar for a rate in [0, 1], with its interval as a whisker."""
    width = 100 * clamp(rate or 0.0)
    whisker = ""
    if low is not None and high is not None:
        left, right = 100 * clamp(low), 100 * clamp(high)
        whisker = f'<div class="whisker" style="left:{left:.1f}%;width:{max(right - left, 0.3):.1f}%"></div>'
    interval = f" [{pct(low)}, {pct(high)}]" if low is not None and high is not None else ""
    return (
        f'<div class="bar-row"><div class="label">{escape(label)}</div>'
        f'<div class="track" role="img" aria-label="{escape(label)}: {pct(rate)}">'
        f'<div class="fill{" old" if old else ""}" style="width:{width:.1f}%"></div>{whisker}</div>'
        f'<div class="num">{pct(rate)}<span class="muted">{interval}</span></div></div>'
    )


def difference_bar(label: str, difference: float | None, low: float | None, high: float | None) -> str:
    """A difference in [-1, 1] on a centred axis: a dot with its 95% interval."""

    def pos(x: float) -> float:
        return 50 + 50 * max(-1.0, min(1.0, x))

    parts = ['<div class="zero"></div>']
    if low is not None and high is not None:
        left, right = pos(low), pos(high)
        parts.append(f'<div class="whisker" style="left:{left:.1f}%;width:{max(right - left, 0.3):.1f}%"></div>')
    if difference is not None:
        parts.append(f'<div class="dot" style="left:{pos(difference):.1f}%"></div>')
    return (
        f'<div class="bar-row diff"><div class="label">{escape(label)}</div>'
        f'<div class="track" role="img" aria-label="{escape(label)}: {pts(difference)}">{"".join(parts)}</div>'
        f'<div class="num">{pts(difference)}</div></div>'
    )


def table(headers: list[str], rows: list[list[str]], *, raw: bool = False) -> str:
    """A table that stacks into cards on a narrow screen (each cell labelled by its header).

    Cells are escaped unless ``raw`` (then the caller has escaped them).
    """
    head = "<tr>" + "".join(f"<th>{escape(h)}</th>" for h in headers) + "</tr>"
    body = []
    for row in rows:
        cells = []
        for h, cell in zip(headers, row, strict=True):
            numeric = bool(_NUMBER.match(cell))
            text = cell if raw else escape(cell)
            cells.append(f'<td data-label="{escape(h)}"{" class=num" if numeric else ""}>{text}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f'<table class="stack">{head}{"".join(body)}</table>'


def heat(x: float | None) -> str:
    """Background for a heat-map cell: red (0) to green (1); grey for no data. Dark text stays readable."""
    if x is None:
        return "#f6f8fa"
    red, green = int(250 - 110 * x), int(170 + 70 * x)
    blue = int(170 - 40 * x)
    return f"rgb({red},{green},{blue})"
