"""The trigger figures in the reports: a markdown section per skill, the routing matrix, JUnit suites
and the COMPLETE block's lines. Pure. Figures: :mod:`reducer.triggers`."""

from __future__ import annotations

import re
from html import escape
from xml.sax.saxutils import quoteattr

from reducer.html_parts import table
from reducer.paired import MIN_INTERVAL_CASES
from schemas.shard import CURRENT, ROW_SEPARATOR
from schemas.triggers import NO_ACTIVATION, PairedChange, Proportion, QueryRate, TriggerFigures, TriggerReport
from schemas.words import plural

_NOT_XML = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml(text: str) -> str:
    """Text XML 1.0 can hold (control characters and lone surrogates dropped)."""
    return _NOT_XML.sub("", text)


def _md(text: object) -> str:
    """Repo text (queries, skill names) as inert markdown: no table breaks, no markup, no HTML."""
    out = str(text).replace("\\", "\\\\").replace("\r", " ").replace("\n", " ")
    for ch in "|`*_[]<>#!":
        out = out.replace(ch, "\\" + ch)
    return out


def figure_label(f: TriggerFigures) -> str:
    """``model (executor)``; a sweep's row already names its harness (``codex × openai/gpt-5``)."""
    return f.model if f.model.startswith(f.executor + ROW_SEPARATOR) else f"{f.model} ({f.executor})"


def proportion_text(p: Proportion) -> str:
    """``3/4 (75.0%, 95% CI over queries 30.1-95.4%)``; ``0/0 (not measured)`` when nothing counted."""
    if p.rate is None:
        return f"{p.hits}/{p.total} (not measured)"
    return f"{p.hits}/{p.total} ({100 * p.rate:.1f}%, 95% CI over queries {100 * p.low:.1f}-{100 * p.high:.1f}%)"


def f1_text(f: TriggerFigures) -> str:
    if f.f1 is None:
        return "not measured"
    bounds = f", range {100 * f.f1_low:.1f}-{100 * f.f1_high:.1f}%" if f.f1_low is not None and f.f1_high else ""
    return f"{100 * f.f1:.1f}%{bounds}"


def change_text(c: PairedChange) -> str:
    """``+50.0 pts (95% CI +0.0 to +100.0 pts, p=0.5, 8 queries)``; ``not paired`` without a pair.

    From fewer than ``MIN_INTERVAL_CASES`` queries the interval is not shown, as for the
    behavioural comparisons: no exact test over so few can exclude any change at 2.5%."""
    if c.difference is None:
        return "not paired (no query ended in both arms)"
    p = f"p={c.p_two_sided:.3g}, " if c.p_two_sided is not None else ""
    if c.low is not None and c.high is not None and c.queries < MIN_INTERVAL_CASES:
        return f"{100 * c.difference:+.1f} pts (interval not shown: {plural(c.queries, 'query')}, {p.rstrip(', ')})"
    bounds = (
        f"95% CI {100 * c.low:+.1f} to {100 * c.high:+.1f} pts, " if c.low is not None and c.high is not None else ""
    )
    return f"{100 * c.difference:+.1f} pts ({bounds}{p}{plural(c.queries, 'query')})"


def change_lines(report: TriggerReport, skill: str | None = None) -> list[str]:
    """One line per skill and baseline: the paired change of recall and of the false-trigger rate."""
    return [
        f"triggers {c.skill} vs {c.baseline}: recall {change_text(c.recall)}; "
        f"false triggers {change_text(c.false_trigger)}"
        for c in report.changes
        if skill is None or c.skill == skill
    ]


