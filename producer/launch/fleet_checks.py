"""Client-side checks against the worker fleet: a run's shard timeout, and one node's liveness.

``check_shard_timeout`` holds every run to the fleet-wide ceiling (``SKILL_EVAL_MAX_SHARD_TIMEOUT_S``,
and the smallest ceiling published by live workers), because a worker's shutdown grace period is
sized to that ceiling: a longer shard could be cut at every scale-down. ``node_health`` is
``skill-eval worker --health``: the rule is ``engine.fleet.assess``.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import redis

from engine.fleet import Fleet, Health, assess
from engine.settings import Settings, shown_url
from schemas.errors import ConfigError

NODE_FILE = "node-name"
"""File in the worker's workdir naming the node last started there (the probe's fallback)."""


def check_broker(url: str, named: str, *, reach: bool = True) -> None:
    """Raise ``ConfigError`` naming ``named`` (the flag or variable the URL came from) when the broker
    URL is not a Redis URL or, with ``reach``, when no Redis answers there within a few seconds.

    Checked before anything is planned or sent, so a mistyped ``--broker`` is the user's to fix,
    not a crash of the evaluator after the work is done.
    """
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=5, socket_timeout=5)
    except ValueError as exc:
        raise ConfigError(f"{named} {shown_url(url)!r} is not a Redis URL: {exc}") from exc
    if not reach:
        return
    try:
        client.ping()
    except redis.RedisError as exc:
        raise ConfigError(f"{named} {shown_url(url)}: the broker could not be reached: {exc}") from exc
    finally:
        client.close()


def check_shard_timeout(shard_timeout_s: float, settings: Settings) -> None:
    """Raise ``ConfigError`` naming ``--shard-timeout`` when it exceeds the fleet's ceiling."""
    if shard_timeout_s <= 0:
        raise ConfigError(f"--shard-timeout {shard_timeout_s:g}: must be a positive number of seconds")
    ceiling, source = settings.max_shard_timeout_s, "SKILL_EVAL_MAX_SHARD_TIMEOUT_S"
    if settings.broker_url:
        try:
            fleet = Fleet(redis.Redis.from_url(settings.broker_url, socket_connect_timeout=5))
            live = fleet.fleet_max_shard_timeout(settings.health_stale_s)
        except redis.RedisError:
            live = None  # the broker is unreachable: submitting reports that itself
        if live is not None and live < ceiling:
            ceiling, source = live, "the max_shard_timeout_s of the live workers"
    if shard_timeout_s > ceiling:
        raise ConfigError(
            f"--shard-timeout {shard_timeout_s:g} exceeds {source} = {ceiling:g} s, the fleet-wide ceiling "
            "that worker shutdown grace periods are sized to; lower it or raise the ceiling on every worker"
        )


def default_node_name() -> str:
    return f"skill-eval-{os.getpid()}@{socket.gethostname()}"


def remember_node(settings: Settings, name: str) -> None:
    """Write the node's name into its workdir, where ``--health`` finds it when not told."""
    settings.workdir.mkdir(parents=True, exist_ok=True)
    (settings.workdir / NODE_FILE).write_text(name + "\n", encoding="utf-8")


def node_name_for_probe(settings: Settings, name: str | None) -> str | None:
    if name or settings.node_name:
        return name or settings.node_name
    path: Path = settings.workdir / NODE_FILE
    try:
        return path.read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def node_health(settings: Settings, name: str) -> Health:
    """Assess one node from its record and its queues' depth (one Redis round trip each); a broker
    that does not answer makes the node unhealthy (the probe's exit 1), not a crash."""
    fleet = Fleet(redis.Redis.from_url(settings.broker_url or "", socket_connect_timeout=5, socket_timeout=10))
    try:
        record = fleet.record(name)
        waiting = fleet.waiting(record.queues) if record else 0
        now_ms = fleet.now_ms()
    except redis.RedisError as exc:
        return Health(False, f"the broker {shown_url(settings.broker_url or '')} could not be reached: {exc}")
    return assess(
        record,
        now_ms=now_ms,
        waiting=waiting,
        stale_after_s=settings.health_stale_s,
        idle_after_s=settings.health_idle_s,
    )
