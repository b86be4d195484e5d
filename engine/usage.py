"""Per-model usage counters in Redis (calls, tokens, cost, 429s) for ``skill-eval status``.

Two hashes per model: one for all time on this Redis, one per run when the client knows its
run id. A set beside them lists the models, so totals are read without scanning keys.
Recording never fails a model call: a Redis error loses one increment, nothing else.
"""

from __future__ import annotations

import contextlib
from typing import Any

import redis

from engine.keys import usage_key, usage_models_key
from engine.scripts import reply_text

INT_FIELDS = ("calls", "attempts", "prompt_tokens", "completion_tokens", "rate_limited", "errors", "failed")
"""calls: completions returned; attempts: HTTP attempts; failed: calls that spent their budget."""


def _keys(model: str, run_id: str | None) -> list[tuple[str, str]]:
    keys = [(usage_key(model), usage_models_key())]
    if run_id:
        keys.append((usage_key(model, run_id), usage_models_key(run_id)))
    return keys


def record_usage(
    redis_client: redis.Redis,
    model: str,
    run_id: str | None = None,
    *,
    cost_usd: float | None = None,
    **counts: int,
) -> None:
    """Add ``counts`` (fields of :data:`INT_FIELDS`) and ``cost_usd`` to the model's counters."""
    with contextlib.suppress(redis.RedisError):
        pipe = redis_client.pipeline(transaction=False)
        queue_usage(pipe, model, run_id, cost_usd=cost_usd, **counts)
        pipe.execute()


def queue_usage(
    pipe: redis.client.Pipeline,
    model: str,
    run_id: str | None = None,
    *,
    cost_usd: float | None = None,
    **counts: int,
) -> None:
    """Queue :func:`record_usage`'s increments on ``pipe`` (a non-transactional pipeline whose
    other commands are the caller's: the counters ride on a round trip it makes anyway).

    Never executed twice: an increment retried after a dropped connection could count twice."""
    unknown = set(counts) - set(INT_FIELDS)
    if unknown:
        raise ValueError(f"unknown usage fields: {sorted(unknown)}")
    for key, models_key in _keys(model, run_id):
        pipe.sadd(models_key, model)
        for name, value in counts.items():
            if value:
                pipe.hincrby(key, name, value)
        if cost_usd:
            pipe.hincrbyfloat(key, "cost_usd", cost_usd)


def usage_totals(redis_client: redis.Redis, run_id: str | None = None) -> dict[str, dict[str, Any]]:
    """Counters per model: ``{model: {calls, attempts, prompt_tokens, ..., cost_usd}}``.

    ``run_id`` None: totals over every run on this Redis. ``cost_usd`` is None when no call
    of the model had a known cost.
    """
    models_key = usage_models_key(run_id)
    totals: dict[str, dict[str, Any]] = {}
    for raw in sorted(redis_client.smembers(models_key)):
        model = reply_text(raw)
        key = usage_key(model, run_id)
        fields = {reply_text(k): reply_text(v) for k, v in redis_client.hgetall(key).items()}
        entry: dict[str, Any] = {name: int(fields.get(name, 0)) for name in INT_FIELDS}
        entry["cost_usd"] = float(fields["cost_usd"]) if "cost_usd" in fields else None
        totals[model] = entry
    return totals
