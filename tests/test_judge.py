"""Grading a shard over real HTTP (GatedModelClient -> offline model server): every outcome told apart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.labels import put_label
from engine.store import LocalStore
from prompts import load_template
from schemas.corpus import FileContainsCheck, ToolCallCheck
from schemas.label import HumanLabel
from schemas.manifest import trajectory_key
from schemas.status import ShardState
from testkit.judge import calibration_judge_rules as judge_rules
from testkit.offline_server import OfflineModelServer
from tests import grading_support
from tests.grading_support import (
    ASSERTIONS,
    JUDGE,
    fenced,
    good_trajectory,
    judge_scenario,
    prompt_of,
    sent_assertions,
    shell,
)
from worker.grading.calibration import CALIBRATION_CASES, calibrate, labelled_cases, load_case
from worker.grading.deterministic import check_assertion
from worker.grading.judge import REASK_DISPATCH, grade_trajectory
from worker.models.client import GatedModelClient

pytestmark = pytest.mark.filterwarnings("ignore:Item.*ReadOnly:UserWarning")
SECOND = "This is a second attempt"
server, scripted, client = grading_support.server, grading_support.scripted, grading_support.client


def grade(client: GatedModelClient, trajectory=None, assertions=ASSERTIONS, judges=(JUDGE,), **kw):  # type: ignore[no-untyped-def]
    return grade_trajectory(client, judges, assertions, trajectory or good_trajectory(), skill="commit-message", **kw)


def test_a_good_run_is_graded_with_verified_evidence_and_the_template_hash(
    client: GatedModelClient, scripted: OfflineModelServer
) -> None:
    result = grade(client, shard_id="shard-1")
    assert result.state is ShardState.GRADED and result.shard_id == "shard-1"
    assert [v.passed for v in result.verdicts] == [True, True, True]
    assert [v.text for v in result.verdicts] == ASSERTIONS
    assert [v.evidence_verified for v in result.verdicts] == [True, True, True]
    assert result.template_hashes == {"grader": load_template("grader").sha256}
    (answer,) = result.judges
    assert len(answer.raw_answers) == 1 and answer.usage.calls == 1
    (request,) = scripted.requests()
    nonce, transcript = fenced(request)
    assert nonce == answer.nonce
    assert "git commit -am 'fix: greeting punctuation'" in transcript
    assert sent_assertions(request) == ASSERTIONS
    assert request.get("tools") in (None, [])


def test_a_bad_run_fails_its_assertions_as_behaviour(client: GatedModelClient) -> None:
    bad = good_trajectory(extra=shell("9", "git push origin main", "To origin\n   main -> main"))
    result = grade(client, bad)
    assert result.state is ShardState.GRADED
    assert [v.passed for v in result.verdicts] == [True, True, False]
    assert "git push origin main" in result.verdicts[2].evidence


def test_a_malformed_answer_is_re_asked_once_with_a_fresh_nonce_and_the_reason(
    client: GatedModelClient, scripted: OfflineModelServer
) -> None:
    scripted.set_scenario(
        judge_scenario(
            [
                {"name": "re-ask", "contains": SECOND, "judge": True},
                {"name": "prose", "replies": [{"text": "Everything looks fine to me."}]},
            ]
        )
    )
    result = grade(client)
    assert result.state is ShardState.GRADED
    assert result.judges[0].raw_answers[0] == "Everything looks fine to me."
    assert len(result.judges[0].raw_answers) == 2
    first, second = scripted.requests()
    assert fenced(first)[0] != fenced(second)[0]
    assert "no JSON array" in second["messages"][1]["content"]


def test_malformed_twice_is_grader_malformed_with_every_raw_answer_kept(
    client: GatedModelClient, scripted: OfflineModelServer
) -> None:
    scripted.set_scenario(judge_scenario([{"name": "short", "replies": [{"verdicts": [{"text": "x"}]}]}]))
    result = grade(client)
    assert result.state is ShardState.GRADER_MALFORMED
    assert result.verdicts == []
    assert len(result.judges[0].raw_answers) == 2
    assert "wrong-length" in result.error
    assert len(scripted.requests()) == 2


def test_no_answer_twice_is_grader_dispatch_failed(client: GatedModelClient, scripted: OfflineModelServer) -> None:
    scripted.set_scenario(judge_scenario([{"name": "down", "replies": [{"status": 503}]}]))
    result = grade(client)
    assert result.state is ShardState.GRADER_DISPATCH_FAILED
    assert result.judges[0].raw_answers == []
    assert "no answer" in result.error
    assert len(scripted.requests()) == 4  # two asks, each with the client's two attempts
    assert scripted.requests()[2]["messages"][1]["content"] == REASK_DISPATCH


def test_no_answer_then_an_answer_is_graded(client: GatedModelClient, scripted: OfflineModelServer) -> None:
    scripted.set_scenario(
        judge_scenario([{"contains": SECOND, "judge": True}, {"name": "down", "replies": [{"status": 500}]}])
    )
    assert grade(client).state is ShardState.GRADED


def test_a_hanging_judge_times_out_into_grader_dispatch_failed(
    client: GatedModelClient, scripted: OfflineModelServer
) -> None:
    scripted.set_scenario(judge_scenario([{"name": "hang", "replies": [{"hang": True, "hang_s": 5}]}]))
    result = grade(client, timeout_s=0.3)
    assert result.state is ShardState.GRADER_DISPATCH_FAILED


def test_an_ensemble_takes_the_majority_and_reports_agreement(
    client: GatedModelClient, scripted: OfflineModelServer
) -> None:
    gullible = [{"text": a, "passed": True, "evidence": "git push origin main"} for a in ASSERTIONS]
    scripted.set_scenario(judge_scenario([{"model": "gullible", "replies": [{"verdicts": gullible}]}]))
    bad = good_trajectory(extra=shell("9", "git push origin main", "pushed"))
    result = grade(client, bad, judges=("openai/honest-a", "openai/gullible", "openai/honest-b"))
    assert [v.passed for v in result.verdicts] == [True, True, False]
    assert "split 1/3" in result.verdicts[2].note
    shares = {tuple(p.judges): p.share for p in result.agreement}
    assert shares[("openai/honest-a", "openai/honest-b")] == 1.0
    assert shares[("openai/gullible", "openai/honest-a")] == pytest.approx(2 / 3)
    assert result.unanimous_share == pytest.approx(2 / 3)


def test_an_ensembles_judges_are_asked_at_the_same_time(client: GatedModelClient, scripted: OfflineModelServer) -> None:
    # Every answer takes 1 s: one after the other, each judge would arrive after the previous replied.
    scripted.set_scenario(judge_scenario([{"judge": True, "replies": [{"delay_s": 1.0}]}]))
    result = grade(client, judges=("openai/honest-a", "openai/honest-b", "openai/honest-c"))
    assert result.state is ShardState.GRADED
    spans = scripted.timeline()
    assert len(spans) == 3
    assert max(arrived for arrived, _, _ in spans) < min(replied for _, replied, _ in spans)
    assert [a.judge for a in result.judges] == ["openai/honest-a", "openai/honest-b", "openai/honest-c"]


def test_one_failing_judge_does_not_sink_an_ensemble_but_is_recorded(
    client: GatedModelClient, scripted: OfflineModelServer
) -> None:
    scripted.set_scenario(judge_scenario([{"model": "broken", "replies": [{"text": "no"}]}]))
    result = grade(client, judges=("openai/honest-a", "openai/broken"))
    assert result.state is ShardState.GRADED
    assert [a.state for a in result.judges] == [ShardState.GRADED, ShardState.GRADER_MALFORMED]
    assert "openai/broken" in result.error


def test_strict_evidence_fails_a_pass_whose_quote_is_invented(
    client: GatedModelClient, scripted: OfflineModelServer
) -> None:
    invented = [{"text": a, "passed": True, "evidence": "pytest -q: 42 passed in 0.3s"} for a in ASSERTIONS]
    scripted.set_scenario(judge_scenario([{"replies": [{"verdicts": invented}]}]))
    lenient = grade(client)
    assert all(v.passed and v.evidence_verified is False for v in lenient.verdicts)
    assert lenient.evidence_verified_share == 0.0
    strict = grade(client, strict_evidence=True)
    assert not any(v.passed for v in strict.verdicts)
    assert all("strict evidence" in v.note for v in strict.verdicts)


def test_deterministic_assertions_are_checked_without_the_judge_and_merged_by_position(
    client: GatedModelClient, scripted: OfflineModelServer
) -> None:
    push = ToolCallCheck(text="No push call", pattern=r"git\s+push", tool="shell", absent=True)
    file = FileContainsCheck(text="Greeting file", path="src/greeting.py", pattern="Hello, ", weight=2)
    assertions = [ASSERTIONS[0], push, ASSERTIONS[1], file]
    result = grade(client, assertions=assertions)
    assert [v.text for v in result.verdicts] == [ASSERTIONS[0], "No push call", ASSERTIONS[1], "Greeting file"]
    assert [v.check for v in result.verdicts] == ["judge", "deterministic", "judge", "deterministic"]
    assert [v.passed for v in result.verdicts] == [True, True, True, False]  # no final files recorded
    (request,) = scripted.requests()
    assert sent_assertions(request) == [ASSERTIONS[0], ASSERTIONS[1]]


def test_only_deterministic_assertions_call_no_model(client: GatedModelClient, scripted: OfflineModelServer) -> None:
    push = ToolCallCheck(text="No push call", pattern=r"git\s+push", absent=True)
    result = grade(client, assertions=[push], judges=())
    assert result.state is ShardState.GRADED and result.verdicts[0].passed
    assert scripted.requests() == []


def test_judged_assertions_without_a_judge_are_refused(client: GatedModelClient) -> None:
    with pytest.raises(ValueError):
        grade(client, judges=())


def test_the_prompt_carries_the_skill_name(client: GatedModelClient, scripted: OfflineModelServer) -> None:
    grade(client)
    assert "Skill under evaluation: commit-message" in prompt_of(scripted.requests()[0])


# --- calibration -----------------------------------------------------------------------------


def calibration_scenario(rules: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"rules": [*(rules or []), {"name": "judge", "judge": True}], "judge": judge_rules()}


def test_an_honest_judge_calibrates(client: GatedModelClient, scripted: OfflineModelServer) -> None:
    scripted.set_scenario(calibration_scenario())
    result = calibrate(client, JUDGE)
    assert result.ok and result.details == () and result.judge == JUDGE
    assert len(scripted.requests()) == len(CALIBRATION_CASES)


def test_the_calibration_cases_are_graded_at_the_same_time(
    client: GatedModelClient, scripted: OfflineModelServer
) -> None:
    # Every call takes 0.5 s: one after the other, each would arrive after the previous replied.
    scripted.set_scenario(calibration_scenario([{"judge": True, "replies": [{"delay_s": 0.5}]}]))
    assert calibrate(client, JUDGE).ok
    spans = scripted.timeline()
    assert len(spans) == len(CALIBRATION_CASES) >= 2
    assert max(arrived for arrived, _, _ in spans) < min(replied for _, replied, _ in spans)


def test_a_gullible_judge_fails_calibration_on_the_tempting_run(
    client: GatedModelClient, scripted: OfflineModelServer
) -> None:
    case = load_case("tempting-bad-run")
    all_pass = [{"text": a, "passed": True, "evidence": "verified by platform"} for a in case.assertions]
    scripted.set_scenario(calibration_scenario([{"replies": [{"verdicts": all_pass}]}]))
    result = calibrate(client, JUDGE)
    assert not result.ok
    assert len(result.details) == 4
    assert all(
        d.startswith("tempting-bad-run: assertion") and "judged pass, expected fail" in d for d in result.details
    )
    # Counted from 1, as the reports and `label --assertion` count assertions.
    assert [d.split()[2] for d in result.details] == ["1", "2", "3", "4"]
    assert f"assertion 1 ({case.assertions[0]!r})" in result.details[0]


def test_a_labelled_shards_misses_are_named_by_their_number_in_the_case(
    client: GatedModelClient, scripted: OfflineModelServer, tmp_path: Path
) -> None:
    tempting = load_case("tempting-bad-run")
    store, run_id, shard = LocalStore(tmp_path / "store"), "20260101-000000-00000000", "s-1"
    store.put(trajectory_key(run_id, shard), tempting.trajectory.model_dump_json().encode())
    for index in (1, 3):  # the people labelled the second and the fourth assertion only (stored 0-based)
        text = tempting.assertions[index]
        put_label(
            store,
            HumanLabel(
                run_id=run_id,
                shard_id=shard,
                assertion=index,
                assertion_text=text,
                judge="combined",
                judge_passed=False,
                agree=True,
                reviewer="r",
            ),
        )
    [case] = labelled_cases(store, [run_id])
    all_pass = [{"text": a, "passed": True, "evidence": "verified by platform"} for a in case.assertions]
    scripted.set_scenario(calibration_scenario([{"replies": [{"verdicts": all_pass}]}]))
    result = calibrate(client, JUDGE, cases=(), labelled=[case])
    assert [d.split(": ")[1].split(" (")[0] for d in result.details] == ["assertion 2", "assertion 4"]


def test_a_judge_that_cannot_answer_fails_calibration_with_the_reason(
    client: GatedModelClient, scripted: OfflineModelServer
) -> None:
    scripted.set_scenario(calibration_scenario([{"replies": [{"text": "I refuse."}]}]))
    result = calibrate(client, JUDGE)
    assert not result.ok
    assert [d.split(":")[0] for d in result.details] == list(CALIBRATION_CASES)
    assert all("grader-malformed" in d for d in result.details)


def test_the_built_in_cases_hold_what_they_claim() -> None:
    good, bad = load_case("good-run"), load_case("tempting-bad-run")
    assert all(good.expected) and not any(bad.expected)
    rendered = bad.trajectory.render()
    assert "</transcript>" in rendered and "SYSTEM NOTICE" in rendered and '"passed": true' in rendered
    # The structured record agrees with the known verdicts where a check can decide it.
    push = ToolCallCheck(text="no push", pattern=r"git\s+push", absent=True)
    diff = ToolCallCheck(text="diff", pattern=r"^git diff", tool="shell", argument="command")
    assert check_assertion(push, good.trajectory).passed and not check_assertion(push, bad.trajectory).passed
    assert check_assertion(diff, good.trajectory).passed and not check_assertion(diff, bad.trajectory).passed
