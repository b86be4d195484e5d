"""What the execute, grade and reduce tasks do. Celery-free so it can be called and tested directly.

Every step is idempotent: a redelivered message for a shard that another worker holds, or
that already moved on, does nothing (the claim fails), and results are written under the
shard's deterministic id.
"""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import structlog

from engine.state import MAX_ATTEMPTS
from schemas.constants import KEY_PREFIX
from schemas.errors import BlockedError, InfraError, ModelCallFailed, NoSandbox, SkillEvalError
from schemas.manifest import RunManifest, calibration_key, grade_key, outcome_key, result_key, trajectory_key
from schemas.shard import BASELINE_PREFIX, NO_SKILL
from schemas.status import SandboxMode, ShardState
from schemas.trajectory import Trajectory
from worker.context import Context, with_redis_retry

log = structlog.get_logger("skill_eval.worker")

Send = Callable[[str, str, str | None], None]
"""send(task_name, run_id, shard_id or None): enqueue a follow-up task."""


@dataclass(frozen=True)
class Outcome:
    """Why a shard ended outside the happy path; stored at ``outcome_key``."""

    state: ShardState
    detail: str

    def to_json(self) -> bytes:
        return json.dumps({"state": self.state.value, "detail": self.detail}).encode()


@contextmanager
def heartbeat(ctx: Context, run_id: str, shard_id: str, token: str) -> Iterator[threading.Event]:
    """Refresh the shard's lease while the body runs; the event is set if the lease was lost."""
    stop, lost = threading.Event(), threading.Event()
    ttl = ctx.settings.lease_ttl_s

    def beat() -> None:
        while not stop.wait(ttl / 3):
            try:
                if not ctx.state.heartbeat(run_id, shard_id, token, ttl):
                    lost.set()
                    return
            except Exception as exc:  # a Redis blip: keep trying until the lease would lapse
                log.warning("heartbeat failed", run_id=run_id, shard_id=shard_id, error=str(exc))

    thread = threading.Thread(target=beat, name=f"lease-{shard_id}", daemon=True)
    thread.start()
    try:
        yield lost
    finally:
        stop.set()
        thread.join(5)


def still_ours(ctx: Context, run_id: str, shard_id: str, token: str) -> bool:
    """Renew the lease now and say whether we still hold it; call right before writing results.

    A worker that stalled past its lease (the shard was reclaimed by another) must not overwrite
    the new owner's trajectory, grade or outcome: the heartbeat thread notices only every third
    of a lease, so the check is repeated at the moment of writing.
    """
    if not token:
        return True
    ours = with_redis_retry(lambda: ctx.state.heartbeat(run_id, shard_id, token, ctx.settings.lease_ttl_s))
    if not ours:
        log.warning("lease lost; result discarded, another worker owns the shard", run_id=run_id, shard_id=shard_id)
    return ours


def finish(
    ctx: Context, send: Send, run_id: str, shard_id: str, state: ShardState, token: str, detail: str = ""
) -> None:
    """Record a terminal outcome and move the shard; the mover of the run's last shard enqueues reduce."""
    # The outcome record is authoritative for reports (a re-run overwrites it; a stale grade
    # from an earlier attempt is only used when its state matches). It is written before the
    # transition so the reducer, started by whoever finishes last, always finds it.
    if not still_ours(ctx, run_id, shard_id, token):
        return
    ctx.store.put(outcome_key(run_id, shard_id), Outcome(state, detail).to_json())
    moved = with_redis_retry(lambda: ctx.state.transition(run_id, shard_id, state, token))
    log.info("shard finished", run_id=run_id, shard_id=shard_id, state=state.value, moved=moved.moved)
    if moved.finished_run:
        send("reduce", run_id, None)


def given_up(ctx: Context, send: Send, run_id: str, shard_id: str, leased: ShardState, token: str) -> bool:
    """End a shard whose workers died on it MAX_ATTEMPTS times (an infra failure); True when it was ended."""
    attempt = with_redis_retry(lambda: ctx.state.attempts(run_id, shard_id, leased))
    if attempt <= MAX_ATTEMPTS:
        return False
    state = ShardState.EXECUTOR_FAILED if leased is ShardState.EXECUTING else ShardState.GRADER_DISPATCH_FAILED
    detail = f"{state.value}: the worker died {MAX_ATTEMPTS} times while {leased.value} this shard"
    log.warning("shard given up", run_id=run_id, shard_id=shard_id, state=state.value, attempts=attempt - 1)
    finish(ctx, send, run_id, shard_id, state, token, detail)
    return True


