"""Checked evidence: a pass whose quote is not in the transcript is flagged, or failed when strict."""

from __future__ import annotations

import time

from schemas.verdict import AssertionVerdict
from worker.grading.evidence import check_evidence, evidence_found, verified_share

TRANSCRIPT = (
    '[tool_call] shell({"cmd": "git diff --stat && git commit -m \\"fix: punctuation\\""})\n'
    "[tool_result] shell exit=0\n"
    "[main 1a2b3c4] fix: punctuation\n 1 file changed, 1 insertion(+), 1 deletion(-)\n"
    "[assistant] I pushed the branch to origin.\n"
)


def verdict(passed: bool, evidence: str) -> AssertionVerdict:
    return AssertionVerdict(text="The agent commits with a fix: subject line", passed=passed, evidence=evidence)


def test_a_verbatim_quote_is_found() -> None:
    assert evidence_found("[main 1a2b3c4] fix: punctuation", TRANSCRIPT)


def test_whitespace_and_json_escaping_differences_are_tolerated_but_nothing_else() -> None:
    assert evidence_found('git commit -m "fix:   punctuation"', TRANSCRIPT)
    assert evidence_found("[main 1a2b3c4]\n\nfix: punctuation", TRANSCRIPT)
    assert not evidence_found("[MAIN 1A2B3C4] FIX: PUNCTUATION", TRANSCRIPT)


def test_ellipsis_fragments_must_each_be_found() -> None:
    assert evidence_found("[main 1a2b3c4] ... 1 file changed", TRANSCRIPT)
    assert not evidence_found("[main 1a2b3c4] ... 3 files changed", TRANSCRIPT)
    # ... within one tool call or result, in order: never stitched from several.
    assert not evidence_found("git diff --stat ... 1 file changed", TRANSCRIPT)
    assert not evidence_found("1 file changed ... [main 1a2b3c4]", TRANSCRIPT)


def test_a_quote_with_words_the_transcript_does_not_have_is_not_found() -> None:
    quote = "[main 1a2b3c4] fix: punctuation 1 file changed, 1 insertion(+) [end of output]"
    assert not evidence_found(quote, TRANSCRIPT)


def test_a_quote_from_the_agents_prose_never_verifies() -> None:
    assert "I pushed the branch to origin." in TRANSCRIPT
    assert not evidence_found("I pushed the branch to origin.", TRANSCRIPT)


def test_an_invented_quote_is_not_found() -> None:
    assert not evidence_found("git push origin main", TRANSCRIPT)
    assert not evidence_found("", TRANSCRIPT)


def test_a_near_miss_that_contradicts_the_transcript_is_not_found() -> None:
    transcript = '[tool_call] shell({"command": "pytest -q"})\n[tool_result] shell exit=1\nexit=1 1 failed, 2 passed\n'
    assert not evidence_found("exit=0 3 passed", transcript)
    assert not evidence_found("exit=1 ... 3 passed", transcript)
    assert evidence_found("exit=1 ... 2 passed", transcript)


def test_passes_are_marked_verified_or_not_and_fails_are_left_unchecked() -> None:
    checked = check_evidence(
        [verdict(True, "fix: punctuation"), verdict(True, "git push --force"), verdict(False, "absent: x")],
        TRANSCRIPT,
    )
    assert [v.evidence_verified for v in checked] == [True, False, None]
    assert [v.passed for v in checked] == [True, True, False]
    assert verified_share(checked) == 0.5


def test_strict_mode_turns_an_unverifiable_pass_into_a_fail_with_the_reason() -> None:
    (checked,) = check_evidence([verdict(True, "git push --force")], TRANSCRIPT, strict=True)
    assert checked.passed is False
    assert checked.evidence.startswith("absent:")
    assert "not found in any tool call or result" in checked.note and "git push --force" in checked.note


def test_strict_mode_keeps_a_verified_pass() -> None:
    (checked,) = check_evidence([verdict(True, "fix: punctuation")], TRANSCRIPT, strict=True)
    assert checked.passed is True and checked.evidence_verified is True and checked.note == ""


def test_no_checked_pass_means_no_share() -> None:
    assert verified_share([verdict(False, "absent: x")]) is None


def test_checking_a_long_quote_against_a_capped_transcript_is_fast() -> None:
    hay = ("[tool_result] shell\n" + "abcdefghij" * 12_000)[:120_000]
    start = time.perf_counter()
    evidence_found("q" * 300 + "zzzz" * 200, hay)
    assert time.perf_counter() - start < 1.0
