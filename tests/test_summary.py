"""What a user reads first: the threshold in every report, a summary that ends with the verdict,
evidence quoted as code. Pure."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from producer.plan.planning import plan_run
from producer.results.reports import page_facts
from reducer.render import code, render_json, render_markdown, run_log_line
from reducer.render_html import render_html
from reducer.render_junit import render_junit
from reducer.stream import reduce_run
from reducer.summary import FAILURES_SHOWN, render_complete_block
from reducer.threshold import threshold_text
from schemas.manifest import RunManifest
from schemas.outcome import CalibrationRecord, CalibrationStatus
from schemas.report import RunResult
from schemas.shard_outcome import ShardOutcome
from schemas.status import ShardState, Verdict
from tests.test_render import ASSERTIONS, bundle, failed, graded

RUN = "20260102-030405-0a1b2c3d"
META = {"models": "exec"}


def review_run(passes: tuple[bool, bool], fail_under: float | None = None) -> RunResult:
    """One corpus of three cases, every shard graded with ``passes``."""
    plan = plan_run(RUN, [bundle("review", 3)], ["exec"], judges=["judge-1"])
    return reduce_run(plan, {s.shard_id: graded(s, passes) for s in plan.shards}, fail_under=fail_under)


# --- the threshold --------------------------------------------------------------------------------
def test_a_run_where_every_assertion_failed_fails_without_any_flag() -> None:
    result = review_run((False, False))
    assert result.verdict is Verdict.FAIL and result.verdict.exit_code == 1
    assert result.reasons == ["review: behavioural pass rate 0/6 (0.0%) is below the threshold 1.0 (default)"]
    assert result.skills[0].verdict == "FAIL"


def test_one_failed_assertion_fails_by_default_and_passes_under_a_lower_fail_under() -> None:
    strict = review_run((True, False))
    assert strict.verdict is Verdict.FAIL and threshold_text(strict) == "threshold 1.0 (default)"
    lowered = review_run((True, False), fail_under=0.5)
    assert lowered.verdict is Verdict.PASS and threshold_text(lowered) == "threshold 0.5 (--fail-under)"
    assert lowered.reasons == ["all corpora graded and at or above the threshold 0.5 (--fail-under)"]
    assert review_run((True, True)).verdict is Verdict.PASS  # every assertion passed: the default is met


def test_no_report_shows_pass_for_a_corpus_below_its_threshold() -> None:
    result = review_run((False, False))
    md = render_markdown(result, "review", META)
    assert "- threshold 1.0 (default)" in md
    assert "## current: 0/6 (0.0%) — FAIL (below threshold 1.0)" in md
    assert "**PASS**" not in md and "- verdict: **FAIL**" in md
    doc = json.loads(render_json(result, "review", META))
    assert doc["verdict"] == "FAIL" and doc["variants"][0]["verdict"] == "FAIL"
    assert doc["threshold"] == {"value": 1.0, "source": "default"}
    suite = ET.fromstring(render_junit(result)).find("testsuite")
    assert suite is not None
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["verdict"] == "FAIL" and props["threshold"] == "1.0 (default)"
    page = render_html(result)
    assert 'class="verdict PASS"' not in page and ">PASS<" not in page
    assert "threshold 1.0 (default)" in page
    block = render_complete_block(result, [])
    assert "threshold: 1.0 (default)" in block and "PASS" not in block
    assert "skill: review [current]  cases: 3  result: 0/6 (0.0%)  FAIL (below threshold 1.0)" in block
    fields = run_log_line(result, datetime(2026, 1, 2, tzinfo=UTC), "p", "main", "abc1234").split("\t")
    assert fields[5] == "FAIL" and fields[8] == "review=0/6 (0.0%) FAIL"


def test_a_corpus_at_its_lowered_threshold_passes_and_says_which_threshold() -> None:
    result = review_run((True, False), fail_under=0.5)
    md = render_markdown(result, "review", META)
    assert "- threshold 0.5 (--fail-under)" in md and "## current: 3/6 (50.0%) — PASS" in md
    assert "threshold 0.5 (--fail-under)" in render_html(result)


# --- contradictions --------------------------------------------------------------------------------
def test_a_corpus_whose_shards_were_blocked_says_blocked_in_its_headline_and_its_tally() -> None:
    plan = plan_run(RUN, [bundle("review", 2)], ["exec"], judges=["judge-1"])
    outcomes = {s.shard_id: failed(s, ShardState.BLOCKED, "BLOCKED_BAD_FIXTURE: x") for s in plan.shards}
    result = reduce_run(plan, outcomes)
    block = render_complete_block(result, [])
    assert "result: INCONCLUSIVE (2/2 shards not graded — 2 blocked)" in block
    assert "  not graded (infra): none; blocked: 2" in block
    assert "— infra)" not in block  # no headline blames the infra for blocked cases


def test_an_asked_for_calibration_is_in_the_block_whatever_the_verdict() -> None:
    plan = plan_run(RUN, [bundle("review", 3)], ["exec"], judges=["judge-1"])
    outcomes = {s.shard_id: graded(s, (True, False)) for s in plan.shards}
    wrong = CalibrationRecord(judge="judge-1", status=CalibrationStatus.FAILED, details=["labelled run: 1 wrong"])
    # A FAIL's reasons are the failures: the WARN naming the calibration is not among them.
    failing = reduce_run(plan, outcomes, calibration={"judge-1": wrong})
    assert failing.verdict is Verdict.FAIL and not any("calibration" in r for r in failing.reasons)
    lines = render_complete_block(failing, []).splitlines()
    assert "judge judge-1 calibration: failed: labelled run: 1 wrong" in lines
    assert lines[-1] == "verdict: FAIL"
    ok = CalibrationRecord(judge="judge-1", status=CalibrationStatus.OK)
    assert "judge judge-1 calibration: ok" in render_complete_block(
        reduce_run(plan, outcomes, calibration={"judge-1": ok}), []
    )
    # --no-calibration: not asked for, not listed.
    skipped = CalibrationRecord(judge="judge-1", status=CalibrationStatus.SKIPPED)
    assert "calibration" not in render_complete_block(reduce_run(plan, outcomes, calibration={"judge-1": skipped}), [])


def with_evidence(outcome: ShardOutcome, verified: tuple[bool | None, ...]) -> ShardOutcome:
    """``outcome`` with each verdict's evidence marked verified, unverified or not looked up (None)."""
    assert outcome.grade is not None
    verdicts = [
        v.model_copy(update={"evidence_verified": f}) for v, f in zip(outcome.grade.verdicts, verified, strict=True)
    ]
    return dataclasses.replace(outcome, grade=outcome.grade.model_copy(update={"verdicts": verdicts}))


