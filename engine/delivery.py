"""The delivery ledger: a waiting shard is sent again once its message must be gone, whatever became of it.

The broker's own redelivery (kombu's ``unacked`` set, restored after the visibility timeout)
covers a message a worker took and recorded, hours later; it cannot cover a message popped
and never recorded (the pop and the record are two steps: a worker killed between them, or
stopped with its blocking pop pending, takes the message with it). So the product keeps its
own ledger, ``…:waiting`` (:func:`engine.keys.waiting_key`): every shard waiting for a message
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

from engine.keys import run_keys, server_key, waiting_key, watermark_key
from schemas.constants import QUEUE_EXECUTE, QUEUE_GRADE
from schemas.status import ShardState

QUEUE_OF = {ShardState.QUEUED: QUEUE_EXECUTE, ShardState.EXECUTED: QUEUE_GRADE}
"""The queue a waiting shard's message goes to."""

PEEK = 16
"""Oldest messages of a queue read to find its watermark (stale duplicates are skipped)."""

NEVER = 0.0
"""A watermark that makes no shard overdue: the queue's oldest messages belong to no waiting shard."""
DRAINED = float(2**53)
"""The watermark of an empty queue: every message has left it."""

# KEYS: states, waiting, leases. ARGV: watermark of queued, watermark of executed (ms; DRAINED: now).
# Returns flat (shard, state) of the shards sent before their queue's watermark and re-dates them
# (their new message goes out now); drops entries that no longer wait (claimed or ended).
_OVERDUE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local mark = {queued = math.min(tonumber(ARGV[1]), now), executed = math.min(tonumber(ARGV[2]), now)}
-- Only shards sent before the later watermark can be overdue: in a deep queue that is few of
-- them, and the script does not walk the waiting backlog.
local upper = string.format('(%.17g', math.max(mark.queued, mark.executed))
local old = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', upper, 'WITHSCORES')
local out = {}
for i = 1, #old, 2 do
  local shard, sent = old[i], tonumber(old[i + 1])
  local cur = redis.call('HGET', KEYS[1], shard)
  if not cur or not mark[cur] or redis.call('ZSCORE', KEYS[3], shard) then
    redis.call('ZREM', KEYS[2], shard)
  elseif sent < mark[cur] then
    redis.call('ZADD', KEYS[2], now, shard)
    table.insert(out, shard)
    table.insert(out, cur)
  end
end
return out
"""

# KEYS: samples of one queue's watermark (score: when seen, ms; member: '<when>|<watermark>').
# ARGV: the watermark now (DRAINED: every message sent until now has left), age (ms). Records it
# and returns the newest watermark seen at least ``age`` ago ('0': none), dropping older samples.
_SAMPLE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local mark = math.min(tonumber(ARGV[1]), now)
redis.call('ZADD', KEYS[1], now, string.format('%d|%.3f', now, mark))
local seen = redis.call('ZREVRANGEBYSCORE', KEYS[1], now - tonumber(ARGV[2]), '-inf', 'WITHSCORES', 'LIMIT', 0, 1)
if #seen == 0 then return '0' end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. seen[2])
return string.sub(seen[1], string.find(seen[1], '|', 1, true) + 1)
"""

# KEYS: run. ARGV: older-than (ms). 1 when every shard is terminal, the run is not reduced, and
# nothing (no transition, no earlier re-send of reduce) happened for that long; then dated now.
_REDUCE_DUE = """
if redis.call('HGET', KEYS[1], 'reduced') then return 0 end
local v = redis.call('HMGET', KEYS[1], 'terminal', 'total', 'progress', 'reduce_sent')
local total = tonumber(v[2] or '0')
if total == 0 or tonumber(v[1] or '0') < total then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local last = math.max(tonumber(v[3] or '0'), tonumber(v[4] or '0'))
if now - last < tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'reduce_sent', now)
return 1
"""


# KEYS: run. Dates the run's reduce as started now (the reduce task is running: not lost).
_REDUCING = """
local t = redis.call('TIME')
redis.call('HSET', KEYS[1], 'reduce_sent', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
return 1
"""


