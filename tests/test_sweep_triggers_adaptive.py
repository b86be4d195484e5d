"""A sweep over several harnesses carries trigger runs and adaptive epochs. Pure, and the dry run.

Trigger runs: each harness × model pair asks every query, and the trigger figures, gates, reports
and paired changes are per pair (its row, as every other figure of a sweep). ``--epochs auto``:
each pair is looked at on its own (its gate from its own shards, whether a case varies in it), a
case goes on while it is uncertain in some pair, and its new epochs go to every pair.
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from producer.corpus.triggers import estimate, plan_json, plan_lines
from producer.launch.adaptive import grown
from producer.plan.harnesses import pair_harnesses
from producer.plan.planning import harness_pairs, plan_run
from reducer.adaptive import Gate, ShardKey, next_round
from reducer.render_adaptive import markdown_section, summary_lines
from reducer.render_sweep import is_sweep, row_label
from reducer.render_triggers import complete_lines, junit_suites, trigger_html, trigger_section
from reducer.trigger_compare import run_report
from schemas.adaptive import adaptive_plan
from schemas.corpus import Corpus, EvalCase
from schemas.report import RunResult
from schemas.shard import CURRENT, RunPlan, SkillBundle, baseline_variant, row_name
from schemas.triggers import TriggerCase, TriggerSet, TriggerSettings
from tests.test_baseline_no_skill import make_repo
from tests.test_reducer import bundle
from tests.test_triggers_e2e import trigger_repo

RUN = "20260101-000000-00000000"
GPT, CLAUDE = "openai/gpt-5", "anthropic/claude-sonnet-4-5"
CODEX, AGENT = row_name(GPT, "codex"), row_name(GPT, "agent")


def trigger_bundle() -> SkillBundle:
    queries = (
        TriggerCase(id=1, query="pdf text", should_trigger=True),
        TriggerCase(id=2, query="pdf tables", should_trigger=True),
        TriggerCase(id=3, query="the weather <script>x</script> | `rm -rf`", should_trigger=False),
    )
    cases = tuple(EvalCase(id=q.id, prompt=q.query, expected_output="", files=(), assertions=()) for q in queries)
    return SkillBundle(
        skill="pdf",
        bundle_key="pdf-000000000000",
        corpus_file="evals/pdf.triggers.json",
        corpus=Corpus(skill_name="pdf", evals=cases),
        triggers=TriggerSet(skill_name="pdf", triggers=queries),
    )


def sweep_plan(epochs: int = 2, variants: tuple[str, ...] = (CURRENT,)) -> RunPlan:
    harnesses = pair_harnesses(["codex", "agent"], [GPT])
    return plan_run(RUN, [trigger_bundle()], [GPT], epochs=epochs, variants=variants, harnesses=harnesses)


def fired_by(plan: RunPlan, codex: dict[int, tuple[str, ...]], agent: dict[int, tuple[str, ...]]) -> dict:  # type: ignore[type-arg]
    """What fired per shard: the codex shards ``codex[case]``, the agent's ``agent[case]``."""
    return {s.shard_id: (codex if s.harness == "codex" else agent).get(s.case_id, ()) for s in plan.shards}


def test_a_trigger_plan_over_two_harnesses_asks_every_query_in_each_pair() -> None:
    plan = sweep_plan()
    assert len(plan.shards) == 3 * 2 * 2 and {s.harness for s in plan.shards} == {"codex", "agent"}
    found = estimate(plan, 3, 400)
    lines = plan_lines(plan, 3, found, 2, harness_pairs(plan))
    assert "  pdf: evals/pdf.triggers.json: 2 positive, 1 negative; 12 shards" in lines
    assert any("shards = queries x harness x model pairs x epochs = 12" in line for line in lines)
    assert f"harness x model: codex x {GPT}: 6 shards" in lines and f"harness x model: agent x {GPT}: 6 shards" in lines
    doc = plan_json(plan, 3, found, 2, harness_pairs(plan))
    assert doc["shards"] == 12 and doc["triggers"][0]["shards"] == 12  # type: ignore[index]
    assert doc["pairs"] == [
        {"harness": "codex", "model": GPT, "shards": 6},
        {"harness": "agent", "model": GPT, "shards": 6},
    ]
    # One executor: the plan is what it was (no pairs).
    single = plan_run(RUN, [trigger_bundle()], [GPT], epochs=2)
    assert harness_pairs(single) == [] and len(plan_lines(single, 3, estimate(single, 3, 400), 2)) == 4


