"""The harness as a dimension of a sweep: which executor runs which model, the plan, the reduce. Pure.

A sweep (``--executor`` given several times) runs each harness with the given models it can
speak; a model none speaks, or a harness given none it speaks, is refused by name before
anything runs. The plan gains the harness (a run of one executor keeps its shard ids), and
the reduce keeps every figure per harness × model row, the harness × assertion matrix, and
the harnesses paired on the same cases.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harnesses.providers import provider_of
from harnesses.registry import ADAPTERS, speaks
from producer.plan.harnesses import pair_harnesses
from producer.plan.planning import plan_run, plan_summary
from reducer.render import render_json, render_markdown
from reducer.render_html import render_html
from reducer.stream import StreamReducer, reduce_run
from schemas.errors import ConfigError, UnspokenModel
from schemas.shard import row_name, shard_id_for
from schemas.shard_outcome import ShardOutcome, outcome_line_of
from schemas.status import ShardState
from tests.conftest import EXAMPLE_REPO
from tests.test_reducer import bundle, graded

RUN = "20260101-000000-00000000"
CLAUDE, GPT, GEMINI = "anthropic/claude-sonnet-4-5", "openai/gpt-5", "gemini/gemini-2.5-pro"


def invoke(*args: str) -> tuple[int, str]:
    from producer.commands.cli import app

    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def test_each_harness_speaks_the_models_of_its_protocol_and_the_agent_any() -> None:
    assert speaks("claude-code", CLAUDE) and not speaks("claude-code", GPT)
    assert speaks("codex", GPT) and not speaks("codex", CLAUDE)
    assert speaks("opencode", GPT) and not speaks("opencode", GEMINI)
    assert speaks("gemini-cli", GEMINI) and not speaks("gemini-cli", GPT)
    assert all(speaks("agent", m) for m in (CLAUDE, GPT, GEMINI, "gpt-4o"))
    assert speaks("cmd:my-agent --json", "anything")
    # Every registered harness declares providers (a new one inherits its protocol's).
    assert all(factory().providers for factory in ADAPTERS)


@pytest.mark.parametrize("name", ["gpt-4o", "/gpt-5", "openai/", "", "anthropic"])
def test_a_model_name_without_a_provider_is_run_by_no_harness(name: str) -> None:
    assert provider_of(name) is None
    assert not any(speaks(factory().name, name) for factory in ADAPTERS)


def test_one_executor_refuses_a_model_it_cannot_speak_naming_both() -> None:
    assert pair_harnesses(["gemini-cli"], [GEMINI]) == {}
    with pytest.raises(UnspokenModel) as caught:
        pair_harnesses(["gemini-cli"], [GEMINI, GPT])
    assert "gemini-cli" in str(caught.value) and GPT in str(caught.value)
    assert str(caught.value).startswith("CONFIG_UNSPOKEN_MODEL")


def test_a_sweep_runs_each_harness_with_the_models_it_speaks() -> None:
    paired = pair_harnesses(["claude-code", "codex", "agent"], [CLAUDE, GPT])
    assert paired == {"claude-code": (CLAUDE,), "codex": (GPT,), "agent": (CLAUDE, GPT)}


def test_a_sweep_refuses_a_model_no_given_harness_speaks() -> None:
    with pytest.raises(UnspokenModel) as caught:
        pair_harnesses(["claude-code", "codex"], [CLAUDE, GEMINI])
    assert GEMINI in str(caught.value) and "claude-code" in str(caught.value) and "codex" in str(caught.value)


def test_a_sweep_refuses_a_harness_given_no_model_it_speaks() -> None:
    with pytest.raises(UnspokenModel) as caught:
        pair_harnesses(["claude-code", "agent", "gemini-cli"], [CLAUDE])
    assert "--executor gemini-cli" in str(caught.value)


def test_a_sweep_refuses_an_executor_given_twice_and_an_unknown_one() -> None:
    with pytest.raises(ConfigError, match="codex given more than once"):
        pair_harnesses(["codex", "agent", "codex"], [GPT])
    with pytest.raises(ConfigError, match="unknown executor"):
        pair_harnesses(["codex", "kodex"], [GPT])


def test_one_executor_keeps_its_shard_ids_and_a_sweep_gets_unique_stable_ones() -> None:
    b = bundle("s", (1, 1))
    single = plan_run(RUN, [b], [GPT], epochs=2)
    assert [s.shard_id for s in single.shards] == [
        shard_id_for(RUN, "current", "s", c, GPT, e) for c in (1, 2) for e in (0, 1)
    ]
    assert all(s.harness is None for s in single.shards) and single.rows == (GPT,)
    harnesses = pair_harnesses(["codex", "agent"], [GPT])
    sweep = plan_run(RUN, [b], [GPT], epochs=2, harnesses=harnesses)
    again = plan_run(RUN, [b], [GPT], epochs=2, harnesses=harnesses)
    ids = [s.shard_id for s in sweep.shards]
    assert ids == [s.shard_id for s in again.shards] and len(set(ids)) == len(ids) == 8
    assert sweep.rows == (row_name(GPT, "codex"), row_name(GPT, "agent"))
    assert {s.harness for s in sweep.shards} == {"codex", "agent"}


def test_the_plan_summary_lists_each_harness_model_pair_with_its_shards() -> None:
    harnesses = pair_harnesses(["claude-code", "codex", "agent"], [CLAUDE, GPT])
    plan = plan_run(RUN, [bundle("s", (1, 1, 1))], [CLAUDE, GPT], epochs=2, harnesses=harnesses)
    summary = plan_summary(plan)
    assert [(p.harness, p.model, p.shards) for p in summary.pairs] == [
        ("claude-code", CLAUDE, 6),
        ("codex", GPT, 6),
        ("agent", CLAUDE, 6),
        ("agent", GPT, 6),
    ]
    assert summary.totals.shards == 24 == summary.corpora[0].shards
    assert plan_summary(plan_run(RUN, [bundle("s", (1, 1))], [GPT])).pairs == []


def _sweep_outcomes(passes: dict[tuple[str, int], list[bool]]) -> tuple[object, dict[str, ShardOutcome]]:
    harnesses = pair_harnesses(["claude-code", "codex", "agent"], [CLAUDE, GPT])
    plan = plan_run(RUN, [bundle("s", (2, 2, 2, 2))], [CLAUDE, GPT], epochs=2, harnesses=harnesses)
    outcomes = {}
    for shard in plan.shards:
        spec = passes.get((shard.harness or "", shard.case_id))
        if spec is None:
            outcomes[shard.shard_id] = ShardOutcome(shard, ShardState.EXECUTOR_FAILED, detail="executor-failed: x")
        else:
            outcomes[shard.shard_id] = graded(shard, spec)
    return plan, outcomes


def test_a_sweep_reduces_to_harness_model_rows_a_harness_assertion_matrix_and_paired_harnesses() -> None:
    passes = {}
    for case in (1, 2, 3, 4):
        passes[("claude-code", case)] = [True, True]
        passes[("codex", case)] = [True, False]  # the second instruction never works in codex
        passes[("agent", case)] = [True, case % 2 == 0]
    plan, outcomes = _sweep_outcomes(passes)
    result = reduce_run(plan, outcomes)  # type: ignore[arg-type]
    [current] = result.skills
    rows = [m.model for m in current.models]
    assert rows == ["claude-code × " + CLAUDE, "codex × " + GPT, "agent × " + CLAUDE, "agent × " + GPT]
    assert {m.model: m.graded for m in result.leaderboard} == dict.fromkeys(rows, 8)
    # The harness × assertion matrix: each instruction's pass rate per harness, its models pooled.
    second = [a for a in current.assertions if a.index == 1]
    assert all(a.by_harness["codex"].rate == 0.0 and a.by_harness["claude-code"].rate == 1.0 for a in second)
    assert {a.case_id: a.by_harness["agent"].total for a in second} == dict.fromkeys((1, 2, 3, 4), 4)
    # Paired: claude-code and codex share no model (every model pair is the unit, and it says so);
    # agent shares one model with each, which is then the unit.
    pairs = {(c.baseline, c.harness): c for c in result.harness_comparisons}
    assert set(pairs) == {("claude-code", "codex"), ("claude-code", "agent"), ("codex", "agent")}
    mixed = pairs[("claude-code", "codex")]
    assert mixed.kind == "harness" and mixed.cases == 4 and mixed.pairs == 8 and "no model in common" in mixed.note
    assert mixed.difference == pytest.approx(-0.5) and mixed.worse == 4 and mixed.test == "sign-flip-exact"
    assert [(a.index, a.worse) for a in mixed.assertions if a.case_id == 1] == [(0, 0), (1, 2)]
    shared = pairs[("codex", "agent")]
    assert shared.pairs == 8 and "no model in common" not in shared.note  # gpt-5 is both's
    # No gate reads them: the verdict is the current arm's against its threshold alone.
    assert result.comparisons == []
    # The page says which pairs mix harness and model, as the markdown does.
    page = render_html(result)
    assert "<li>codex vs claude-code: claude-code and codex run no model in common" in page
    assert "<li>agent vs codex" not in page


def test_the_streamed_reduce_of_a_sweep_is_the_rows_kept_one() -> None:
    passes = {(h, c): [c != 3, h != "codex"] for h in ("claude-code", "codex", "agent") for c in (1, 2, 3)}
    plan, outcomes = _sweep_outcomes(passes)
    full = reduce_run(plan, outcomes)  # type: ignore[arg-type]
    fold = StreamReducer(plan)  # type: ignore[arg-type]
    for o in outcomes.values():
        fold.add(outcome_line_of(o))
    streamed = fold.result()
    assert fold.unplanned == 0
    assert [m.model_dump() for m in streamed.leaderboard] == [m.model_dump() for m in full.leaderboard]
    assert streamed.harness_comparisons == full.harness_comparisons
    assert streamed.skills[0].assertions == full.skills[0].assertions
    # Case 4 failed everywhere: dropped from every pair, counted by the side that failed.
    drop = {(c.baseline, c.harness): c.dropped_by for c in full.harness_comparisons}
    assert drop[("codex", "agent")] == {"agent:executor-failed": 2, "codex:executor-failed": 2}


def test_a_line_naming_a_harness_the_plan_has_not_is_not_counted() -> None:
    plan, outcomes = _sweep_outcomes({("codex", 1): [True, True]})
    fold = StreamReducer(plan)  # type: ignore[arg-type]
    o = next(o for o in outcomes.values() if o.shard.harness == "codex" and o.state is ShardState.GRADED)
    forged = outcome_line_of(o).model_copy(update={"harness": "gemini-cli"})
    fold.add(forged)
    fold.add(outcome_line_of(o).model_copy(update={"harness": None}))  # the model alone is no row of a sweep
    assert fold.unplanned == 2 and fold.lines == 0


def test_reports_of_a_sweep_show_harness_model_rows_and_of_one_executor_stay_as_they_were() -> None:
    passes = {(h, c): [True, h == "claude-code"] for h in ("claude-code", "codex", "agent") for c in (1, 2, 3, 4)}
    plan, outcomes = _sweep_outcomes(passes)
    result = reduce_run(plan, outcomes)  # type: ignore[arg-type]
    markdown = render_markdown(result, "s", {})
    assert "## Harness × assertion" in markdown and "## Harnesses paired" in markdown
    assert "| claude-code × anthropic/claude-sonnet-4-5 |" in markdown
    doc = render_json(result, "s", {})
    assert '"by_harness"' in doc and '"harness_comparisons"' in doc
    assert 'id="harnesses"' in render_html(result) and "claude-code × anthropic/claude-sonnet-4-5" in render_html(
        result
    )
    single = plan_run(RUN, [bundle("s", (2, 2))], [GPT])
    alone = reduce_run(single, {s.shard_id: graded(s, [True, False]) for s in single.shards})
    text = render_markdown(alone, "s", {}) + render_json(alone, "s", {})
    assert 'id="harnesses"' not in render_html(alone)
    assert "Harness" not in text and "by_harness" not in text and '"harness"' not in text


def test_the_leaderboard_and_per_model_tables_of_a_sweep_head_their_rows_harness_by_model() -> None:
    passes = {(h, c): [True, h != "codex"] for h in ("claude-code", "codex", "agent") for c in (1, 2)}
    plan, outcomes = _sweep_outcomes(passes)
    result = reduce_run(plan, outcomes)  # type: ignore[arg-type]
    page, markdown = render_html(result), render_markdown(result, "s", {})
    assert "<h3>Leaderboard (composite score)</h3><table class=stack><tr><th>harness × model</th>" in page
    assert "| harness × model | behavioural |" in markdown and "| model | behavioural |" not in markdown
    assert "<h2>Pass rate by harness × model</h2>" in page and "### Assertions by harness × model" in markdown
    assert "one per case, harness × model, epoch and arm" in page
    # One executor over two models: its rows are models, and its headers say so.
    single = plan_run(RUN, [bundle("s", (2, 2))], [GPT, CLAUDE])
    alone = reduce_run(single, {s.shard_id: graded(s, [True, False]) for s in single.shards})
    page, markdown = render_html(alone), render_markdown(alone, "s", {})
    assert "<h3>Leaderboard (composite score)</h3><table class=stack><tr><th>model</th>" in page
    assert "harness × model" not in page and "| model | behavioural |" in markdown
    assert "<h2>Pass rate by model</h2>" in page and "### Assertions by model" in markdown


def test_dry_run_lists_each_harness_model_pair_with_its_shards(example_repo: Path) -> None:
    code, output = invoke(
        "run", "commit-message", "--repo", str(example_repo), "--dry-run",
        *("--executor", "claude-code", "--executor", "codex", "--executor", "agent"),
        *("--model", CLAUDE, "--model", GPT, "--epochs", "2"),
    )  # fmt: skip
    assert code == 0, output
    assert "shards = cases x harness x model pairs x epochs = 16" in output
    for harness, model in (("claude-code", CLAUDE), ("codex", GPT), ("agent", CLAUDE), ("agent", GPT)):
        assert f"harness x model: {harness} x {model}: 4 shards" in output
    code, output = invoke(
        "run", "commit-message", "--repo", str(example_repo), "--dry-run", "--json",
        *("--executor", "claude-code", "--executor", "gemini-cli"),
    )  # fmt: skip
    assert code == 0, output  # no --model yet: each harness counted for one unnamed model
    assert [(p["harness"], p["shards"]) for p in json.loads(output)["pairs"]] == [("claude-code", 2), ("gemini-cli", 2)]


@pytest.mark.parametrize(
    ("command", "extra"),
    [
        ("validate", ()),
        ("run", ("--dry-run",)),
        ("run", ("--judge", "openai/j", "--api-base", "http://127.0.0.1:9/v1")),
    ],
)
def test_a_model_no_given_harness_speaks_is_refused_by_validate_dry_run_and_run_before_anything_runs(
    command: str, extra: tuple[str, ...], tmp_path: Path
) -> None:
    store = tmp_path / "store"
    args = ["--store", str(store), "--out", str(tmp_path / "out")] if command == "run" else []
    code, output = invoke(
        command, "commit-message", "--repo", str(EXAMPLE_REPO), *args, *extra,
        *("--executor", "claude-code", "--executor", "opencode", "--model", CLAUDE, "--model", GEMINI),
    )  # fmt: skip
    assert code == 2, output
    assert "CONFIG_UNSPOKEN_MODEL" in output and GEMINI in output and "claude-code" in output and "opencode" in output
    assert not store.exists() and not (tmp_path / "out").exists()  # nothing planned, stored or written


def test_one_harness_refuses_a_model_it_cannot_speak_by_name(tmp_path: Path) -> None:
    code, output = invoke(
        "run", "commit-message", "--repo", str(EXAMPLE_REPO), "--dry-run",
        *("--executor", "gemini-cli", "--model", GPT),
    )  # fmt: skip
    assert code == 2
    assert "--executor gemini-cli cannot run --model openai/gpt-5" in " ".join(output.split())


def test_a_result_stored_before_it_named_its_harnesses_still_reports_harness_model_rows() -> None:
    from schemas.report import RunResult

    passes = {(h, c): [True, h != "codex"] for h in ("claude-code", "codex", "agent") for c in (1, 2)}
    plan, outcomes = _sweep_outcomes(passes)
    result = reduce_run(plan, outcomes)  # type: ignore[arg-type]
    assert result.harnesses == list(plan.harnesses) == ["claude-code", "codex", "agent"]
    doc = result.model_dump(mode="json")
    del doc["harnesses"]
    old = RunResult.model_validate_json(json.dumps(doc))
    assert old.harnesses == result.harnesses
    assert "| harness × model | behavioural |" in render_markdown(old, "s", {})
    single = plan_run(RUN, [bundle("s", (2, 2))], [GPT, CLAUDE])
    alone = reduce_run(single, {s.shard_id: graded(s, [True, False]) for s in single.shards}).model_dump(mode="json")
    del alone["harnesses"]
    assert RunResult.model_validate(alone).harnesses == []


def test_a_streamed_sweeps_shard_list_names_each_shard_by_its_harness_model_row(tmp_path: Path) -> None:
    """The viewer's rows of a run reduced from its segments are the figures' rows, so the model
    filter (the plan's rows) finds them and a shard's fellows are its own harness's."""
    from engine.segments import encode_segment, segment_key
    from engine.store import open_store
    from viewer.rows import rows_from_segments

    plan = plan_run(RUN, [bundle("s", (1, 1))], [GPT], harnesses=pair_harnesses(["codex", "agent"], [GPT]))
    store = open_store(str(tmp_path / "store"))
    lines = [outcome_line_of(graded(s, [True])).model_dump_json().encode() for s in plan.shards]
    store.put(segment_key(RUN, "0001"), encode_segment(lines))
    rows = {r.shard_id: r.model for r in rows_from_segments(store, RUN)}
    assert rows == {s.shard_id: s.row for s in plan.shards} and set(rows.values()) == set(plan.rows)


def test_the_viewer_keeps_a_sweeps_harness_matrix_and_the_page_escapes_what_the_repo_wrote() -> None:
    from viewer.app import harness_matrix
    from viewer.data import slim_result

    harnesses = pair_harnesses(["cmd:agent-cli --x", "agent"], [GPT])
    hostile = bundle("s", (1, 1)).model_copy(deep=True)
    first = hostile.corpus.evals[0].model_copy(update={"assertions": ("The agent prints <script>alert(1)</script>",)})
    hostile = hostile.model_copy(
        update={"corpus": hostile.corpus.model_copy(update={"evals": (first, *hostile.corpus.evals[1:])})}
    )
    plan = plan_run(RUN, [hostile], [GPT], harnesses=harnesses)
    result = reduce_run(plan, {s.shard_id: graded(s, [s.harness == "agent"]) for s in plan.shards})
    html = render_html(result)
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    doc, _ = slim_result(result.model_dump_json().encode(), RUN)
    [matrix] = harness_matrix(doc)
    assert matrix["harnesses"] == ["cmd:agent-cli --x", "agent"]
    assert [c["rate"] for c in matrix["rows"][0]["cells"]] == [0.0, 1.0]
    assert [(p["baseline"], p["harness"]) for p in matrix["pairs"]] == [("cmd:agent-cli --x", "agent")]
    assert "assertions" not in matrix["pairs"][0] and "assertions" not in doc["skills"][0]


def test_a_sweep_with_a_no_skill_arm_compares_arms_per_row_and_pairs_harnesses_on_the_current_arm() -> None:
    from schemas.shard import NO_SKILL

    harnesses = pair_harnesses(["codex", "agent"], [GPT])
    plan = plan_run(RUN, [bundle("s", (1, 1, 1))], [GPT], variants=("current", NO_SKILL), harnesses=harnesses)
    outcomes = {s.shard_id: graded(s, [s.variant == "current" or s.harness == "agent"]) for s in plan.shards}
    result = reduce_run(plan, outcomes)
    overall = {c.model: c for c in result.comparisons}
    assert set(overall) == {None, f"codex × {GPT}", f"agent × {GPT}"}
    assert overall[f"codex × {GPT}"].difference == 1.0 and overall[f"agent × {GPT}"].difference == 0.0
    [paired] = result.harness_comparisons
    assert (paired.baseline, paired.harness, paired.pairs, paired.difference) == ("codex", "agent", 3, 0.0)
