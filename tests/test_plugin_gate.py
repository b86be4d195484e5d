"""What decides a Claude Code plugin eval suite, and what every report says decided it. Pure.

A plugin eval suite is judged by its case scores against the case threshold (``--threshold``,
else the run's threshold); its assertions' pass rate decides nothing, so no line may put a
pass-rate threshold beside its PASS (81.8% "at or above the threshold 0.9" was printed). A run of
plugin suites only refuses ``--fail-under`` beside ``--threshold``: it would gate nothing. The
evidence statistic counts only judged passes (a deterministic check's evidence is the run's own).
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from datetime import UTC, datetime

import pytest

from producer.plan.planning import plan_run
from producer.plan.prechecks import check_plugin_threshold
from reducer.render import evidence_sentence, render_json, render_markdown, run_log_line
from reducer.render_html import render_html
from reducer.render_junit import render_junit
from reducer.stream import reduce_run
from reducer.summary import render_complete_block
from reducer.threshold import plugin_basis, rule_sentence, score_against, threshold_text
from schemas.errors import ConfigError
from schemas.report import PluginCaseScore, PluginSuiteScore, RunResult
from schemas.shard import Shard, SkillBundle
from schemas.shard_outcome import ShardOutcome
from schemas.status import ShardState, Verdict
from schemas.verdict import AssertionVerdict, ShardGrade
from tests.test_render import ASSERTIONS, bundle
from viewer.run_figures import plugin_note, plugin_view

RUN = "20260102-030405-0a1b2c3d"
MODEL = "exec"
PLUGIN = "evals/*/ [plugin suite: forecast]"


def plugin_bundle() -> SkillBundle:
    """Two cases of two assertions each, as the interop loader names a plugin eval suite."""
    return bundle("forecast", 2).model_copy(update={"corpus_file": PLUGIN})


def outcome(shard: Shard, passes: tuple[bool, ...], verified: tuple[bool | None, ...] = (None, None)) -> ShardOutcome:
    """A graded shard: a pass whose ``verified`` is None is a deterministic check's (no quote to look up)."""
    verdicts = [
        AssertionVerdict(
            text=t,
            passed=p,
            evidence="[tool_call] shell(git diff)" if p else "absent: no call",
            evidence_verified=v if p else None,
            check="deterministic" if v is None else "judge",
        )
        for t, p, v in zip(ASSERTIONS, passes, verified, strict=True)
    ]
    grade = ShardGrade(shard_id=shard.shard_id, state=ShardState.GRADED, verdicts=verdicts)
    return ShardOutcome(shard, ShardState.GRADED, grade=grade)


def run(*, ordinary: bool = False, **options: object) -> RunResult:
    """The plugin suite scoring 0.5 on case 1 and 1.0 on case 2 (3/4 assertions: 75%), and when
    ``ordinary`` another corpus passing every assertion."""
    bundles = [plugin_bundle(), *([bundle("review", 2)] if ordinary else [])]
    plan = plan_run(RUN, bundles, [MODEL], judges=["judge-1"])
    passes = {1: (True, False), 2: (True, True)}
    outcomes = {
        s.shard_id: outcome(s, passes[s.case_id] if s.skill == "forecast" else (True, True)) for s in plan.shards
    }
    return reduce_run(plan, outcomes, **options)


def every_surface(result: RunResult) -> dict[str, str]:
    meta = {"models": MODEL}
    return {
        "complete": render_complete_block(result, []),
        "md": render_markdown(result, "forecast", meta),
        "json": render_json(result, "forecast", meta),
        "html": render_html(result, {}),
        "junit": render_junit(result),
    }


# --- what decides, and the reasons ------------------------------------------------------------------
def test_a_plugin_suite_passed_by_its_case_scores_names_no_pass_rate_threshold_anywhere() -> None:
    result = run(plugin_threshold=0.5)
    assert result.verdict is Verdict.PASS
    [suite] = result.skills
    assert (suite.headline, suite.verdict) == ("3/4 (75.0%)", "PASS")
    assert result.reasons == ["all corpora graded; every plugin eval case's score at or above --threshold 0.5"]
    assert threshold_text(result) == "threshold 0.5 (--threshold) on every plugin eval case's score"
    basis = f"every plugin eval case at or above --threshold 0.5; lowest: case 1, 0.500 with {MODEL}"
    surfaces = every_surface(result)
    for name, text in surfaces.items():
        # The run's own threshold (1.0, default) applies to no corpus of this run: never named.
        assert "threshold 1.0" not in text and "1.0 (default)" not in text, name
        assert "behavioural pass rate reaches" not in text, name
    block = surfaces["complete"].splitlines()
    assert "threshold: 0.5 (--threshold) on every plugin eval case's score" in block
    assert f"skill: forecast [current]  cases: 2  result: 3/4 (75.0%)  PASS ({basis})" in block
    assert f"## current: 3/4 (75.0%) — PASS ({basis})" in surfaces["md"]
    notes = run_log_line(result, datetime(2026, 1, 2, tzinfo=UTC), "p", "main", "abc1234").split("\t")[8]
    assert notes == f"forecast=3/4 (75.0%) PASS ({basis})"
    doc = json.loads(surfaces["json"])
    assert doc["variants"][0]["verdict_basis"] == basis
    assert doc["threshold"]["text"] == "threshold 0.5 (--threshold) on every plugin eval case's score"
    assert (
        "A plugin eval suite passes when every case&#x27;s score, per executor model, reaches --threshold 0.5"
        in (surfaces["html"])
    )
    assert f'<p class="plugin-gate"><b>PASS</b>: {basis}</p>' in surfaces["html"]
    props = {p.get("name"): p.get("value") for p in ET.fromstring(surfaces["junit"]).iter("property")}
    assert props["threshold"] == "0.5 (--threshold) on every plugin eval case's score"
    assert props["verdict_basis"] == basis
    assert (props[f"plugin_eval.{MODEL}.suite"], props[f"plugin_eval.{MODEL}.case1"]) == ("0.75", "0.5")


