"""``skill-eval resubmit``: run again only the shards a user chooses, keeping every earlier record.

What may come back, and to where:

- ``executor-failed`` -> ``queued`` (execute again), except in a grade-only run, which has
  nothing to execute (its executor-failed shards had no recording): those are left and said so.
- ``grader-malformed``, ``grader-dispatch-failed`` -> ``executed`` (grade the stored
  trajectory again; no new executor run).
- ``budget-exhausted`` -> ``executed`` when its trajectory is stored (the cap stopped the
  grading), else ``queued``; raise the cap with ``--max-cost`` / ``--max-tokens`` first.
- ``stale``: shards still waiting (``queued``, ``executed``) with no worker on them get their
  message again; a duplicate of a message that is still queued is a no-op.
- ``--regrade``: every graded shard goes back to ``executed`` and is graded again from its
  stored trajectory (with ``--judge``, by other judges; the manifest gets a new revision that
  records which judges graded, and reports read it). Behavioural failures are never re-executed: re-rolling the
  agent until it passes would bias the result.

Before a shard is sent again its attempt number goes up by one: the workers commit each
attempt's grade and outcome under ``runs/<run>/attempts/<n>/`` (first writer wins, never
overwritten), so every earlier attempt stays readable beside the new one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import redis

from engine.broker import send_shard
from engine.budget import RunBudget
from engine.litellm_table import bundled_model_table
from engine.records import put_manifest
from engine.settings import Settings
from engine.state import RunState
from engine.store import ArtifactStore, open_store
from producer.launch.cluster import task_sender
from producer.plan.model_names import check_cost_cap
from schemas.errors import ConfigError
from schemas.manifest import RunManifest, manifest_key, trajectory_key
from schemas.status import ShardState
from schemas.words import plural

STALE = "stale"
CHOICES = (
    ShardState.EXECUTOR_FAILED.value,
    ShardState.GRADER_MALFORMED.value,
    ShardState.GRADER_DISPATCH_FAILED.value,
    ShardState.BUDGET_EXHAUSTED.value,
    STALE,
)
"""What ``--only`` accepts; the default is all of them."""


@dataclass
class Resubmitted:
    """What a resubmit sent again, and what it left and why."""

    execute: list[str] = field(default_factory=list)
    grade: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    moved_on: int = 0
    """Shards chosen that had moved on before this resubmit could move them (another resubmit, or a
    late delivery, took them first): neither re-queued nor counted again."""

    @property
    def total(self) -> int:
        return len(self.execute) + len(self.grade) + len(self.stale)

    def summary(self, run_id: str) -> str:
        """One line saying what this resubmit did: what it re-queued, what it only sent again."""
        requeued = len(self.execute) + len(self.grade)
        resent = f"{plural(len(self.stale), 'waiting shard')} sent again" if self.stale else ""
        taken = f"{self.moved_on} moved on before this resubmit could (already re-queued?)" if self.moved_on else ""
        if requeued:
            head = f"re-queued {plural(requeued, 'shard')} of run {run_id}: {len(self.execute)} to execute, "
            return ", ".join(p for p in (f"{head}{len(self.grade)} to grade", resent, taken) if p)
        return f"re-queued nothing in run {run_id}" + "".join(f"; {p}" for p in (resent, taken) if p)


def parse_only(value: str | None) -> list[str]:
    """``--only a,b`` as a list of known choices; raise ConfigError naming an unknown one."""
    if not value:
        return list(CHOICES)
    chosen = [v.strip() for v in value.split(",") if v.strip()]
    unknown = [v for v in chosen if v not in CHOICES]
    if unknown:
        raise ConfigError(f"--only: unknown state {unknown[0]!r}; one of {', '.join(CHOICES)}")
    return chosen


def resubmit_run(
    run_id: str,
    settings: Settings,
    *,
    only: Sequence[str] = CHOICES,
    regrade: bool = False,
    judges: Sequence[str] = (),
    max_cost_usd: float | None = None,
    max_tokens: int | None = None,
) -> Resubmitted:
    """Re-enqueue the chosen shards of a run on its live cluster; see the module docstring."""
    if not settings.broker_url:
        raise ConfigError("resubmit needs the cluster's broker: --broker or SKILL_EVAL_BROKER_URL")
    if judges and not regrade:
        raise ConfigError("--judge on resubmit needs --regrade (only a regrade changes who judges)")
    store = open_store(settings.store)
    client = redis.Redis.from_url(settings.broker_url)
    state = RunState(client)
    if not state.exists(run_id):
        raise ConfigError(f"run {run_id}: not known to the broker at {settings.broker_url}")
    manifest = RunManifest.model_validate_json(store.get(state.manifest_key(run_id) or manifest_key(run_id)))
    if regrade and manifest.settings.triggers is not None:
        raise ConfigError(f"run {run_id} is a trigger run: what fired is read from the record, nothing is graded")
    if judges:
        manifest = _new_revision(manifest, list(judges), store, state)
    # A raised cost cap counts only priced models' spend: refused, as the run would refuse it.
    called = () if manifest.settings.executor.startswith("recorded:") else manifest.plan.models
    check_cost_cap(max_cost_usd, [*called, *manifest.plan.judges], bundled_model_table())
    if max_cost_usd is not None or max_tokens is not None:
        caps = manifest.settings
        RunBudget(client, run_id).set_caps(
            max_tokens if max_tokens is not None else caps.max_tokens,
            max_cost_usd if max_cost_usd is not None else caps.max_cost_usd,
        )
    grade_only = manifest.settings.executor.startswith("recorded:")
    done = Resubmitted()
    moves: list[tuple[str, ShardState, ShardState]] = []
    for shard_id, current in sorted(state.states(run_id).items()):
        back = _back_state(current, only, regrade, grade_only, store, run_id, shard_id, done)
        if back is not None:
            moves.append((shard_id, current, back))
    for shard_id, _, _ in moves:  # the next attempt's records go under its own number; earlier ones stay
        state.next_attempt(run_id, shard_id)
    moved = set(state.requeue(run_id, moves))
    publisher = task_sender(settings, manifest)
    with publisher.batch():
        for shard_id, _, back in moves:
            if shard_id in moved:
                send_shard(publisher, run_id, shard_id, back)
                (done.execute if back is ShardState.QUEUED else done.grade).append(shard_id)
            else:
                done.moved_on += 1
        if STALE in only:
            for shard_id, waiting in state.unleased(run_id):
                if shard_id not in moved:
                    send_shard(publisher, run_id, shard_id, waiting)
                    done.stale.append(shard_id)
    return done


def _back_state(
    current: ShardState,
    only: Sequence[str],
    regrade: bool,
    grade_only: bool,
    store: ArtifactStore,
    run_id: str,
    shard_id: str,
    done: Resubmitted,
) -> ShardState | None:
    if current is ShardState.GRADED:
        return ShardState.EXECUTED if regrade else None
    if current.value not in only:
        return None
    if current is ShardState.EXECUTOR_FAILED:
        if grade_only:
            done.notes.append(f"{shard_id}: executor-failed in a grade-only run (no recording): left as it is")
            return None
        return ShardState.QUEUED
    if current in (ShardState.GRADER_MALFORMED, ShardState.GRADER_DISPATCH_FAILED):
        return ShardState.EXECUTED
    if current is ShardState.BUDGET_EXHAUSTED:
        if store.exists(trajectory_key(run_id, shard_id)):
            return ShardState.EXECUTED
        if grade_only:
            done.notes.append(f"{shard_id}: budget-exhausted in a grade-only run without a recording: left")
            return None
        return ShardState.QUEUED
    return None


def _new_revision(manifest: RunManifest, judges: list[str], store: ArtifactStore, state: RunState) -> RunManifest:
    """Store the manifest again with other judges: under a new key the workers will read, and as
    the run's manifest (what ``report`` and ``export`` read), so every report names the judges
    that graded and their calibration. Each revision stays under ``manifest.r<n>.json`` (the submitted one ``r1``)."""
    run_id = manifest.plan.run_id
    revision = state.next_manifest_revision(run_id)
    if revision == 2:  # the first revision after the submitted one: keep that one readable
        store.put(f"runs/{run_id}/manifest.r1.json", manifest.model_dump_json().encode())
    updated = manifest.model_copy(update={"plan": manifest.plan.model_copy(update={"judges": tuple(judges)})})
    key = f"runs/{run_id}/manifest.r{revision}.json"
    store.put(key, updated.model_dump_json().encode())
    put_manifest(store, updated)
    state.set_manifest_key(run_id, key)
    return updated
