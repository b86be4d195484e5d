"""Per-process resources of a worker: Redis, the run state, the store, manifests, model clients.

Built lazily in each worker process (after fork: sockets must not be shared across forks).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import cached_property
from typing import TypeVar

import redis
from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_exponential

from engine.records import load_manifest
from engine.settings import Settings
from engine.state import RunState
from engine.store import ArtifactStore, open_store
from schemas.manifest import RunManifest

T = TypeVar("T")

# Redis may restart under a running worker (a failover, an operator, a fault test): every
# state operation retries connection errors for a while instead of failing the shard.
_redis_retry = Retrying(
    retry=retry_if_exception_type((redis.ConnectionError, redis.TimeoutError)),
    wait=wait_exponential(multiplier=0.2, max=5),
    stop=stop_after_delay(120),
    reraise=True,
)


def with_redis_retry(fn: Callable[[], T]) -> T:
    """Call ``fn``, retrying Redis connection errors for up to two minutes."""
    return _redis_retry(fn)


class Context:
    """Lazily built resources shared by the tasks of one worker process."""

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or Settings()
        self._manifests: dict[str, RunManifest] = {}
        self._clients: dict[str, object] = {}
        self._lock = threading.RLock()

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

    def manifest(self, run_id: str) -> RunManifest:
        """The run's manifest, read from the store once per process."""
        with self._lock:
            if run_id not in self._manifests:
                self._manifests[run_id] = load_manifest(self.store, run_id)
            return self._manifests[run_id]

    def model_client(self, run_id: str) -> object:
        """The litellm client configured for this run (model table from the manifest)."""
        from worker.models.client import LiteLLMClient

        with self._lock:
            if run_id not in self._clients:
                config = self.manifest(run_id).settings.models
                self._clients[run_id] = LiteLLMClient(config, self.redis, run_id=run_id)
            return self._clients[run_id]


_context: Context | None = None


def context() -> Context:
    """This process's Context (created on first use, after any fork)."""
    global _context
    if _context is None:
        _context = Context()
    return _context


def reset_context() -> None:
    global _context
    _context = None
