"""The fleet-wide rate limiter: one set of Redis keys per model, shared by every worker.

Every model call passes :meth:`Limiter.acquire`, which atomically (one Lua script):

1. refuses while the model is in a shared cool-down (set by any worker's 429);
2. reclaims expired concurrency leases and takes one if fewer than the cap are held;
3. reserves the next request slot (requests per minute) and the call's estimated tokens
   (tokens per minute), returning how long the caller must wait for its slot.

The lease is refreshed while the call runs by the limiter's one heartbeat thread, which
refreshes every live lease of the process every third of ``lease_ttl_s`` and exits when none
is left, so a worker that dies stops refreshing and its slot returns after ``lease_ttl_s``. After the call,
:meth:`Lease.settle` corrects the token estimate with the provider's actual usage and lets
the pace grow; :meth:`Limiter.report_rate_limited` starts a cool-down and shrinks the pace.
Design and reasons: ``docs/design/limiter.md``.
"""

from __future__ import annotations

import contextlib
import logging
import math
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import redis

from engine.keys import limiter_keys
from engine.scripts import scripts
from schemas.errors import ModelCallFailed
from schemas.model_config import LimiterSettings, ModelLimits

T = TypeVar("T")
_log = logging.getLogger(__name__)

_REDIS_ERRORS = (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError)
_POLL_S = (0.02, 0.25)  # poll interval range while every concurrency slot is taken


@dataclass
class Lease:
    """One granted call slot; settle it with the actual usage when the call returns."""

    limiter: Limiter
    lease_id: str
    estimated_tokens: int
    started_ms: float
    """Redis time at grant (ms): tells a 429 of this call from news of a new episode."""
    waited_s: float = 0.0
    """Time spent waiting for the request/token slot after the grant."""
    settled: bool = False

    def settle(
        self,
        actual_tokens: int | None,
        *,
        success: bool = True,
        also: Callable[[redis.client.Pipeline], None] | None = None,
    ) -> None:
        """Release the slot; correct the token estimate with ``actual_tokens`` (None: keep it).

        ``also`` queues the caller's own commands (usage counters) on the settle's round trip.
        They are sent once and never retried, whatever happens to the settle.
        """
        if self.settled:
            return
        self.settled = True
        self.limiter._beat.drop(self)
        correction = 0 if actual_tokens is None else self.estimated_tokens - actual_tokens
        self.limiter._settle(self, correction, success, also)


class _Heartbeat:
    """Keeps a limiter's live leases from expiring: one thread refreshes all of them every
    ``period_s``, and exits at a beat that finds none (the next lease starts it again).

    One thread for every lease, not one per call: a call's own thread would be started (and
    waited for until it ran) before every request, and with a 30 s lease and calls of seconds it
    would almost never refresh anything. A lease is refreshed at most ``period_s`` after it was added.
    """

    def __init__(self, refresh: Callable[[Lease], None], period_s: float) -> None:
        self._refresh = refresh
        self._period_s = period_s
        self._live: dict[str, Lease] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def add(self, lease: Lease) -> None:
        with self._lock:
            self._live[lease.lease_id] = lease
            # Not alive: it left, or this is a forked child, where the parent's thread never runs.
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, daemon=True, name="lease-heartbeat")
                self._thread.start()

    def drop(self, lease: Lease) -> None:
        with self._lock:
            self._live.pop(lease.lease_id, None)

    def running(self) -> bool:
        with self._lock:
            return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        while True:
            time.sleep(self._period_s)
            with self._lock:
                leases = list(self._live.values())
                if not leases:
                    self._thread = None  # under the lock: an add() from now on starts a new one
                    return
            for lease in leases:
                if not lease.settled:
                    # Redis away, or any other failure: the next beat tries again, the call goes on
                    # meanwhile, and the thread lives on for every other lease it keeps. A refresh
                    # racing the settle cannot bring the lease back (the script updates, never adds).
                    try:
                        self._refresh(lease)
                    except _REDIS_ERRORS:
                        pass
                    except Exception:
                        _log.warning("lease refresh failed", exc_info=True)


