"""The delivery ledger: a waiting shard is sent again once its message must be gone, whatever became of it.

The broker's own redelivery (kombu's ``unacked`` set, restored after the visibility timeout)
covers a message a worker took and recorded, hours later; it cannot cover a message popped
and never recorded (the pop and the record are two steps: a worker killed between them, or
stopped with its blocking pop pending, takes the message with it). So the product keeps its
own ledger, ``…:waiting`` (:attr:`engine.keys.RunKeys.waiting`): every shard waiting for a message
(``queued``, ``executed``) that no lease holds, scored with the time its latest message was
sent (Redis's clock). The scripts of :mod:`engine.state` keep it in the same step as the state:
a shard enters it when registered, moved on to ``executed``, reaped, handed back or resubmitted,
is re-dated when its message is confirmed sent, and leaves it when a claim takes it.

A queue is a Redis list consumed first in, first out (kombu pushes on the left, pops on the
right), so the oldest message still in it bounds every message sent before: those have left
the queue. Its *watermark* is the send time of its oldest message whose shard still waits
(an empty queue: every message sent until now has left). Each reaper pass samples the
watermarks into ``skill-eval:watermark:<queue>``. A waiting shard is **overdue** when its
latest send is older than the watermark its queue had ``redeliver_after_s`` ago: its message
had left the queue by then, and the worker that took it had that long to claim it. Nothing
will ever claim it, so the reaper sends it again. A shard still in the queue is never sent
again, so the backlog autoscalers read stays the real one. A message sent twice costs a
delivery whose claim does nothing (docs/design/cluster.md, "Delivery from the ledger").

A Redis restart breaks every pending pop and drops what workers had taken but not yet
claimed. It is detected from the data: ``skill-eval:server`` holds the server run id the fleet
last saw; the first reaper pass that finds another (whatever its worker saw before, or none)
swaps it and sends at once every shard whose message left its queue, without waiting out the
bound.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass

import redis

from engine.broker import DRAINED, WAITING_QUEUE
from engine.keys import run_keys, server_key, watermark_key
from engine.scripts import reply_text, scripts, shard_states
from schemas.constants import QUEUE_EXECUTE, QUEUE_GRADE
from schemas.status import ShardState

PEEK = 16
"""Oldest messages of a queue read to find its watermark (stale duplicates are skipped)."""

NEVER = 0.0
"""A watermark that makes no shard overdue: the queue's oldest messages belong to no waiting shard."""


def message_ids(raw: bytes | str) -> tuple[str, str] | None:
    """(run, shard) of a queued execute or grade message (kombu's JSON envelope around Celery's
    body), or None for anything else."""
    try:
        envelope = json.loads(raw)
        body = envelope["body"]
        if envelope.get("properties", {}).get("body_encoding") == "base64":
            body = base64.b64decode(body)
        args = json.loads(body)[0]
    except (ValueError, KeyError, TypeError, IndexError):
        return None
    if isinstance(args, list) and len(args) == 2 and all(isinstance(a, str) for a in args):
        return args[0], args[1]
    return None


@dataclass(frozen=True)
class Waiting:
    """A run's shards waiting without a lease, as ``status`` shows them."""

    shards: int
    oldest_s: float | None
    """Seconds since the oldest of them was sent (None: none waits)."""
    leased: int
    """Shards of the run a worker holds: leases not yet expired."""
    idle_s: float | None
    """Seconds since a shard of the run was last claimed or moved (None: never)."""
    expired: int = 0
    """Shards whose lease expired: their worker is gone, and they wait for the reaper to hand them
    back (a dead fleet has no reaper, so they wait for ever)."""
    expired_s: float | None = None
    """Seconds since the latest of those leases expired (None: none did)."""

    def stalled(self, bound_s: float) -> bool:
        """Shards wait (for a message, or for the reaper), none is in flight, and nothing moved for
        longer than ``bound_s`` (see :func:`stall_bound`): the run cannot finish by itself.

        A lease's expiry counts as a move: its worker lived until then, and a live fleet's reaper
        hands the shard back within its period, so a long shard whose worker just died is no stall.
        """
        idle = self.idle_s if self.idle_s is not None else self.oldest_s
        if self.expired_s is not None:
            idle = self.expired_s if idle is None else min(idle, self.expired_s)
        stuck = self.shards + self.expired
        return stuck > 0 and self.leased == 0 and idle is not None and idle > bound_s


def stall_bound(redeliver_after_s: float, reaper_period_s: float) -> float:
    """How long a run may sit with shards waiting and none in flight before it is called stalled:
    a live fleet would have sent a lost message again and started it by then (the ledger's
    re-send bound plus three reaper periods; docs/design/cluster.md, "Delivery from the ledger")."""
    return redeliver_after_s + 3 * reaper_period_s