def trigger_section(report: TriggerReport, skill: str) -> list[str]:
    """The markdown of one skill's trigger figures, per model, with its queries and confusion table."""
    lines = [f"## Trigger evaluation (first activation ends a query; at most {report.turns} turns)"]
    for f in (f for f in report.figures if f.skill == skill):
        lines += ["", f"### {_md(figure_label(f))}", ""]
        lines.append(f"- recall (positives where the skill fired): {proportion_text(f.recall)}")
        lines.append(f"- false-trigger rate (negatives where it fired): {proportion_text(f.false_trigger)}")
        lines.append(f"- precision (of its activations, those on positives): {proportion_text(f.precision)}")
        lines.append(f"- F1: {f1_text(f)}")
        if f.not_ended:
            lines.append(f"- not counted: {plural(f.not_ended, 'shard')} ended without a record of what fired")
        lines += ["", "| query | should fire | fired (epochs) | flaky | fired first instead |", "|---|---|---|---|---|"]
        for q in f.queries:
            instead = ", ".join(f"{_md(k)} x{v}" for k, v in q.instead.items()) or "-"
            lines.append(
                f"| {q.case_id}: {_md(q.query[:120])} | {'yes' if q.should_trigger else 'no'} | "
                f"{q.fired}/{q.runs} | {'FLAKY' if q.flaky else '-'} | {instead} |"
            )
        if f.confusion:
            lines += ["", "Missed positives, by what fired first instead:", ""]
            lines += [
                f"- {_md(k)}: {plural(v, 'run')}" + (" (no skill activated)" if k == NO_ACTIVATION else "")
                for k, v in f.confusion.items()
            ]
        # The row's verdict last, each a paragraph of its own (not one more item of the list above).
        for line in f.failure_lines:
            lines += ["", f"**gate failed:** {_md(line)}"]
    changes = change_lines(report, skill)
    if changes:
        lines += ["", "### Against the earlier description (paired per query)", "", *arms_table(report, skill)]
        lines += ["", *(f"- {_md(c)}" for c in changes)]
    return lines


def arm_rows(report: TriggerReport, skill: str | None = None) -> list[tuple[str, TriggerFigures]]:
    """``--compare``: each row's figures in every arm, the baseline arms' before the current one's,
    so a row's figures then and now sit together; empty for a run of one arm."""
    if not report.baselines:
        return []
    arms = [*report.baselines.items(), (CURRENT, report.figures)]
    mine = [(arm, f) for arm, figures in arms for f in figures if skill is None or f.skill == skill]
    rows = dict.fromkeys((f.skill, f.model) for _, f in mine)
    return [(arm, f) for row in rows for arm, f in mine if (f.skill, f.model) == row]


def arms_table(report: TriggerReport, skill: str) -> list[str]:
    """Each arm's own figures per row, the baseline's beside the current's (the paired change follows)."""
    rows = arm_rows(report, skill)
    if not rows:
        return []
    lines = ["| arm | row | recall | false-trigger rate | precision | F1 |", "|---|---|---|---|---|---|"]
    lines += [
        f"| {_md(arm)} | {_md(figure_label(f))} | {proportion_text(f.recall)} | "
        f"{proportion_text(f.false_trigger)} | {proportion_text(f.precision)} | {f1_text(f)} |"
        for arm, f in rows
    ]
    return lines


def routing_columns(report: TriggerReport) -> list[str]:
    """Every skill tested or fired, by name, then ``(none)``."""
    named = {c for row in report.routing.values() for c in row} | set(report.routing)
    return [*sorted(named - {NO_ACTIVATION}), NO_ACTIVATION]


def routing_caption(report: TriggerReport) -> str:
    """What the routing matrix counts, in its units, and over what it is summed: one matrix for the
    whole run, so with several rows (models, or harness × model pairs) it pools them; each row's own
    misroutes are its figures' "missed to"."""
    rows = len({f.model for f in report.figures})
    pooled = f"summed over {rows} rows and every epoch" if rows > 1 else "summed over every epoch"
    return (
        "Routing matrix: positive runs of each skill under test (rows) by the skill that fired first "
        f"(columns; the diagonal is right), {pooled}"
    )


def routing_section(report: TriggerReport) -> list[str]:
    """Skill x skill: for each skill's positive queries, which skill fired first (the diagonal is right)."""
    if not report.routing:
        return []
    columns = routing_columns(report)
    lines = [f"## {routing_caption(report)}", ""]
    lines.append("| skill | " + " | ".join(_md(c) for c in columns) + " |")
    lines.append("|---|" + "---|" * len(columns))
    for skill, row in report.routing.items():
        lines.append(f"| {_md(skill)} | " + " | ".join(str(row.get(c, 0)) for c in columns) + " |")
    return lines


def gates_text(report: TriggerReport) -> str:
    """The trigger run's gates as given (a trigger run has no behavioural threshold)."""
    given = [
        f"{flag} {value}"
        for flag, value in (("--min-recall", report.min_recall), ("--max-false-trigger", report.max_false_trigger))
        if value is not None
    ]
    return ", ".join(given) or "none (--min-recall and --max-false-trigger not given)"


def complete_lines(report: TriggerReport) -> list[str]:
    """One line per skill and model for the COMPLETE block (with ``--compare``, one per arm, each
    named), then the paired changes."""
    rows = arm_rows(report) or [(CURRENT, f) for f in report.figures]
    return [
        f"triggers {f.skill} ({f.model}){f' [{arm}]' if report.baselines else ''}: "
        f"recall {proportion_text(f.recall)}; false triggers {proportion_text(f.false_trigger)}; F1 {f1_text(f)}"
        for arm, f in rows
    ] + change_lines(report)


