"""A self-contained HTML report for a run. Pure; no scripts, no external assets, every value escaped.

Sections, each with a stable id: ``headline`` (verdict, the run's facts, threshold, reasons,
gates), ``overview`` (several corpora: corpus by model and the leaderboard), ``corpora`` (one
row per corpus and arm), ``models`` (per-model bars with 95% intervals), ``plugin-scores``
(Claude Code plugin eval suites: per-case and suite scores), ``comparisons``
(with/without and old/new, with the paired figures), ``harnesses`` (a sweep over several harnesses:
harness by assertion and the harnesses paired), ``adaptive`` (``--epochs auto``: each case's
epochs and why it stopped),
``heatmap`` (model by assertion), ``usage`` (tokens and cost per model), ``quality``
(assertion quality) and ``verdicts`` (every verdict with its evidence and, where one was
kept, a link to the case transcript beside the page; every shard collapsed, failing ones marked).
With several corpora, each corpus's charts and tables are collapsed under the overview.
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape

from reducer.html_overview import corpora, headline, overview
from reducer.html_parts import (
    CSS,
    DIFFERENCE_AXIS,
    RATE_AXIS,
    axis,
    bar,
    ci,
    composite_range,
    difference_bar,
    heat_row,
    name,
    pct,
    pts,
    pval,
    table,
)
from reducer.plugin_score import plugin_score_html
from reducer.render_adaptive import html_section
from reducer.render_compare import NO_SKILL_NOTE, TEST_LABELS
from reducer.render_sweep import row_label, sweep_html
from reducer.render_triggers import trigger_html
from reducer.rows import ROWS_NOT_KEPT
from schemas.comparison import PairedComparison
from schemas.constants import MIN_FLAKY_EPOCHS, MIN_QUALITY_OBSERVATIONS
from schemas.report import UNFINISHED, CaseRun, RunResult, SkillResult
from schemas.shard import CURRENT
from schemas.status import ShardState


def _models(result: RunResult) -> str:
    out = [f'<section id="models"><h2>Pass rate by {row_label(result)}</h2>']
    weighted = any(m.behavioural.weighted is not None for s in result.skills for m in s.models)
    method = "Wilson interval of the case-weighted counts (cases got unequal epochs)" if weighted else "Wilson interval"
    out.append(f'<p class="legend">Behavioural pass rate over graded shards; the whisker is the 95% {method}.</p>')
    for s in result.skills:
        bars = [bar(m.model, m.behavioural.rate, m.behavioural.low, m.behavioural.high) for m in s.models]
        title = f"{name(s.skill)} [{name(s.variant)}]: {escape(s.headline)}"
        out.append(_part(result, title, "<div class='bars'>" + "".join(bars) + axis(RATE_AXIS) + "</div>"))
    if len(result.leaderboard) > 1 and not _several_corpora(result):  # several corpora: the leaderboard leads
        rows = [[m.model, pct(m.composite_mean), composite_range(m)] for m in result.leaderboard]
        out.append(
            "<h3>Leaderboard (composite score)</h3>"
            + table([row_label(result), "composite", "95% CI over cases"], rows)
        )
    return "".join(out) + "</section>"


def _comparison(c: PairedComparison, per_model: list[PairedComparison], arms: Mapping[str, SkillResult]) -> str:
    title = "With vs without the skill" if c.kind == "no-skill" else f"Old vs new: {c.baseline}"
    out = [f"<h3>{escape(c.skill)}: {escape(title)}</h3>"]
    if c.kind == "no-skill":
        out.append(f"<p class='legend'>{escape(NO_SKILL_NOTE)}</p>")
    base, current = arms.get(c.baseline), arms.get("current")
    out.append("<div class='bars'>")
    if base is not None:
        r = base.behavioural
        out.append(bar(f"{c.baseline} (all models)", r.rate, r.low, r.high, old=True))
    if current is not None:
        r = current.behavioural
        out.append(bar("current (all models)", r.rate, r.low, r.high))
    out.append(difference_bar("paired difference", c.difference, c.low, c.high, c.cases))
    out += [difference_bar(f"{m.model}: difference", m.difference, m.low, m.high, m.cases) for m in per_model]
    out.append(axis(DIFFERENCE_AXIS) + "</div>")
    out.append(
        "<p class='legend'>Paired difference, current minus the other arm, in percentage points: "
        "the dot is the difference, the whisker its 95% interval, the line at 0 no change.</p>"
    )
    figures = (
        f"Paired over {c.cases} cases ({c.pairs} pairs; {c.dropped} dropped because a side was not graded"
        + (": " + ", ".join(f"{k} {v}" for k, v in sorted(c.dropped_by.items())) if c.dropped_by else "")
        + f"). Difference {pts(c.difference)}, {ci(c.low, c.high, c.cases)} "
        f"(score interval over cases). {TEST_LABELS[c.test]}: "
        f"two-sided p = {pval(c.p_two_sided)}, one-sided p (drop) = {pval(c.p_drop)}, "
        f"one-sided p (uplift) = {pval(c.p_uplift)}; {c.better} cases better, {c.worse} worse "
        f"(seed {c.seed}, from the run id, for any Monte Carlo p)."
    )
    out.append(f"<p>{escape(figures)}</p>")
    if c.note:
        out.append(f"<p class='muted'>{escape(c.note)}</p>")
    if c.assertions:
        rows = [
            [
                str(a.case_id),
                a.text,
                pct(a.baseline_rate),
                pct(a.current_rate),
                f"{a.better}/{a.worse}",
                pval(a.p_two_sided),
                pval(a.p_drop_holm),
            ]
            for a in c.assertions
        ]
        head = ["case", "assertion", name(c.baseline), "current", "better/worse", "p", "p drop (Holm)"]
        out.append(table(head, rows))
    return "".join(out)


def _comparisons(result: RunResult) -> str:
    overall = [c for c in result.comparisons if c.model is None]
    out = ['<section id="comparisons"><h2>Comparisons</h2>']
    if not overall:
        out.append("<p class='muted'>This run had one arm: no --compare REF and no --baseline no-skill.</p>")
    for c in overall:
        per_model = [m for m in result.comparisons if m.model and m.skill == c.skill and m.baseline == c.baseline]
        arms = {s.variant: s for s in result.skills if s.skill == c.skill}
        out.append(_comparison(c, per_model, arms))
    return "".join(out) + "</section>"


def _heatmap(result: RunResult) -> str:
    out = ['<section id="heatmap"><h2>Model by assertion</h2>']
    for s in result.skills:
        models = [m.model for m in s.models]
        head = ["case", "assertion", *[name(m) for m in models], "pass@k", "pass^k"]
        rows = [[*heat_row(a, a.by_model, models), pct(a.pass_at_k), pct(a.pass_hat_k)] for a in s.assertions]
        out.append(_part(result, f"{name(s.skill)} [{name(s.variant)}]", table(head, rows, raw=True)))
    return "".join(out) + "</section>"


def _usage(result: RunResult) -> str:
    rows = [
        [
            model,
            str(u.calls),
            f"{u.prompt_tokens:,}",
            f"{u.completion_tokens:,}",
            "unknown" if u.cost_usd is None else f"${u.cost_usd:.4f}",
        ]
        for model, u in sorted(result.usage.items())
    ]
    body = table(["model", "calls", "prompt tokens", "completion tokens", "cost"], rows) if rows else "<p>none</p>"
    return f'<section id="usage"><h2>Tokens and cost per model</h2>{body}</section>'


def _activation(result: RunResult) -> str:
    """Harness executors: how often each skill was activated, per model (only when recorded)."""
    counts = {
        (f"{s.skill} [{s.variant}]", m.model): m.skill_activated
        for s in result.skills
        for m in s.models
        if m.skill_activated is not None
    }
    if not counts:
        return ""
    rows = [[skill, model, f"{hit}/{n}", pct(hit / n)] for (skill, model), (hit, n) in sorted(counts.items())]
    return (
        '<section id="activation"><h2>Skill activation</h2>'
        "<p>Shards of a harness executor in which the harness loaded the skill (a Skill call naming it, "
        "or its SKILL.md read).</p>" + table(["skill", "model", "activated", "rate"], rows) + "</section>"
    )


def _quality(result: RunResult) -> str:
    rows = [
        [
            name(q.skill),
            str(q.case_id),
            q.text,
            str(q.observations),
            pct(q.pass_rate),
            f"always {q.constant}" if q.non_discriminating else "-",
            ", ".join(q.flaky_in) or "-",
            pct(q.judge_disagreement),
        ]
        for q in result.assertion_quality
    ]
    flagged = [row for row, q in zip(rows, result.assertion_quality, strict=True) if q.non_discriminating or q.flaky]
    head = ["skill", "case", "assertion", "verdicts", "pass rate", "non-discriminating", "flaky in", "judges disagree"]
    rule = (
        f"{len(flagged)} of {len(rows)} assertions flagged. Non-discriminating: at least "
        f"{MIN_QUALITY_OBSERVATIONS} verdicts from two or more models or arms, all passing (or all failing). "
        f"Flaky: the verdict changed across at least {MIN_FLAKY_EPOCHS} epochs of one model in one arm. "
        "Fewer observations flag nothing: they cannot tell a weak assertion from a sound one."
    )
    out = ['<section id="quality"><h2>Assertion quality</h2>', f"<p>{escape(rule)}</p>"]
    if flagged:
        out.append(table(head, flagged))
    if rows:
        out.append(f"<details><summary>all {len(rows)} assertions</summary>{table(head, rows)}</details>")
    else:
        out.append("<p>no graded verdicts</p>")
    return "".join(out) + "</section>"


def _run(r: CaseRun, transcripts: Mapping[str, str], label: str = "") -> str:
    """One shard, collapsed: its summary says how it went (failing shards marked), the rest is a click
    away. ``label``: how its case is named (:meth:`SkillResult.case_label`)."""
    passed = sum(v.passed for v in r.verdicts)
    status = f"{passed}/{len(r.verdicts)} passed" if r.state is ShardState.GRADED else r.state.value
    bad = r.state is not ShardState.GRADED or passed < len(r.verdicts)
    mark = '<span class="fail">FAIL</span> ' if r.state is ShardState.GRADED and bad else ""
    title = f"{mark}{escape(label or f'case {r.case_id}')} · {name(r.model)} · epoch {r.epoch}: {escape(status)}"
    out = [f"<details class='shard'><summary>{title}</summary>"]
    link = transcripts.get(r.shard_id)
    if link:
        out.append(f'<p><a href="{escape(link, quote=True)}">transcript</a></p>')
    else:
        out.append("<p class='muted'>every assertion passed: transcript not kept beside the report</p>")
    if r.state is not ShardState.GRADED:
        out.append(f"<p class='detail'>{escape(r.detail)}</p>")
    for label, lines in (("Mock calls", r.mock_calls), ("HTTP calls", r.http_calls)):
        if lines:
            items = "".join(f"<li class='wrap'><code>{escape(line)}</code></li>" for line in lines)
            out.append(f"<p>{label}:</p><ul class='calls'>{items}</ul>")
    out.append("<ul>")
    for v in r.verdicts:
        verdict = '<span class="pass">PASS</span>' if v.passed else '<span class="fail">FAIL</span>'
        out.append(f'<li>{verdict} {escape(v.text)}<div class="ev">{escape(v.evidence)}</div></li>')
    return "".join(out) + "</ul></details>"


def _verdicts(result: RunResult, transcripts: Mapping[str, str]) -> str:
    out = ['<section id="verdicts"><h2>Verdicts and evidence</h2>']
    for s in result.skills:
        infra = ", ".join(f"{k} {v}" for k, v in s.infra.items() if v and k != UNFINISHED) or "none"
        infra += f"; not ended (still running or lost): {s.unfinished}" if s.unfinished else ""
        failing = sum(r.state is not ShardState.GRADED or not all(v.passed for v in r.verdicts) for r in s.runs)
        body = [
            f"<p>{len(s.runs)} shards, {failing} failing or not graded (marked; open one to read its evidence). "
            f"Not graded (infra): {escape(infra)}; blocked: {s.blocked_count}; "
            f"sandbox: {escape(', '.join(s.sandbox_modes) or 'n/a')}</p>",
            *(_run(r, transcripts, s.case_label(r.case_id)) for r in s.runs),
        ]
        if not s.runs and s.shard_count:
            body.append(f"<p>{ROWS_NOT_KEPT.format(shards=s.shard_count)}</p>")
        title = f"{name(s.skill)} [{name(s.variant)}]" + (f": {failing} failing" if _several_corpora(result) else "")
        out.append(_part(result, title, "".join(body)))
    return "".join(out) + "</section>"


def _unended(result: RunResult, transcripts: Mapping[str, str]) -> str:
    """A trigger run's shards that did not end with a record of what fired, each with its detail
    and transcript (the ones that ended are in the figures)."""
    out = ['<section id="verdicts"><h2>Shards not run to an end</h2>']
    for s in result.skills:
        runs = [r for r in s.runs if r.state is not ShardState.GRADED]
        if runs:
            shown = "".join(_run(r, transcripts, s.case_label(r.case_id)) for r in runs)
            out.append(_part(result, f"{name(s.skill)} [{name(s.variant)}]", shown))
    if len(out) == 1:
        out.append("<p>none: every shard ended with a record of what fired</p>")
    return "".join(out) + "</section>"


def _several_corpora(result: RunResult) -> bool:
    """A page over several corpora (not a sweep over harnesses, :func:`reducer.render_sweep.is_sweep`)."""
    return sum(s.variant == CURRENT for s in result.skills) > 1


def _part(result: RunResult, title: str, body: str) -> str:
    """One corpus's chart or table: under its heading, or collapsed when the page shows several corpora."""
    if _several_corpora(result):
        return f"<details><summary>{title}</summary>{body}</details>"
    return f"<h3>{title}</h3>{body}"


def render_html(
    result: RunResult, transcripts: Mapping[str, str] | None = None, meta: Mapping[str, str] | None = None
) -> str:
    """The run as one page; ``transcripts`` maps a shard id to its transcript file beside the page,
    ``meta`` holds the run's facts shown under the verdict (repo, commit, models, judges, date)."""
    links = dict(transcripts or {})
    if result.triggers is not None:  # no assertions: the trigger figures replace every behavioural section
        body = [
            headline(result, dict(meta or {})),
            corpora(result),
            trigger_html(result.triggers),
            _usage(result),
            _unended(result, links),
        ]
        return _page(result, body)
    body = [
        headline(result, dict(meta or {})),
        overview(result),
        corpora(result),
        _models(result),
        plugin_score_html(result),
        _comparisons(result),
        sweep_html(result),
        html_section(result.adaptive),
        _heatmap(result),
        _activation(result),
        trigger_html(result.triggers),
        _usage(result),
        _quality(result),
        _verdicts(result, links),
    ]
    return _page(result, body)


def _page(result: RunResult, body: list[str]) -> str:
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>skill-eval {escape(result.run_id)}</title><style>{CSS}</style></head><body>"
        + "".join(body)
        + "</body></html>\n"
    )
