"""A shard's life on a worker, in one place: claim -> lease -> outcome -> transition.

:func:`shard_lease` owns the lease from the claim to the shard's next state:

1. **claim** ``src -> dst`` under a fresh lease token (a redelivered message, or one for a
   shard another worker holds or that moved on, claims nothing and the body never runs);
2. **give up** a shard claimed more than ``MAX_CLAIMS`` times (its workers died on it, or could
   not record its end: the store's error is cited then);
3. **heartbeat** the lease while the body works, noting if it was lost (reclaimed by the
   reaper after a stall);
4. the body ends the shard with :meth:`ShardLease.end` (a terminal outcome) or moves it on
   with :meth:`ShardLease.advance`; both check the lease once more right before writing, so
   a worker that stalled past its lease never overwrites the new owner's results;
5. an exception from the body ends the shard by **one rule** (:func:`failure_outcome`) read
   from the error's own attributes.

Messages are acked late and the reaper re-sends expired leases, so every step is safe to
repeat; see docs/design/engine.md.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import structlog
from pydantic import ValidationError

from engine.broker import Broker, queue_of, send_shard
from engine.collect import load_trajectory
from engine.records import commit_outcome
from engine.state import MAX_CLAIMS
from schemas.constants import QUEUE_REDUCE
from schemas.errors import ArtifactMissing, BlockedError, InfraError, SkillEvalError, StoreError
from schemas.manifest import RunManifest
from schemas.outcome import ShardOutcomeRecord
from schemas.shard_outcome import outcome_line
from schemas.status import ShardState
from schemas.trajectory import Trajectory
from schemas.verdict import ShardGrade
from worker.context import Context, with_redis_retry
from worker.deadline import within_deadline

log = structlog.get_logger("skill_eval.worker")

PHASE_FAILURE = {
    ShardState.EXECUTING: ShardState.EXECUTOR_FAILED,
    ShardState.GRADING: ShardState.GRADER_DISPATCH_FAILED,
}
"""The infra failure a shard ends in when its work in that leased state fails for no named reason."""


def failure_outcome(exc: BaseException, leased: ShardState) -> ShardOutcomeRecord:
    """The one rule from an exception to a terminal outcome.

    A ``BlockedError`` ends the shard ``blocked`` (its ``stops_run`` decides whether the run's
    verdict is BLOCKED); an ``InfraError`` ends it in its own ``state``; any other named error
    (a model call that spent its retries, a store error) and any crash is the evaluator
    failing in this phase, never a pass or fail.
    """
    phase_failure = PHASE_FAILURE[leased]
    if isinstance(exc, BlockedError):
        return ShardOutcomeRecord(state=ShardState.BLOCKED, detail=str(exc), status=exc.status, stops_run=exc.stops_run)
    if isinstance(exc, InfraError):
        return ShardOutcomeRecord(state=exc.state, detail=str(exc), status=exc.status)
    if isinstance(exc, SkillEvalError):
        return ShardOutcomeRecord(state=phase_failure, detail=str(exc), status=exc.status)
    return ShardOutcomeRecord(state=phase_failure, detail=f"{phase_failure.value}: {exc!r}", status=phase_failure.value)


@dataclass
class ShardLease:
    """This worker's hold on one shard, from its claim until it ends or moves on."""

    ctx: Context
    broker: Broker
    run_id: str
    shard_id: str
    leased: ShardState
    """executing or grading."""
    token: str
    claims: int = 1
    """Times the shard was claimed into ``leased``, this claim included."""
    attempt: int = 0
    """Which attempt of the shard this is (0, then one more per resubmit): its final records' key."""
    lost: threading.Event = field(default_factory=threading.Event)
    """Set by the heartbeat when the lease turned out to be someone else's."""
    settled: bool = False
    """The shard was ended or moved on (or found lost); later errors are not the shard's."""

    @property
    def manifest(self) -> RunManifest:
        """The run's manifest (read once per process, before the body starts)."""
        return self.ctx.manifest(self.run_id)

    def renew(self) -> bool:
        """Renew the lease now; False when it is no longer ours. Call right before writing results.

        The heartbeat notices a lost lease only every third of a lease period, so the check is
        repeated at the moment of writing.
        """
        if self.lost.is_set():
            return False
        ours = with_redis_retry(
            lambda: self.ctx.state.heartbeat(self.run_id, self.shard_id, self.token, self.ctx.settings.lease_ttl_s)
        )
        if not ours:
            log.warning(
                "lease lost; result discarded, another worker owns the shard",
                run_id=self.run_id,
                shard_id=self.shard_id,
            )
        return ours

    def end(
        self, outcome: ShardOutcomeRecord, grade: ShardGrade | None = None, trajectory: Trajectory | None = None
    ) -> None:
        """Record the terminal outcome and move the shard; the mover of the run's last shard sends reduce.

        The outcome (and its compact line, for a streamed reduce) is written before the
        transition so the reducer, started by whoever finishes last, always finds it.
        """
        self.settled = True
        if not self.renew():
            return
        try:
            committed = commit_outcome(self.ctx.store, self.run_id, self.shard_id, self.attempt, outcome)
        except StoreError as exc:
            # Nothing recorded: the lease lapses and the shard is claimed again. Should the store keep
            # refusing, the claim that gives it up says so, not that a worker died.
            why = outcome.detail if outcome.status == exc.status else str(exc)
            state = self.ctx.state
            with_redis_retry(lambda: state.note_unrecorded(self.run_id, self.shard_id, self.leased, self.attempt, why))
            raise
        if committed != outcome:
            log.warning(
                "another delivery of this attempt committed first; its outcome stands",
                run_id=self.run_id,
                shard_id=self.shard_id,
                attempt=self.attempt,
            )
            outcome, grade = committed, None
        self._push_line(outcome, grade, trajectory)
        moved = with_redis_retry(
            lambda: self.ctx.state.transition(self.run_id, self.shard_id, outcome.state, self.token)
        )
        log.info(
            "shard ended", run_id=self.run_id, shard_id=self.shard_id, state=outcome.state.value, moved=moved.moved
        )
        if moved.finished_run:
            self.broker.send(QUEUE_REDUCE, self.run_id)

    def _push_line(self, outcome: ShardOutcomeRecord, grade: ShardGrade | None, trajectory: Trajectory | None) -> None:
        """Push the shard's outcome line. A failure loses nothing: the reducer rebuilds missing lines
        from the full records just written (and a shard whose manifest is unreadable has no line)."""
        try:
            if trajectory is None and self.leased is ShardState.GRADING:  # failed while grading: it was stored
                trajectory = load_trajectory(self.ctx.store, self.run_id, self.shard_id)
            line = outcome_line(self.manifest.shard(self.shard_id), outcome, grade, trajectory)
            with_redis_retry(lambda: self.ctx.segments.push(self.run_id, line))
        except Exception as exc:
            log.warning("outcome line not pushed", run_id=self.run_id, shard_id=self.shard_id, error=str(exc))

    def advance(self, state: ShardState) -> None:
        """Move the shard to a non-terminal ``state`` and send it to that state's queue."""
        self.settled = True
        moved = with_redis_retry(lambda: self.ctx.state.transition(self.run_id, self.shard_id, state, self.token))
        if moved.moved:
            send_shard(self.broker, self.run_id, self.shard_id, state)


