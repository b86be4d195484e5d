"""Per-process resources of a worker: Redis, the run state, the store, manifests, model clients.

Built lazily in each worker process (after fork: sockets must not be shared across forks) and
shared by every shard the process runs on its threads: one Redis connection pool, one store,
one model client per run (litellm's HTTP clients and the limiters with it), manifests read once.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from functools import cached_property
from typing import TYPE_CHECKING, TypeVar

import redis

from engine.redis_retry import with_redis_retry
from engine.segments import SegmentWriter
from engine.settings import Settings
from engine.state import RunState
from engine.store import ArtifactStore, open_store
from schemas.manifest import RunManifest, manifest_key

if TYPE_CHECKING:
    from worker.models.client import GatedModelClient
    from worker.models.transports import Transports

__all__ = ["RUNS_KEPT", "Context", "context", "remember_recent", "reset_context", "with_redis_retry"]

V = TypeVar("V")


RUNS_KEPT = 16
"""Runs whose manifest and model client a worker process keeps; a long-lived cluster worker serves
many runs, and a manifest holds a whole plan. The least recently used run is dropped first (its
next message reads the manifest again)."""


def remember_recent(cache: OrderedDict[str, V], key: str, make: Callable[[], V]) -> V:
    """``cache[key]``, made on a miss; the cache keeps the RUNS_KEPT most recently used keys."""
    if key in cache:
        cache.move_to_end(key)
        return cache[key]
    value = cache[key] = make()
    while len(cache) > RUNS_KEPT:
        cache.popitem(last=False)
    return value


class Context:
    """Lazily built resources shared by the tasks of one worker process."""

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or Settings()
        self._manifests: OrderedDict[str, RunManifest] = OrderedDict()
        self._clients: OrderedDict[str, GatedModelClient] = OrderedDict()
        self._lock = threading.RLock()
        self._task = threading.local()
        """``keys``: the manifest keys the task running on this thread has read, by run."""

    @cached_property
    def redis(self) -> redis.Redis:
        url = self.settings.broker_url or "redis://127.0.0.1:6379/0"
        return redis.Redis.from_url(url, socket_timeout=30, socket_connect_timeout=5, health_check_interval=15)

    @cached_property
    def state(self) -> RunState:
        return RunState(self.redis)

    @cached_property
    def store(self) -> ArtifactStore:
        return open_store(self.settings.store)

    @cached_property
    def segments(self) -> SegmentWriter:
        """Where ended shards push their outcome lines (engine/segments.py)."""
        return SegmentWriter(self.redis, self.store)

    @contextlib.contextmanager
    def one_task(self) -> Iterator[None]:
        """Within the block (one task on this thread) each run's manifest key is read from Redis once.

        A task used to read it on every access (about nine round trips per shard). It is read
        afresh by the next task, so a resubmit with other judges reaches every task that starts
        after it, and a task now sees one revision of its run from start to end.
        """
        self._task.keys = {}
        try:
            yield
        finally:
            self._task.keys = None

    def saw_manifest_key(self, run_id: str, key: str) -> None:
        """``key`` was read with this task's claim: the task's later reads of it need no round trip."""
        keys: dict[str, str] | None = getattr(self._task, "keys", None)
        if keys is not None:
            keys.setdefault(run_id, key)

    def manifest_key(self, run_id: str) -> str:
        """The store key of the run's current manifest: a resubmit with other judges writes a new revision."""
        keys: dict[str, str] | None = getattr(self._task, "keys", None)
        if keys is not None and run_id in keys:
            return keys[run_id]
        key = with_redis_retry(lambda: self.state.manifest_key(run_id)) or manifest_key(run_id)
        if keys is not None:
            keys[run_id] = key
        return key

    def manifest(self, run_id: str) -> RunManifest:
        """The run's current manifest, read from the store once per revision and process.

        The cache is bounded (least recently used out), so a worker that lives through many
        runs holds only the manifests and model clients of the latest ones.
        """
        key = self.manifest_key(run_id)
        with self._lock:
            return remember_recent(self._manifests, key, lambda: RunManifest.model_validate_json(self.store.get(key)))

    @cached_property
    def transports(self) -> Transports:
        """This process's model transports, shared by every run's client (one set of HTTP pools)."""
        from worker.models.transports import Transports

        return Transports()

    def model_client(self, run_id: str) -> GatedModelClient:
        """The model client configured for this run (model table from the manifest)."""
        from engine.budget import RunBudget
        from worker.models.client import GatedModelClient

        key = self.manifest_key(run_id)

        def make() -> GatedModelClient:
            manifest = self.manifest(run_id)
            settings = manifest.settings
            capped = settings.max_cost_usd is not None or settings.max_tokens is not None
            budget = RunBudget(self.redis, run_id, capped=capped, shards=len(manifest.plan.shards))
            return GatedModelClient(
                settings.models, self.redis, run_id=run_id, budget=budget, transports=self.transports
            )

        with self._lock:
            return remember_recent(self._clients, key, make)


_context: Context | None = None
_context_lock = threading.Lock()


def context() -> Context:
    """This process's Context (created on first use, after any fork; once, however many threads ask)."""
    global _context
    with _context_lock:
        if _context is None:
            _context = Context()
        return _context


def reset_context() -> None:
    global _context
    with _context_lock:
        _context = None