class Delivery:
    """The delivery ledger's reads and the reaper's re-send decisions, on one Redis database."""

    def __init__(self, client: redis.Redis) -> None:
        self.r = client
        self._lua = scripts(client, "delivery")

    def watermark(self, queue: str) -> float:
        """Send time (ms) of the queue's oldest message whose shard still waits: every message sent
        before it has left the queue. :data:`DRAINED` for an empty queue, :data:`NEVER` when
        none of its oldest messages tells."""
        oldest = self.r.lrange(queue, -PEEK, -1)
        if not oldest:
            return DRAINED
        waits_for = next(state.value for state, q in WAITING_QUEUE.items() if q == queue)
        for raw in reversed(oldest):  # the list's right end is its oldest message
            ids = message_ids(raw)
            if ids is None:
                continue
            pipe = self.r.pipeline(transaction=False)
            pipe.zscore(run_keys(ids[0]).waiting, ids[1])
            pipe.hget(run_keys(ids[0]).states, ids[1])
            sent, state = pipe.execute()
            if sent is not None and state is not None and reply_text(state) == waits_for:
                return float(sent)  # a stale message (its shard claimed, or moved on) tells nothing
        return NEVER

    def watermarks(self) -> tuple[float, float]:
        """(execute, grade) watermarks now."""
        return self.watermark(QUEUE_EXECUTE), self.watermark(QUEUE_GRADE)

    def watermarks_seen(self, age_s: float) -> tuple[float, float]:
        """Record the (execute, grade) watermarks now and return those seen at least ``age_s`` ago
        (:data:`NEVER` until a sample is that old): what had left each queue by then."""
        marks = []
        for queue, now in zip((QUEUE_EXECUTE, QUEUE_GRADE), self.watermarks(), strict=True):
            seen = self._lua["sample"](keys=[watermark_key(queue)], args=[now, int(age_s * 1000)])
            marks.append(float(reply_text(seen)))
        return marks[0], marks[1]

    def overdue(self, run_id: str, marks: tuple[float, float]) -> list[tuple[str, ShardState]]:
        """Waiting shards sent before their queue's watermark in ``marks`` (execute, grade): their
        message had left the queue, unclaimed. (shard, state) to send again; each is re-dated
        now, so no later pass sends it again before its new message has had its time."""
        k = run_keys(run_id)
        flat = self._lua["overdue"](keys=[k.states, k.waiting, k.leases], args=[marks[0], marks[1]])
        return shard_states(flat)

    def reduce_due(self, run_id: str, after_s: float) -> bool:
        """Whether the run's reduce should be sent again: every shard ended ``after_s`` ago and the
        run is still not reduced (the reduce message was lost with its worker)."""
        return bool(self._lua["reduce_due"](keys=[run_keys(run_id).run], args=[int(after_s * 1000)]))

    def reducing(self, run_id: str) -> None:
        """Note that a reduce of the run started now: the reaper sends no other for ``redeliver_after_s``
        (a reduce that outlives it gets a duplicate, which reduces the same records again)."""
        self._lua["reducing"](keys=[run_keys(run_id).run])

    def restarted(self) -> bool:
        """Whether the Redis server restarted since the fleet last looked; True for exactly one caller.

        The server's run id is swapped into ``skill-eval:server`` in one step: the caller that
        finds another id there is the one that saw the restart. A missing key (a first start, or a
        Redis that lost its data, and with it every run) is no restart to act on.
        """
        server = str(self.r.info("server")["run_id"])
        previous = self._lua["swap"](keys=[server_key()], args=[server])
        return previous is not None and reply_text(previous) != server

    def waiting(self, run_id: str) -> Waiting:
        """The run's shards waiting without a lease, those whose lease expired, how long the oldest
        waits, and how long the run idled; read at one instant of Redis's clock, which dates leases."""
        k = run_keys(run_id)
        reply = self._lua["waiting"](keys=[k.waiting, k.leases, k.run])
        now_ms, shards, oldest, live, expired, progress, latest = reply
        oldest_ms, progress_ms, latest_ms = reply_text(oldest), reply_text(progress), reply_text(latest)
        return Waiting(
            shards=int(shards),
            oldest_s=(int(now_ms) - float(oldest_ms)) / 1000 if oldest_ms else None,
            leased=int(live),
            idle_s=(int(now_ms) - int(progress_ms)) / 1000 if progress_ms else None,
            expired=int(expired),
            expired_s=(int(now_ms) - float(latest_ms)) / 1000 if latest_ms else None,
        )
