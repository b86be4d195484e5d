"""Shard state in Redis: forward-only atomic transitions, heartbeat leases, the finish counter.

Keys (prefix ``skill-eval:run:<run_id>``):

- ``…`` hash: ``total``, ``terminal`` (count of shards in a terminal state), ``manifest``,
  ``created``; the shard that moves ``terminal`` to ``total`` is told so, exactly once, and
  enqueues ``reduce`` (no chords: they are fragile on the Redis backend).
- ``…:states`` hash: shard id -> state (the contract's strings).
- ``…:leases`` sorted set: shard id -> lease expiry (ms); ``…:owners`` hash: shard id -> token;
  ``…:attempts`` hash: ``<shard>:<executing|grading>`` -> claims so far.
  A worker executing or grading a shard refreshes its lease; the reaper returns shards whose
  lease expired (their worker died) to the previous state and re-enqueues them, so a dead
  worker costs about a lease period, not a broker visibility timeout.

Every read-modify-write is one Lua script, so two workers can never both move a shard.
See docs/design/engine.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import redis

from schemas.constants import KEY_PREFIX
from schemas.status import TERMINAL_STATES, ShardState, may_transition

ACTIVE_RUNS = KEY_PREFIX + ":runs"
MAX_ATTEMPTS = 3
"""Claims of one shard into executing (or grading) before it is given up: a shard whose worker dies
every time (a native crash, an OOM kill) would otherwise come back by its lease forever."""
_TERMINAL_LUA = "{" + ",".join(f'["{s.value}"]=true' for s in TERMINAL_STATES) + "}"

# KEYS: run, states, leases, owners. ARGV: shard, new, token ('' = no owner check), n_allowed, allowed...
_TRANSITION = f"""
local terminal = {_TERMINAL_LUA}
local cur = redis.call('HGET', KEYS[2], ARGV[1])
if not cur then return {{0, '', 0, 0}} end
local n = tonumber(ARGV[4])
local ok = false
for i = 1, n do if ARGV[4 + i] == cur then ok = true end end
if not ok then return {{0, cur, 0, 0}} end
if ARGV[3] ~= '' and redis.call('HGET', KEYS[4], ARGV[1]) ~= ARGV[3] then return {{0, cur, 0, 0}} end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1])
local done, total = 0, tonumber(redis.call('HGET', KEYS[1], 'total') or '0')
if terminal[ARGV[2]] and not terminal[cur] then
  done = redis.call('HINCRBY', KEYS[1], 'terminal', 1)
end
return {{1, cur, done, total}}
"""

# Claim a shard for work: from -> to with a lease, or take over a lease that expired; count the attempt.
# KEYS: states, leases, owners, attempts. ARGV: shard, from, to, token, ttl_ms
_CLAIM = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur == ARGV[2] then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
elseif cur == ARGV[3] then
  local exp = redis.call('ZSCORE', KEYS[2], ARGV[1])
  if exp and tonumber(exp) > now then return {0, cur} end
else
  return {0, cur or ''}
end
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[5]), ARGV[1])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[4])
redis.call('HINCRBY', KEYS[4], ARGV[1] .. ':' .. ARGV[3], 1)
return {1, cur}
"""

# KEYS: leases, owners. ARGV: shard, token, ttl_ms
_HEARTBEAT = """
if redis.call('HGET', KEYS[2], ARGV[1]) ~= ARGV[2] then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
return 1
"""

# Expire a lease now, only while ``token`` holds it. KEYS: leases, owners. ARGV: shard, token
_EXPIRE = """
if redis.call('HGET', KEYS[2], ARGV[1]) ~= ARGV[2] then return 0 end
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('ZADD', KEYS[1], 'XX', 0, ARGV[1])
return 1
"""

# Return shards whose lease expired to the state before the leased one.
# KEYS: states, leases, owners. ARGV: executing, queued, grading, executed
_REAP = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)
local out = {}
for _, shard in ipairs(expired) do
  local cur = redis.call('HGET', KEYS[1], shard)
  local back = nil
  if cur == ARGV[1] then back = ARGV[2] elseif cur == ARGV[3] then back = ARGV[4] end
  redis.call('ZREM', KEYS[2], shard)
  redis.call('HDEL', KEYS[3], shard)
  if back then
    redis.call('HSET', KEYS[1], shard, back)
    table.insert(out, shard)
    table.insert(out, back)
  end