def claim(ctx: Context, send: Send, run_id: str, shard_id: str, src: ShardState, dst: ShardState) -> str | None:
    """Take the shard ``src -> dst`` under a fresh lease; the lease token, or None when this delivery
    has nothing to do (another worker holds it, it moved on, or it was just given up on)."""
    token = secrets.token_hex(8)
    ttl = ctx.settings.lease_ttl_s
    if not with_redis_retry(lambda: ctx.state.claim(run_id, shard_id, src, dst, token, ttl)):
        task = "execute" if dst is ShardState.EXECUTING else "grade"
        log.info(f"{task} skipped: shard not claimable", run_id=run_id, shard_id=shard_id)
        return None
    if given_up(ctx, send, run_id, shard_id, dst, token):
        return None
    return token


def execute_shard(ctx: Context, send: Send, run_id: str, shard_id: str) -> None:
    """Materialize the workspace, run the executor in the sandbox, store the trajectory, enqueue grading."""
    token = claim(ctx, send, run_id, shard_id, ShardState.QUEUED, ShardState.EXECUTING)
    if token is None:
        return
    bound = log.bind(run_id=run_id, shard_id=shard_id)
    manifest = ctx.manifest(run_id)
    with heartbeat(ctx, run_id, shard_id, token) as lost:
        try:
            trajectory = run_executor(ctx, manifest, shard_id)
        except BlockedError as exc:
            bound.warning("shard blocked", status=exc.status, detail=exc.detail)
            finish(ctx, send, run_id, shard_id, ShardState.BLOCKED, token, str(exc))
            return
        except (InfraError, ModelCallFailed) as exc:
            bound.warning("executor failed", error=str(exc))
            finish(ctx, send, run_id, shard_id, ShardState.EXECUTOR_FAILED, token, str(exc))
            return
        except Exception as exc:  # the evaluator broke, not the skill: an infra failure, never a pass or fail
            bound.exception("executor crashed")
            finish(ctx, send, run_id, shard_id, ShardState.EXECUTOR_FAILED, token, f"executor-failed: {exc!r}")
            return
        if lost.is_set() or not still_ours(ctx, run_id, shard_id, token):
            return
        ctx.store.put(trajectory_key(run_id, shard_id), trajectory.model_dump_json().encode())
    moved = with_redis_retry(lambda: ctx.state.transition(run_id, shard_id, ShardState.EXECUTED, token))
    if moved.moved:
        send("grade", run_id, shard_id)


def run_executor(ctx: Context, manifest: RunManifest, shard_id: str) -> Trajectory:
    """Workspace + sandbox + executor for one shard (raises the contract's named errors)."""
    from worker.executor.agent import run_agent
    from worker.sandbox import SandboxLimits, open_sandbox, require_sandbox
    from worker.workspace import materialize_workspace

    shard = manifest.shard(shard_id)
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
        strip_skill=shard.variant == NO_SKILL,
        graded_paths=bundle.graded_paths,
    ) as ws:
        # The skill text comes from the workspace itself, so a baseline shard reads the OLD skill;
        # the no-skill arm has none (skill_text None: the bare case prompt).
        skill_dir = ws.path / "skills" / shard.skill
        skill_text: str | None = None
        agents: dict[str, str] = {}
        if shard.variant != NO_SKILL:
            skill_text = (skill_dir / "SKILL.md").read_text(encoding="utf-8", errors="replace")
            agents = {
                p.name: p.read_text(encoding="utf-8", errors="replace") for p in sorted(skill_dir.glob("agents/*.md"))
            }
        budget = settings.budget
        limits = SandboxLimits(timeout_s=budget.command_timeout_s)
        if settings.executor.startswith("cmd:"):
            from worker.executor.external import ExternalExecutor, external_limits, run_external

            return run_external(
                ExternalExecutor.from_option(settings.executor),
                skill=shard.skill,
                skill_text=skill_text,
                agent_texts=agents,
                case=case,
                sandbox=open_sandbox(
                    ws.path, manifest.plan.sandbox, external_limits(limits, wall_clock_s=budget.wall_clock_s)
                ),
                wall_clock_s=budget.wall_clock_s,
                shard_id=shard_id,
            )
        sandbox = open_sandbox(ws.path, manifest.plan.sandbox, limits)
        return run_agent(
            ctx.model_client(manifest.plan.run_id),  # type: ignore[arg-type]
            shard.model,
            skill=shard.skill,
            skill_text=skill_text,
            agent_texts=agents,
            case=case,
            sandbox=sandbox,
            budget=budget,
            shard_id=shard_id,
        )


