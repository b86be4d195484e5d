"""The reports of an ``--epochs auto`` run: pooled when every case got the same epochs, case-weighted
(and labelled so) when they did not, with the interval always of the counts printed beside it. Pure."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from producer.launch.adaptive import grown
from producer.plan.planning import plan_run
from reducer.render import render_markdown
from reducer.render_html import render_html
from reducer.stream import reduce_run
from schemas.adaptive import AdaptivePlan, CaseEpochs
from schemas.report import Rate, RunResult
from tests.test_reducer import bundle, graded
from viewer.templating import templates

CASES = 6


def wilson95(successes: float, n: float) -> tuple[float, float]:
    """The Wilson score interval written out here, independently of ``reducer.stats``."""
    z = 1.959963984540054
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


def adaptive_result(epochs: dict[int, int], passes: Callable[[int, int], bool]) -> RunResult:
    """A one-model run of ``CASES`` one-assertion cases with these epochs per case, each shard
    graded with ``passes(case, epoch)``."""
    rule = AdaptivePlan(
        max_epochs=5,
        looks_done=1,
        cases=tuple(CaseEpochs(skill="s", case_id=c, epochs=e, stopped="stable") for c, e in epochs.items()),
    )
    first = plan_run("20260101-000000-00000000", [bundle("s", (1,) * CASES)], ["m"], judges=["j"], adaptive=rule)
    plan = grown(first.model_copy(update={"adaptive": rule.model_copy(update={"cases": ()})}), rule)
    return reduce_run(plan, {s.shard_id: graded(s, [passes(s.case_id, s.epoch)]) for s in plan.shards})


def test_an_adaptive_run_whose_cases_all_got_three_epochs_reports_the_pooled_wilson_interval() -> None:
    # Cases 1-4 pass every epoch, 5 and 6 fail every one: 12 of 18 verdicts.
    result = adaptive_result({c: 3 for c in range(1, CASES + 1)}, lambda case, _: case <= 4)
    s = result.skills[0]
    low, high = wilson95(12, 18)
    assert (s.behavioural.passed, s.behavioural.total) == (12, 18)
    # Wilson over 12 of 18, not over 4 of 6 (each case's three alike verdicts counted once).
    assert (s.behavioural.low, s.behavioural.high) == pytest.approx((low, high), abs=1e-9)
    assert s.models[0].behavioural == s.behavioural
    assert s.headline == "12/18 (66.7%)" and s.behavioural.weighted is None
    md = render_markdown(result, "s", {})
    assert "unequal epochs" not in md and "case-weighted" not in md
    assert f"12/18 (66.7%), 95% CI {100 * low:.1f}%–{100 * high:.1f}% (Wilson)" in md
    assert f"| m | 12/18 (66.7%) | {100 * low:.1f}%–{100 * high:.1f}% |" in md


def test_unequal_epochs_show_the_case_weighted_counts_their_wilson_interval_is_of() -> None:
    # Cases 1-4: 3 epochs, all pass; case 5: 3 of 5; case 6: 1 of 5. Raw 16/22. Weighted, each case
    # that went on past its first round of 3 is rated as that round would be given its 5 epochs:
    # case 5 (k first-round passes, 1 or 2, in the ratio C(3,k) C(2,3-k): 3 to 6) 5/9, case 6 1/3;
    # 4 + 5/9 + 1/3 = 44/9 of 6.
    epochs = {c: 3 for c in range(1, 5)} | {5: 5, 6: 5}
    result = adaptive_result(epochs, lambda case, epoch: case <= 4 or (case == 5 and epoch % 2 == 0) or epoch == 0)
    b = result.skills[0].behavioural
    low, high = wilson95(44 / 9, 6)
    assert (b.passed, b.total, b.low, b.high) == pytest.approx((16, 22, low, high), abs=1e-9)
    assert (
        result.skills[0].headline
        == "81.5% (each case rated by its first round and weighted equally; 16/22 verdicts in all)"
    )
    md = render_markdown(result, "s", {})
    interval = f"{100 * low:.1f}%–{100 * high:.1f}%"
    assert (
        f"Behavioural pass rate 4.89/6 case-weighted (81.5%; 16/22 verdicts), 95% CI {interval} "
        "(Wilson on the case-weighted counts, each case weighted as one shard and rated by its first round)"
    ) in md
    assert f"| m | 4.89/6 case-weighted (81.5%; 16/22 verdicts) | {interval} |" in md
    assert "16/22 (81.5%)" not in md  # never a percent beside counts it is not the ratio of
    assert b.weighted == pytest.approx((44 / 9, 6.0))
    html = render_html(result)
    assert (
        "Wilson interval of the case-weighted counts" in html
        and "81.5% (each case rated by its first round and weighted equally)" in html
    )


def test_the_viewer_run_page_shows_the_counts_the_rate_is_of() -> None:
    epochs = {c: 3 for c in range(1, 5)} | {5: 5, 6: 5}
    result = adaptive_result(epochs, lambda case, epoch: case <= 4 or (case == 5 and epoch % 2 == 0) or epoch == 0)
    doc = result.model_dump(mode="json")
    tally = templates().env.filters["tally"]  # the run page's "passed / assertions" cells
    assert tally(doc["skills"][0]["behavioural"]) == "4.89/6 case-weighted, 16/22 verdicts"
    assert tally(doc["skills"][0]["models"][0]["behavioural"]) == "4.89/6 case-weighted, 16/22 verdicts"
    assert (
        tally(
            adaptive_result(dict.fromkeys(range(1, 7), 3), lambda c, e: c > 2).model_dump(mode="json")["skills"][0][
                "behavioural"
            ]
        )
        == "12/18"
    )


def test_a_rate_below_the_threshold_names_the_case_weighted_figure() -> None:
    epochs = {c: 3 for c in range(1, 5)} | {5: 5, 6: 5}
    result = adaptive_result(epochs, lambda case, epoch: case <= 4 or (case == 5 and epoch % 2 == 0) or epoch == 0)
    assert result.reasons == [
        "s: behavioural pass rate 81.5% (each case rated by its first round and weighted equally; "
        "16/22 verdicts in all) "
        "is below the threshold 1.0 (default)"
    ]


def test_a_weighted_rate_keeps_the_counts_its_interval_is_of() -> None:
    r = Rate(passed=16, total=22, rate=0.8, low=0.0, high=1.0, weighted=(4.8, 6.0))
    assert Rate.model_validate_json(r.model_dump_json()).weighted == (4.8, 6.0)
    pooled = Rate.model_validate({"passed": 1, "total": 2, "rate": 0.5, "low": 0.1, "high": 0.9})
    assert pooled.weighted is None and "weighted" not in pooled.model_dump(mode="json")


def test_the_aggregate_line_weighs_each_case_once_as_its_corpora_do() -> None:
    # Corpus s as above (44/9 of 6 case-weighted, 16/22 verdicts); corpus t gets 3 epochs of every case,
    # all passing: pooled on its own (18/18), one shard's worth per case beside s (6 of 6).
    unequal = {c: 3 for c in range(1, 5)} | {5: 5, 6: 5}
    epochs = {"s": unequal, "t": dict.fromkeys(range(1, CASES + 1), 3)}
    rule = AdaptivePlan(
        max_epochs=5,
        looks_done=1,
        cases=tuple(
            CaseEpochs(skill=k, case_id=c, epochs=e, stopped="stable") for k in "st" for c, e in epochs[k].items()
        ),
    )
    bundles = [bundle(k, (1,) * CASES) for k in "st"]
    first = plan_run("20260101-000000-00000000", bundles, ["m"], judges=["j"], adaptive=rule)
    plan = grown(first.model_copy(update={"adaptive": rule.model_copy(update={"cases": ()})}), rule)

    def passes(skill: str, case: int, epoch: int) -> bool:
        return skill == "t" or case <= 4 or (case == 5 and epoch % 2 == 0) or epoch == 0

    result = reduce_run(plan, {s.shard_id: graded(s, [passes(s.skill, s.case_id, s.epoch)]) for s in plan.shards})
    s, t = result.skills
    assert s.behavioural.weighted == pytest.approx((44 / 9, 6.0)) and t.headline == "18/18 (100.0%)"
    # 98/9 of 12 is 90.7%: not the pooled 34/40 (85.0%), nor t's every epoch counted beside s's one.
    assert result.aggregate_headline == (
        "AGGREGATE: 90.7% (each case rated by its first round and weighted equally; 34/40 verdicts in all)"
    )
