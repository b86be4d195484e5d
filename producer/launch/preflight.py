"""Before dispatch: ask an execute worker to check its host, and a worker of each queue that will
call models to check them, and wait.

The contract's rule is that a missing prerequisite stops the run before anything is sent,
instead of failing case by case (a missing key would otherwise end every case
``executor-failed`` after six retries each). The checks run on the workers, where the keys,
the sandbox and the agent CLIs are; the embedded cluster is a cluster like any other, so it
is the same path there (worker/host_check.py, worker/preflight.py).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

import redis

from engine.records import put_manifest, put_run_end
from engine.redis_retry import with_redis_retry
from engine.state import RunState
from engine.store import ArtifactStore
from schemas.errors import BlockedError, ModelUnavailable, SkillEvalError
from schemas.manifest import RunManifest
from schemas.preflight import (
    HOST_CHECK,
    HostCheckReport,
    PreflightReport,
    needs_canary,
    needs_host_check,
    preflight_queues,
)
from schemas.run_end import RunEnd

DEFAULT_TIMEOUT_S = 300.0

T = TypeVar("T")


@dataclass
class Waiting:
    """Where a wait for workers says, once, that it is still waiting: a silent wait of minutes on a
    fleet with no worker for a queue reads as a hang."""

    say: Callable[[str], None]
    after_s: float = 5.0
    _started: float = field(default_factory=time.monotonic)
    _said: bool = False

    def tick(self, what: str, timeout_s: float) -> None:
        if not self._said and time.monotonic() - self._started >= self.after_s:
            self._said = True
            self.say(f"waiting for {what} (up to {timeout_s:g} s)...")


def queues_text(queues: Sequence[str]) -> str:
    """``queue execute`` or ``queues execute and grade``."""
    if len(queues) == 1:
        return f"queue {queues[0]}"
    return f"queues {', '.join(queues[:-1])} and {queues[-1]}"


"""How long to wait for a worker of each queue (autoscaled fleets may start from zero)."""


class SendsPreflight(Protocol):
    def preflight(self, run_id: str, queue: str) -> None: ...


class SendsChecks(SendsPreflight, Protocol):
    def host_check(self, run_id: str) -> None: ...


def check_before_dispatch(
    manifest: RunManifest,
    store: ArtifactStore,
    state: RunState,
    publisher: SendsChecks,
    *,
    models: bool,
    embedded: bool,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    waiting: Waiting | None = None,
) -> str | None:
    """The host check and (with ``models``) the model preflight; the manifest's store key when they
    stored it (the checking workers read the run from it), else None.

    With a canary, the model checks are sent only once it has passed: a run whose executor cannot
    be graded calls no model at all. A check that refuses the run leaves its end (``blocked``, with
    the named error) beside the manifest, so the stored run reads as refused, not as still going.
    """
    host = needs_host_check(manifest, embedded=embedded)
    queues = preflight_queues(manifest) if models else []
    if not host and not queues:
        return None
    stored = put_manifest(store, manifest)
    try:
        _run_checks(manifest, state, publisher, host=host, queues=queues, timeout_s=timeout_s, waiting=waiting)
    except SkillEvalError as exc:
        put_run_end(store, RunEnd(run_id=manifest.plan.run_id, how="blocked", reason=str(exc)))
        raise
    return stored


def _run_checks(
    manifest: RunManifest,
    state: RunState,
    publisher: SendsChecks,
    *,
    host: bool,
    queues: list[str],
    timeout_s: float,
    waiting: Waiting | None,
) -> None:
    run_id = manifest.plan.run_id
    if host:
        publisher.host_check(run_id)
    again = functools.partial(publisher.host_check, run_id)
    if host and needs_canary(manifest):
        wait_host_check(run_id, state, timeout_s=timeout_s, waiting=waiting, resend=again)
        host = False
    if queues:
        send_model_checks(manifest, publisher)
    if host:  # the sandbox probe, checked beside the models and its failure said first
        wait_host_check(run_id, state, timeout_s=timeout_s, waiting=waiting, resend=again)
    if queues:
        resend = functools.partial(send_model_checks, manifest, publisher)
        wait_model_checks(manifest, state, timeout_s=timeout_s, waiting=waiting, resend=resend)


def _through_restart(read: Callable[[], T], resend: Callable[[], None] | None) -> T:
    """``read`` retried through a broker restart as the workers' calls are (engine/redis_retry.py),
    then the checks sent again: a Redis back without its data lost their messages, and one whose pop
    a worker had pending took it along. A second answer only replaces the first."""
    try:
        return read()
    except (redis.ConnectionError, redis.TimeoutError):
        value = with_redis_retry(read)
        if resend is not None:
            resend()
        return value


def wait_host_check(
    run_id: str,
    state: RunState,
    *,
    timeout_s: float,
    recheck_s: float = 1.0,
    waiting: Waiting | None = None,
    resend: Callable[[], None] | None = None,
) -> None:
    """Wait for an execute worker's host check; raise the named error it found. Through a broker
    restart, ``resend`` sends the check again."""
    deadline = time.monotonic() + timeout_s
    while (raw := _through_restart(functools.partial(state.preflight, run_id, HOST_CHECK), resend)) is None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise BlockedError(
                f"no execute worker answered the host check (sandbox, executor canary) within {timeout_s:g} s"
                " (start a worker for the execute queue)"
            )
        if waiting:
            waiting.tick("a worker on queue execute to check its host", timeout_s)
        _through_restart(functools.partial(state.wait_preflight, run_id, min(recheck_s, left)), resend)
    error = HostCheckReport.model_validate_json(raw).error()
    if error is not None:
        raise error


def send_model_checks(manifest: RunManifest, publisher: SendsPreflight) -> None:
    """One preflight per queue whose workers will call models."""
    for queue in preflight_queues(manifest):
        publisher.preflight(manifest.plan.run_id, queue)


def wait_model_checks(
    manifest: RunManifest,
    state: RunState,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    recheck_s: float = 1.0,
    waiting: Waiting | None = None,
    resend: Callable[[], None] | None = None,
) -> list[PreflightReport]:
    """The queues' preflight reports once all are in (sent by :func:`send_model_checks`);
    ``ModelUnavailable`` naming each fault, or each queue no worker answered within ``timeout_s``.

    The run's manifest must already be in the store (the workers read the models from it).
    The wait blocks on the run's preflight signal, which storing each report raises, so
    it ends the moment the last report is stored, not a poll later; the reports are read again
    at least every ``recheck_s`` in any case (kept below the Redis client's socket timeout). Its
    reads live through a broker restart, after which ``resend`` sends the checks again.
    """
    run_id = manifest.plan.run_id
    queues = preflight_queues(manifest)
    reports: dict[str, PreflightReport] = {}
    deadline = time.monotonic() + timeout_s
    while True:
        for queue in queues:
            read = functools.partial(state.preflight, run_id, queue)
            raw = None if queue in reports else _through_restart(read, resend)
            if raw is not None:
                reports[queue] = PreflightReport.model_validate_json(raw)
        if len(reports) == len(queues):
            break
        left = deadline - time.monotonic()
        silent = queues_text([q for q in queues if q not in reports])
        if left <= 0:
            raise ModelUnavailable(
                f"no worker answered the model preflight on {silent} within {timeout_s:g} s "
                "(start a worker for each, or pass --no-preflight)"
            )
        if waiting:
            waiting.tick(f"a worker on {silent}", timeout_s)
        _through_restart(functools.partial(state.wait_preflight, run_id, min(recheck_s, left)), resend)
    failures = [line for q in queues for line in reports[q].failures()]
    if failures:
        raise ModelUnavailable("; ".join(dict.fromkeys(failures)))
    return [reports[q] for q in queues]
