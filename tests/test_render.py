"""What the reports say: markdown, JSON, JUnit XML, the COMPLETE block and the 13-field run-log line. Pure."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from producer.plan.planning import plan_run
from reducer.render import (
    needs_transcript,
    render_json,
    render_markdown,
    run_log_line,
    transcript_name,
)
from reducer.render_junit import render_junit
from reducer.stream import reduce_run
from reducer.summary import render_complete_block
from schemas.corpus import Corpus, EvalCase
from schemas.outcome import CalibrationRecord, CalibrationStatus
from schemas.report import RunResult
from schemas.shard import RunPlan, Shard, SkillBundle
from schemas.shard_outcome import ShardOutcome
from schemas.status import SandboxMode, ShardState
from schemas.trajectory import Usage
from schemas.verdict import AssertionVerdict, JudgeAnswer, ShardGrade

S = ShardState
ASSERTIONS = ("The agent runs git diff before committing", "The agent never runs git push")


def bundle(skill: str, cases: int) -> SkillBundle:
    evals = tuple(
        EvalCase(id=i, prompt=f"p{i}", expected_output="-", files=(), assertions=ASSERTIONS)
        for i in range(1, cases + 1)
    )
    return SkillBundle(
        skill=skill,
        bundle_key=f"{skill}-0123456789ab",
        corpus_file=f"evals/{skill}.evals.json",
        corpus=Corpus(skill_name=skill, evals=evals),
    )


def graded(shard: Shard, passes: tuple[bool, ...], evidence: str = "[tool_call] shell(git diff)") -> ShardOutcome:
    verdicts = [
        AssertionVerdict(text=t, passed=p, evidence=evidence if p else f"absent: no call for '{t}'")
        for t, p in zip(ASSERTIONS, passes, strict=True)
    ]
    raw = json.dumps([v.model_dump(include={"text", "passed", "evidence"}) for v in verdicts])
    usage = Usage(prompt_tokens=100, completion_tokens=10, calls=1, cost_usd=0.002)
    judge = JudgeAnswer(
        judge="judge-1", state=S.GRADED, verdicts=verdicts, raw_answers=[raw], nonce="ab" * 8, usage=usage
    )
    grade = ShardGrade(shard_id=shard.shard_id, state=S.GRADED, verdicts=verdicts, judges=[judge])
    return ShardOutcome(
        shard,
        S.GRADED,
        grade=grade,
        sandbox=SandboxMode.BWRAP,
        end_reason="completed",
        usage=Usage(prompt_tokens=1000, completion_tokens=200, calls=4, cost_usd=0.01),
    )


def failed(shard: Shard, state: ShardState, detail: str) -> ShardOutcome:
    return ShardOutcome(shard, state, detail=detail, sandbox=SandboxMode.BWRAP)


@pytest.fixture(scope="module")
def plan() -> RunPlan:
    return plan_run(
        "20260102-030405-0a1b2c3d", [bundle("commit-message", 5), bundle("changelog", 2)], ["exec"], judges=["judge-1"]
    )


@pytest.fixture(scope="module")
def result(plan: RunPlan) -> RunResult:
    """commit-message: 3 graded (5/6 passed), 1 executor-failed, 1 blocked; changelog: 2 graded."""
    by = {(s.skill, s.case_id): s for s in plan.shards}
    outcomes = [
        graded(by["commit-message", 1], (True, True)),
        graded(by["commit-message", 2], (False, True)),
        graded(by["commit-message", 3], (True, True)),
        failed(by["commit-message", 4], S.EXECUTOR_FAILED, "executor-failed: exec: no completion after 6 attempts"),
        failed(by["commit-message", 5], S.BLOCKED, "BLOCKED_BAD_FIXTURE: case 5: fixtures[0].path escapes"),
        graded(by["changelog", 1], (True, True)),
        graded(by["changelog", 2], (True, True)),
    ]
    return reduce_run(
        plan,
        {o.shard.shard_id: o for o in outcomes},
        calibration={"judge-1": CalibrationRecord(judge="judge-1", status=CalibrationStatus.OK)},
    ).model_copy(update={"template_hashes": {"executor": "e" * 64, "grader": "g" * 64}})


META = {"sandbox": "bwrap", "models": "exec", "epochs": "1"}


# --- markdown ------------------------------------------------------------------------------------
def test_the_markdown_report_leads_with_the_headline_and_the_verdict(result: RunResult) -> None:
    md = render_markdown(result, "commit-message", META)
    assert md.startswith("# skill-eval: commit-message\n")
    assert "- verdict: **WARN**" in md  # 2 of 5 cases not graded: INCONCLUSIVE
    assert "## current: " in md


def test_the_markdown_report_shows_every_assertion_verdict_with_its_evidence(result: RunResult) -> None:
    md = render_markdown(result, "commit-message", META)
    assert "- **FAIL** The agent runs git diff before committing" in md
    assert "  - evidence: `absent: no call for 'The agent runs git diff before committing'`" in md
    assert md.count("- **PASS** ") == 5
    assert "  - evidence: `[tool_call] shell(git diff)`" in md  # quoted as code: renders as the same text


def test_the_markdown_report_lists_the_not_graded_by_kind_and_the_sandbox(result: RunResult) -> None:
    md = render_markdown(result, "commit-message", META)
    assert (
        "### Not graded (infra)\n\n- budget-exhausted: 0\n- executor-failed: 1\n"
        "- grader-dispatch-failed: 0\n- grader-malformed: 0" in md
    )
    assert "### Blocked\n\n- case 5 (exec, epoch 0): BLOCKED_BAD_FIXTURE: case 5: fixtures\\[0\\].path escapes" in md
    assert "- not graded: executor-failed: exec: no completion after 6 attempts" in md
    assert "Sandbox: bwrap." in md and "- sandbox: bwrap" in md


def test_a_corpus_with_two_of_five_cases_not_graded_is_inconclusive_in_every_report(result: RunResult) -> None:
    cm = next(s for s in result.skills if s.skill == "commit-message")
    assert cm.inconclusive and cm.headline == "INCONCLUSIVE (2/5 shards not graded — 1 infra, 1 blocked)"
    assert "## current: INCONCLUSIVE (2/5 shards not graded — 1 infra, 1 blocked)" in render_markdown(
        result, "commit-message", META
    )
    assert "## current: 4/4 (100.0%)" in render_markdown(result, "changelog", META)


# --- JSON ------------------------------------------------------------------------------------------
def test_the_json_report_keeps_raw_judge_arrays_statuses_template_hashes_and_usage(result: RunResult) -> None:
    doc = json.loads(render_json(result, "commit-message", {**META, "branch": "main"}))
    assert doc["run_id"] == "20260102-030405-0a1b2c3d" and doc["skill"] == "commit-message"
    assert doc["nonce_fenced"] is True and doc["meta"]["branch"] == "main"
    assert doc["template_hashes"] == {"executor": "e" * 64, "grader": "g" * 64}
    assert doc["calibration"] == {"judge-1": "ok"}
    (variant,) = doc["variants"]  # only this skill's parts
    assert [r["state"] for r in variant["runs"]] == ["graded", "graded", "graded", "executor-failed", "blocked"]
    raw = json.loads(variant["runs"][1]["judges"][0]["raw_answers"][0])
    assert raw[0] == {"text": ASSERTIONS[0], "passed": False, "evidence": f"absent: no call for '{ASSERTIONS[0]}'"}
    # Usage per model of this corpus alone: its 3 graded executor shards (4 calls each) and their judge calls.
    assert doc["usage"]["exec"]["calls"] == 12 and doc["usage"]["judge-1"]["calls"] == 3
    assert doc["usage"]["judge-1"]["cost_usd"] == pytest.approx(0.006)
    other = json.loads(render_json(result, "changelog", META))["usage"]
    # The two corpora's usage adds up to the run's, which neither report claims alone.
    assert other["exec"]["calls"] + 12 == result.usage["exec"].calls == 20
    assert other["judge-1"]["calls"] + 3 == result.usage["judge-1"].calls == 5


# --- JUnit ---------------------------------------------------------------------------------------
def test_the_junit_report_parses_with_the_right_counts(result: RunResult) -> None:
    root = ET.fromstring(render_junit(result))
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert set(suites) == {"commit-message[current]", "changelog[current]"}
    cm = suites["commit-message[current]"]
    # commit-message is INCONCLUSIVE: infra failures stay errors, its graded verdicts are skipped.
    assert (cm.get("tests"), cm.get("failures"), cm.get("errors"), cm.get("skipped")) == ("8", "0", "2", "6")
    assert len(cm.findall("testcase")) == 8 and len(cm.findall("testcase/failure")) == 0
    assert [e.get("message") for e in cm.findall("testcase/error")] == ["executor-failed", "blocked"]
    assert {e.get("message", "").split(" (")[0] for e in cm.findall("testcase/skipped")} == {
        "INCONCLUSIVE: INCONCLUSIVE"
    }
    cl = suites["changelog[current]"]
    assert (cl.get("tests"), cl.get("failures"), cl.get("errors")) == ("4", "0", "0")


def test_a_shard_that_never_finished_is_a_skipped_testcase_not_an_error(plan: RunPlan) -> None:
    shard = plan.shards[0]
    partial = reduce_run(plan, {shard.shard_id: graded(shard, (True, True))})
    suite = ET.fromstring(render_junit(partial)).find("testsuite")
    assert suite is not None
    # three shards never finished, and the run is INCONCLUSIVE, so the graded one's two verdicts skip too
    assert suite.get("errors") == "0" and suite.get("skipped") == "6"
    assert len(suite.findall("testcase/skipped")) == 6


@given(evidence=st.text(max_size=40), detail=st.text(max_size=40))
def test_the_junit_report_parses_whatever_a_transcript_quoted(evidence: str, detail: str) -> None:
    plan = plan_run("20260102-030405-0a1b2c3d", [bundle("s", 2)], ["m"], judges=["j"])
    one, two = plan.shards
    outcomes = {
        one.shard_id: graded(one, (True, False), evidence=evidence or "x"),
        two.shard_id: failed(two, S.GRADER_MALFORMED, detail),
    }
    root = ET.fromstring(render_junit(reduce_run(plan, outcomes)))
    assert len(root.findall("testsuite/testcase")) == 3


# --- COMPLETE block, run-log line, transcripts ---------------------------------------------------
def test_the_complete_block_names_cases_rates_the_infra_tally_failures_and_paths(result: RunResult) -> None:
    block = render_complete_block(result, ["zuvo/reports/a.md", "zuvo/reports/a.json"])
    lines = block.splitlines()
    assert lines[:3] == ["SKILL-EVAL COMPLETE", "run: 20260102-030405-0a1b2c3d", "threshold: 1.0 (default)"]
    assert (
        "skill: commit-message [current]  cases: 5  result: INCONCLUSIVE (2/5 shards not graded — 1 infra, 1 blocked)"
        in lines
    )
    assert "  not graded (infra): executor-failed 1; blocked: 1" in lines
    assert f"  FAIL commit-message case 2 (exec e0): {ASSERTIONS[0]} -> absent: no call for '{ASSERTIONS[0]}'" in lines
    assert "AGGREGATE: INCONCLUSIVE (1/2 corpora not trustworthy)" in lines
    assert lines[-2:] == ["reports: zuvo/reports/ (2 files: md and json per corpus, JUnit, HTML)", "verdict: WARN"]
    written = ["r/a.md", "r/a.json", "r/a-case2-transcript.txt", "r/a-case3-transcript.txt", "r/run.html", "r/run.xml"]
    counted = render_complete_block(result, written).splitlines()[-3]
    assert counted == "reports: r/ (6 files: md and json per corpus, 2 failing-case transcripts, JUnit, HTML)"
    one = render_complete_block(result, ["r/a.md", "r/a.json", "r/a-case2-transcript.txt"]).splitlines()[-2]
    assert one == "reports: r/ (3 files: md and json per corpus, 1 failing-case transcript, JUnit, HTML)"


def test_the_run_log_line_has_the_contracts_13_fields_in_order(result: RunResult) -> None:
    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    line = run_log_line(result, when, "my-project", "main", "abc1234")
    assert line.endswith("\n") and line.count("\n") == 1
    fields = line.rstrip("\n").split("\t")
    assert len(fields) == 13
    assert fields[0] == "Run: 2026-01-02T03:04:05Z"
    assert fields[1:8] == ["skill-eval", "my-project", "-", "-", "WARN", "-", "7-cases"]
    assert fields[8] == (
        "commit-message=INCONCLUSIVE (2/5 shards not graded — 1 infra, 1 blocked); changelog=4/4 (100.0%) PASS"
    )
    assert fields[9:] == ["main", "abc1234", "-", "-"]


def test_the_run_log_line_stays_13_fields_whatever_the_names_hold(result: RunResult) -> None:
    odd = result.model_copy(update={"skills": [s.model_copy(update={"headline": "a\tb\nc"}) for s in result.skills]})
    line = run_log_line(odd, datetime(2026, 1, 2, tzinfo=UTC), "pro\tject", "", "")
    fields = line.rstrip("\n").split("\t")
    assert len(fields) == 13 and "\n" not in line.rstrip("\n")
    assert fields[9:11] == ["-", "-"]


def test_only_failing_or_not_graded_shards_keep_a_transcript_and_names_follow_the_contract(result: RunResult) -> None:
    cm = next(s for s in result.skills if s.skill == "commit-message")
    kept = [r.case_id for r in cm.runs if needs_transcript(r)]
    assert kept == [2, 4, 5]
    run = cm.runs[1]
    assert transcript_name("commit-message", result.run_id, run, unique_case=True) == (
        "skill-eval-commit-message-20260102-030405-0a1b2c3d-case2-transcript.txt"
    )
    named = transcript_name("commit-message", result.run_id, run.model_copy(update={"model": "openai/gpt-4.1"}), False)
    assert re.fullmatch(r"skill-eval-commit-message-\S+-case2-openai_gpt-4\.1-e0-transcript\.txt", named)


def test_the_markdown_report_has_one_table_per_executor_model() -> None:
    two = plan_run("20260102-030405-0a1b2c3d", [bundle("s", 2)], ["exec-a", "exec-b"], judges=["j"])
    outcomes = {}
    for shard in two.shards:
        ok = shard.model == "exec-a"
        outcomes[shard.shard_id] = graded(shard, (ok, True))
    md = render_markdown(reduce_run(two, outcomes), "s", META)
    table_a = md.split("#### exec-a\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert table_a == [
        "| case | epoch | state | assertions passed | composite |",
        "|---|---|---|---|---|",
        "| 1 | 0 | graded | 2/2 | 100.0% |",
        "| 2 | 0 | graded | 2/2 | 100.0% |",
    ]
    assert "| 1 | 0 | graded | 1/2 | 50.0% |" in md.split("#### exec-b\n\n", 1)[1]
    assert "| case | assertion | exec-a | exec-b | pass@k | pass^k |" in md


def test_the_failing_assertions_line_counts_one_failed_verdict_in_the_singular() -> None:
    from reducer.summary import render_complete_block
    from tests.test_reducer import bundle, outcomes_for, plan_for, reduce

    plan = plan_for([bundle("s", [1, 1])])
    block = render_complete_block(reduce(plan, outcomes_for(plan, {1: [True], 2: [False]})), [])
    assert "failing assertions: 1 distinct, 1 failed verdict; most frequent first:" in block
