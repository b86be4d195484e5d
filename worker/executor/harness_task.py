"""A harness shard as the execute task runs it: the run's model config, limiter and usage counters wired in.

A harness binary missing on a cluster worker is that worker's failure, not the corpus's:
``BLOCKED_NO_HARNESS`` becomes ``executor-failed`` with the same text (an embedded run has
already refused before enqueuing anything).
"""

from __future__ import annotations

from engine.usage import record_usage
from harnesses.base import Harness, Invoke
from schemas.errors import ExecutorFailed, NoHarness
from schemas.shard import NO_SKILL
from schemas.trajectory import Trajectory
from worker.executor.allowed import case_budget
from worker.executor.harness import HarnessShard, harness_limits, run_harness
from worker.executor.shard_job import ShardJob
from worker.preflight import upstream_fails
from worker.sandbox import open_sandbox


def run_harness_shard(job: ShardJob, harness: Harness) -> Trajectory:
    """Run ``harness`` for the job's shard in its workspace."""
    ctx, manifest, shard_id, case = job.ctx, job.manifest, job.shard_id, job.case
    settings = manifest.settings
    shard = manifest.shard(shard_id)
    config = settings.models
    run_id = manifest.plan.run_id
    triggers = settings.triggers

    def usage(prompt: int, completion: int, ok: bool, rate_limited: bool) -> None:
        counts = {"attempts": 1, "calls": int(ok), "rate_limited": int(rate_limited), "errors": int(not ok)}
        record_usage(ctx.redis, shard.model, run_id, prompt_tokens=prompt, completion_tokens=completion, **counts)

    from engine.budget import RunBudget
    from worker.models.limiter import Limiter

    model_limits = config.for_model(shard.model)
    sandbox = open_sandbox(
        job.workspace, manifest.plan.sandbox, harness_limits(job.limits, wall_clock_s=settings.budget.wall_clock_s)
    )
    try:
        return run_harness(
            HarnessShard(
                harness=harness,
                model=shard.model,
                skill=shard.skill,
                case=case,
                # The no-skill arm stages nothing (the skill folder is gone) and gets the bare prompt;
                # a trigger query is always bare, and its turns are the trigger turns.
                invoke=Invoke.IMPLICIT if shard.variant == NO_SKILL or triggers else Invoke(settings.invoke),
                budget=settings.budget.model_copy(update={"max_turns": triggers.turns})
                if triggers
                else case_budget(settings.budget, case),
                shard_id=shard_id,
                triggers=triggers is not None,
            ),
            sandbox=sandbox,
            limits=model_limits,
            limiter=Limiter(ctx.redis, model_limits, config.limiter),
            usage=usage,
            tmp_parent=ctx.settings.workspaces_dir,
            upstream_check=lambda: upstream_fails(ctx.model_client(run_id), shard.model),
            run_budget=RunBudget(
                ctx.redis,
                run_id,
                capped=settings.max_cost_usd is not None or settings.max_tokens is not None,
                shards=len(manifest.plan.shards),
            ),
        )
    except NoHarness as exc:
        raise ExecutorFailed(str(exc)) from exc
