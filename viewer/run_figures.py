"""A trigger run's figures, an adaptive run's looks and plugin eval suites' scores, as the run page lays them out. Pure.

Every number is the reducer's: the stored result's ``triggers`` (a :class:`TriggerReport`),
``adaptive`` (an :class:`AdaptivePlan`) and each corpus's ``plugin_scores`` are read back as the
reducer's own models and only put in words here; nothing is counted, estimated or gated again (a
suite's verdict is the stored one, its basis the reducer's words for it). Both records grow with the queries, the
cases and the harness × model rows, never with the shards, so they are read whole. A record this
version cannot read is a named :class:`StoreError` (the result and its field), not a blank section.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from reducer.render_adaptive import LOOK_INTERVAL, REASONS, look_decision, stop_counts, summary_rule
from reducer.render_triggers import change_lines, figure_label, gates_text, routing_caption, routing_columns
from reducer.threshold import case_threshold_label, plugin_basis, rule_sentence, score_against
from schemas.adaptive import AdaptivePlan, GateLook
from schemas.constants import DEFAULT_THRESHOLD
from schemas.errors import StoreError
from schemas.report import PluginSuiteScore, case_label
from schemas.shard import CURRENT
from schemas.triggers import Proportion, QueryRate, TriggerFigures, TriggerReport
from schemas.words import plural

M = TypeVar("M", bound=BaseModel)

POOLED = "all models pooled"
"""The row of a look that pools a corpus's models (one executor, or no sweep)."""


def _parsed(model: type[M], result: dict[str, Any], key: str, run_id: str) -> M | None:
    raw = result.get(key)
    if raw is None:
        return None
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise StoreError(f"run {run_id}: result.json field {key!r} cannot be read as {model.__name__}: {exc}") from exc


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def proportion_cells(p: Proportion, unit: str) -> dict[str, str]:
    """``2 of 3 positive runs``, its rate and its 95% interval over queries (``-`` when nothing counted)."""
    interval = "-" if p.rate is None else f"{_pct(p.low)} – {_pct(p.high)}"
    return {"count": f"{p.hits} of {p.total} {unit}", "rate": _pct(p.rate), "interval": interval}


def gate_of(report: TriggerReport, f: TriggerFigures, inconclusive: set[str]) -> dict[str, Any]:
    """The trigger gates' verdict on one row, read from the gates the reducer found it missed (never re-gated)."""
    if report.min_recall is None and report.max_false_trigger is None:
        return {"verdict": "not gated", "reasons": [], "gates": gates_text(report)}
    if f.skill in inconclusive:
        return {"verdict": "not gated", "reasons": ["INCONCLUSIVE: most shards did not end"], "gates": ""}
    reasons = f.failure_lines
    return {"verdict": "FAIL" if reasons else "PASS", "reasons": reasons, "gates": gates_text(report)}


def query_row(q: QueryRate) -> dict[str, Any]:
    instead = ", ".join(f"{name} ×{n}" for name, n in q.instead.items())
    return {
        "case_id": q.case_id,
        "query": q.query,
        "should": "yes" if q.should_trigger else "no",
        "fired": f"{q.fired} of {q.runs} epochs",
        "right": (q.fired == q.runs) if q.should_trigger else q.fired == 0,
        "flaky": q.flaky,
        "instead": instead or "-",
    }


def figure_cells(f: TriggerFigures) -> dict[str, Any]:
    """One row's four figures with their counts, as the current and the baseline arms show them."""
    return {
        "skill": f.skill,
        "row": figure_label(f),
        "recall": proportion_cells(f.recall, "positive runs"),
        "false_trigger": proportion_cells(f.false_trigger, "negative runs"),
        "precision": proportion_cells(f.precision, "activations"),
        "f1": _pct(f.f1),
    }


def trigger_view(result: dict[str, Any] | None, run_id: str) -> dict[str, Any] | None:
    """A trigger run's page section: per skill and row the four figures with their counts and the
    gates' verdict last, then each row's queries; the routing matrix, the paired changes and each
    baseline arm's own figures (never gated); None for a run that is not a trigger run."""
    report = _parsed(TriggerReport, result or {}, "triggers", run_id)
    if report is None:
        return None
    skills = (result or {}).get("skills", [])
    inconclusive = {s["skill"] for s in skills if s.get("variant") == CURRENT and s.get("inconclusive")}
    rows = [
        figure_cells(f)
        | {
            "f1_range": "-" if f.f1_low is None or f.f1_high is None else f"{_pct(f.f1_low)} – {_pct(f.f1_high)}",
            "not_ended": f.not_ended,
            "gate": gate_of(report, f, inconclusive),
            "queries": [query_row(q) for q in f.queries],
        }
        for f in report.figures
    ]
    baselines = [{"arm": arm} | figure_cells(f) for arm, figures in report.baselines.items() for f in figures]
    columns = routing_columns(report) if report.routing else []
    routing = [{"skill": s, "cells": [row.get(c, 0) for c in columns]} for s, row in report.routing.items()]
    return {
        "turns": report.turns,
        "gates": gates_text(report),
        "rows": rows,
        "routing_caption": routing_caption(report),
        "routing_columns": columns,
        "routing": routing,
        "changes": change_lines(report),
        "baselines": baselines,
    }