def test_trigger_figures_and_gates_are_per_harness_model_pair() -> None:
    plan = sweep_plan()
    # Codex misses query 2 and fires on the negative; the agent fires exactly where it should.
    fired = fired_by(plan, {1: ("pdf",), 2: ("other",), 3: ("pdf",)}, {1: ("pdf",), 2: ("pdf",)})
    report = run_report(plan, fired, TriggerSettings(min_recall=0.75), "codex")
    by_row = {f.model: f for f in report.figures}
    assert list(by_row) == [CODEX, AGENT]
    assert (by_row[CODEX].executor, by_row[AGENT].executor) == ("codex", "agent")
    assert (by_row[CODEX].recall.hits, by_row[CODEX].recall.total) == (2, 4)
    assert (by_row[CODEX].false_trigger.hits, by_row[CODEX].false_trigger.total) == (2, 2)
    assert by_row[CODEX].confusion == {"other": 2}
    assert (by_row[AGENT].recall.hits, by_row[AGENT].false_trigger.hits) == (4, 0)
    assert report.failures == [f"pdf ({CODEX}): recall 2/4 (50.0%) is below 75%"]
    # Every report names the pair once (the row already holds the harness).
    section = "\n".join(trigger_section(report, "pdf"))
    assert f"### codex × {GPT}\n" in section and f"### agent × {GPT}\n" in section and "(codex)" not in section
    assert f"**gate failed:** pdf ({CODEX}): recall" in section
    assert [line.split(":")[0] for line in complete_lines(report)] == [
        f"triggers pdf ({CODEX})",
        f"triggers pdf ({AGENT})",
    ]
    suites = junit_suites(report)
    assert f'name="pdf[triggers:{CODEX}]"' in suites and suites.count("<failure ") == 1
    html = trigger_html(report)
    assert f">{CODEX}</td>" in html and f">{AGENT}</td>" in html and "(codex)" not in html
    # The repo's queries stay inert in each pair's table.
    assert "<script>" not in section and "\\<script\\>" in section and "| `rm" not in section
    assert "<script>" not in html


def test_a_one_executor_trigger_report_keeps_the_model_and_its_executor_apart() -> None:
    plan = plan_run(RUN, [trigger_bundle()], [GPT])
    report = run_report(plan, {s.shard_id: ("pdf",) for s in plan.shards}, TriggerSettings(), "codex")
    [figures] = report.figures
    assert (figures.model, figures.executor) == (GPT, "codex")
    assert f"### {GPT} (codex)" in trigger_section(report, "pdf")
    alone = RunResult(run_id=RUN, verdict="PASS", reasons=[], skills=[], triggers=report)
    assert not is_sweep(alone) and row_label(alone) == "model"


def test_a_trigger_sweeps_tables_head_their_rows_harness_by_model() -> None:
    plan = sweep_plan(epochs=1)
    report = run_report(plan, {s.shard_id: ("pdf",) for s in plan.shards}, TriggerSettings(), "codex")
    swept = RunResult(run_id=RUN, verdict="PASS", reasons=[], skills=[], triggers=report)
    assert is_sweep(swept) and row_label(swept) == "harness × model"  # no assertion to pair, yet pairs


def test_the_change_against_an_earlier_description_pairs_within_each_harness() -> None:
    ref = baseline_variant("v1")
    plan = sweep_plan(epochs=1, variants=(CURRENT, ref))
    # Now both harnesses fire on query 2; at REF only the agent did: codex gained, the agent did not.
    fired = {
        s.shard_id: ("pdf",)
        if s.case_id == 1 or (s.case_id == 2 and (s.variant == CURRENT or s.harness == "agent"))
        else ()
        for s in plan.shards
    }
    report = run_report(plan, fired, TriggerSettings(), "codex")
    [change] = report.changes
    # Paired within a row: codex's query 2 went 0 -> 1, the agent's 1 -> 1; the unit is the query.
    assert change.recall.queries == 2 and change.recall.difference == 0.25


def observed(
    plan: RunPlan, verdicts: dict[tuple[str, int], list[tuple[bool, ...]]]
) -> dict[ShardKey, tuple[bool, ...]]:
    """(harness, case) -> the verdicts of its epochs in order."""
    out: dict[ShardKey, tuple[bool, ...]] = {}
    for s in plan.shards:
        given = verdicts.get((s.harness or "", s.case_id))
        if given is not None:
            out[(s.skill, s.variant, s.case_id, s.row, s.epoch)] = given[s.epoch]
    return out