class Limiter:
    """The fleet-wide limiter of one model (see the module docstring).

    Survives Redis restarts: every operation retries connection errors with backoff for
    ``settings.redis_retry_s``, then raises :class:`ModelCallFailed` (an infra failure of the
    one call, never a crash of the run). State lost in a restart starts afresh.
    """

    def __init__(
        self,
        redis_client: redis.Redis,
        limits: ModelLimits,
        settings: LimiterSettings | None = None,
    ) -> None:
        self.redis = redis_client
        self.limits = limits
        self.settings = settings or LimiterSettings()
        self.state_key, self.leases_key = limiter_keys(limits.name)
        self._lua = scripts(redis_client, "limiter")
        self._beat = _Heartbeat(self._refresh_lease, self.settings.lease_ttl_s / 3)

    # --- Redis with retries ---------------------------------------------------------------
    def _with_redis(self, op: Callable[[], T], budget_s: float | None = None) -> T:
        budget = self.settings.redis_retry_s if budget_s is None else min(budget_s, self.settings.redis_retry_s)
        deadline = time.monotonic() + budget
        delay = 0.05
        while True:
            try:
                return op()
            except _REDIS_ERRORS as err:
                if time.monotonic() >= deadline:
                    raise ModelCallFailed(
                        f"{self.limits.name}: limiter: Redis unreachable for {budget:g}s: {err}"
                    ) from err
                time.sleep(delay * random.uniform(0.5, 1.0))
                delay = min(delay * 2, 2.0)

    # --- the public operations -------------------------------------------------------------
    @contextmanager
    def acquire(self, estimated_tokens: int, *, max_wait_s: float | None = None) -> Iterator[Lease]:
        """Wait for a slot (cool-down, concurrency, rpm, tpm) and hold it for the block.

        Raises :class:`ModelCallFailed` when no slot came within ``max_wait_s`` (None: wait
        as long as it takes; leases of dead workers expire, so it always comes) or Redis
        stays unreachable. Unsettled leases are released on exit with the estimate kept.
        """
        lease = self._grant(max(0, int(estimated_tokens)), max_wait_s)
        self._beat.add(lease)
        try:
            if lease.waited_s > 0:
                time.sleep(lease.waited_s)
                # The grant refused a cool-down atomically; only a wait for the paced slot can
                # have let one start since (a 429 elsewhere). Not re-read after an immediate
                # grant: one Redis round trip per model call saved.
                self.wait_cooldown()
            yield lease
        finally:
            if not lease.settled:
                lease.settle(None, success=False)

    def report_rate_limited(self, retry_after_s: float | None, lease: Lease | None = None) -> float:
        """A 429 came back: start the shared cool-down; shrink the pace once per episode.

        ``retry_after_s`` None means the provider sent no Retry-After: one second, as for a value
        that is not a finite, non-negative number of seconds (an infinite one would stop the
        fleet for good). Returns the cool-down left, in seconds.
        """
        if retry_after_s is None or not math.isfinite(retry_after_s) or retry_after_s < 0:
            retry_after_s = 1.0
        retry_ms = 1000.0 * retry_after_s
        # Without the lease the 429's request cannot be placed in time: count it as news.
        started = lease.started_ms if lease is not None else 1e18
        args = [retry_ms, started, self.settings.shrink, self.settings.min_factor]
        _factor, left = self._with_redis(lambda: self._lua["rate_limited"](keys=[self.state_key], args=args))
        return max(0.0, float(left) / 1000.0)

    def wait_cooldown(self) -> None:
        """Sleep until the model's shared cool-down (if any) is over."""
        while True:
            left = self.cooldown_left()
            if left <= 0:
                return
            time.sleep(left + random.uniform(0, 0.05))

    def cooldown_left(self) -> float:
        """Seconds of shared cool-down left (0: none)."""
        raw = self._with_redis(lambda: self.redis.hget(self.state_key, "cooldown_until"))
        if raw is None:
            return 0.0
        now_s, now_us = self._with_redis(self.redis.time)
        return max(0.0, (float(raw) - (now_s * 1000 + now_us / 1000)) / 1000.0)

    def snapshot(self) -> dict[str, Any]:
        """Pace factor, cool-down left and leases held, for ``skill-eval status`` and tests."""
        factor = self._with_redis(lambda: self.redis.hget(self.state_key, "factor"))
        leases = self._with_redis(lambda: self.redis.zcard(self.leases_key))
        return {
            "model": self.limits.name,
            "factor": float(factor) if factor is not None else 1.0,
            "cooldown_s": self.cooldown_left(),
            "leases": int(leases),
        }

    # --- internals ----------------------------------------------------------------------------
    def _grant(self, estimated_tokens: int, max_wait_s: float | None) -> Lease:
        lease_id = uuid.uuid4().hex
        ttl_ms = self.settings.lease_ttl_s * 1000
        args: list[str | int | float] = [
            lease_id,
            estimated_tokens,
            self.limits.rpm or 0,
            self.limits.tpm or 0,
            self.limits.max_concurrency,
            ttl_ms,
            self.settings.headroom,
        ]
        deadline = None if max_wait_s is None else time.monotonic() + max_wait_s
        poll = _POLL_S[0]
        while True:
            granted, wait_ms, now_ms = self._with_redis(
                lambda: self._lua["acquire"](keys=[self.state_key, self.leases_key], args=args)
            )
            wait_s = float(wait_ms) / 1000.0
            if granted in (b"1", "1"):
                return Lease(self, lease_id, estimated_tokens, float(now_ms), waited_s=wait_s)
            if wait_s < 0:  # every slot held: poll, jittered so waiters do not wake in step
                sleep = random.uniform(poll / 2, poll)
                poll = min(poll * 1.5, _POLL_S[1])
            else:  # cool-down: its end is known
                sleep = wait_s + random.uniform(0, 0.05)
            if deadline is not None and time.monotonic() + sleep > deadline:
                raise ModelCallFailed(f"{self.limits.name}: limiter: no call slot within {max_wait_s:g}s")
            time.sleep(sleep)

    def _settled_with(self, args: list[str | int | float], also: Callable[[redis.client.Pipeline], None]) -> bool:
        """The settle and ``also``'s commands in one round trip; False when the settle must be
        done again on its own: its script not loaded yet (a new or restarted Redis), or the
        connection failing. ``also``'s commands are not repeated (a counter could count twice).

        A raw EVALSHA: redis-py's script objects in a pipeline ask SCRIPT EXISTS first, every
        time, which is the round trip this saves."""
        pipe = self.redis.pipeline(transaction=False)
        keys = [self.state_key, self.leases_key]
        pipe.evalsha(self._lua["settle"].sha, len(keys), *keys, *args)
        also(pipe)
        try:
            results = pipe.execute(raise_on_error=False)
        except _REDIS_ERRORS:
            return False
        return not isinstance(results[0], Exception)

    def _refresh_lease(self, lease: Lease) -> None:
        # Lands before the grant's expiry (which included the slot wait): at most a third of the TTL.
        self._lua["refresh"](keys=[self.leases_key], args=[lease.lease_id, self.settings.lease_ttl_s * 1000])

    def _settle(
        self,
        lease: Lease,
        correction: int,
        success: bool,
        also: Callable[[redis.client.Pipeline], None] | None = None,
    ) -> None:
        args: list[str | int | float] = [
            lease.lease_id,
            correction,
            1 if success else 0,
            self.settings.growth_per_success,
        ]
        if also is not None and self._settled_with(args, also):
            return
        # A lease left behind expires on its own; one lost correction is not worth failing (or
        # long delaying) a call that has already succeeded, hence the short Redis budget.
        with contextlib.suppress(ModelCallFailed):
            self._with_redis(
                lambda: self._lua["settle"](keys=[self.state_key, self.leases_key], args=args), budget_s=5.0
            )
