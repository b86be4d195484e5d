"""Shard state in Redis: forward-only atomic transitions, heartbeat leases, the finish counter.

The keys (built in :mod:`engine.keys`): the run hash counts ``terminal`` shards against
``total``; the shard that moves ``terminal`` to ``total`` is told so, exactly once, and
enqueues ``reduce`` (no chords: they are fragile on the Redis backend). A worker executing
or grading a shard refreshes its lease; the reaper returns shards whose lease expired
(their worker died) to the previous state and re-enqueues them, so a dead worker costs
about a lease period, not a broker visibility timeout.
The unsent ledger notes shards registered (or moved back by the reaper) whose message
is not yet confirmed published; the reaper sends those older than a grace period, so a
publisher dying midway strands nothing, without re-sending the waiting backlog. The scripts
also keep the delivery ledger (every waiting shard without a lease, dated by its latest send)
in the same step as the state; :mod:`engine.delivery` reads it to re-send lost messages. One
in-flight list per queue (fleet-wide) holds a ``<run>|<shard>`` entry per leased shard,
pushed by the claim and removed by whatever ends the lease (transition, reaper, hand-back):
its length is the work in flight that an autoscaler adds to the queue's backlog.

Every read-modify-write is one Lua script (``engine/lua/state_*.lua``), so two workers can never
both move a shard.
See docs/design/engine.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import redis

from engine.broker import WAITING_STATES, queue_of
from engine.keys import (
    RunKeys,
    active_runs_key,
    claims_field,
    inflight_key,
    preflight_key,
    run_keys,
    server_key,
    unrecorded_field,
)
from engine.scripts import reply_text, scripts, shard_states
from engine.signals import SIGNAL_TTL_S, raise_signal, wait_signal
from schemas.constants import QUEUE_EXECUTE, QUEUE_GRADE
from schemas.status import ShardState, may_transition

MAX_CLAIMS = 3
"""Claims of one shard into executing (or grading) before it is given up: a shard whose worker dies
every time (a native crash, an OOM kill) would otherwise come back by its lease forever."""


class Claim(NamedTuple):
    """A claim that took a shard's lease."""

    claims: int
    """Times the shard was claimed into the leased state (executing or grading), this claim included."""
    attempt: int
    """The shard's attempt: 0, or the number of its latest resubmit (its final records' key)."""
    manifest_key: str | None = None
    """The store key of the run's current manifest, read in the same round trip (None: not registered)."""


_REGISTER_CHUNK = 1000
"""Shard ids per registration script call: large enough to amortise round trips, small enough
that one script never blocks Redis for long."""


def inflight_entry(run_id: str, shard_id: str) -> str:
    """A leased shard's entry in its queue's in-flight list."""
    return f"{run_id}|{shard_id}"


def _inflight_list(leased: ShardState) -> str:
    return inflight_key(queue_of(leased))


@dataclass(frozen=True)
class Transition:
    """Outcome of a transition attempt."""

    moved: bool
    previous: ShardState | None
    finished_run: bool
    """True for exactly one caller: the one that moved the last shard to a terminal state."""