@contextmanager
def _heartbeat(lease: ShardLease) -> Iterator[None]:
    """Refresh the lease every third of its period while the body runs; set ``lease.lost`` if it is gone.

    Also hands the shard back (lease released, message re-sent) when its node's shutdown grace
    runs out (worker/shutdown.py); ``lease.lost`` is then set as well, so nothing is written.
    """
    from worker.shutdown import watch_handback

    stop = threading.Event()
    ttl = lease.ctx.settings.lease_ttl_s

    def beat() -> None:
        while not stop.wait(ttl / 3):
            try:
                if not lease.ctx.state.heartbeat(lease.run_id, lease.shard_id, lease.token, ttl):
                    lease.lost.set()
                    return
            except Exception as exc:  # a Redis blip: keep trying until the lease would lapse
                log.warning("heartbeat failed", run_id=lease.run_id, shard_id=lease.shard_id, error=str(exc))

    thread = threading.Thread(target=beat, name=f"lease-{lease.shard_id}", daemon=True)
    thread.start()
    watcher = watch_handback(lease.ctx, lease.broker, lease.run_id, lease.shard_id, lease.token, stop, lease.lost)
    try:
        yield
    finally:
        stop.set()
        thread.join(5)
        if watcher is not None:
            watcher.join(5)


def _claim(
    ctx: Context, broker: Broker, run_id: str, shard_id: str, src: ShardState, dst: ShardState
) -> ShardLease | None:
    """Take the shard ``src -> dst`` under a fresh lease; None when this delivery has nothing to do."""
    token = secrets.token_hex(8)
    ttl = ctx.settings.lease_ttl_s
    claim = with_redis_retry(lambda: ctx.state.claim(run_id, shard_id, src, dst, token, ttl))
    if claim is None:
        log.info(f"{queue_of(dst)} skipped: shard not claimable", run_id=run_id, shard_id=shard_id)
        return None
    if claim.manifest_key is not None:
        ctx.saw_manifest_key(run_id, claim.manifest_key)
    return ShardLease(ctx, broker, run_id, shard_id, dst, token, claims=claim.claims, attempt=claim.attempt)


