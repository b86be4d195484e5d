"""What the execute, grade and reduce tasks do. Celery-free so it can be called and tested directly.

Every step is idempotent: a redelivered message for a shard that another worker holds, or
that already moved on, does nothing (the claim fails, see :mod:`worker.lifecycle`), and
results are written under the shard's deterministic id.
"""

from __future__ import annotations

import structlog

from engine.broker import Broker
from engine.keys import calibrating_key
from engine.records import commit_grade, put_calibration, put_result
from schemas.errors import NoSandbox
from schemas.manifest import RunManifest, calibration_key, trajectory_key
from schemas.outcome import CalibrationRecord, CalibrationStatus, ShardOutcomeRecord
from schemas.shard import BASELINE_PREFIX, GUTTED, NO_SKILL
from schemas.status import SandboxMode, ShardState
from schemas.trajectory import Trajectory
from worker.context import Context, with_redis_retry
from worker.lifecycle import shard_lease
from worker.models.base import ModelClient

log = structlog.get_logger("skill_eval.worker")


def execute_shard(ctx: Context, broker: Broker, run_id: str, shard_id: str) -> None:
    """Materialize the workspace, run the executor in the sandbox, store the trajectory, send grading."""
    with shard_lease(ctx, broker, run_id, shard_id, ShardState.QUEUED, ShardState.EXECUTING) as lease:
        if lease is None:
            return
        trajectory = run_executor(ctx, lease.manifest, shard_id)
        if not lease.renew():
            return
        ctx.store.put(trajectory_key(run_id, shard_id), trajectory.model_dump_json().encode())
        if lease.manifest.settings.triggers is not None:
            # A trigger shard's result is what fired, read from the record: nothing to judge.
            lease.end(ShardOutcomeRecord(state=ShardState.GRADED), None, trajectory)
            return
        lease.advance(ShardState.EXECUTED)


def run_executor(ctx: Context, manifest: RunManifest, shard_id: str) -> Trajectory:
    """Workspace + sandbox + executor for one shard (raises the contract's named errors)."""
    from engine.repo_files import read_skill
    from worker.executor.registry import ShardJob, executor_for
    from worker.sandbox import SandboxLimits, require_sandbox
    from worker.workspace import materialize_workspace

    shard = manifest.shard(shard_id)
    executor = executor_for(manifest.executor_of(shard))
    bundle = manifest.plan.bundle(shard.skill)
    case = bundle.corpus.case(shard.case_id)
    settings = manifest.settings
    if ctx.settings.sandbox is SandboxMode.BWRAP and manifest.plan.sandbox is not SandboxMode.BWRAP:
        # A worker configured for bubblewrap never runs a shard unconfined because a submitter asked.
        raise NoSandbox(
            f"this worker requires the bwrap sandbox; run {manifest.plan.run_id} asked for "
            f"--sandbox {manifest.plan.sandbox.value} (start the worker with --sandbox none to allow it)"
        )
    require_sandbox(manifest.plan.sandbox)
    ref = shard.variant[len(BASELINE_PREFIX) :] if shard.variant.startswith(BASELINE_PREFIX) else None
    with materialize_workspace(
        ctx.store,
        manifest.snapshots[shard.variant],
        skill=shard.skill,
        case=case,
        parent=ctx.settings.workspaces_dir,
        cache_dir=ctx.settings.cache_dir,
        ref=ref,
        strip_skill=shard.variant in (NO_SKILL, GUTTED),
        graded_paths=bundle.graded_paths,
        gut_skill=shard.variant == GUTTED,
    ) as ws:
        # The skill text comes from the workspace itself, so a baseline shard reads the OLD skill;
        # the no-skill arm has none (skill_text None: the bare case prompt), the gutted arm its name and
        # description only (materialize_workspace wrote it so). Read without
        # following a link out of the workspace (BLOCKED_BAD_REPO otherwise).
        skill_text: str | None = None
        agents: dict[str, str] = {}
        if shard.variant != NO_SKILL:
            skill_text, agents = read_skill(ws.path, shard.skill)
        limits = SandboxLimits(timeout_s=settings.budget.command_timeout_s)
        job = ShardJob(ctx, manifest, shard_id, case, ws.path, skill_text, agents, limits)
        return executor.run(job)


