"""Wake-up signals in Redis: a client blocks on a key until a worker raises it.

A signal is a list holding one token at most, however often it is raised before anyone
waits; the state it announces, read after the wake-up, is the answer, never the token.
:class:`engine.state.RunState` raises one when a run is reduced and when a worker leaves a
preflight report.
"""

from __future__ import annotations

import redis

SIGNAL_TTL_S = 86_400
"""How long a signal's token (and a preflight report) waits for a client that never came."""


def raise_signal(pipe: redis.client.Pipeline, key: str) -> None:
    """Queue, in ``pipe``, the wake-up of whoever blocks on ``key`` (:func:`wait_signal`)."""
    pipe.delete(key)
    pipe.rpush(key, 1)
    pipe.expire(key, SIGNAL_TTL_S)


def wait_signal(client: redis.Redis, key: str, timeout_s: float) -> None:
    """Block until :func:`raise_signal` raised ``key`` (taking its token), ``timeout_s`` at most."""
    client.blpop([key], timeout=max(0.01, timeout_s))  # 0 would mean: block for ever
