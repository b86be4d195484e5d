"""A run exported as Inspect AI eval logs, read back with Inspect's own log reader."""

from __future__ import annotations

from pathlib import Path

from inspect_ai.log import read_eval_log

from producer.results.export_inspect import write_logs
from reducer.stream import reduce_run
from schemas.manifest import RunManifest
from schemas.shard import CURRENT, NO_SKILL
from schemas.shard_outcome import ShardOutcome
from schemas.status import ShardState
from schemas.trajectory import AssistantEvent, ToolCallEvent, ToolResultEvent, Trajectory
from tests.test_reducer import bundle, graded, plan_for


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
