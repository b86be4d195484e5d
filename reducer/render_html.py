"""A self-contained HTML report for a run: headlines, per-model bars with 95% intervals, the
model-by-assertion matrix as a heat map, and every verdict with its evidence. Pure; no scripts,
no external assets, every value escaped."""

from __future__ import annotations

from html import escape

from schemas.report import RunResult, SkillResult
from schemas.status import ShardState

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2rem;max-width:1100px;color:#1d1d1f}
h1{font-size:1.5rem}h2{margin-top:2rem;border-bottom:1px solid #ddd}
.verdict{display:inline-block;padding:.1rem .6rem;border-radius:4px;color:#fff;font-weight:600}
.PASS{background:#1a7f37}.FAIL{background:#cf222e}.WARN{background:#bf8700}.BLOCKED{background:#6e7781}
table{border-collapse:collapse;margin:.5rem 0}td,th{border:1px solid #ddd;padding:.25rem .5rem;text-align:left}
td.cell{text-align:center;min-width:4rem}.ev{font-family:monospace;font-size:12px;white-space:pre-wrap;color:#444}
.pass{color:#1a7f37;font-weight:600}.fail{color:#cf222e;font-weight:600}
"""


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _heat(x: float | None) -> str:
    if x is None:
        return "#f6f8fa"
    red, green = int(255 * (1 - x)), int(180 * x + 60)
    return f"rgb({red},{green},90)"


def _bars(s: SkillResult) -> str:
    """One horizontal bar per model: behavioural rate, with its Wilson interval as a whisker."""
    width, row = 420, 26
    height = row * len(s.models) + 10
    parts = [f'<svg width="{width + 260}" height="{height}" role="img" aria-label="pass rate by model">']
    for i, m in enumerate(s.models):
        y = 5 + i * row
        rate = m.behavioural.rate or 0.0
        parts.append(f'<text x="0" y="{y + 16}" font-size="12">{escape(m.model[:34])}</text>')
        parts.append(f'<rect x="240" y="{y + 4}" width="{width}" height="16" fill="#eaeef2"/>')
        parts.append(f'<rect x="240" y="{y + 4}" width="{rate * width:.1f}" height="16" fill="#2da44e"/>')
        lo, hi = 240 + m.behavioural.low * width, 240 + m.behavioural.high * width
        parts.append(
            f'<line x1="{lo:.1f}" x2="{hi:.1f}" y1="{y + 12}" y2="{y + 12}" stroke="#24292f" stroke-width="2"/>'
        )
        parts.append(f'<text x="{250 + width}" y="{y + 16}" font-size="12">{_pct(m.behavioural.rate)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _skill(s: SkillResult) -> str:
    out = [f"<h2>{escape(s.skill)} <small>[{escape(s.variant)}]</small>: {escape(s.headline)}</h2>"]
    infra = ", ".join(f"{escape(k)} {v}" for k, v in s.infra.items() if v) or "none"
    out.append(
        f"<p>Not graded (infra): {infra}; blocked: {len(s.blocked)}; sandbox: {escape(', '.join(s.sandbox_modes))}</p>"
    )
    out.append(_bars(s))
    models = [m.model for m in s.models]
    out.append("<table><tr><th>case</th><th>assertion</th>")
    out += [f"<th>{escape(m)}</th>" for m in models]
    out.append("<th>pass@k</th><th>pass^k</th></tr>")
    for a in s.assertions:
        out.append(f"<tr><td>{a.case_id}</td><td>{escape(a.text)}</td>")
        for m in models:
            cell = a.by_model[m].rate if m in a.by_model else None
            out.append(f'<td class="cell" style="background:{_heat(cell)}">{_pct(cell)}</td>')
        out.append(f'<td class="cell">{_pct(a.pass_at_k)}</td><td class="cell">{_pct(a.pass_hat_k)}</td></tr>')
    out.append("</table>")
    for r in s.runs:
        out.append(f"<h3>case {r.case_id} · {escape(r.model)} · epoch {r.epoch}: {escape(r.state.value)}</h3>")
        if r.state is not ShardState.GRADED:
            out.append(f"<p>{escape(r.detail)}</p>")
        out.append("<ul>")
        for v in r.verdicts:
            mark = '<span class="pass">PASS</span>' if v.passed else '<span class="fail">FAIL</span>'
            out.append(f'<li>{mark} {escape(v.text)}<div class="ev">{escape(v.evidence)}</div></li>')
        out.append("</ul>")
    return "".join(out)


def render_html(result: RunResult) -> str:
    """The run as one HTML page."""
    body = [
        f"<h1>skill-eval run {escape(result.run_id)} "
        f'<span class="verdict {result.verdict.value}">{result.verdict.value}</span></h1>',
        "<ul>" + "".join(f"<li>{escape(r)}</li>" for r in result.reasons) + "</ul>",
    ]
    if result.aggregate_headline:
        body.append(f"<p><b>{escape(result.aggregate_headline)}</b></p>")
    if len(result.leaderboard) > 1:
        body.append(
            "<h2>Leaderboard (composite score)</h2><table><tr><th>model</th><th>composite</th><th>95% CI</th></tr>"
        )
        for m in result.leaderboard:
            body.append(
                f"<tr><td>{escape(m.model)}</td><td>{_pct(m.composite_mean)}</td>"
                f"<td>{_pct(m.composite_low)}–{_pct(m.composite_high)}</td></tr>"
            )
        body.append("</table>")
    body += [_skill(s) for s in result.skills]
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>skill-eval {escape(result.run_id)}</title><style>{_CSS}</style></head><body>"
        + "".join(body)
        + "</body></html>\n"
    )