end
return out
"""


# KEYS: run, states, active, attempts. ARGV: run_id, queued, infra states...
_REQUEUE = """
local out = {}
local all = redis.call('HGETALL', KEYS[2])
for i = 1, #all, 2 do
  local shard, cur = all[i], all[i + 1]
  for j = 3, #ARGV do
    if cur == ARGV[j] then
      redis.call('HSET', KEYS[2], shard, ARGV[2])
      redis.call('HINCRBY', KEYS[1], 'terminal', -1)
      redis.call('HDEL', KEYS[4], shard .. ':executing', shard .. ':grading')
      table.insert(out, shard)
    end
  end
end
if #out > 0 then
  redis.call('HDEL', KEYS[1], 'reduced')
  redis.call('SADD', KEYS[3], ARGV[1])
end
return out
"""


def _text(value: object) -> str:
    """Redis replies are bytes (no decode_responses: the same client serves Lua scripts)."""
    return value.decode() if isinstance(value, bytes) else str(value)


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
        self._transition = client.register_script(_TRANSITION)
        self._claim = client.register_script(_CLAIM)
        self._heartbeat = client.register_script(_HEARTBEAT)
        self._reap = client.register_script(_REAP)
        self._expire = client.register_script(_EXPIRE)
        self._requeue = client.register_script(_REQUEUE)

    @staticmethod
    def _keys(run_id: str) -> tuple[str, str, str, str]:
        base = f"{KEY_PREFIX}:run:{run_id}"
        return base, base + ":states", base + ":leases", base + ":owners"

    def register(
        self,
        run_id: str,
        shard_ids: list[str],
        manifest_key: str,
        created: str,
        initial: ShardState = ShardState.QUEUED,
    ) -> int:
        """Record a run's shards as ``initial`` (queued; executed for grade-only runs); idempotent.

        A resubmission keeps existing states.

        Returns the number of shards newly registered.
        """
        run, states, _, _ = self._keys(run_id)
        pipe = self.r.pipeline()
        for shard_id in shard_ids:
            pipe.hsetnx(states, shard_id, initial.value)
        added = sum(bool(x) for x in pipe.execute())
        self.r.hset(run, mapping={"total": len(shard_ids), "manifest": manifest_key, "created": created})
        self.r.hsetnx(run, "terminal", 0)
        self.r.sadd(ACTIVE_RUNS, run_id)
        return added

    def exists(self, run_id: str) -> bool:
        return bool(self.r.exists(self._keys(run_id)[0]))

    def manifest_key(self, run_id: str) -> str | None:
        value = self.r.hget(self._keys(run_id)[0], "manifest")
        return _text(value) if value else None

    def get(self, run_id: str, shard_id: str) -> ShardState | None:
        value = self.r.hget(self._keys(run_id)[1], shard_id)
        return ShardState(_text(value)) if value else None

    def states(self, run_id: str) -> dict[str, ShardState]:
        raw = self.r.hgetall(self._keys(run_id)[1])
        return {_text(k): ShardState(_text(v)) for k, v in raw.items()}

    def counts(self, run_id: str) -> dict[str, int]:
        counts = {s.value: 0 for s in ShardState}
        for state in self.states(run_id).values():
            counts[state.value] += 1
        return counts

    def totals(self, run_id: str) -> tuple[int, int]:
        """(terminal, total) shard counts."""
        raw = self.r.hmget(self._keys(run_id)[0], "terminal", "total")
        return int(raw[0] or 0), int(raw[1] or 0)

    def claim(self, run_id: str, shard_id: str, src: ShardState, dst: ShardState, token: str, ttl_s: float) -> bool:
        """Move ``src -> dst`` taking a lease, or take over ``dst`` whose lease expired."""
        run, states, leases, owners = self._keys(run_id)
        ok, _ = self._claim(
            keys=[states, leases, owners, run + ":attempts"],
            args=[shard_id, src.value, dst.value, token, int(ttl_s * 1000)],
        )
        return bool(ok)

    def attempts(self, run_id: str, shard_id: str, leased: ShardState) -> int:
        """How many times the shard was claimed into ``leased`` (executing or grading), this claim included."""
        value = self.r.hget(self._keys(run_id)[0] + ":attempts", f"{shard_id}:{leased.value}")
        return int(value or 0)

    def heartbeat(self, run_id: str, shard_id: str, token: str, ttl_s: float) -> bool:
        """Extend the lease; False when the lease is no longer ours (the shard was reclaimed)."""
        _, _, leases, owners = self._keys(run_id)
        return bool(self._heartbeat(keys=[leases, owners], args=[shard_id, token, int(ttl_s * 1000)]))

    def expire_lease(self, run_id: str, shard_id: str, token: str) -> bool:
        """Give up a lease ``token`` holds: its heartbeats and writes are refused from now on, and the
        next reaper pass re-queues the shard (an abandoned task). False when ``token`` no longer held it."""
        _, _, leases, owners = self._keys(run_id)
        return bool(self._expire(keys=[leases, owners], args=[shard_id, token]))

    def transition(self, run_id: str, shard_id: str, new: ShardState, token: str = "") -> Transition:
        """Move the shard forward to ``new`` when allowed (and, with ``token``, when we hold its lease)."""
        allowed = [s.value for s in ShardState if may_transition(s, new)]
        moved, prev, done, total = self._transition(
            keys=list(self._keys(run_id)), args=[shard_id, new.value, token, len(allowed), *allowed]
        )
        previous = ShardState(_text(prev)) if prev else None
        finished = bool(moved) and new.terminal and int(done) == int(total) and int(total) > 0
        return Transition(bool(moved), previous, finished)

    def reap(self, run_id: str) -> list[tuple[str, ShardState]]:
        """Return shards whose lease expired to the previous state; give back (shard, state) to re-enqueue."""
        _, states, leases, owners = self._keys(run_id)
        flat = self._reap(
            keys=[states, leases, owners],
            args=[
                ShardState.EXECUTING.value,
                ShardState.QUEUED.value,
                ShardState.GRADING.value,
                ShardState.EXECUTED.value,
            ],
        )
        return [(_text(flat[i]), ShardState(_text(flat[i + 1]))) for i in range(0, len(flat), 2)]

    def unleased(self, run_id: str) -> list[tuple[str, ShardState]]:
        """Shards waiting for a message (queued or executed) that no worker holds a lease on.

        After a broker restart their messages may be gone; sending them again is safe because
        a claim lets only one delivery work and the others do nothing.
        """
        _, _, leases, _ = self._keys(run_id)
        leased = {_text(x) for x in self.r.zrange(leases, 0, -1)}
        waiting = (ShardState.QUEUED, ShardState.EXECUTED)
        return [(k, s) for k, s in sorted(self.states(run_id).items()) if s in waiting and k not in leased]

    def active_runs(self) -> list[str]:
        return sorted(_text(x) for x in self.r.smembers(ACTIVE_RUNS))

    def reduced(self, run_id: str) -> bool:
        return bool(self.r.hget(self._keys(run_id)[0], "reduced"))

    def finish(self, run_id: str) -> None:
        """Mark the run reduced; the reaper stops watching it."""
        self.r.srem(ACTIVE_RUNS, run_id)
        self.r.hset(self._keys(run_id)[0], "reduced", 1)

    def requeue_failed(self, run_id: str) -> list[tuple[str, ShardState]]:
        """Put infra-failed shards back where their failure happened; return (shard, state) to re-send.

        ``executor-failed`` goes back to ``queued`` (execute again); ``grader-malformed`` and
        ``grader-dispatch-failed`` go back to ``executed`` (grade the stored trajectory again:
        no new executor run, and grade-only runs, which have nothing to execute, recover too).
        The run becomes active again and will be reduced anew.
        """
        run, states, _, _ = self._keys(run_id)
        keys = [run, states, ACTIVE_RUNS, run + ":attempts"]
        out: list[tuple[str, ShardState]] = []
        for back, failed in (
            (ShardState.QUEUED, [ShardState.EXECUTOR_FAILED]),
            (ShardState.EXECUTED, [ShardState.GRADER_MALFORMED, ShardState.GRADER_DISPATCH_FAILED]),
        ):
            flat = self._requeue(keys=keys, args=[run_id, back.value, *(s.value for s in failed)])
            out += [(_text(x), back) for x in flat]
        return out
