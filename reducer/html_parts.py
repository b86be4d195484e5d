"""Building blocks of the HTML report: styles, bars with intervals, the difference chart. Pure.

Charts are HTML and CSS, not SVG text: a label is ordinary text that wraps, so no model
name or assertion is ever cut, at any width. Every value is escaped here or by the caller.

Words are never broken: a name (a model, a skill, a ref) may wrap only after its separators
(``/``, ``-``, ``_``, ``:``, ``@``), where :func:`name` puts a break opportunity, and only
free text (an assertion, evidence, an error detail) may break anywhere when a token is wider
than its line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from html import escape, unescape

from reducer.paired import MIN_INTERVAL_CASES
from schemas.report import AssertionStat, ModelSummary, Rate

_NUMBER = re.compile(r"^[-+$]?[\d.,]+(%| pts)?(/[\d.,]+)?$")
"""A short figure (``12``, ``45.0%``, ``+3.1 pts``, ``2/5``): right-aligned and kept on one line."""

CSS = """
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;padding:1rem;max-width:1100px;
color:#1d1d1f;overflow-wrap:break-word}
h1{font-size:1.5rem;margin:.5rem 0}h2{margin-top:2rem;border-bottom:1px solid #d0d7de;padding-bottom:.2rem}
h3{font-size:1.05rem;margin:1.2rem 0 .4rem}
.verdict{display:inline-block;padding:.1rem .6rem;border-radius:4px;color:#fff;font-weight:600}
.PASS{background:#1a7f37}.FAIL{background:#cf222e}.WARN{background:#9a6700}.BLOCKED{background:#57606a}
table{border-collapse:collapse;margin:.5rem 0;width:100%}
td,th{border:1px solid #d0d7de;padding:.25rem .45rem;text-align:left;vertical-align:top}
th{background:#f6f8fa;overflow-wrap:normal}td.num{text-align:right;white-space:nowrap}
td.cell{text-align:center;white-space:nowrap}td.text,.ev,.detail{overflow-wrap:anywhere}
dl.meta{display:grid;grid-template-columns:max-content 1fr;gap:.1rem .8rem;margin:.4rem 0}
dl.meta dt{color:#57606a}dl.meta dd{margin:0}
.verdict.small{font-size:12px;padding:0 .4rem}.heat{padding:0 .3rem;border-radius:3px}.baseline{color:#57606a}
.ev{font-family:ui-monospace,monospace;font-size:12px;white-space:pre-wrap;color:#3d444d;margin:.2rem 0 .4rem}
.pass{color:#1a7f37;font-weight:600}.fail{color:#cf222e;font-weight:600}.muted{color:#57606a}
.bars{margin:.5rem 0}.bar-row{display:grid;grid-template-columns:minmax(7rem,15rem) 1fr 13.5rem;gap:.5rem;
align-items:center;margin:.25rem 0}.bar-row .num{white-space:nowrap}
.axis .ticks{position:relative;height:1.1rem;font-size:11px;color:#57606a;border-top:1px solid #8c959f}
.tick{position:absolute;top:0;transform:translateX(-50%);white-space:nowrap}
.tick.first{transform:none}.tick.last{transform:translateX(-100%)}
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
 body{padding:.6rem}td,th{padding:.2rem .25rem}
 .bar-row{grid-template-columns:1fr 11.5rem}.bar-row .label{grid-column:1 / -1}.bar-row .num{font-size:12px}
 .tick.minor{display:none}
 table.stack,table.stack tbody,table.stack tr,table.stack td{display:block;width:100%}
 table.stack tr:first-child{display:none}
 table.stack tr{border:1px solid #d0d7de;margin:.4rem 0}
 table.stack td{border:none;border-bottom:1px solid #eaeef2;text-align:left;white-space:normal}
 table.stack td::before{content:attr(data-label) ": ";font-weight:600;color:#57606a}
}
"""


class Raw(str):
    """A cell or header already escaped by the caller (``table`` escapes every other string)."""

    __slots__ = ()


_SEPARATORS = re.compile(r"([/\-_:@]+)")


def name(text: str) -> Raw:
    """A name, escaped, with a break opportunity after each separator: it wraps between its parts,
    never inside a word."""
    return Raw(_SEPARATORS.sub(r"\1<wbr>", escape(text)))


def composite_range(m: ModelSummary) -> str:
    """A model's composite interval over cases, ``40.0% to 90.0%``; ``-`` from fewer than two cases."""
    found = m.composite_interval
    return "-" if found is None else f"{pct(found[0])} to {pct(found[1])}"


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def pts(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.1f} pts"


def interval(low: float | None, high: float | None, cases: int, sep: str = " to ") -> str:
    """A paired comparison's 95% interval in points, or why it is not shown: from fewer than
    ``MIN_INTERVAL_CASES`` cases no exact test over them can exclude any difference at 2.5%."""
    if low is None or high is None:
        return "-"
    if cases < MIN_INTERVAL_CASES:
        return f"interval not shown: {cases} case{'' if cases == 1 else 's'}"
    return f"{pts(low)}{sep}{pts(high)}"


def ci(low: float | None, high: float | None, cases: int) -> str:
    """``95% CI -66.7 pts to -33.3 pts``, or ``interval not shown: 2 cases`` (see :func:`interval`)."""
    shown = interval(low, high, cases)
    return shown if shown.startswith("interval not shown") else f"95% CI {shown}"


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
        f'<div class="bar-row"><div class="label">{name(label)}</div>'
        f'<div class="track" role="img" aria-label="{escape(label)}: {pct(rate)}">'
        f'<div class="fill{" old" if old else ""}" style="width:{width:.1f}%"></div>{whisker}</div>'
        f'<div class="num">{pct(rate)}<span class="muted">{interval}</span></div></div>'
    )


def difference_bar(label: str, difference: float | None, low: float | None, high: float | None, cases: int) -> str:
    """A difference in [-1, 1] on a centred axis: a dot with its 95% interval (no whisker from
    fewer than ``MIN_INTERVAL_CASES`` cases, see :func:`interval`)."""

    def pos(x: float) -> float:
        return 50 + 50 * max(-1.0, min(1.0, x))

    parts = ['<div class="zero"></div>']
    if low is not None and high is not None and cases >= MIN_INTERVAL_CASES:
        left, right = pos(low), pos(high)
        parts.append(f'<div class="whisker" style="left:{left:.1f}%;width:{max(right - left, 0.3):.1f}%"></div>')
    if difference is not None:
        parts.append(f'<div class="dot" style="left:{pos(difference):.1f}%"></div>')
    return (
        f'<div class="bar-row diff"><div class="label">{name(label)}</div>'
        f'<div class="track" role="img" aria-label="{escape(label)}: {pts(difference)}">{"".join(parts)}</div>'
        f'<div class="num">{pts(difference)}</div></div>'
    )


def axis(ticks: list[tuple[float, str]]) -> str:
    """A row of tick labels under a column of bars, each at its position in [0, 1] of the track; every
    other inner one is minor, left out on a phone's narrow track, where the labels would run together."""
    marks = []
    for i, (at, label) in enumerate(ticks):
        edge = " first" if i == 0 else (" last" if i == len(ticks) - 1 else " minor" if i % 2 else "")
        marks.append(f'<span class="tick{edge}" style="left:{100 * clamp(at):.1f}%">{escape(label)}</span>')
    return (
        f'<div class="bar-row axis"><div class="label"></div><div class="ticks">{"".join(marks)}</div><div></div></div>'
    )


RATE_AXIS = [(0.0, "0%"), (0.25, "25%"), (0.5, "50%"), (0.75, "75%"), (1.0, "100%")]
DIFFERENCE_AXIS = [(0.0, "−100 pts"), (0.25, "−50"), (0.5, "0"), (0.75, "+50"), (1.0, "+100 pts")]


def table(
    headers: list[str],
    rows: list[list[str]],
    *,
    raw: bool = False,
    text: tuple[str, ...] = ("assertion",),
    stack: bool = True,
) -> str:
    """A table that stacks into cards on a narrow screen (each cell labelled by its header).

    Cells are escaped unless ``raw`` or a :class:`Raw` (then the caller has escaped them); the
    columns named in ``text`` hold free text, which may break anywhere inside a long token.
    A table of a few short columns keeps its rows on a narrow screen (``stack=False``).
    """
    head = "<tr>" + "".join(f"<th>{h if isinstance(h, Raw) else escape(h)}</th>" for h in headers) + "</tr>"
    body = []
    for row in rows:
        cells = []
        for h, cell in zip(headers, row, strict=True):
            kind = " class=num" if _NUMBER.match(cell) else (" class=text" if h in text else "")
            shown = cell if raw or isinstance(cell, Raw) else escape(cell)
            cells.append(f'<td data-label="{escape(_plain(h))}"{kind}>{shown}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table{' class=stack' if stack else ''}>{head}{''.join(body)}</table>"


def _plain(header: str) -> str:
    return unescape(re.sub(r"<[^>]*>", "", header)) if isinstance(header, Raw) else header


def heat(x: float | None) -> str:
    """Background for a heat-map cell: red (0) to green (1); grey for no data. Dark text stays readable."""
    if x is None:
        return "#f6f8fa"
    red, green = int(250 - 110 * x), int(170 + 70 * x)
    blue = int(170 - 40 * x)
    return f"rgb({red},{green},{blue})"


def heat_row(a: AssertionStat, rates: Mapping[str, Rate], columns: Iterable[str]) -> list[str]:
    """A heat map's row of an assertion: its case, its text, then each column's pass rate on the
    colour of :func:`heat` (``-`` on grey where the column has no trial of it). Raw cells."""
    cells = [escape(str(a.case_id)), escape(a.text)]
    for column in columns:
        x = rates[column].rate if column in rates else None
        cells.append(f'<span style="background:{heat(x)};padding:0 .3rem;border-radius:3px">{pct(x)}</span>')
    return cells
