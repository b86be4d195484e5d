"""Plugin eval's focused llm graders and baseline graders, judged over real HTTP (GatedModelClient ->
offline model server): their own PASS/FAIL prompt, three votes each, a majority, the judge seeing only
what the grader names and never another assertion."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from producer.corpus.repo import Repo
from producer.corpus.validation import validate_corpus
from prompts import load_template
from schemas.checks_focus import BaselineCheck, FocusedCheck
from schemas.corpus import Assertion
from schemas.errors import BadCorpus
from schemas.status import ShardState
from schemas.trajectory import AssistantEvent, Trajectory
from testkit.offline_server import OfflineModelServer
from tests.grading_support import HONEST_JUDGE_RULES, JUDGE, good_trajectory, prompt_of, shell
from tests.model_support import server_fixtures
from tests.test_interop import plugin_repo
from worker.grading.focus import Ballots, parse_vote, tally
from worker.grading.judge import grade_trajectory
from worker.models.client import GatedModelClient

pytestmark = pytest.mark.filterwarnings("ignore:Item.*ReadOnly:UserWarning")
SECOND = "This is a second attempt"
FORECAST_RULE = {"assertion_contains": "forecast for Paris", "transcript_regex": r"sunny"}


def scenario(rules: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"rules": [*(rules or []), {"name": "judge", "judge": True}], "judge": [*HONEST_JUDGE_RULES, FORECAST_RULE]}


server, scripted, client = server_fixtures(scenario)

CRITERION = "The final message reports the forecast for Paris"


def weather_run(final: str = "The forecast for Paris is sunny.", tool_output: str = "paris: cloudy") -> Trajectory:
    events = [
        *shell("1", "weather paris", tool_output),
        AssistantEvent(text=final),
    ]
    return Trajectory(skill="weather", case_id=1, model="scripted-exec", events=events)


def grade(client: GatedModelClient, assertions: list[Assertion], trajectory: Trajectory, judges=(JUDGE,)):  # type: ignore[no-untyped-def]
    return grade_trajectory(client, judges, assertions, trajectory, skill="weather")


def votes(scripted: OfflineModelServer) -> list[str]:
    return [prompt_of(r) for r in scripted.requests() if "Respond with exactly one word" in prompt_of(r)]


def test_a_last_message_focus_is_three_votes_on_the_final_message_alone(
    client: GatedModelClient, scripted: OfflineModelServer
) -> None:
    assertions: list[Assertion] = ["The agent runs git diff before committing", FocusedCheck(text=CRITERION)]
    result = grade(client, assertions, weather_run())
    assert result.state is ShardState.GRADED
    batch, focused = result.verdicts
    assert not batch.passed and focused.passed and focused.check == "judge"
    assert focused.note == f"votes: {JUDGE}: PASS, PASS, PASS"
    assert focused.evidence.startswith("3 of 3 votes PASS")
    prompts = votes(scripted)
    assert len(prompts) == 3 and len(set(prompts)) == 3  # a fresh nonce for every vote
    for prompt in prompts:
        assert "The forecast for Paris is sunny." in prompt and "weather paris" not in prompt
        assert "git diff" not in prompt  # the vote never sees the batch's assertions
    (batch_prompt,) = [prompt_of(r) for r in scripted.requests() if prompt_of(r) not in prompts]
    assert CRITERION not in batch_prompt  # nor the batch judge the vote's criterion
    assert result.template_hashes["judge-focus"] == load_template("judge-focus").sha256
    (answer,) = result.judges
    assert answer.usage.calls == 4 and answer.raw_answers[1:] == ["PASS", "PASS", "PASS"]


def test_the_focus_decides_what_the_judge_reads(client: GatedModelClient) -> None:
    run = weather_run(final="Done.", tool_output="paris: sunny")
    by_focus = {
        focus: grade(client, [FocusedCheck(text=CRITERION, focus=focus)], run).verdicts[0].passed
        for focus in ("last_message", "trace")
    }
    assert by_focus == {"last_message": False, "trace": True}
    files = run.model_copy(update={"final_files": {"out/report.md": "Paris: sunny"}})
    assert grade(client, [FocusedCheck(text=CRITERION, focus="files")], files).verdicts[0].passed
    only = FocusedCheck(text=CRITERION, focus="file", path="out/other.md")
    failed = grade(client, [only], files).verdicts[0]
    assert not failed.passed and failed.evidence.startswith("absent: 0 of 3 votes PASS")


def test_a_baseline_vote_reads_the_reference_and_the_new_trace(
    client: GatedModelClient, scripted: OfflineModelServer
) -> None:
    reference = "\n".join(
        json.dumps(m)
        for m in (
            {"type": "user", "message": {"role": "user", "content": "Weather in Paris?"}},
            {"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": "cloudy"}]}},
        )
    )
    check = BaselineCheck(text=CRITERION, reference=reference, reference_file="evals/w/base.jsonl", weight=2.0)
    result = grade(client, [check], weather_run(tool_output="paris: sunny"))
    (verdict,) = result.verdicts
    assert verdict.passed and verdict.weight == 2.0 and "evals/w/base.jsonl" in verdict.evidence
    (prompt, *_) = votes(scripted)
    assert "[baseline user] Weather in Paris?" in prompt and "[baseline assistant] cloudy" in prompt
    assert prompt.index("cloudy") < prompt.index("[tool_call] shell")  # the reference comes first
    assert set(result.template_hashes) == {"grader", "judge-baseline"}


def test_an_unreadable_vote_is_re_asked_once_then_counts(
    client: GatedModelClient, scripted: OfflineModelServer
) -> None:
    scripted.set_scenario(
        scenario(
            [
                {"name": "re-ask", "contains": SECOND, "judge": True},
                {"name": "prose", "contains": "Criterion", "replies": [{"text": "I would say PASS."}]},
            ]
        )
    )
    result = grade(client, [FocusedCheck(text=CRITERION)], weather_run())
    assert result.state is ShardState.GRADED and result.verdicts[0].passed
    assert result.judges[0].raw_answers == ["I would say PASS.", "PASS"] * 3


def test_no_readable_vote_leaves_the_shard_ungraded(client: GatedModelClient, scripted: OfflineModelServer) -> None:
    scripted.set_scenario(scenario([{"name": "prose", "contains": "Criterion", "replies": [{"text": "PASS FAIL"}]}]))
    result = grade(client, ["The agent runs git diff before committing", FocusedCheck(text=CRITERION)], weather_run())
    assert result.state is ShardState.GRADER_MALFORMED and result.verdicts == []
    assert "assertion 2 (focused): no readable vote" in result.error
    assert len(scripted.requests()) == 6  # three votes, each re-asked; the batch judge is not asked


def test_two_judges_split_three_to_three_is_not_a_majority(
    client: GatedModelClient, scripted: OfflineModelServer
) -> None:
    scripted.set_scenario(
        scenario(
            [{"name": "naysayer", "model": "openai/judge-b", "contains": "Criterion", "replies": [{"text": "FAIL"}]}]
        )
    )
    result = grade(client, [FocusedCheck(text=CRITERION)], weather_run(), judges=("openai/judge-a", "openai/judge-b"))
    (verdict,) = result.verdicts
    assert (
        not verdict.passed
        and verdict.note == "votes: openai/judge-a: PASS, PASS, PASS; openai/judge-b: FAIL, FAIL, FAIL"
    )
    assert [a.judge for a in result.judges] == ["openai/judge-a", "openai/judge-b"]


@pytest.mark.parametrize(
    ("votes_cast", "passed"),
    [
        ([True, True, False], True),
        ([True, False, False], False),
        ([True, True, None], True),
        ([True, None, None], False),
    ],
)
def test_a_majority_of_three_passes(votes_cast: list[bool | None], passed: bool) -> None:
    verdict = tally(FocusedCheck(text=CRITERION), {JUDGE: Ballots(votes=votes_cast)})
    assert verdict is not None and verdict.passed is passed


@pytest.mark.parametrize(
    ("answer", "vote"),
    [
        ("PASS", True),
        (" **FAIL**.\n", False),
        ("`pass`", True),
        ("PASS\nFAIL", None),
        ('[{"passed": true}]', None),
        ("", None),
    ],
)
def test_only_one_word_is_a_vote(answer: str, vote: bool | None) -> None:
    assert parse_vote(answer) is vote


def test_a_trace_focus_fails_an_over_cap_run_without_asking(
    client: GatedModelClient, scripted: OfflineModelServer
) -> None:
    huge = good_trajectory(extra=[e for i in range(400) for e in shell(f"x{i}", "echo " + "y" * 400, "ok")])
    result = grade(client, [FocusedCheck(text=CRITERION, focus="trace")], huge)
    assert not result.verdicts[0].passed and "exceed" in result.verdicts[0].evidence
    assert scripted.requests() == []


# --- reading a suite's focused and baseline graders ---------------------------------------------
def test_a_suite_s_focused_and_baseline_graders_are_read_with_the_reference_run(tmp_path: Path) -> None:
    root = plugin_repo(tmp_path)
    case = root / "evals" / "greet-ada"
    reference = json.dumps({"role": "assistant", "content": "Hello, Ada!"}) + "\n"
    (case / "base.jsonl").write_text(reference)
    (case / "graders" / "ran.md").write_text("---\ntype: llm\nfocus: last_message\n---\nThe reply greets Ada\n")
    (case / "graders" / "vs.md").write_text(
        "---\ntype: baseline\nbaseline_file: base.jsonl\nweight: 2\n---\nThe agent greets Ada by name\n"
    )
    (case / "graders" / "file.md").write_text(
        "---\ntype: llm\nfocus: {source: file, path: ./out/hi.txt}\n---\nThe file greets Ada\n"
    )
    greet = Repo(root).load("evals/*/ [plugin suite: greeter]").corpus.evals[0]
    assert greet.assertions == (
        FocusedCheck(text="The file greets Ada", focus="file", path="out/hi.txt"),
        FocusedCheck(text="The reply greets Ada"),
        BaselineCheck(
            text="The agent greets Ada by name",
            reference=reference,
            reference_file="evals/greet-ada/base.jsonl",
            weight=2.0,
        ),
    )


def test_a_reference_run_that_is_not_json_lines_is_refused_by_name(tmp_path: Path) -> None:
    root = plugin_repo(tmp_path)
    case = root / "evals" / "greet-ada"
    (case / "base.jsonl").write_text("not json\n")
    (case / "graders" / "ran.md").write_text("---\ntype: baseline\nbaseline_file: base.jsonl\n---\nThe agent greets\n")
    with pytest.raises(BadCorpus, match=r"reference: \(evals/greet-ada/base.jsonl\) line 1 is not JSON"):
        Repo(root).load("evals/*/ [plugin suite: greeter]")


# --- a schema-v1 corpus writing the kinds directly -----------------------------------------------
def _corpus(assertion: dict[str, Any]) -> dict[str, Any]:
    case = {"id": 1, "prompt": "p", "expected_output": "e", "files": [], "assertions": [assertion]}
    other = {**case, "id": 2, "assertions": ["The agent runs the tests"]}
    return {"skill_name": "demo", "extensions": ["deterministic-assertions"], "evals": [case, other]}


def test_a_schema_v1_corpus_may_write_focused_and_baseline_checks() -> None:
    focused = {"kind": "focused", "text": CRITERION, "focus": "file", "path": "out\\report.md", "weight": 3}
    (check,) = validate_corpus(_corpus(focused), "evals/demo.evals.json", lambda _p: False).evals[0].assertions
    assert check == FocusedCheck(text=CRITERION, focus="file", path="out/report.md", weight=3.0)
    reference = '{"role": "assistant", "content": "hi"}\n'
    baseline = {"kind": "baseline", "text": CRITERION, "reference": reference, "reference_file": "runs/a.jsonl"}
    (check,) = validate_corpus(_corpus(baseline), "evals/demo.evals.json", lambda _p: False).evals[0].assertions
    assert isinstance(check, BaselineCheck) and check.reference == reference


@pytest.mark.parametrize(
    ("assertion", "message"),
    [
        ({"kind": "focused", "text": CRITERION, "focus": "diff"}, "assertions[0].focus: 'diff' is not one of"),
        ({"kind": "focused", "text": CRITERION, "focus": "file"}, "assertions[0].path: is required with focus file"),
        ({"kind": "focused", "text": CRITERION, "path": "a.md"}, "assertions[0].path: is required with focus file"),
        ({"kind": "focused", "text": CRITERION, "focus": "file", "path": "../x"}, "assertions[0].path: "),
        ({"kind": "focused", "text": " "}, "assertions[0].text: must be a non-blank"),
        (
            {"kind": "baseline", "text": CRITERION, "reference": "[1]\n", "reference_file": "r.jsonl"},
            "assertions[0].reference: (r.jsonl) line 1 is list",
        ),
        (
            {"kind": "baseline", "text": CRITERION, "reference": "", "reference_file": "r.jsonl"},
            "assertions[0].reference: (r.jsonl) holds no message",
        ),
        ({"kind": "baseline", "text": CRITERION, "reference": "{}"}, "missing key reference_file"),
    ],
)
def test_bad_values_are_named_by_field(assertion: dict[str, Any], message: str) -> None:
    with pytest.raises(BadCorpus) as info:
        validate_corpus(_corpus(assertion), "evals/demo.evals.json", lambda _p: False)
    assert message in str(info.value), str(info.value)


def test_the_kinds_cross_the_queue_as_json_and_come_back_equal() -> None:
    reference = '{"role": "assistant", "content": "hi"}\n'
    data = _corpus({"kind": "baseline", "text": CRITERION, "reference": reference, "reference_file": "r.jsonl"})
    data["evals"][1]["assertions"] = [{"kind": "focused", "text": CRITERION, "focus": "mock_calls"}]
    corpus = validate_corpus(data, "evals/demo.evals.json", lambda _p: False)
    assert type(corpus).model_validate_json(corpus.model_dump_json()) == corpus


def test_a_shards_votes_go_out_together(client: GatedModelClient, scripted: OfflineModelServer) -> None:
    # Every vote takes 1 s: one after the other, each would arrive after the previous replied.
    slow = {"name": "slow", "contains": "Criterion", "judge": True, "replies": [{"delay_s": 1.0}]}
    scripted.set_scenario(scenario([slow]))
    checks: list[Assertion] = [FocusedCheck(text=CRITERION), FocusedCheck(text="The agent runs weather paris")]
    result = grade(client, checks, weather_run())
    assert result.state is ShardState.GRADED
    spans = scripted.timeline()
    assert len(spans) == 6  # two assertions, three votes each
    assert max(arrived for arrived, _, _ in spans) < min(replied for _, replied, _ in spans)
    # read back in a fixed order whatever order they ended in
    assert [v.text for v in result.verdicts] == [CRITERION, "The agent runs weather paris"]