def test_adaptive_rounds_look_at_each_pair_and_grow_every_pair_alike() -> None:
    rule = adaptive_plan(5)
    harnesses = pair_harnesses(["codex", "agent"], [GPT])
    plan = plan_run(RUN, [bundle("s", (1, 1, 1))], [GPT], adaptive=rule, harnesses=harnesses)
    assert len(plan.shards) == 3 * 2 * 3
    yes, no = (True,), (False,)
    seen = observed(
        plan,
        {
            # Case 1 is stable in both pairs; case 2 varies in the agent's pair only; case 3 in both.
            ("codex", 1): [yes, yes, yes],
            ("agent", 1): [no, no, no],
            ("codex", 2): [yes, yes, yes],
            ("agent", 2): [yes, no, yes],
            ("codex", 3): [no, yes, no],
            ("agent", 3): [yes, no, no],
        },
    )
    cases = [("s", 1), ("s", 2), ("s", 3)]
    after = next_round(rule, cases, {"s": Gate(0.5)}, seen, [CURRENT], rows=plan.rows)
    assert [(c.case_id, c.epochs, c.stopped) for c in after.cases] == [(1, 3, "stable"), (2, 5, ""), (3, 5, "")]
    assert [g.row for g in after.gates] == [CODEX, AGENT]
    more = grown(plan, after)
    added = more.shards[len(plan.shards) :]
    assert sorted((s.harness, s.case_id, s.epoch) for s in added) == sorted(
        (h, c, e) for h in ("codex", "agent") for c in (2, 3) for e in (3, 4)
    )
    assert len({s.shard_id for s in more.shards}) == len(more.shards)
    # A pair whose gate is decided lets a case stop there: at a threshold of 0.9 the agent's pair is
    # decided below, so case 2 (varying only there) stops; case 3 still varies in codex's, undecided.
    high = next_round(rule, cases, {"s": Gate(0.9)}, seen, [CURRENT], rows=plan.rows)
    assert [g.decided for g in high.gates] == ["", "below"]
    assert [(c.case_id, c.epochs, c.stopped) for c in high.cases] == [(1, 3, "stable"), (2, 3, "decided"), (3, 5, "")]
    text = "\n".join(markdown_section(after, "s") + summary_lines(after))
    assert f"- gate: {CODEX}: pass-rate" in text and f"; {AGENT}: pass-rate" in text


def test_an_adaptive_look_outside_a_sweep_is_recorded_as_before() -> None:
    rule = adaptive_plan(5)
    plan = plan_run(RUN, [bundle("s", (1, 1))], [GPT], adaptive=rule)
    seen = {("s", CURRENT, c, GPT, e): (c == 2 or e % 2 == 0,) for c in (1, 2) for e in range(3)}
    after = next_round(rule, [("s", 1), ("s", 2)], {"s": Gate(0.5)}, seen, [CURRENT])
    assert [(c.epochs, c.stopped) for c in after.cases] == [(5, ""), (3, "stable")]
    assert "row" not in after.gates[0].model_dump(mode="json") and '"row"' not in after.model_dump_json()
    added = grown(plan, after).shards[6:]
    assert [(s.harness, s.case_id, s.epoch) for s in added] == [(None, 1, 3), (None, 1, 4)]


def invoke(*args: str) -> tuple[int, str]:
    from producer.commands.cli import app

    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def test_the_dry_run_of_a_sweep_counts_trigger_and_adaptive_shards_per_pair(tmp_path: Path) -> None:
    repo = trigger_repo(tmp_path / "repo")
    sweep = ("--executor", "codex", "--executor", "agent", "--model", GPT, "--model", CLAUDE)
    code, output = invoke("run", "pdf-tools", "--repo", str(repo), "--triggers", "--dry-run", "--json", *sweep)
    assert code == 0, output
    doc = json.loads(output)
    assert doc["shards"] == 5 * 3 and doc["triggers"][0]["shards"] == 15
    assert [(p["harness"], p["model"]) for p in doc["pairs"]] == [("codex", GPT), ("agent", GPT), ("agent", CLAUDE)]
    code, output = invoke("run", "pdf-tools", "--repo", str(repo), "--triggers", "--dry-run", *sweep[:4])
    assert code == 0, output
    assert "harness x model: codex x (unspecified): 5 shards" in output
    # A harness that records no activation is refused in a sweep as alone.
    code, output = invoke(
        "run", "pdf-tools", "--repo", str(repo), "--triggers", "--dry-run", *sweep[:2], "--executor", "cmd:x"
    )
    assert code == 2 and "not 'cmd:x'" in output
    # --epochs auto: the first round per pair, and the most the rounds may add.
    greeter = make_repo(tmp_path / "greeter", cases=2)
    auto = ("--epochs", "auto", "--max-epochs", "5", "--dry-run", "--json")
    code, output = invoke("run", "greeter", "--repo", str(greeter), *auto, *sweep)
    assert code == 0, output
    plan = json.loads(output)
    assert plan["totals"]["shards"] == 2 * 3 * 3 and plan["max_shards"] == 2 * 3 * 5
    assert [(p["harness"], p["shards"]) for p in plan["pairs"]] == [("codex", 6), ("agent", 6), ("agent", 6)]
