"""The HTML report is one self-contained page that escapes everything the agent or judge wrote."""

from __future__ import annotations

from html.parser import HTMLParser

from producer.plan.planning import plan_run
from reducer.render_html import render_html
from reducer.stream import reduce_run
from schemas.corpus import Corpus, EvalCase
from schemas.shard import SkillBundle
from schemas.shard_outcome import ShardOutcome
from schemas.status import ShardState
from schemas.trajectory import Usage
from schemas.verdict import AssertionVerdict, ShardGrade

HOSTILE = '<script>alert("x")</script>'


def result_with(evidence: str, activated: list[bool | None] | None = None):  # type: ignore[no-untyped-def]
    case = EvalCase(id=1, prompt="p", expected_output="e", files=(), assertions=("The agent runs the tests first",))
    corpus = Corpus(skill_name="demo", evals=(case, case.model_copy(update={"id": 2})))
    bundle = SkillBundle(
        skill="demo", bundle_key="demo-000000000000", corpus_file="evals/demo.evals.json", corpus=corpus
    )
    plan = plan_run("20260101-000000-00000000", [bundle], ["m1", "m2"])
    outcomes = {}
    for i, shard in enumerate(plan.shards):
        verdict = AssertionVerdict(text=case.assertions[0], passed=i % 2 == 0, evidence=evidence)
        grade = ShardGrade(shard_id=shard.shard_id, state=ShardState.GRADED, verdicts=[verdict])
        skill_activated = activated[i] if activated else None
        outcomes[shard.shard_id] = ShardOutcome(shard, ShardState.GRADED, grade=grade, skill_activated=skill_activated)
    return reduce_run(plan, outcomes)


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: object) -> None:
        self.tags.append(tag)


def test_the_page_has_a_bar_per_model_and_the_assertion_matrix() -> None:
    page = render_html(result_with("[tool_call] shell(pytest)"))
    parser = Tags()
    parser.feed(page)
    assert page.count('class="bar-row"') == 2  # one bar per model, drawn in HTML so labels wrap
    assert "svg" not in parser.tags and "script" not in parser.tags
    assert "m1" in page and "m2" in page
    assert "The agent runs the tests first" in page
    assert "Leaderboard" in page


def test_a_cost_litellm_cannot_price_reads_unknown_and_a_known_one_in_dollars() -> None:
    result = result_with("[tool_call] shell(pytest)").model_copy(
        update={"usage": {"m1": Usage(calls=1, cost_usd=0.0123), "m2": Usage(calls=1)}}
    )
    usage = render_html(result).split('id="usage"')[1].split("</section>")[0]
    assert '<td data-label="cost" class=num>$0.0123</td>' in usage and '<td data-label="cost">unknown</td>' in usage
    assert '<td data-label="cost">-</td>' not in usage


def test_evidence_from_the_transcript_is_escaped_never_markup() -> None:
    page = render_html(result_with(HOSTILE))
    parser = Tags()
    parser.feed(page)
    assert "script" not in parser.tags
    assert "&lt;script&gt;" in page


def test_skill_activation_is_shown_per_skill_and_model_when_a_harness_recorded_it() -> None:
    # shards in plan order: case 1 m1, case 1 m2, case 2 m1, case 2 m2
    page = render_html(result_with("x", activated=[True, False, False, False]))
    assert '<section id="activation">' in page
    row = page.split('<section id="activation">', 1)[1].split("</section>", 1)[0]
    assert "m1" in row and "1/2" in row and "50.0%" in row
    assert "0/2" in row and "0.0%" in row  # m2: never activated
    assert '<section id="activation">' not in render_html(result_with("x"))  # the built-in agent records none


def test_assertion_quality_flags_nothing_on_too_few_verdicts() -> None:
    # One model, one epoch, every assertion passed: two equal verdicts per assertion say nothing
    # about whether it can tell a better skill from a worse one.
    case = EvalCase(id=1, prompt="p", expected_output="e", files=(), assertions=("The agent runs the tests first",))
    corpus = Corpus(skill_name="demo", evals=(case, case.model_copy(update={"id": 2})))
    bundle = SkillBundle(
        skill="demo", bundle_key="demo-000000000000", corpus_file="evals/demo.evals.json", corpus=corpus
    )
    plan = plan_run("20260101-000000-00000000", [bundle], ["m1"], epochs=2)
    outcomes = {}
    for shard in plan.shards:
        verdict = AssertionVerdict(text=case.assertions[0], passed=True, evidence="ok")
        grade = ShardGrade(shard_id=shard.shard_id, state=ShardState.GRADED, verdicts=[verdict])
        outcomes[shard.shard_id] = ShardOutcome(shard, ShardState.GRADED, grade=grade)
    result = reduce_run(plan, outcomes)
    assert not any(q.non_discriminating or q.flaky for q in result.assertion_quality)
    section = render_html(result).split('<section id="quality">', 1)[1].split("</section>", 1)[0]
    assert "0 of 2 assertions flagged" in section and "at least 4 verdicts from two or more models" in section
    assert "always pass" not in section


def test_the_paired_line_gives_the_seed_for_the_monte_carlo_p_not_for_the_interval() -> None:
    from schemas.shard import CURRENT, NO_SKILL
    from tests.test_reducer import bundle, outcomes_for, plan_for, reduce

    plan = plan_for([bundle("s", [1] * 6)], variants=(CURRENT, NO_SKILL))
    outcomes = {
        **outcomes_for(plan, {k: [True] for k in range(1, 7)}),
        **outcomes_for(plan, {k: [k % 2 == 0] for k in range(1, 7)}, variant=NO_SKILL),
    }
    result = reduce(plan, outcomes)
    html = render_html(result)
    seed = result.comparisons[0].seed
    assert "(score interval over cases)." in html and f"seed {seed}, from the run id, for any Monte Carlo p" in html
    assert "over cases, seed" not in html