class RunState:
    """Shard states of runs in one Redis database."""

    def __init__(self, client: redis.Redis) -> None:
        self.r = client
        self._lua = scripts(client, "state")

    @staticmethod
    def _keys(run_id: str) -> RunKeys:
        return run_keys(run_id)

    def register(
        self,
        run_id: str,
        shard_ids: list[str],
        manifest_key: str,
        created: str,
        initial: ShardState = ShardState.QUEUED,
    ) -> int:
        """Record a run's shards as ``initial`` (queued; executed for grade-only runs); idempotent.

        A resubmission keeps existing states. Newly registered shards are also noted as
        *unsent* until :meth:`mark_sent` confirms their message was published; the reaper
        re-sends only those (see :meth:`unsent`), never the whole waiting backlog.

        Returns the number of shards newly registered.
        """
        k = self._keys(run_id)
        added = 0
        for start in range(0, len(shard_ids), _REGISTER_CHUNK):
            chunk = shard_ids[start : start + _REGISTER_CHUNK]
            keys = [k.states, k.unsent, k.waiting]
            added += int(self._lua["register"](keys=keys, args=[initial.value, *chunk]))
        run = k.run
        self.r.hset(run, mapping={"total": len(shard_ids), "manifest": manifest_key, "created": created})
        self.r.hsetnx(run, "terminal", 0)
        self.r.sadd(active_runs_key(), run_id)
        # The server a run was registered on: the fleet tells a restart from a change of it (engine/delivery.py).
        self.r.set(server_key(), str(self.r.info("server")["run_id"]), nx=True)
        return added

    def exists(self, run_id: str) -> bool:
        return bool(self.r.exists(self._keys(run_id).run))

    def manifest_key(self, run_id: str) -> str | None:
        value = self.r.hget(self._keys(run_id).run, "manifest")
        return reply_text(value) if value else None

    def get(self, run_id: str, shard_id: str) -> ShardState | None:
        value = self.r.hget(self._keys(run_id).states, shard_id)
        return ShardState(reply_text(value)) if value else None

    def states(self, run_id: str) -> dict[str, ShardState]:
        raw = self.r.hgetall(self._keys(run_id).states)
        return {reply_text(k): ShardState(reply_text(v)) for k, v in raw.items()}

    def counts(self, run_id: str) -> dict[str, int]:
        counts = {s.value: 0 for s in ShardState}
        for state in self.states(run_id).values():
            counts[state.value] += 1
        return counts

    def totals(self, run_id: str) -> tuple[int, int]:
        """(terminal, total) shard counts."""
        raw = self.r.hmget(self._keys(run_id).run, "terminal", "total")
        return int(raw[0] or 0), int(raw[1] or 0)

    def claim(
        self, run_id: str, shard_id: str, src: ShardState, dst: ShardState, token: str, ttl_s: float
    ) -> Claim | None:
        """Move ``src -> dst`` taking a lease, or take over ``dst`` whose lease expired; None when the
        shard is in neither state (or another lease on it is live).

        The claim's counts and the run's manifest key come back in the same round trip: a
        worker claims a shard twice per shard (execute, grade), and each separate read was one
        more trip per task.
        """
        k = self._keys(run_id)
        got = self._lua["claim"](
            keys=[*k.lease, k.claims, _inflight_list(dst), k.resubmits, k.run, k.waiting],
            args=[shard_id, src.value, dst.value, token, int(ttl_s * 1000), inflight_entry(run_id, shard_id)],
        )
        if not int(got[0]):
            return None
        return Claim(claims=int(got[2]), attempt=int(got[3]), manifest_key=reply_text(got[4]) or None)

    def release(self, run_id: str, shard_id: str, token: str) -> ShardState | None:
        """Hand a shard we hold back (``executing -> queued``, ``grading -> executed``); the state to
        re-send it in, or None when the lease is not ours any more (nothing was changed)."""
        k = self._keys(run_id)
        for leased, back in ((ShardState.EXECUTING, ShardState.QUEUED), (ShardState.GRADING, ShardState.EXECUTED)):
            done = self._lua["release"](
                keys=[*k.lease, k.claims, _inflight_list(leased), k.unsent, k.waiting],
                args=[shard_id, token, leased.value, back.value, inflight_entry(run_id, shard_id)],
            )
            if done:
                return back
        return None

    def claims(self, run_id: str, shard_id: str, leased: ShardState) -> int:
        """How many times the shard was claimed into ``leased`` (executing or grading), this claim included."""
        value = self.r.hget(self._keys(run_id).claims, claims_field(shard_id, leased.value))
        return int(value or 0)

    def note_unrecorded(self, run_id: str, shard_id: str, leased: ShardState, attempt: int, why: str) -> None:
        """Note why this claim could not record the shard's end in the store (its lease then lapses and
        the shard is claimed again): the claim that gives the shard up cites it instead of a death."""
        field = unrecorded_field(shard_id, leased.value, attempt)
        self.r.hset(self._keys(run_id).unrecorded, field, why[:1000])

    def unrecorded(self, run_id: str, shard_id: str, leased: ShardState, attempt: int) -> str | None:
        """The latest note of :meth:`note_unrecorded` for this phase and attempt, or None."""
        raw = self.r.hget(self._keys(run_id).unrecorded, unrecorded_field(shard_id, leased.value, attempt))
        return reply_text(raw) if raw is not None else None

    def heartbeat(self, run_id: str, shard_id: str, token: str, ttl_s: float) -> bool:
        """Extend the lease; False when the lease is no longer ours (the shard was reclaimed)."""
        k = self._keys(run_id)
        return bool(self._lua["heartbeat"](keys=[k.leases, k.owners], args=[shard_id, token, int(ttl_s * 1000)]))

    def expire_lease(self, run_id: str, shard_id: str, token: str) -> bool:
        """Give up a lease ``token`` holds: its heartbeats and writes are refused from now on, and the
        next reaper pass re-queues the shard (an abandoned task). False when ``token`` no longer held it."""
        k = self._keys(run_id)
        return bool(self._lua["expire"](keys=[k.leases, k.owners], args=[shard_id, token]))

    def transition(self, run_id: str, shard_id: str, new: ShardState, token: str = "") -> Transition:
        """Move the shard forward to ``new`` when allowed (and, with ``token``, when we hold its lease)."""
        allowed = [s.value for s in ShardState if may_transition(s, new)]
        k = self._keys(run_id)
        moved, prev, done, total = self._lua["transition"](
            keys=[*k[:4], inflight_key(QUEUE_EXECUTE), inflight_key(QUEUE_GRADE), k.waiting],
            args=[shard_id, new.value, token, len(allowed), *allowed, inflight_entry(run_id, shard_id)],
        )
        previous = ShardState(reply_text(prev)) if prev else None
        finished = bool(moved) and new.terminal and int(done) == int(total) and int(total) > 0
        return Transition(bool(moved), previous, finished)

    def reap(self, run_id: str) -> list[tuple[str, ShardState]]:
        """Return shards whose lease expired to the previous state; give back (shard, state) to re-enqueue."""
        k = self._keys(run_id)
        flat = self._lua["reap"](
            keys=[*k.lease, k.unsent, inflight_key(QUEUE_EXECUTE), inflight_key(QUEUE_GRADE), k.waiting, k.run],
            args=[
                ShardState.EXECUTING.value,
                ShardState.QUEUED.value,
                ShardState.GRADING.value,
                ShardState.EXECUTED.value,
                run_id,
            ],
        )
        return shard_states(flat)

    def put_preflight(self, run_id: str, queue: str, report: str) -> None:
        """Keep a worker's preflight report (JSON) for the producer waiting on it, for a day, and wake it."""
        pipe = self.r.pipeline(transaction=True)
        pipe.set(preflight_key(run_id, queue), report, ex=SIGNAL_TTL_S)
        raise_signal(pipe, self._keys(run_id).preflight_signal)
        pipe.execute()

    def wait_preflight(self, run_id: str, timeout_s: float) -> None:
        """Block until a worker leaves a preflight report for the run, ``timeout_s`` at most.

        Returns at once when a report came since the last wait; the reports themselves
        (:meth:`preflight`) are the answer, the signal only the wake-up.
        """
        wait_signal(self.r, self._keys(run_id).preflight_signal, timeout_s)

    def preflight(self, run_id: str, queue: str) -> str | None:
        """The preflight report a worker of ``queue`` left for this run, or None yet."""
        value = self.r.get(preflight_key(run_id, queue))
        return reply_text(value) if value is not None else None

    def mark_sent(self, run_id: str, shard_ids: list[str]) -> None:
        """Confirm that the messages of ``shard_ids`` were published: the unsent pass leaves them alone,
        and the delivery ledger dates their wait from now (:mod:`engine.delivery`)."""
        k = self._keys(run_id)
        keys = [k.unsent, k.waiting]
        for start in range(0, len(shard_ids), _REGISTER_CHUNK):
            self._lua["sent"](keys=keys, args=shard_ids[start : start + _REGISTER_CHUNK])

    def unsent(self, run_id: str, grace_s: float) -> list[tuple[str, ShardState]]:
        """Waiting shards whose message was never confirmed sent within ``grace_s``: (shard, state) to send.

        A publisher that died between registering and publishing (or a reaper between moving
        a shard back and re-sending it) leaves such shards; nothing else would ever send them.
        Each returned shard's note is renewed, so a second reaper pass within the grace period
        does not send it again. A shard whose message did go out but was not confirmed gets a
        duplicate at most, which its claim turns into a no-op.
        """
        k = self._keys(run_id)
        flat = self._lua["unsent"](
            keys=[k.states, k.unsent, k.leases, k.waiting],
            args=[int(grace_s * 1000), *(s.value for s in WAITING_STATES)],
        )
        return shard_states(flat)

    def unleased(self, run_id: str) -> list[tuple[str, ShardState]]:
        """Shards waiting for a message (queued or executed) that no worker holds a lease on.

        After a broker restart their messages may be gone; sending them again is safe because
        a claim lets only one delivery work and the others do nothing.
        """
        leased = {reply_text(x) for x in self.r.zrange(self._keys(run_id).leases, 0, -1)}
        return [(k, s) for k, s in sorted(self.states(run_id).items()) if s in WAITING_STATES and k not in leased]

    def active_runs(self) -> list[str]:
        return sorted(reply_text(x) for x in self.r.smembers(active_runs_key()))

    def reduced(self, run_id: str) -> bool:
        return bool(self.r.hget(self._keys(run_id).run, "reduced"))

    def mark_reduced(self, run_id: str) -> None:
        """Mark the run reduced (the reaper stops watching it) and wake a client waiting for it."""
        pipe = self.r.pipeline(transaction=True)
        pipe.srem(active_runs_key(), run_id)
        pipe.hset(self._keys(run_id).run, "reduced", 1)
        raise_signal(pipe, self._keys(run_id).reduced_signal)
        pipe.execute()

    def reopen(self, run_id: str) -> None:
        """Make a reduced run active again, to be reduced anew once its newly registered shards end
        (adaptive epochs add a round to a run). Call after registering them: while more shards are
        registered than have ended, no reduce starts."""
        pipe = self.r.pipeline(transaction=True)
        pipe.hdel(self._keys(run_id).run, "reduced")
        pipe.sadd(active_runs_key(), run_id)
        pipe.execute()

    def wait_reduced(self, run_id: str, timeout_s: float) -> bool:
        """Block until the run is marked reduced, ``timeout_s`` at most; whether it is reduced.

        A token left by an earlier reduction (before a resubmit) wakes the waiter once early;
        the flag, not the token, is the answer.
        """
        wait_signal(self.r, self._keys(run_id).reduced_signal, timeout_s)
        return self.reduced(run_id)

    def requeue(self, run_id: str, moves: list[tuple[str, ShardState, ShardState]]) -> list[str]:
        """Move each ``(shard, expected, back)`` from ``expected`` back to ``back``; the shards moved.

        For resubmit's choices: a terminal shard goes back to ``queued`` (execute again) or
        ``executed`` (grade its stored trajectory again); its claims start afresh and
        the run becomes active again, to be reduced anew. A shard no longer in ``expected``
        is left as it is.
        """
        k = self._keys(run_id)
        moved: list[str] = []
        for start in range(0, len(moves), _REGISTER_CHUNK):
            args = [
                x for shard, exp, back in moves[start : start + _REGISTER_CHUNK] for x in (shard, exp.value, back.value)
            ]
            keys = [k.run, k.states, active_runs_key(), k.claims, k.waiting]
            flat = self._lua["requeue"](keys=keys, args=[run_id, *args])
            moved += [reply_text(x) for x in flat]
        return moved

    def next_attempt(self, run_id: str, shard_id: str) -> int:
        """Number the shard's next resubmitted attempt (1, 2, ...; the first attempt is 0)."""
        return int(self.r.hincrby(self._keys(run_id).resubmits, shard_id, 1))

    def next_manifest_revision(self, run_id: str) -> int:
        """Number the run's next manifest revision (2, 3, ...; the first manifest is revision 1)."""
        return int(self.r.hincrby(self._keys(run_id).run, "manifest_revision", 1)) + 1

    def set_manifest_key(self, run_id: str, key: str) -> None:
        """Point the run at a new revision of its manifest (resubmit with other judges)."""
        self.r.hset(self._keys(run_id).run, "manifest", key)