def _exhausted(lease: ShardLease) -> bool:
    """Whether the shard's workers died on it MAX_CLAIMS times (this claim is one more)."""
    if lease.claims <= MAX_CLAIMS:
        return False
    state = PHASE_FAILURE[lease.leased]
    log.warning(
        "shard given up", run_id=lease.run_id, shard_id=lease.shard_id, state=state.value, attempts=lease.claims - 1
    )
    return True


def _given_up(lease: ShardLease) -> ShardOutcomeRecord:
    """The end of a shard claimed ``MAX_CLAIMS`` times without ending: the store error that kept its
    end from being recorded, when a claim noted one; else its workers died or stalled past the lease."""
    state = PHASE_FAILURE[lease.leased]
    ctx, run_id, shard_id = lease.ctx, lease.run_id, lease.shard_id
    why = with_redis_retry(lambda: ctx.state.unrecorded(run_id, shard_id, lease.leased, lease.attempt))
    if why is not None:
        detail = f"{why} (claimed {MAX_CLAIMS} times while {lease.leased.value}; its end could not be stored)"
        return ShardOutcomeRecord(state=state, detail=detail, status=StoreError.status)
    detail = (
        f"{state.value}: claimed {MAX_CLAIMS} times while {lease.leased.value} and never ended "
        "(its worker died or stalled past its lease)"
    )
    return ShardOutcomeRecord(state=state, detail=detail, status=state.value)


@contextmanager
def shard_lease(
    ctx: Context, broker: Broker, run_id: str, shard_id: str, src: ShardState, dst: ShardState
) -> Iterator[ShardLease | None]:
    """Claim the shard and hold it while the body works; None when there is nothing to do.

    The body must end the shard (``lease.end``) or move it on (``lease.advance``); if it
    raises first, the shard ends by :func:`failure_outcome`. The manifest is read after the
    claim (a shard given up never needs it) and before the heartbeat starts: failing to read
    it leaves the lease to expire, and the reaper to send the shard again.
    """
    lease = _claim(ctx, broker, run_id, shard_id, src, dst)
    if lease is None:
        yield None
        return
    if _exhausted(lease):
        lease.end(_given_up(lease))
        yield None
        return
    try:
        ctx.manifest(run_id)  # read (and cached) outside the body: see above
    except (ArtifactMissing, ValidationError) as exc:
        # A poisoned message: its run's manifest is gone or unreadable, and no retry changes that.
        state = PHASE_FAILURE[dst]
        detail = f"{state.value}: the run's manifest cannot be used ({type(exc).__name__}): {str(exc)[:300]}"
        log.warning("poisoned message rejected", run_id=run_id, shard_id=shard_id, detail=detail)
        lease.end(ShardOutcomeRecord(state=state, detail=detail, status=state.value))
        yield None
        return
    with _heartbeat(lease):
        try:
            # Shards run on threads, which Celery's time limits do not reach: the product's own
            # deadlines interrupt the body (soft) and abandon its lease (hard); see worker/deadline.py.
            with within_deadline(ctx, queue_of(dst), run_id, shard_id, lease.token):
                yield lease
        except Exception as exc:
            if lease.settled:
                raise
            outcome = failure_outcome(exc, dst)
            if outcome.state is ShardState.BLOCKED:
                log.warning("shard blocked", run_id=run_id, shard_id=shard_id, detail=outcome.detail)
            elif isinstance(exc, SkillEvalError):
                log.warning("shard failed", run_id=run_id, shard_id=shard_id, error=outcome.detail)
            else:  # the evaluator broke, not the skill
                log.exception("shard crashed", run_id=run_id, shard_id=shard_id)
            lease.end(outcome)
