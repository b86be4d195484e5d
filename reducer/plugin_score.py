"""Scores of Claude Code ``plugin eval`` suites, as ``plugin eval`` defines them. Pure.

A run's score is the share of its graders that passed, weighted by the graders' weights (the
composite of its verdicts); a case's score is the mean of its runs' scores; the suite's score is
the mean of its cases' scores. A case passes when its score reaches the case threshold, and
the suite fails when any case's score is below it (reducer/threshold.py). Only graded runs count: a run the evaluator
failed to grade (infra) has no score, which skill-eval's own gates report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

from reducer.html_parts import table
from reducer.markdown_text import md
from reducer.threshold import score_against, verdict_basis
from schemas.report import PluginCaseScore, PluginSuiteScore, RunResult, SkillResult
from schemas.visible import visible
from schemas.words import plural

PLUGIN_SUITE_PREFIX = "evals/*/ [plugin suite:"


def is_plugin_suite(corpus_file: str) -> bool:
    return corpus_file.startswith(PLUGIN_SUITE_PREFIX)


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def scores_from_sums(
    case_ids: Sequence[int], models: Sequence[str], sums: Mapping[tuple[int, str], Sequence[float]]
) -> list[PluginSuiteScore]:
    """Per executor model: every case's score and the suite's, from (case, model) -> [sum of the
    graded runs' scores, graded runs] (what the reduce counts)."""
    out = []
    for model in models:
        cases = []
        for case_id in case_ids:
            total, runs = sums.get((case_id, model), (0.0, 0.0))
            cases.append(PluginCaseScore(case_id=case_id, runs=int(runs), score=total / runs if runs else None))
        scored = [c.score for c in cases if c.score is not None]
        out.append(PluginSuiteScore(model=model, score=_mean(scored), cases=cases))
    return out


def below_threshold(skill: SkillResult, threshold: float, label: str) -> list[str]:
    """One line per (model, case) whose score is below ``threshold`` (``label`` names it and its source)."""
    return [
        f"{skill.skill}: plugin eval {skill.case_label(c.case_id)} scores {score_against(c.score, threshold)} "
        f"with {s.model}, below {label}"
        for s in skill.plugin_scores
        for c in s.cases
        if c.score is not None and round(c.score, 12) < threshold
    ]


def _score(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def plugin_score_lines(skill: SkillResult) -> list[str]:
    """The report section: per model, the suite score and each case's (0 to 1, as plugin eval prints them)."""
    if not skill.plugin_scores:
        return []
    out = [
        "",
        "### Plugin eval scores",
        "",
        "Run score: weighted share of graders passed; case score: mean over its graded runs; "
        "suite score: mean of the case scores (0 to 1).",
        "",
        "| model | suite score | "
        + " | ".join(md(skill.case_label(c.case_id)) for c in skill.plugin_scores[0].cases)
        + " |",
        "|---|---|" + "---|" * len(skill.plugin_scores[0].cases),
    ]
    for s in skill.plugin_scores:
        cells = " | ".join(f"{_score(c.score)} ({plural(c.runs, 'run')})" for c in s.cases)
        out.append(f"| {s.model} | {_score(s.score)} | {cells} |")
    return out


def plugin_complete_lines(skill: SkillResult) -> list[str]:
    """One line per model for the SKILL-EVAL COMPLETE block."""
    return [
        f"  plugin eval score ({s.model}): suite {_score(s.score)}; cases "
        + ", ".join(f"{visible(skill.case_cell(c.case_id))}={_score(c.score)}" for c in s.cases)
        for s in skill.plugin_scores
    ]


def plugin_score_html(result: RunResult) -> str:
    """The HTML section (id ``plugin-scores``): per plugin suite and model, the suite and case scores."""
    suites = [s for s in result.skills if s.plugin_scores]
    if not suites:
        return ""
    out = ['<section id="plugin-scores"><h2>Plugin eval scores</h2>']
    out.append(
        '<p class="legend">Run score: weighted share of graders passed; case score: mean over its graded runs; '
        "suite score: mean of the case scores (0 to 1).</p>"
    )
    for skill in suites:
        head = ["model", "suite score", *(skill.case_label(c.case_id) for c in skill.plugin_scores[0].cases)]
        rows = [
            [s.model, _score(s.score), *(f"{_score(c.score)} ({plural(c.runs, 'run')})" for c in s.cases)]
            for s in skill.plugin_scores
        ]
        out.append(f"<h3>{escape(skill.skill)} [{escape(skill.variant)}]</h3>")
        basis = verdict_basis(skill, result)
        if basis:  # what decided the suite: these scores against the case threshold, not its pass rate
            out.append(f'<p class="plugin-gate"><b>{escape(skill.verdict)}</b>: {escape(basis)}</p>')
        out.append(table(head, rows))
    return "".join(out) + "</section>"
