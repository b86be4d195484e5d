"""The worker fleet's records in Redis: node liveness, the hand-back flag, queue depth and work in flight.

A worker node (one ``skill-eval worker`` process and its pool) keeps a hash at
``skill-eval:node:<name>`` (docs/design/deployment.md):

- ``beat_ms``: Redis time of the node's last heartbeat (its main process, every few seconds);
- ``consumed_ms``: Redis time the node last took a message off a queue (its start time before that);
- ``slots`` / ``busy``: pool size and tasks running at the last beat;
- ``queues``: comma-separated queues it consumes; ``max_shard_timeout_s``: its configured ceiling;
- ``draining``: set to ``1`` when the node got SIGTERM and stopped consuming on purpose;
- ``handback``: set to ``1`` when the node's shutdown grace is running out: every task it still runs
  releases its lease and re-sends its message, so another node runs the shard as a new attempt.

``assess`` is the pure liveness rule behind ``skill-eval worker --health``; the rest is I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import redis

from engine.keys import node_key
from engine.scripts import register, reply_text
from schemas.words import plural

RECORD_TTL_S = 24 * 3600
"""A node record outlives its node by a day at most (a SIGKILLed node cannot remove it)."""


def queue_list(queue: str) -> str:
    """The Redis list Celery's Redis transport keeps a queue's waiting messages in (messages without a
    priority, which is all skill-eval sends): the queue's own name."""
    return queue


@dataclass(frozen=True)
class NodeRecord:
    """A worker node's liveness record as last written."""

    name: str
    beat_ms: int
    consumed_ms: int
    slots: int
    busy: int
    queues: tuple[str, ...]
    max_shard_timeout_s: float | None
    handback: bool
    draining: bool = False

    @classmethod
    def from_hash(cls, name: str, raw: Mapping[bytes | str, bytes | str]) -> NodeRecord:
        def get(field: str, default: str = "") -> str:
            value = raw.get(field.encode(), raw.get(field))
            if value is None:
                return default
            return reply_text(value)

        ceiling = get("max_shard_timeout_s")
        return cls(
            name=name,
            beat_ms=int(get("beat_ms", "0")),
            consumed_ms=int(get("consumed_ms", "0")),
            slots=int(get("slots", "0")),
            busy=int(get("busy", "0")),
            queues=tuple(q for q in get("queues").split(",") if q),
            max_shard_timeout_s=float(ceiling) if ceiling else None,
            handback=get("handback") == "1",
            draining=get("draining") == "1",
        )


@dataclass(frozen=True)
class Health:
    ok: bool
    reason: str


def assess(
    record: NodeRecord | None, *, now_ms: int, waiting: int, stale_after_s: float, idle_after_s: float
) -> Health:
    """Is this node alive and consuming?

    A node shutting down (``draining``) is healthy while it beats: it stopped consuming on purpose.
    Unhealthy when there is no record, when its heartbeat is older than ``stale_after_s``, or when
    it has a free slot while ``waiting`` messages sit on its queues and it has taken none for
    ``idle_after_s`` (the consumer is stuck, e.g. after a broker reconnect). A node with every slot
    busy is healthy however long the queue: it cannot take more.
    """
    if record is None:
        return Health(False, "no liveness record: the worker never started or its record expired")
    beat_age = (now_ms - record.beat_ms) / 1000
    if beat_age > stale_after_s:
        return Health(False, f"heartbeat stale: last beat {beat_age:.0f}s ago (limit {stale_after_s:.0f}s)")
    if record.draining:
        return Health(True, f"draining: shutting down, {record.busy}/{record.slots} busy")
    idle = (now_ms - record.consumed_ms) / 1000
    if record.busy < record.slots and waiting > 0 and idle > idle_after_s:
        return Health(
            False,
            f"not consuming: {plural(record.slots - record.busy, 'free slot')}, "
            f"{plural(waiting, 'message')} waiting on "
            f"{','.join(record.queues)}, nothing taken for {idle:.0f}s (limit {idle_after_s:.0f}s)",
        )
    return Health(True, f"ok: beat {beat_age:.0f}s ago, {record.busy}/{record.slots} busy, {waiting} waiting")


class Fleet:
    """Node records, hand-back flags and queue figures in one Redis database."""

    def __init__(self, client: redis.Redis) -> None:
        self.r = client
        self._beat = register(client, "fleet_beat")

    def beat(
        self,
        node: str,
        *,
        slots: int,
        busy: int,
        queues: Iterable[str],
        consumed_ago_s: float,
        max_shard_timeout_s: float,
    ) -> None:
        """Write the node's heartbeat (Redis time, so every host compares against one clock)."""
        fields: list[str | int | float] = [
            *("slots", slots, "busy", busy, "queues", ",".join(queues)),
            *("max_shard_timeout_s", max_shard_timeout_s),
        ]
        self._beat(keys=[node_key(node)], args=[RECORD_TTL_S, int(consumed_ago_s * 1000), *fields])

    def record(self, node: str) -> NodeRecord | None:
        raw = self.r.hgetall(node_key(node))
        return NodeRecord.from_hash(node, raw) if raw else None

    def records(self) -> list[NodeRecord]:
        """Every node record in this database (live or recently dead)."""
        prefix = node_key("")
        out = []
        for key in self.r.scan_iter(match=prefix + "*", count=500):
            name = key.decode()[len(prefix) :]
            rec = self.record(name)
            if rec is not None:
                out.append(rec)
        return sorted(out, key=lambda r: r.name)

    def now_ms(self) -> int:
        sec, usec = self.r.time()
        return int(sec) * 1000 + int(usec) // 1000

    def forget(self, node: str) -> None:
        self.r.delete(node_key(node))

    def mark_draining(self, node: str) -> None:
        self.r.hset(node_key(node), "draining", "1")

    def request_handback(self, node: str) -> None:
        self.r.hset(node_key(node), "handback", "1")

    def handback_requested(self, node: str) -> bool:
        return self.r.hget(node_key(node), "handback") == b"1"

    def waiting(self, queues: Iterable[str]) -> int:
        """Messages waiting (not yet taken by any worker) on ``queues``."""
        return sum(int(self.r.llen(queue_list(q))) for q in queues)

    def fleet_max_shard_timeout(self, stale_after_s: float) -> float | None:
        """The smallest ``max_shard_timeout_s`` among nodes with a fresh heartbeat; None when none is live."""
        now = self.now_ms()
        live = [
            r.max_shard_timeout_s
            for r in self.records()
            if r.max_shard_timeout_s is not None and (now - r.beat_ms) / 1000 <= stale_after_s
        ]
        return min(live) if live else None
