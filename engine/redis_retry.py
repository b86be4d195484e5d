"""Retrying a Redis operation through a restart: the one rule every state call follows.

Redis may restart under a running worker or a waiting producer (a failover, an operator, a
fault test): every state operation retries connection errors for a while instead of failing
the shard, or ending the producer's wait while the run goes on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import redis
from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_exponential

T = TypeVar("T")

_redis_retry = Retrying(
    retry=retry_if_exception_type((redis.ConnectionError, redis.TimeoutError)),
    wait=wait_exponential(multiplier=0.2, max=5),
    stop=stop_after_delay(120),
    reraise=True,
)


def with_redis_retry(fn: Callable[[], T]) -> T:
    """Call ``fn``, retrying Redis connection errors for up to two minutes."""
    return _redis_retry(fn)