def _junit_query(skill: str, q: QueryRate) -> tuple[str, bool]:
    """A query's testcase: skipped (reported, not gated one by one) when most of its runs went the
    wrong way; the gates' own testcases decide what fails."""
    name = quoteattr(_xml(f"trigger{q.case_id} {q.query[:80]}"))
    wrong = q.runs - q.fired if q.should_trigger else q.fired
    if not (q.runs and wrong * 2 > q.runs):
        return f"<testcase classname={quoteattr(skill)} name={name}/>", False
    what = "missed" if q.should_trigger else "false trigger"
    message = quoteattr(f"{what} in {wrong}/{plural(q.runs, 'epoch')}; the trigger gates decide the verdict")
    return f"<testcase classname={quoteattr(skill)} name={name}><skipped message={message}/></testcase>", True


def _junit_gates(report: TriggerReport, f: TriggerFigures) -> list[str]:
    """One testcase per trigger gate set: a failure carrying the reason when the gate failed."""
    cases = []
    for flag, value in (("--min-recall", report.min_recall), ("--max-false-trigger", report.max_false_trigger)):
        if value is None:
            continue
        reasons = [f.failure_line(g) for g in f.failed if g.gate == flag]
        name = quoteattr(_xml(f"gate {flag} {value:g}"))
        inner = f"<failure message={quoteattr(_xml(reasons[0]))}/>" if reasons else ""
        cases.append(f"<testcase classname={quoteattr(f.skill)} name={name}>{inner}</testcase>")
    return cases


def junit_suites(report: TriggerReport) -> str:
    """One testsuite per skill and model: a testcase per trigger gate set (failing with its reason)
    and one per query (skipped when most of its runs went the wrong way: reported, not gated)."""
    out = []
    for f in report.figures:
        gates = _junit_gates(report, f)
        queries = [_junit_query(f.skill, q) for q in f.queries]
        cases = gates + [case for case, _ in queries]
        props = "".join(
            f"<property name={quoteattr(k)} value={quoteattr(str(v))}/>"
            for k, v in (("recall", f.recall.rate), ("false_trigger", f.false_trigger.rate), ("f1", f.f1))
        )
        out.append(
            f'<testsuite name={quoteattr(f"{f.skill}[triggers:{f.model}]")} tests="{len(cases)}" '
            f'failures="{sum("<failure " in c for c in gates)}" errors="0" '
            f'skipped="{sum(skipped for _, skipped in queries)}"><properties>{props}</properties>'
            + "".join(cases)
            + "</testsuite>"
        )
    return "".join(out)


def trigger_html(report: TriggerReport | None) -> str:
    """The HTML report's ``triggers`` section: figures per skill and model, then the routing matrix."""
    if report is None:
        return ""
    arms = arm_rows(report) or [(CURRENT, f) for f in report.figures]
    rows = [
        [
            *([arm] if report.baselines else []),
            f.skill,
            figure_label(f),
            proportion_text(f.recall),
            proportion_text(f.false_trigger),
            proportion_text(f.precision),
            f1_text(f),
            ", ".join(f"{k} x{v}" for k, v in f.confusion.items()) or "-",
            ", ".join(str(q.case_id) for q in f.queries if q.flaky) or "-",
        ]
        for arm, f in arms
    ]
    heads = ["skill", "model", "recall", "false triggers", "precision", "F1", "missed to", "flaky queries"]
    out = [
        '<section id="triggers"><h2>Trigger evaluation</h2>',
        f"<p>Each query asked bare with every skill installed; at most {report.turns} turns each.</p>",
        table(["arm", *heads] if report.baselines else heads, rows),
    ]
    failed = [line for f in report.figures for line in f.failure_lines]
    if failed:
        out.append("<p>Gates failed:</p><ul>" + "".join(f"<li>{escape(line)}</li>" for line in failed) + "</ul>")
    changes = change_lines(report)
    if changes:
        out.append(
            "<h3>Against the earlier description (paired per query)</h3><ul>"
            + "".join(f"<li>{escape(line)}</li>" for line in changes)
            + "</ul>"
        )
    if report.routing:
        columns = routing_columns(report)
        matrix = [[skill, *(str(row.get(c, 0)) for c in columns)] for skill, row in report.routing.items()]
        out.append(f"<h3>{escape(routing_caption(report))}</h3>" + table(["skill", *columns], matrix))
    return "".join(out) + "</section>"
