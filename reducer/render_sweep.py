"""Markdown of a sweep over several harnesses: the harness × assertion matrix, the harnesses paired. Pure.

Only formats what the fold computed (:mod:`reducer.sweep`); a run of one executor has neither
figure and gets no section.
"""

from __future__ import annotations

from html import escape

from reducer.html_parts import heat_row, interval, name, pct, pts, pval, table
from schemas.report import RunResult, SkillResult
from schemas.shard import CURRENT

PAIRED_NOTE = (
    "Each two harnesses on the same cases: the unit is a model both run (case, model, epoch), so the "
    "difference is the harness's (two harnesses with no model in common are paired across their models, "
    "and a note says the difference is then the harness's and its model's together); a pair graded on one "
    "side only is dropped. These describe the sweep; no gate reads them."
)


def row_label(result: RunResult) -> str:
    """What a row of a per-model table is: a harness × model pair in a sweep over harnesses (its rows
    are named so), else a model."""
    return "harness × model" if is_sweep(result) else "model"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def is_sweep(result: RunResult) -> bool:
    """Whether the run swept several harnesses (its rows are harness × model pairs)."""
    return bool(result.harnesses)


def sweep_section(result: RunResult, current: SkillResult) -> list[str]:
    """The harness × assertion matrix of one corpus's current arm and its harnesses paired."""
    harnesses = list(dict.fromkeys(h for a in current.assertions for h in a.by_harness))
    if not harnesses:
        return []
    out = ["## Harness × assertion", "", "Pass rate of each assertion per harness, its models pooled.", ""]
    out.append("| case | assertion | " + " | ".join(_cell(h) for h in harnesses) + " |")
    out.append("|---|---|" + "---|" * len(harnesses))
    for a in current.assertions:
        cells = [
            f"{pct(a.by_harness[h].rate)} ({a.by_harness[h].passed}/{a.by_harness[h].total})"
            if h in a.by_harness
            else "-"
            for h in harnesses
        ]
        out.append(f"| {a.case_id} | {_cell(a.text)} | " + " | ".join(cells) + " |")
    rows = [c for c in result.harness_comparisons if c.skill == current.skill]
    if not rows:
        return [*out, ""]
    out += ["", "## Harnesses paired", "", PAIRED_NOTE, ""]
    out.append(
        "| harness | against | cases | pairs | rate | against's rate | difference | 95% CI | test | p (two-sided) |"
    )
    out.append("|---|---|---|---|---|---|---|---|---|---|")
    for c in rows:
        out.append(
            f"| {_cell(c.harness or '')} | {_cell(c.baseline)} | {c.cases} | {c.pairs} | {pct(c.current_rate)} | "
            f"{pct(c.baseline_rate)} | {pts(c.difference)} | {interval(c.low, c.high, c.cases)} | {c.test} | "
            f"{pval(c.p_two_sided)} |"
        )
    notes = [f"- {_cell(c.harness or '')} vs {_cell(c.baseline)}: {_cell(c.note)}" for c in rows if c.note]
    worst = [
        f"- {_cell(c.harness or '')} vs {_cell(c.baseline)}, case {a.case_id} `{_cell(a.text)}`: "
        f"{pct(a.baseline_rate)} -> {pct(a.current_rate)}, p drop (Holm) {pval(a.p_drop_holm)}"
        for c in rows
        for a in c.assertions
        if a.worse > a.better
    ]
    if notes:
        out += ["", *notes]
    if worst:
        out += ["", "Assertions that work less in the second harness of a pair:", "", *worst]
    return [*out, ""]


def sweep_html(result: RunResult) -> str:
    """The page's ``harnesses`` section: per corpus the harness × assertion heat map and the
    harnesses paired (empty outside a sweep)."""
    if not is_sweep(result):
        return ""
    out = ['<section id="harnesses"><h2>Harness by assertion</h2>']
    out.append(
        f'<p class="legend">Pass rate of each assertion per harness, its models pooled. {escape(PAIRED_NOTE)}</p>'
    )
    for s in (s for s in result.skills if s.variant == CURRENT):
        harnesses = list(dict.fromkeys(h for a in s.assertions for h in a.by_harness))
        rows = [heat_row(a, a.by_harness, harnesses) for a in s.assertions]
        out.append(
            f"<h3>{name(s.skill)}</h3>" + table(["case", "assertion", *[name(h) for h in harnesses]], rows, raw=True)
        )
        pairs = [
            [
                c.harness or "",
                c.baseline,
                str(c.cases),
                str(c.pairs),
                pct(c.current_rate),
                pct(c.baseline_rate),
                pts(c.difference),
                interval(c.low, c.high, c.cases),
                c.test,
                pval(c.p_two_sided),
            ]
            for c in result.harness_comparisons
            if c.skill == s.skill
        ]
        if pairs:
            head = [
                "harness",
                "against",
                "cases",
                "pairs",
                "rate",
                "against's rate",
                "difference",
                "95% CI",
                "test",
                "p",
            ]
            out.append(table(head, pairs))
        notes = [
            f"<li>{escape(c.harness or '')} vs {escape(c.baseline)}: {escape(c.note)}</li>"
            for c in result.harness_comparisons
            if c.skill == s.skill and c.note
        ]
        if notes:
            out.append('<ul class="notes">' + "".join(notes) + "</ul>")
    return "".join(out) + "</section>"