def test_unverified_judged_passes_are_said_before_the_verdict_and_still_counted() -> None:
    plan = plan_run(RUN, [bundle("review", 3)], ["exec"], judges=["judge-1"])
    flags = [(True, False), (False, True), (True, None)]  # two passes quote prose; one was not looked up
    outcomes = {s.shard_id: with_evidence(graded(s, (True, True)), f) for s, f in zip(plan.shards, flags, strict=True)}
    result = reduce_run(plan, outcomes)
    assert result.verdict is Verdict.PASS  # the default counting is unchanged: they are passes
    lines = render_complete_block(result, []).splitlines()
    line = (
        "unverified passes: 2 of 5 judged passes quote no tool call or result "
        "(counted as passes; --strict-evidence fails them)"
    )
    assert line in lines and lines.index(line) < len(lines) - 1 and lines[-1] == "verdict: PASS"
    verified = {s.shard_id: with_evidence(graded(s, (True, True)), (True, True)) for s in plan.shards}
    assert "unverified passes" not in render_complete_block(reduce_run(plan, verified), [])


# --- the summary does not bury the verdict ----------------------------------------------------------
def sweep() -> tuple[RunResult, list[str]]:
    """26 corpora of 4 cases, 2 models: every case fails its first assertion on one model, and
    corpus s00's case 1 fails on both (the most frequent failure)."""
    bundles = [bundle(f"s{i:02d}", 4) for i in range(26)]
    plan = plan_run(RUN, bundles, ["exec-a", "exec-b"], judges=["judge-1"])
    outcomes: dict[str, ShardOutcome] = {}
    for s in plan.shards:
        fails = s.model == "exec-a" or (s.skill == "s00" and s.case_id == 1)
        outcomes[s.shard_id] = graded(s, (not fails, True))
    paths = [f"out/skill-eval-{b.skill}-{RUN}.{ext}" for b in bundles for ext in ("md", "json")]
    paths += [f"out/skill-eval-{RUN}.html", f"out/skill-eval-{RUN}.junit.xml"]
    return reduce_run(plan, outcomes), paths


