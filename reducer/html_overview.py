"""The top of the HTML report: the verdict with the run's facts, the sweep overview, the corpus table. Pure.

Values in, HTML out: every function takes the reduced result (and plain strings) and returns
markup, so any page that shows a run can reuse them.
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape

from reducer.html_parts import Raw, composite_range, heat, name, pct, table
from reducer.render_sweep import row_label
from reducer.render_triggers import gates_text
from reducer.threshold import gate_rule, threshold_text, verdict_basis
from schemas.report import RunResult, SkillResult
from schemas.shard import CURRENT

REASONS_SHOWN = 5
"""Reasons listed under the verdict; the rest are one click away."""


def headline(result: RunResult, meta: Mapping[str, str]) -> str:
    """The verdict, the run's facts (repo, commit, models, date...), the threshold and the reasons."""
    verdict = result.verdict.value
    facts = "".join(f"<dt>{escape(k)}</dt><dd>{name(v)}</dd>" for k, v in meta.items() if v)
    if result.triggers is not None:  # no assertions: the trigger gates apply, not the threshold
        facts += f"<dt>trigger gates</dt><dd>{escape(gates_text(result.triggers))}</dd>"
        legend = "A trigger run is gated by --min-recall and --max-false-trigger only."
    else:
        label = threshold_text(result)
        facts += f"<dt>threshold</dt><dd>{escape(label.removeprefix('threshold '))}</dd>"
        legend = escape(gate_rule(result) or f"A corpus passes when its behavioural pass rate reaches the {label}.")
    reasons = [f"<li>{escape(r)}</li>" for r in result.reasons]
    listed = "<ul>" + "".join(reasons[:REASONS_SHOWN]) + "</ul>"
    if len(reasons) > REASONS_SHOWN:
        listed += (
            f"<details><summary>{len(reasons) - REASONS_SHOWN} more reasons</summary>"
            f"<ul>{''.join(reasons[REASONS_SHOWN:])}</ul></details>"
        )
    out = [
        '<section id="headline">',
        f'<h1>skill-eval run {escape(result.run_id)} <span class="verdict {verdict}">{verdict}</span></h1>',
        f'<dl class="meta">{facts}</dl>',
        f"<p class='legend'>{legend}</p>",
        listed,
    ]
    if result.aggregate_headline:
        out.append(f"<p><b>{escape(result.aggregate_headline)}</b></p>")
    gates = []
    if result.regression_alpha is not None:
        gates.append(f"--regression-alpha {result.regression_alpha:g}: only a significant one-sided drop fails")
    if result.require_uplift is not None:
        gates.append(f"--require-uplift {result.require_uplift:g}: the uplift over no skill must clear it")
    gates += [f"judge {j}: {c}" for j, c in result.calibration.items()]
    gates += [f"triggers: {gates_text(result.triggers)}"] if result.triggers is not None else []
    out.append("<h2>Gates</h2><ul>" + "".join(f"<li>{escape(g)}</li>" for g in gates or ["none set"]) + "</ul>")
    return "".join(out) + "</section>"


def badge(s: SkillResult, basis: str = "") -> Raw:
    """The corpus's verdict against the threshold, and what decided it when given; a baseline arm
    has none (no PASS is ever implied)."""
    if not s.verdict:
        return Raw('<span class="baseline">baseline arm</span>')
    why = f' <span class="meta">{escape(basis)}</span>' if basis else ""
    return Raw(f'<span class="verdict small {s.verdict.replace(" ", "-")}">{escape(s.verdict)}</span>{why}')


def not_graded(s: SkillResult) -> str:
    """``1/4: 1 infra`` (shards), the kinds adding up as in the headline."""
    if not s.not_graded:
        return f"0/{s.shard_count}"
    infra = sum(s.infra.values())
    blocked = s.blocked_count
    kinds = [(infra, "infra"), (blocked, "blocked"), (s.not_graded - infra - blocked, "not finished")]
    return f"{s.not_graded}/{s.shard_count}: " + ", ".join(f"{n} {k}" for n, k in kinds if n > 0)


def trigger_corpora(result: RunResult) -> str:
    """A trigger run's corpora: one row per trigger set and arm, its queries and the shards that did
    not end with a record of what fired (its shards hold no assertions: the figures are below)."""
    rows = [[Raw(f"{name(s.skill)} [{name(s.variant)}]"), str(s.cases), not_graded(s)] for s in result.skills]
    return (
        '<section id="corpora"><h2>Trigger sets</h2>'
        f"<p class='legend'>Shards: one per query, {row_label(result)}, epoch and arm; a shard that did not "
        "run to an end (infra) is counted apart and enters no figure.</p>"
        + table(["trigger set", "queries", "shards not run to an end / run"], rows)
        + "</section>"
    )


def corpora(result: RunResult) -> str:
    """One row per corpus and arm; the counts say whether they are assertions or shards."""
    if result.triggers is not None:
        return trigger_corpora(result)
    rows = [
        [
            Raw(f"{name(s.skill)} [{name(s.variant)}]"),
            badge(s, verdict_basis(s, result)),
            f"{s.behavioural.passed}/{s.behavioural.total}",
            pct(s.behavioural.rate)
            + (
                " (each case rated by its first round and weighted equally)"
                if s.behavioural.weighted is not None
                else ""
            ),
            not_graded(s),
        ]
        for s in result.skills
    ]
    head = ["corpus", "verdict", "assertions passed / graded", "pass rate", "shards not graded / run"]
    return (
        '<section id="corpora"><h2>Corpora</h2>'
        "<p class='legend'>Assertions: one verdict per assertion of each graded shard. Shards: one per case, "
        f"{row_label(result)}, epoch and arm; a shard not graded is counted apart and never as a failure.</p>"
        + table(head, rows)
        + "</section>"
    )


def overview(result: RunResult) -> str:
    """A sweep at a glance (several corpora): pass rate by corpus and model, and the leaderboard."""
    current = [s for s in result.skills if s.variant == CURRENT]
    if len(current) < 2 or result.triggers is not None:  # a trigger run has no pass rate: its figures say it
        return ""
    models = [m.model for m in result.leaderboard]
    rows = []
    for s in current:
        by_model = {m.model: m.behavioural for m in s.models}
        cells = [
            Raw(f'<span class="heat" style="background:{heat(r.rate)}">{pct(r.rate)}</span>')
            if (r := by_model.get(m)) is not None
            else "-"
            for m in models
        ]
        rows.append([name(s.skill), badge(s), *cells])
    board = [
        [
            name(m.model),
            pct(m.composite_mean),
            composite_range(m),
            pct(m.behavioural.rate),
        ]
        for m in result.leaderboard
    ]
    return (
        '<section id="overview"><h2>Overview</h2>'
        f"<p class='legend'>{len(current)} corpora: behavioural pass rate by corpus and executor model "
        "(red 0% to green 100%), then the models ranked by composite score over every corpus.</p>"
        + table(["corpus", "verdict", *[name(m) for m in models]], rows, stack=False)
        + "<h3>Leaderboard</h3>"
        + table([row_label(result), "composite", "95% CI over cases", "pass rate"], board, stack=False)
        + "</section>"
    )
