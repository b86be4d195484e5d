"""What a trigger run prints and reports: its figures in place of the behavioural ones (it holds no
assertions, so no 0/0 pass rate anywhere), each arm named and the baseline's own figures beside the
current ones under ``--compare``, and a failed gate as the row's last line. Pure: reduced from
outcomes as a worker records them."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from datetime import UTC, datetime

from markdown_it import MarkdownIt

from producer.plan.planning import plan_run
from reducer.render import render_json, render_markdown, run_log_line
from reducer.render_html import render_html
from reducer.render_junit import render_junit
from reducer.stream import StreamReducer, reduce_run
from reducer.summary import render_complete_block
from schemas.corpus import Corpus, EvalCase
from schemas.report import RunResult
from schemas.shard import CURRENT, RunPlan, SkillBundle, baseline_variant
from schemas.shard_outcome import ShardOutcome, outcome_line_of
from schemas.status import ShardState, Verdict
from schemas.triggers import TriggerCase, TriggerSet, TriggerSettings

RUN = "20260101-000000-00000000"
MODEL = "openai/gpt-5"
REF = baseline_variant("v1")
REPORTS = ["out/skill-eval-pdf-x.md", "out/skill-eval-x.html"]


def trigger_bundle(skill: str) -> SkillBundle:
    """Two positives (ids 1, 2) and two negatives (ids 3, 4)."""
    queries = tuple(TriggerCase(id=i, query=f"{skill} query {i}", should_trigger=i <= 2) for i in (1, 2, 3, 4))
    cases = tuple(EvalCase(id=q.id, prompt=q.query, expected_output="", files=(), assertions=()) for q in queries)
    return SkillBundle(
        skill=skill,
        bundle_key=f"{skill}-000000000000",
        corpus_file=f"evals/{skill}.triggers.json",
        corpus=Corpus(skill_name=skill, evals=cases),
        triggers=TriggerSet(skill_name=skill, triggers=queries),
    )


def fired(plan: RunPlan) -> dict[str, ShardOutcome]:
    """Now: each skill fires on its first positive only. At REF: on both positives and its first negative."""
    out = {}
    for s in plan.shards:
        hit = s.case_id == 1 if s.variant == CURRENT else s.case_id in (1, 2, 3)
        out[s.shard_id] = ShardOutcome(s, ShardState.GRADED, skills_fired=(s.skill,) if hit else ())
    return out


def trigger_run(
    skills: tuple[str, ...] = ("pdf", "csv"), compare: bool = True, models: tuple[str, ...] = (MODEL,)
) -> RunResult:
    variants = (CURRENT, REF) if compare else (CURRENT,)
    plan = plan_run(RUN, [trigger_bundle(s) for s in skills], list(models), variants=variants)
    return reduce_run(plan, fired(plan), triggers=TriggerSettings(min_recall=0.9))


def every_report(result: RunResult) -> dict[str, str]:
    out = {"complete": render_complete_block(result, REPORTS), "html": render_html(result)}
    out["junit"] = render_junit(result)
    out["run log"] = run_log_line(result, datetime(2026, 1, 1, tzinfo=UTC), "p", "main", "abc1234")
    for s in dict.fromkeys(s.skill for s in result.skills):
        out[f"md {s}"] = render_markdown(result, s, {})
    return out


def test_a_trigger_run_shows_no_behavioural_figure_in_any_report() -> None:
    runs = (trigger_run(), trigger_run(compare=False, models=(MODEL, "openai/gpt-4o")), trigger_run(("pdf",)))
    for result in runs:
        assert result.verdict is Verdict.FAIL  # recall 1/2 is below 90%
        for where, text in every_report(result).items():
            for behavioural in ("0/0", "AGGREGATE", "Pass rate by", "assertions passed", "Old vs new", "leaderboard"):
                assert behavioural not in text, (where, behavioural)
        page = render_html(result)
        # The trigger figures stand in their place: the trigger sets, then the figures.
        assert '<section id="triggers">' in page and "Trigger sets" in page
        for hidden in ('id="models"', 'id="comparisons"', 'id="heatmap"', 'id="quality"', 'id="overview"'):
            assert hidden not in page
        assert "1/2 (50.0%, 95% CI" in page
        # JUnit: the trigger suites only (every shard ended: no empty behavioural suite of 0 tests).
        suites = ET.fromstring(render_junit(result)).findall("testsuite")
        assert suites and all("[triggers:" in str(s.get("name")) and s.get("tests") != "0" for s in suites)


def test_a_trigger_shard_that_did_not_end_is_still_listed_with_its_detail() -> None:
    plan = plan_run(RUN, [trigger_bundle("pdf")], [MODEL])
    outcomes = fired(plan)
    lost = plan.shards[0]
    outcomes[lost.shard_id] = ShardOutcome(lost, ShardState.EXECUTOR_FAILED, detail="the proxy went away")
    result = reduce_run(plan, outcomes, triggers=TriggerSettings())
    assert "the proxy went away" in render_html(result)
    (suite, _) = ET.fromstring(render_junit(result)).findall("testsuite")
    assert suite.get("name") == "pdf[current]" and suite.get("errors") == "1"


def test_compare_shows_the_baseline_arms_own_figures_beside_the_current_ones() -> None:
    result = trigger_run(("pdf",))
    assert result.triggers is not None
    [base] = result.triggers.baselines[REF]
    assert (base.recall.hits, base.recall.total, base.false_trigger.hits) == (2, 2, 1)
    assert base.failed == []  # the baseline arm is reported, never gated
    md = render_markdown(result, "pdf", {})
    section = md[md.index("### Against the earlier description") :]
    rows = [line for line in section.splitlines() if line.startswith("| baseline") or line.startswith("| current")]
    assert rows == [
        f"| {REF} | {MODEL} (agent) | 2/2 (100.0%, 95% CI over queries 1.2-100.0%) | "
        "1/2 (50.0%, 95% CI over queries 0.2-99.8%) | 2/3 (66.7%, 95% CI over queries 4.4-98.9%) | "
        "80.0%, range 1.9-99.4% |",
        f"| current | {MODEL} (agent) | 1/2 (50.0%, 95% CI over queries 0.2-99.8%) | "
        "0/2 (0.0%, 95% CI over queries 0.0-98.8%) | 1/1 (100.0%, 95% CI over queries 0.0-100.0%) | "
        "66.7%, range 0.0-99.9% |",
    ]
    assert "- triggers pdf vs baseline@v1: recall -50.0 pts" in section
    assert json.loads(render_json(result, "pdf", {}))["triggers"]["baselines"][REF][0]["recall"]["hits"] == 2
    page = render_html(result)
    assert f'<td data-label="arm">{REF}</td>' in page and "triggers pdf vs baseline@v1: recall -50.0 pts" in page
    block = render_complete_block(result, REPORTS)
    assert f"triggers pdf ({MODEL}) [{REF}]: recall 2/2 (100.0%" in block
    assert f"triggers pdf ({MODEL}) [current]: recall 1/2 (50.0%" in block


def test_the_complete_block_names_each_arm_of_a_compared_trigger_run() -> None:
    lines = render_complete_block(trigger_run(("pdf",)), REPORTS).splitlines()
    assert [line for line in lines if line.startswith("skill: ")] == [
        "skill: pdf [current, triggers]  queries: 4",
        f"skill: pdf [{REF}, triggers]  queries: 4",
    ]


def test_a_failed_gate_is_the_rows_last_paragraph_not_an_item_of_the_missed_list() -> None:
    md = render_markdown(trigger_run(("pdf",), compare=False), "pdf", {})
    tokens = MarkdownIt().parse(md)
    inline = [(i, t) for i, t in enumerate(tokens) if t.type == "inline"]
    missed = next(i for i, t in inline if t.content.startswith("Missed positives"))
    [(at, gate)] = [(i, t) for i, t in inline if "gate failed" in t.content]
    assert gate.content == f"**gate failed:** pdf ({MODEL}): recall 1/2 (50.0%) is below 90%"
    assert tokens[at - 1].type == "paragraph_open" and tokens[at - 1].level == 0  # its own paragraph
    between = [t.type for t in tokens[missed:at]]
    assert "bullet_list_close" in between  # after the list it follows, not inside it
    row = md[md.index(f"### {MODEL}") : md.index("## Routing matrix")]
    assert row.rstrip().endswith("is below 90%")  # the verdict last


def test_a_trigger_shard_of_the_built_in_agent_says_the_skill_was_activated_when_it_fired() -> None:
    result = trigger_run(("pdf",), compare=False)
    (skill,) = result.skills
    activated = {r.case_id: r.skill_activated for r in skill.runs}
    assert activated == {1: True, 2: False, 3: False, 4: False}
    runs = json.loads(result.model_dump_json())["skills"][0]["runs"]
    assert [r["skill_activated"] for r in runs if r["case_id"] == 1] == [True]


def test_a_trigger_line_stored_without_the_activation_still_counts_it_from_what_fired() -> None:
    plan = plan_run(RUN, [trigger_bundle("pdf")], [MODEL])
    fold = StreamReducer(plan)
    for o in fired(plan).values():  # lines as written before they derived skill_activated
        fold.add(outcome_line_of(o).model_copy(update={"skill_activated": None}))
    (skill,) = fold.result(triggers=TriggerSettings()).skills
    assert skill.models[0].skill_activated == (1, 4)