def test_a_plugin_suite_below_its_case_threshold_fails_and_no_surface_shows_its_pass() -> None:
    # --fail-under alone is what every case must score: case 1's 0.5 is below 0.7, whatever the 75%.
    result = run(fail_under=0.7)
    assert result.verdict is Verdict.FAIL
    assert result.reasons == [
        f"forecast: plugin eval case 1 scores 0.500 with {MODEL}, below the threshold 0.7 (--fail-under)"
    ]
    assert threshold_text(result) == "threshold 0.7 (--fail-under) on every plugin eval case's score"
    surfaces = every_surface(result)
    basis = f"a plugin eval case below the threshold 0.7 (--fail-under); lowest: case 1, 0.500 with {MODEL}"
    assert f"result: 3/4 (75.0%)  FAIL ({basis})" in surfaces["complete"]
    shown_pass = ("PASS (", "  PASS", "— PASS", "verdict: PASS", "verdict PASS", "small PASS", 'value="PASS"', '"PASS"')
    for name, text in surfaces.items():
        assert not [p for p in shown_pass if p in text], name
        assert "at or above the threshold 0.7" not in text, name


def test_a_mixed_run_says_which_threshold_decided_which_corpus() -> None:
    result = run(ordinary=True, plugin_threshold=0.5, fail_under=0.9)
    assert result.verdict is Verdict.PASS
    assert result.reasons == [
        "all corpora graded; every plugin eval case's score at or above --threshold 0.5 and every other "
        "corpus's pass rate at or above the threshold 0.9 (--fail-under)"
    ]
    assert threshold_text(result) == (
        "threshold 0.9 (--fail-under) on pass rates; 0.5 (--threshold) on every plugin eval case's score"
    )
    block = render_complete_block(result, []).splitlines()
    assert "skill: review [current]  cases: 2  result: 4/4 (100.0%)  PASS" in block
    assert any(
        line.startswith("skill: forecast [current]") and "PASS (every plugin eval case at or" in line for line in block
    )
    props = {
        suite.get("name"): {p.get("name"): p.get("value") for p in suite.iter("property")}
        for suite in ET.fromstring(render_junit(result)).iter("testsuite")
    }
    assert props["review[current]"]["threshold"] == "0.9 (--fail-under)"
    assert props["forecast[current]"]["threshold"] == "0.5 (--threshold) on every plugin eval case's score"
    # Without --threshold the one threshold applies to both, and says so.
    both = run(ordinary=True, fail_under=0.5)
    assert threshold_text(both) == "threshold 0.5 (--fail-under) on pass rates and on every plugin eval case's score"
    assert both.reasons == [
        "all corpora graded; every plugin eval case's score at or above the threshold 0.5 (--fail-under) and every "
        "other corpus's pass rate at or above the threshold 0.5 (--fail-under)"
    ]


def test_a_fail_under_that_gated_nothing_says_so_when_the_ordinary_corpus_was_skipped() -> None:
    skipped = ["BLOCKED_BAD_CORPUS: evals/review.evals.json: evals: expected an array"]
    result = run(plugin_threshold=0.5, fail_under=0.9, skipped=skipped)
    text = (
        "threshold 0.5 (--threshold) on every plugin eval case's score; "
        "0.9 (--fail-under) on nothing: no corpus of this run is gated by its pass rate"
    )
    assert threshold_text(result) == text
    doc = json.loads(render_json(result, "forecast", {}))
    assert doc["threshold"] == {
        "value": 0.9,
        "source": "--fail-under",
        "plugin_eval_cases": 0.5,
        "applies_to": [],
        "text": text,
    }
    assert "threshold: 0.5 (--threshold) on every plugin eval case's score; 0.9 (--fail-under) on nothing" in (
        render_complete_block(result, [])
    )
    # What the run's threshold did gate, when it gated something.
    assert json.loads(render_json(run(fail_under=0.7), "forecast", {}))["threshold"]["applies_to"] == [
        "plugin eval case scores"
    ]
    mixed = json.loads(render_json(run(ordinary=True, plugin_threshold=0.5, fail_under=0.9), "forecast", {}))
    assert mixed["threshold"]["applies_to"] == ["pass rates"]