def grade_shard(ctx: Context, send: Send, run_id: str, shard_id: str) -> None:
    """Judge the stored trajectory against the case's assertions; store the grade; finish the shard."""
    from worker.grading.judge import grade_trajectory

    token = claim(ctx, send, run_id, shard_id, ShardState.EXECUTED, ShardState.GRADING)
    if token is None:
        return
    manifest = ctx.manifest(run_id)
    shard = manifest.shard(shard_id)
    case = manifest.plan.bundle(shard.skill).corpus.case(shard.case_id)
    client = ctx.model_client(run_id)
    with heartbeat(ctx, run_id, shard_id, token) as lost:
        try:
            trajectory = Trajectory.model_validate_json(ctx.store.get(trajectory_key(run_id, shard_id)))
            if manifest.settings.calibrate:
                for judge in manifest.plan.judges:
                    ensure_calibrated(ctx, client, run_id, judge)
            grade = grade_trajectory(
                client,  # type: ignore[arg-type]
                manifest.plan.judges,
                case.assertions,
                trajectory,
                skill=shard.skill,
                shard_id=shard_id,
                strict_evidence=manifest.settings.strict_evidence,
            )
        except SkillEvalError as exc:
            finish(ctx, send, run_id, shard_id, ShardState.GRADER_DISPATCH_FAILED, token, str(exc))
            return
        except Exception as exc:
            log.exception("grader crashed", run_id=run_id, shard_id=shard_id)
            finish(ctx, send, run_id, shard_id, ShardState.GRADER_DISPATCH_FAILED, token, f"grader crashed: {exc!r}")
            return
        if lost.is_set() or not still_ours(ctx, run_id, shard_id, token):
            return
        ctx.store.put(grade_key(run_id, shard_id), grade.model_dump_json().encode())
    finish(ctx, send, run_id, shard_id, grade.state, token, grade.error)


def ensure_calibrated(ctx: Context, client: object, run_id: str, judge: str) -> None:
    """Grade the built-in calibration trajectories with ``judge`` once per run.

    One worker takes a Redis lock and calibrates; the others go on grading. The lock
    holder's own shard ends only after the result is stored, so by the time the run's
    last shard is terminal (and reduce starts) every judge's calibration is recorded.
    """
    from worker.grading.calibration import calibrate

    key = calibration_key(run_id, judge)
    if ctx.store.exists(key):
        return
    lock = f"{KEY_PREFIX}:run:{run_id}:calibrating:{judge}"
    if not with_redis_retry(lambda: ctx.redis.set(lock, "1", nx=True, ex=900)):
        return
    result = calibrate(client, judge)  # type: ignore[arg-type]
    status = "ok" if result.ok else "failed: " + "; ".join(result.details)
    ctx.store.put(key, json.dumps({"judge": judge, "status": status}).encode())


def reduce_run(ctx: Context, run_id: str) -> None:
    """Reduce from the store (idempotent), store the result, stop watching the run."""
    from engine.collect import reduce_from_store

    manifest = ctx.manifest(run_id)
    try:
        result = reduce_from_store(ctx.store, manifest)
        ctx.store.put(result_key(run_id), result.model_dump_json().encode())
    except Exception:
        # Nobody else will ever mark the run reduced: a submitter waiting for it would wait
        # forever. Release it; with no stored result it reduces itself and shows this error.
        log.exception("reduce failed", run_id=run_id)
        with_redis_retry(lambda: ctx.state.finish(run_id))
        raise
    with_redis_retry(lambda: ctx.state.finish(run_id))
    log.info("run reduced", run_id=run_id, verdict=result.verdict.value)