def test_a_many_corpus_sweep_lists_a_screenful_of_failures_and_ends_with_the_verdict() -> None:
    result, paths = sweep()
    lines = render_complete_block(result, paths).splitlines()
    assert "verdict: FAIL" in lines[-15:] and lines[-1] == "verdict: FAIL"
    fails = [line for line in lines if line.startswith("  FAIL ")]
    assert len(fails) == FAILURES_SHOWN
    assert fails[0] == (
        f"  FAIL s00 case 1 (2 shards, e.g. exec-a e0): {ASSERTIONS[0]} -> absent: no call for '{ASSERTIONS[0]}'"
    )
    assert f"  and {26 * 4 - FAILURES_SHOWN} more: see out/skill-eval-{RUN}.html" in lines
    # The report files are summarised: their folder and the run's page, not one line per corpus.
    assert not any(line.startswith("report: ") for line in lines)
    assert f"page: out/skill-eval-{RUN}.html" in lines
    assert any(line.startswith("reports: out/ (54 files") for line in lines)
    # After the corpus lines, one screen: failures, at most five reasons, the reports, the verdict.
    last_corpus = max(i for i, line in enumerate(lines) if line.startswith("  not graded (infra)"))
    assert len(lines) - last_corpus <= 40
    assert f"and {26 - 5} more reasons: see out/skill-eval-{RUN}.html" in lines


# --- evidence quoted as code -------------------------------------------------------------------------
def inline_tokens(markdown: str) -> list:  # type: ignore[type-arg]
    tokens = MarkdownIt("commonmark").enable("table").parse(markdown)
    return [child for t in tokens for child in (t.children or [])]


def test_evidence_with_shell_and_regex_characters_is_quoted_as_code_not_entities() -> None:
    assert code("git add -A && git commit") == "`git add -A && git commit`"
    assert code("(?P<evidence>.*)") == "`(?P<evidence>.*)`"
    # The fence is longer than any run of backticks inside; a backtick at an end is padded.
    assert code("run `make` then ``x``") == "``` run `make` then ``x`` ```"
    assert code("line one\n# heading\r\n<script>") == "`line one # heading <script>`"
    assert code("  ") == "(none)"
    plan = plan_run(RUN, [bundle("review", 2)], ["exec"], judges=["judge-1"])
    outcomes = {
        s.shard_id: graded(s, (True, True), evidence="[tool_call] shell(make && make test)") for s in plan.shards
    }
    md = render_markdown(reduce_run(plan, outcomes), "review", META)
    assert "  - evidence: `[tool_call] shell(make && make test)`" in md and "&amp;" not in md


PRINTABLE = st.text(alphabet=st.sampled_from([*list("ab `\\<>&*_[]()|!#~-=:.'\"/\t"), "\xa0", "é"]), min_size=1)


@given(PRINTABLE.filter(lambda t: t.strip() != ""))
def test_any_evidence_renders_as_one_code_span_with_its_exact_text(text: str) -> None:
    rendered = code(text)
    children = inline_tokens(f"- evidence: {rendered}\n")
    kinds = [c.type for c in children]
    assert kinds == ["text", "code_inline"], (rendered, kinds)
    assert children[-1].content == text, rendered


def test_the_page_names_the_repo_commit_models_and_date_of_the_run() -> None:
    plan = plan_run(RUN, [bundle("review", 2)], ["exec-a", "exec-b"], judges=["judge-1"])
    manifest = RunManifest(plan=plan, snapshots={}, repo="/src/skills", branch="main", sha7="abc1234")
    facts = page_facts(manifest)
    assert facts["repo"] == "/src/skills" and facts["commit"] == "main @ abc1234"
    assert facts["models"] == "exec-a, exec-b" and facts["date"] == plan.created_at.strftime("%Y-%m-%d %H:%M UTC")
    result = reduce_run(plan, {s.shard_id: graded(s, (True, True)) for s in plan.shards})
    page = render_html(result, {}, facts)
    for value in ("/src/skills", "abc1234", "exec-b", facts["date"]):
        assert value in page.replace("<wbr>", "")


def test_run_help_says_the_threshold_and_its_strict_default() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "producer.commands.cli", "run", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "100", "NO_COLOR": "1"},
    )
    text = " ".join(done.stdout.replace("│", " ").split())
    assert done.returncode == 0 and "--fail-under" in text
    assert "A corpus passes when its behavioural pass rate reaches this threshold (0-1); FAIL below it." in text
    assert "Default 1.0: every assertion must pass." in text