def test_a_run_without_a_plugin_suite_reads_as_it_did() -> None:
    plan = plan_run(RUN, [bundle("review", 2)], [MODEL], judges=["judge-1"])
    result = reduce_run(plan, {s.shard_id: outcome(s, (True, False)) for s in plan.shards}, fail_under=0.5)
    assert threshold_text(result) == "threshold 0.5 (--fail-under)"
    assert result.reasons == ["all corpora graded and at or above the threshold 0.5 (--fail-under)"]
    assert "text" not in json.loads(render_json(result, "review", {}))["threshold"]
    assert rule_sentence(True, False, 0.5, "--fail-under", None) == ""


def test_the_basis_is_the_lowest_case_over_every_model_compared_as_the_verdict_is() -> None:
    def suite(model: str, *scores: float | None) -> PluginSuiteScore:
        cases = [PluginCaseScore(case_id=i, runs=1, score=s) for i, s in enumerate(scores, start=1)]
        return PluginSuiteScore(model=model, score=None, cases=cases)

    scores = [suite("a", 1.0, 0.9), suite("b", None, 0.1 + 0.2)]
    assert plugin_basis(scores, 0.3, "--threshold 0.3") == (
        "every plugin eval case at or above --threshold 0.3; lowest: case 2, 0.300 with b"
    )
    assert plugin_basis(scores, 0.31, "--threshold 0.31").startswith("a plugin eval case below --threshold 0.31")
    assert plugin_basis([suite("a", None)], 1.0, "x") == "no plugin eval case scored; each must reach x"
    # A score just below the threshold is never shown as the threshold itself.
    assert plugin_basis([suite("a", 0.2996)], 0.3, "--threshold 0.3").endswith("lowest: case 1, 0.299600 with a")
    assert score_against(0.2996, 0.3) == "0.299600" and score_against(0.3004, 0.3) == "0.300"


# --- --fail-under beside --threshold ----------------------------------------------------------------
def test_fail_under_beside_threshold_is_refused_when_every_corpus_is_a_plugin_suite() -> None:
    with pytest.raises(ConfigError, match=r"--fail-under 0\.9: every corpus of this run is a Claude Code plugin"):
        check_plugin_threshold(0.3, [PLUGIN], 0.9)
    check_plugin_threshold(0.3, [PLUGIN, "evals/review.evals.json"], 0.9)  # it gates the other corpus
    check_plugin_threshold(None, [PLUGIN], 0.9)  # alone, it is the case threshold
    check_plugin_threshold(0.3, [PLUGIN], None)


# --- evidence ---------------------------------------------------------------------------------------
def test_the_evidence_figure_counts_judged_passes_and_says_so() -> None:
    plan = plan_run(RUN, [bundle("review", 2)], [MODEL], judges=["judge-1"])
    outcomes = {
        s.shard_id: outcome(s, (True, True), (None, True) if s.case_id == 1 else (None, False)) for s in plan.shards
    }
    [s] = reduce_run(plan, outcomes).skills
    assert (s.evidence_verified_share, s.evidence_checked, s.behavioural.passed) == (0.5, 2, 4)
    assert evidence_sentence(s) == (
        "Evidence a judge quoted was found in a tool call or result for 1/2 judged passes (50.0%); "
        "the other 2 passes were not looked up (a deterministic check reads the run itself)."
    )
    assert "Evidence found in the transcript" not in render_markdown(reduce_run(plan, outcomes), "review", {})
    # A result stored before the count was kept still says what it counted.
    old = s.model_copy(update={"evidence_checked": None})
    assert evidence_sentence(old) == (
        "Evidence a judge quoted was found in a tool call or result for 50.0% of the judged passes checked."
    )


# --- the viewer's section ---------------------------------------------------------------------------
def test_the_viewer_section_shows_every_score_against_the_case_threshold() -> None:
    result = json.loads(run(ordinary=True, plugin_threshold=0.6, fail_under=0.9).model_dump_json())
    view = plugin_view(result, RUN)
    assert view is not None
    assert view["bar"] == "--threshold 0.6"
    assert view["rule"].startswith("A corpus passes when its behavioural pass rate reaches the threshold 0.9")
    [suite] = view["suites"]
    assert (suite["skill"], suite["verdict"]) == ("forecast", "FAIL")
    assert suite["basis"] == f"a plugin eval case below --threshold 0.6; lowest: case 1, 0.500 with {MODEL}"
    [m] = suite["models"]
    assert (m["model"], m["score"]) == (MODEL, "0.750")
    assert [(c["case_id"], c["score"], c["runs"], c["mark"]) for c in m["cases"]] == [
        (1, "0.500", 1, "below"),
        (2, "1.000", 1, "met"),
    ]
    assert plugin_note(result["skills"][0], result) == f" — FAIL: {suite['basis']}"
    assert plugin_note(result["skills"][1], result) == ""  # the other corpus: its rate decided
    ordinary = reduce_run(plan_run(RUN, [bundle("r", 2)], [MODEL]), {})
    assert plugin_view(json.loads(ordinary.model_dump_json()), RUN) is None