def grade_shard(ctx: Context, broker: Broker, run_id: str, shard_id: str) -> None:
    """Judge the stored trajectory against the case's assertions; store the grade; end the shard."""
    from worker.grading.calibration import wait_for_background
    from worker.grading.judge import grade_trajectory

    with shard_lease(ctx, broker, run_id, shard_id, ShardState.EXECUTED, ShardState.GRADING) as lease:
        if lease is None:
            return
        manifest = lease.manifest
        shard = manifest.shard(shard_id)
        case = manifest.plan.bundle(shard.skill).corpus.case(shard.case_id)
        client = ctx.model_client(run_id)
        trajectory = Trajectory.model_validate_json(ctx.store.get(trajectory_key(run_id, shard_id)))
        if manifest.settings.calibrate:
            for judge in manifest.plan.judges:
                wait_for_background(run_id, judge)  # started by this run's preflight, if here
                ensure_calibrated(ctx, client, run_id, judge)
        grade = grade_trajectory(
            client,
            manifest.plan.judges,
            case.assertions,
            trajectory,
            skill=shard.skill,
            shard_id=shard_id,
            strict_evidence=manifest.settings.strict_evidence,
        )
        if not lease.renew():
            return
        grade = commit_grade(ctx.store, run_id, shard_id, lease.attempt, grade)
        status = "" if grade.state is ShardState.GRADED else grade.state.value
        lease.end(ShardOutcomeRecord(state=grade.state, detail=grade.error, status=status), grade, trajectory)


def ensure_calibrated(ctx: Context, client: ModelClient, run_id: str, judge: str) -> None:
    """Grade the built-in calibration trajectories with ``judge`` once per run.

    One worker takes a Redis lock and calibrates; the others go on grading. The lock
    holder's own shard ends only after the result is stored, so by the time the run's
    last shard is terminal (and reduce starts) every judge's calibration is recorded.
    """
    from worker.grading.calibration import calibrate, labelled_cases

    if ctx.store.exists(calibration_key(run_id, judge)):
        return
    if not with_redis_retry(lambda: ctx.redis.set(calibrating_key(run_id, judge), "1", nx=True, ex=900)):
        return
    labelled = labelled_cases(ctx.store, ctx.manifest(run_id).settings.calibrate_with)
    result = calibrate(client, judge, labelled=labelled)
    status = CalibrationStatus.OK if result.ok else CalibrationStatus.FAILED
    put_calibration(ctx.store, run_id, CalibrationRecord(judge=judge, status=status, details=list(result.details)))


def reduce_stored_run(ctx: Context, run_id: str) -> None:
    """Reduce from the store (idempotent), store the result, mark the run reduced."""
    from engine.collect import StoredRun
    from engine.delivery import Delivery
    from reducer.from_store import run_result

    records = StoredRun(ctx.store, run_id, ended=lambda: with_redis_retry(lambda: ctx.state.totals(run_id))[0])
    try:
        with_redis_retry(lambda: Delivery(ctx.redis).reducing(run_id))  # the reaper's lost-reduce clock
        with_redis_retry(lambda: ctx.segments.flush(run_id))  # seal the last lines (and any a dead worker left)
        reduced = run_result(records, stream_from=ctx.settings.stream_reduce_shards)
        if reduced.streamed:
            log.info(
                "reduced from outcome segments",
                run_id=run_id,
                lines=reduced.lines,
                shards=reduced.shards,
                rebuilt=reduced.rebuilt,
                unreadable=reduced.unreadable,
            )
        result = reduced.result
        put_result(ctx.store, result)
    except Exception:
        # Nobody else will ever mark the run reduced: a submitter waiting for it would wait
        # forever. Release it; with no stored result it reduces itself and shows this error.
        log.exception("reduce failed", run_id=run_id)
        with_redis_retry(lambda: ctx.state.mark_reduced(run_id))
        raise
    with_redis_retry(lambda: ctx.state.mark_reduced(run_id))
    log.info("run reduced", run_id=run_id, verdict=result.verdict.value)