# KEYS: key. ARGV: value. Sets it and returns what it held (SET ... GET needs Redis 6.2).
_SWAP = """
local old = redis.call('GET', KEYS[1])
redis.call('SET', KEYS[1], ARGV[1])
return old
"""


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
    """Shards of the run a worker holds."""
    idle_s: float | None
    """Seconds since a shard of the run was last claimed or moved (None: never)."""


class Delivery:
    """The delivery ledger's reads and the reaper's re-send decisions, on one Redis database."""

    def __init__(self, client: redis.Redis) -> None:
        self.r = client
        self._overdue = client.register_script(_OVERDUE)
        self._reduce_due = client.register_script(_REDUCE_DUE)
        self._reducing = client.register_script(_REDUCING)
        self._sample = client.register_script(_SAMPLE)
        self._swap = client.register_script(_SWAP)

    def watermark(self, queue: str) -> float:
        """Send time (ms) of the queue's oldest message whose shard still waits: every message sent
        before it has left the queue. :data:`DRAINED` for an empty queue, :data:`NEVER` when
        none of its oldest messages tells."""
        oldest = self.r.lrange(queue, -PEEK, -1)
        if not oldest:
            return DRAINED
        waits_for = next(state.value for state, q in QUEUE_OF.items() if q == queue)
        for raw in reversed(oldest):  # the list's right end is its oldest message
            ids = message_ids(raw)
            if ids is None:
                continue
            pipe = self.r.pipeline(transaction=False)
            pipe.zscore(waiting_key(ids[0]), ids[1])
            pipe.hget(run_keys(ids[0]).states, ids[1])
            sent, state = pipe.execute()
            if sent is not None and state is not None and _text(state) == waits_for:
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
            seen = self._sample(keys=[watermark_key(queue)], args=[now, int(age_s * 1000)])
            marks.append(float(_text(seen)))
        return marks[0], marks[1]

    def overdue(self, run_id: str, marks: tuple[float, float]) -> list[tuple[str, ShardState]]:
        """Waiting shards sent before their queue's watermark in ``marks`` (execute, grade): their
        message had left the queue, unclaimed. (shard, state) to send again; each is re-dated
        now, so no later pass sends it again before its new message has had its time."""
        k = run_keys(run_id)
        flat = self._overdue(keys=[k.states, waiting_key(run_id), k.leases], args=[marks[0], marks[1]])
        return [(_text(flat[i]), ShardState(_text(flat[i + 1]))) for i in range(0, len(flat), 2)]

    def reduce_due(self, run_id: str, after_s: float) -> bool:
        """Whether the run's reduce should be sent again: every shard ended ``after_s`` ago and the
        run is still not reduced (the reduce message was lost with its worker)."""
        return bool(self._reduce_due(keys=[run_keys(run_id).run], args=[int(after_s * 1000)]))

    def reducing(self, run_id: str) -> None:
        """Note that a reduce of the run started now: the reaper sends no other for ``redeliver_after_s``
        (a reduce that outlives it gets a duplicate, which reduces the same records again)."""
        self._reducing(keys=[run_keys(run_id).run])

    def restarted(self) -> bool:
        """Whether the Redis server restarted since the fleet last looked; True for exactly one caller.

        The server's run id is swapped into ``skill-eval:server`` in one step: the caller that
        finds another id there is the one that saw the restart. A missing key (a first start, or a
        Redis that lost its data, and with it every run) is no restart to act on.
        """
        server = str(self.r.info("server")["run_id"])
        previous = self._swap(keys=[server_key()], args=[server])
        return previous is not None and _text(previous) != server

    def waiting(self, run_id: str) -> Waiting:
        """The run's shards waiting without a lease, how long the oldest has, and how long the run idled."""
        k = run_keys(run_id)
        pipe = self.r.pipeline(transaction=False)
        pipe.time()
        pipe.zcard(waiting_key(run_id))
        pipe.zrange(waiting_key(run_id), 0, 0, withscores=True)
        pipe.zcard(k.leases)
        pipe.hget(k.run, "progress")
        (sec, usec), shards, oldest, leased, progress = pipe.execute()
        now_ms = sec * 1000 + usec // 1000
        return Waiting(
            shards=int(shards),
            oldest_s=(now_ms - oldest[0][1]) / 1000 if oldest else None,
            leased=int(leased),
            idle_s=(now_ms - int(progress)) / 1000 if progress else None,
        )


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