def look_row(g: GateLook, plan: AdaptivePlan) -> dict[str, Any]:
    """One gate's last look: the figure, its interval at the corrected level, the decision, and
    why its corpus's cases stopped (cases are shared by every row of a corpus)."""
    return {
        "skill": g.skill,
        "row": g.row or POOLED,
        "figure": g.figure,
        "estimate": "-" if g.estimate is None else f"{g.estimate:.3f}",
        "interval": f"[{g.low:.3f}, {g.high:.3f}]",
        "level": f"{100 * g.level:.2f}%",
        "over": LOOK_INTERVAL,
        "decision": look_decision(g),
        "stops": ", ".join(f"{n} {reason}" for reason, n in stop_counts(plan, g.skill).items()),
    }


def adaptive_view(result: dict[str, Any] | None, run_id: str) -> dict[str, Any] | None:
    """An adaptive run's page section: its rule, each row's last look, and each case's epochs and
    stop reason; None for fixed epochs."""
    plan = _parsed(AdaptivePlan, result or {}, "adaptive", run_id)
    if plan is None:
        return None
    cases = [
        {"skill": c.skill, "case_id": c.case_id, "epochs": c.epochs, "stopped": c.stopped or "running"}
        | {"why": REASONS[c.stopped]}
        for c in plan.cases
    ]
    return {"rule": summary_rule(plan), "looks": [look_row(g, plan) for g in plan.gates], "cases": cases}


HEADLINE_ROWS = 3
"""Trigger rows the runs list names one by one; more are counted."""


def trigger_headline(raw: dict[str, Any]) -> str:
    """The runs list's line for a trigger run (its pass rates are 0/0: it holds no assertions)."""
    try:
        report = TriggerReport.model_validate(raw)
    except ValidationError:
        return "trigger run (its figures do not read; the run page names the fault)"
    failed = f"; {plural(len(report.failures), 'gate failure')}" if report.failures else ""
    if len(report.figures) > HEADLINE_ROWS:
        return f"triggers: {len(report.figures)} skill and row figures{failed}"
    return "; ".join(
        f"triggers {f.skill} ({f.model}): recall {f.recall.hits} of {f.recall.total}, "
        f"false triggers {f.false_trigger.hits} of {f.false_trigger.total}"
        for f in report.figures
    )


def _suite_scores(skill: dict[str, Any], run_id: str) -> list[PluginSuiteScore]:
    try:
        return [PluginSuiteScore.model_validate(m) for m in skill.get("plugin_scores") or []]
    except ValidationError as exc:
        name = f"{skill.get('skill')} [{skill.get('variant')}]"
        raise StoreError(f"run {run_id}: result.json plugin_scores of {name} cannot be read: {exc}") from exc


def case_names(skill: dict[str, Any]) -> dict[int, str]:
    """A corpus's case names by case id (JSON keeps the ids as strings)."""
    return {int(k): str(v) for k, v in (skill.get("case_names") or {}).items() if str(k).isdigit()}


def _bar(result: dict[str, Any]) -> tuple[float, str, float | None, float, str]:
    """The run's threshold and source, ``--threshold``, and what a plugin eval case must score (value, words)."""
    threshold, source = result.get("threshold", DEFAULT_THRESHOLD), result.get("threshold_source", "default")
    given = result.get("plugin_threshold")
    return (
        threshold,
        source,
        given,
        threshold if given is None else given,
        case_threshold_label(threshold, source, given),
    )


def plugin_note(skill: dict[str, Any], result: dict[str, Any]) -> str:
    """After a plugin eval suite's headline: its verdict and what decided it ('' for any other corpus)."""
    verdict = skill.get("verdict")
    if not skill.get("plugin_scores") or verdict not in ("PASS", "FAIL"):
        return ""
    *_, bar, label = _bar(result)
    scores = _suite_scores(skill, str(result.get("run_id")))
    return f" — {verdict}: {plugin_basis(scores, bar, label, case_names(skill))}"


def plugin_view(result: dict[str, Any] | None, run_id: str) -> dict[str, Any] | None:
    """The plugin eval suites' section: how a suite passes, then per suite its verdict, what decided
    it (its lowest case score against the case threshold) and every model's suite and case scores,
    each case marked against that threshold; None when the run has no plugin eval suite."""
    skills = (result or {}).get("skills") or []
    suites = [(s, scores) for s in skills if (scores := _suite_scores(s, run_id))]
    if not suites or result is None:
        return None
    threshold, source, given, bar, label = _bar(result)
    current = [s for s in skills if s.get("variant") == CURRENT] or skills
    ordinary = any(not s.get("plugin_scores") for s in current)
    rows = []
    for s, scores in suites:
        verdict = s.get("verdict") or ""
        models = [
            {
                "model": m.model,
                "score": "-" if m.score is None else f"{m.score:.3f}",
                "cases": [
                    {
                        "case_id": c.case_id,
                        "case": case_label(c.case_id, case_names(s)),
                        "score": "-" if c.score is None else score_against(c.score, bar),
                        "runs": c.runs,
                        "mark": "-" if c.score is None else "met" if round(c.score, 12) >= bar else "below",
                    }
                    for c in m.cases
                ],
            }
            for m in scores
        ]
        basis = plugin_basis(scores, bar, label, case_names(s)) if verdict in ("PASS", "FAIL") else ""
        rows.append(
            {"skill": s.get("skill"), "variant": s.get("variant"), "verdict": verdict, "basis": basis}
            | {"models": models}
        )
    return {"rule": rule_sentence(ordinary, True, threshold, source, given), "bar": label, "suites": rows}
