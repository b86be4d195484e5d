"""A run exported as Inspect AI eval logs, read back with Inspect's own log reader."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest
from inspect_ai.log import read_eval_log
from typer.testing import CliRunner

from engine.records import put_manifest, put_run_end
from engine.store import open_store
from producer.plan.planning import plan_run
from producer.results.export_inspect import write_logs
from reducer.stream import reduce_run
from schemas.manifest import RunManifest
from schemas.run_end import RunEnd
from schemas.shard import CURRENT, NO_SKILL
from schemas.shard_outcome import ShardOutcome
from schemas.status import ShardState
from schemas.trajectory import AssistantEvent, Event, ToolCallEvent, ToolResultEvent, Trajectory
from schemas.triggers import TriggerSettings
from schemas.verdict import ShardGrade
from tests.test_reducer import bundle, graded, plan_for
from tests.test_sweep_triggers_adaptive import GPT, RUN, trigger_bundle


def test_one_log_per_variant_and_model_with_a_sample_per_shard_and_epochs_from_one(tmp_path: Path) -> None:
    plan = plan_for([bundle("s", [2, 1])], models=("openai/a", "openai/b"), epochs=2, variants=(CURRENT, NO_SKILL))
    outcomes = {}
    for sh in plan.shards:
        if sh.case_id == 2 and sh.epoch == 1 and sh.model == "openai/a" and sh.variant == CURRENT:
            outcomes[sh.shard_id] = ShardOutcome(sh, ShardState.EXECUTOR_FAILED, detail="executor-failed: 503")
        else:
            n = 2 if sh.case_id == 1 else 1
            outcomes[sh.shard_id] = graded(sh, [sh.variant == CURRENT] * n)
    result = reduce_run(plan, outcomes)
    manifest = RunManifest(plan=plan, snapshots={})

    def load(shard_id: str) -> Trajectory:
        shard = manifest.shard(shard_id)
        return Trajectory(
            shard_id=shard_id,
            skill=shard.skill,
            case_id=shard.case_id,
            model=shard.model,
            events=[
                AssistantEvent(text="I will look first."),
                ToolCallEvent(call_id="c1", name="shell", arguments={"command": "git status"}),
                ToolResultEvent(call_id="c1", output="clean", exit_code=0),
                AssistantEvent(text="done"),
            ],
        )

    paths = write_logs(result, manifest, load, tmp_path / "inspect")
    assert len(paths) == 4  # 2 variants x 2 models
    logs = {(lg.eval.metadata["variant"], lg.eval.model): lg for lg in (read_eval_log(str(p)) for p in paths)}
    assert set(logs) == {(v, m) for v in (CURRENT, NO_SKILL) for m in ("openai/a", "openai/b")}
    current = logs[(CURRENT, "openai/a")]
    assert current.status == "success" and current.eval.task == "s[current]"
    samples = current.samples or []
    assert len(samples) == 4 and sorted({s.epoch for s in samples}) == [1, 2]
    failed = next(s for s in samples if s.id == "case-2" and s.epoch == 2)
    assert failed.error is not None and "executor-failed" in failed.error.message and not failed.scores
    ok = next(s for s in samples if s.id == "case-1" and s.epoch == 1)
    assert ok.scores is not None and ok.scores["pass_rate"].value == 1.0
    assert ok.scores["assertions"].value == {"a1": "C", "a2": "C"}
    roles = [m.role for m in ok.messages]
    assert roles == ["user", "assistant", "tool", "assistant"]
    call = ok.messages[1].tool_calls[0]  # type: ignore[union-attr]
    assert (call.function, call.arguments) == ("shell", {"command": "git status"})
    assert current.results is not None and current.results.completed_samples == 3
    without = logs[(NO_SKILL, "openai/b")]
    assert without.results is not None and without.results.scores[0].metrics["mean"].value == 0.0


def _load_of(manifest: RunManifest, fired: Mapping[str, Sequence[str]] | None = None) -> Callable[[str], Trajectory]:
    def load(shard_id: str) -> Trajectory:
        shard = manifest.shard(shard_id)
        events: list[Event] = [AssistantEvent(text="done")]
        got = None if fired is None or shard_id not in fired else list(fired[shard_id])
        return Trajectory(
            shard_id=shard_id,
            skill=shard.skill,
            case_id=shard.case_id,
            model=shard.model,
            events=events,
            skills_fired=got,
        )

    return load


def test_the_headline_is_the_reports_pooled_rate_with_the_mean_of_shares_beside_it(tmp_path: Path) -> None:
    plan = plan_for([bundle("s", [4, 2])], models=("openai/a",))
    one, two = plan.shards
    outcomes = {one.shard_id: graded(one, [True, True, True, False]), two.shard_id: graded(two, [True, False])}
    result = reduce_run(plan, outcomes)
    manifest = RunManifest(plan=plan, snapshots={})
    (path,) = write_logs(result, manifest, _load_of(manifest), tmp_path)
    lg = read_eval_log(str(path))
    assert lg.status == "success" and lg.results is not None
    (score,) = lg.results.scores
    assert list(score.metrics) == ["pooled", "mean"]  # the first metric is Inspect's headline
    assert score.metrics["pooled"].value == pytest.approx(4 / 6) == result.skills[0].models[0].behavioural.rate
    assert score.metrics["mean"].value == pytest.approx(0.625)
    assert lg.results.headline is not None and lg.results.headline.metric == "pooled"
    assert lg.eval.headline_metric is not None and lg.eval.headline_metric.metric == "pooled"


def test_a_trigger_run_exports_whether_each_query_fired_as_it_should(tmp_path: Path) -> None:
    plan = plan_run(RUN, [trigger_bundle()], [GPT], epochs=2)
    what = {1: ("pdf",), 2: ("other-skill",), 3: ("pdf",)}  # right, missed, false trigger
    fired = {s.shard_id: what[s.case_id] for s in plan.shards}
    outcomes = {
        s.shard_id: ShardOutcome(
            s,
            ShardState.GRADED,
            grade=ShardGrade(shard_id=s.shard_id, state=ShardState.GRADED),
            skills_fired=fired[s.shard_id],
        )
        for s in plan.shards
    }
    result = reduce_run(plan, outcomes, triggers=TriggerSettings())
    manifest = RunManifest(plan=plan, snapshots={})
    (path,) = write_logs(result, manifest, _load_of(manifest, fired), tmp_path)
    lg = read_eval_log(str(path))
    assert lg.status == "success" and lg.results is not None
    samples = {(s.id, s.epoch): s for s in lg.samples or []}
    assert len(samples) == 6
    right, missed, false = samples[("case-1", 1)], samples[("case-2", 2)], samples[("case-3", 1)]
    assert right.scores is not None and right.scores["trigger"].value == 1.0 and right.target == "fires"
    assert missed.scores is not None and missed.scores["trigger"].value == 0.0
    assert missed.scores["trigger"].metadata == {"should_trigger": True, "fired": ["other-skill"]}
    assert false.scores is not None and false.scores["trigger"].value == 0.0 and false.target == "does not fire"
    assert "pass_rate" not in (right.scores or {})
    (score,) = lg.results.scores
    assert score.name == "trigger" and score.metrics["accuracy"].value == pytest.approx(2 / 6)
    assert score.metrics["recall"].value == pytest.approx(0.5) and score.metrics["false_trigger"].value == 1.0
    assert lg.results.headline is not None and lg.results.headline.metric == "accuracy"


def test_a_run_with_no_result_is_never_a_successful_log_scoring_zero(tmp_path: Path) -> None:
    plan = plan_for([bundle("s", [1, 1])], models=("openai/a",))
    manifest = RunManifest(plan=plan, snapshots={})
    one = plan.shards[0]
    blocked = RunEnd(run_id=plan.run_id, how="blocked", reason="BLOCKED_NO_SANDBOX: bwrap cannot start")
    stopped = RunEnd(run_id=plan.run_id, how="interrupted", reason="stopped by Ctrl-C")
    half = {one.shard_id: graded(one, [True])}
    failed = {
        s.shard_id: ShardOutcome(s, ShardState.EXECUTOR_FAILED, detail="executor-failed: 503") for s in plan.shards
    }
    for name, outcomes, end, status, error in [
        ("blocked", {}, blocked, "error", "BLOCKED: BLOCKED_NO_SANDBOX: bwrap cannot start"),
        ("running", half, None, "started", None),
        ("interrupted", half, stopped, "cancelled", "interrupted: stopped by Ctrl-C"),
        ("infra", failed, None, "error", "nothing graded"),
    ]:
        (path,) = write_logs(reduce_run(plan, outcomes), manifest, _load_of(manifest), tmp_path / name, end)
        lg = read_eval_log(str(path))
        assert lg.status == status, name
        if error is None:
            assert lg.error is None, name
        else:
            assert lg.error is not None and error in lg.error.message, name
        if not outcomes or outcomes is failed:
            assert lg.results is not None and lg.results.scores == [], name  # no score, never a 0


def test_export_of_a_run_its_checks_refused_reads_blocked_from_the_store(tmp_path: Path) -> None:
    from producer.commands.cli import app

    plan = plan_for([bundle("s", [1, 1])], models=("openai/a",))
    store = open_store(f"file://{tmp_path / 'store'}")
    put_manifest(store, RunManifest(plan=plan, snapshots={}))
    put_run_end(store, RunEnd(run_id=plan.run_id, how="blocked", reason="BLOCKED_NO_SANDBOX: bwrap cannot start"))
    ran = CliRunner().invoke(
        app, ["export", plan.run_id, "--store", f"file://{tmp_path / 'store'}", "--out", str(tmp_path / "out")]
    )
    assert ran.exit_code == 0, ran.output
    (path,) = (tmp_path / "out").iterdir()
    lg = read_eval_log(str(path))
    assert lg.status == "error" and lg.error is not None and "BLOCKED_NO_SANDBOX" in lg.error.message


def test_recorded_model_names_make_distinct_bounded_file_names(tmp_path: Path) -> None:
    """Two names with one safe form once wrote one file, the second over the first; a long name
    was an OSError. Each log now has its own file, named within the file-name limit."""
    crafted = "recorded-exec-" + hashlib.sha256(b"recorded exec").hexdigest()[:10]  # another's safe form
    models = ("recorded exec", "recorded-exec", "m" * 300, "recorded-exec_x", crafted)
    plan = plan_for([bundle("s", [1, 1])], models=models, epochs=1)
    outcomes = {sh.shard_id: graded(sh, [True]) for sh in plan.shards}
    manifest = RunManifest(plan=plan, snapshots={})
    paths = write_logs(reduce_run(plan, outcomes), manifest, lambda _id: None, tmp_path / "inspect")
    assert len({p.name for p in paths}) == len(models) == len(list((tmp_path / "inspect").iterdir()))
    assert all(len(p.name.encode()) < 255 for p in paths)
    assert {read_eval_log(str(p)).eval.model for p in paths} == set(models)
    assert any(p.name.endswith("_recorded-exec.eval") for p in paths)  # a safe name is kept as it is
