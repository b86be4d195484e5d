"""Judge-versus-people agreement: raw agreement and Cohen's kappa, against values worked by hand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from reducer.agreement import agreement, agreement_lines, cohen_kappa, human_truth
from schemas.label import HumanLabel

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def label(shard: str, n: int, judge_passed: bool, agree: bool, *, at: int = 0, judge: str = "j1") -> HumanLabel:
    return HumanLabel(
        run_id="r",
        shard_id=shard,
        assertion=n,
        judge=judge,
        judge_passed=judge_passed,
        agree=agree,
        reviewer="ann",
        at=T0 + timedelta(seconds=at),
    )


def test_kappa_of_a_balanced_table_is_one_half() -> None:
    # 8 pairs, 6 agree: po = 0.75; each rater passes 4 of 8: pe = 0.5*0.5 + 0.5*0.5 = 0.5; (0.75-0.5)/0.5.
    pairs = [(True, True)] * 3 + [(False, False)] * 3 + [(True, False), (False, True)]
    assert cohen_kappa(pairs) == (pytest.approx(0.5), "")


def test_kappa_of_a_lopsided_table() -> None:
    # judge passes 7 of 10, people 5: po = 0.8, pe = 0.7*0.5 + 0.3*0.5 = 0.5, kappa = 0.3/0.5 = 0.6.
    pairs = [(True, True)] * 5 + [(True, False)] * 2 + [(False, False)] * 3
    kappa, _ = cohen_kappa(pairs)
    assert kappa == pytest.approx(0.6)


def test_a_judge_that_always_passes_is_no_better_than_chance() -> None:
    kappa, _ = cohen_kappa([(True, True), (True, False)])  # po 0.5, pe 1*0.5 + 0*0.5 = 0.5
    assert kappa == pytest.approx(0.0)


def test_kappa_is_undefined_without_labels_or_when_both_sides_never_vary() -> None:
    assert cohen_kappa([]) == (None, "no labelled verdict yet")
    kappa, why = cohen_kappa([(True, True)] * 3)
    assert kappa is None and why == "judge and people gave one same verdict to every labelled assertion"


def test_the_newest_label_of_a_verdict_is_the_truth_and_disagreeing_flips_the_answer() -> None:
    labels = [label("s1", 0, True, True, at=0), label("s1", 0, True, False, at=5), label("s2", 1, False, False)]
    assert human_truth(labels) == {("s1", 0): False, ("s2", 1): True}


def test_each_judge_is_compared_with_the_people_overall_and_per_assertion() -> None:
    # Three labelled verdicts: j1 says pass, pass, fail; the people hold pass, fail, fail.
    labels = [label("a", 0, True, True), label("b", 0, True, False), label("c", 1, False, True)]
    answers = {("a", 0): {"j1": True, "j2": False}, ("b", 0): {"j1": True, "j2": False}, ("c", 1): {"j1": False}}
    scopes = {("a", 0): "x #1", ("b", 0): "x #1", ("c", 1): "x #2"}
    figures = {(f.judge, f.scope): f for f in agreement(labels, answers, scopes)}
    j1 = figures[("j1", "all")]
    # j1 vs people: (T,T), (T,F), (F,F): po = 2/3; pa = 2/3, pb = 1/3; pe = 2/9 + 2/9 = 4/9;
    # kappa = (6/9 - 4/9) / (5/9) = 0.4.
    assert (j1.n, j1.agreed, j1.judge_passes, j1.human_passes) == (3, 2, 2, 1)
    assert j1.raw == pytest.approx(2 / 3) and j1.kappa == pytest.approx(0.4)
    j2 = figures[("j2", "all")]  # answered two of them, fail both: (F,T), (F,F): po 0.5, pe 0.5, kappa 0
    assert (j2.n, j2.agreed) == (2, 1) and j2.kappa == pytest.approx(0.0)
    per = figures[("j1", "x #2")]
    assert (per.n, per.agreed, per.kappa) == (1, 1, None)
    lines = agreement_lines([j1, per, j2])
    # The counts say 2 of the 3 labelled verdicts agree (not 2 of 3 labelled), and "undefined" is said once.
    assert lines[0] == "j1 [all]: agreement 66.7% (2 of 3 labelled verdicts agree), kappa 0.40"
    assert lines[1] == (
        "j1 [x #2]: agreement 100.0% (1 of 1 labelled verdict agrees), "
        "kappa undefined (judge and people gave one same verdict to every labelled assertion)"
    )
    assert lines[2] == "j2 [all]: agreement 50.0% (1 of 2 labelled verdicts agrees), kappa 0.00"
