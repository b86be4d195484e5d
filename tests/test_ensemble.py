"""Judge ensembles: majority per assertion (a tie is false), agreement figures."""

from __future__ import annotations

import pytest

from schemas.verdict import AssertionVerdict
from worker.grading.ensemble import agreement, combine, majority


def v(passed: bool, evidence: str = "e") -> AssertionVerdict:
    return AssertionVerdict(text="The agent runs git diff first", passed=passed, evidence=evidence)


def test_a_majority_of_passes_passes_with_a_passing_judges_evidence() -> None:
    combined = majority([v(False, "absent: diff"), v(True, "git diff"), v(True, "git diff --stat")])
    assert combined.passed is True
    assert combined.evidence == "git diff"
    assert "split 2/3" in combined.note


def test_a_tie_counts_as_false() -> None:
    combined = majority([v(True, "git diff"), v(False, "absent: diff")])
    assert combined.passed is False
    assert combined.evidence == "absent: diff"


def test_one_judge_is_its_own_majority_without_a_split_note() -> None:
    assert majority([v(True)]).passed is True
    assert majority([v(True)]).note == ""


def test_combine_works_per_assertion() -> None:
    judges = [[v(True), v(False)], [v(True), v(True)], [v(False), v(False)]]
    assert [c.passed for c in combine(judges)] == [True, False]


def test_judges_with_different_lengths_are_refused() -> None:
    with pytest.raises(ValueError):
        combine([[v(True)], [v(True), v(False)]])


def test_pairwise_agreement_and_unanimous_share() -> None:
    result = agreement(
        {
            "a": [v(True), v(True), v(False), v(False)],
            "b": [v(True), v(False), v(False), v(False)],
            "c": [v(True), v(True), v(True), v(False)],
        }
    )
    assert result.pairwise == {("a", "b"): 0.75, ("a", "c"): 0.75, ("b", "c"): 0.5}
    assert result.unanimous_share == 0.5


def test_a_single_judge_has_no_agreement_figures() -> None:
    result = agreement({"only": [v(True)]})
    assert result.pairwise == {} and result.unanimous_share is None
