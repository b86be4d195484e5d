"""Before dispatch: ask a worker of each queue that will call models to check them, and wait.

The contract's rule is that a missing prerequisite stops the run before anything is sent,
instead of failing case by case (a missing key would otherwise end every case
``executor-failed`` after six retries each). The check runs on the workers, where the keys
are; the embedded cluster is a cluster like any other, so it is the same path there.
"""

from __future__ import annotations

import time
from typing import Protocol

from engine.state import RunState
from schemas.errors import ModelUnavailable
from schemas.manifest import RunManifest
from schemas.preflight import PreflightReport, preflight_queues

DEFAULT_TIMEOUT_S = 300.0
"""How long to wait for a worker of each queue (autoscaled fleets may start from zero)."""


class SendsPreflight(Protocol):
    def preflight(self, run_id: str, queue: str) -> None: ...


def check_models(
    manifest: RunManifest,
    state: RunState,
    publisher: SendsPreflight,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    poll_s: float = 0.02,
) -> list[PreflightReport]:
    """Send one preflight per queue and wait for the reports; raise ``ModelUnavailable`` naming each fault.

    The run's manifest must already be in the store (the workers read the models from it).
    Polled every ``poll_s``: one GET per queue, while every shard waits on the answer.
    """
    run_id = manifest.plan.run_id
    queues = preflight_queues(manifest)
    for queue in queues:
        publisher.preflight(run_id, queue)
    reports: dict[str, PreflightReport] = {}
    deadline = time.monotonic() + timeout_s
    while len(reports) < len(queues):
        for queue in queues:
            raw = None if queue in reports else state.preflight(run_id, queue)
            if raw is not None:
                reports[queue] = PreflightReport.model_validate_json(raw)
        if len(reports) == len(queues):
            break
        if time.monotonic() > deadline:
            silent = ", ".join(q for q in queues if q not in reports)
            raise ModelUnavailable(
                f"no worker on queue {silent} answered the model preflight within {timeout_s:.0f} s "
                "(start a worker for it, or pass --no-preflight)"
            )
        time.sleep(poll_s)
    failures = [line for q in queues for line in reports[q].failures()]
    if failures:
        raise ModelUnavailable("; ".join(dict.fromkeys(failures)))
    return [reports[q] for q in queues]
