"""Checking a run's models from a worker before its shards are sent: keys present, endpoints answering.

The keys live where the calls are made, on the workers, so the check runs there: one
preflight task per queue that will call models (``execute`` for the executor models,
``grade`` for the judges), each answering with a :class:`schemas.preflight.PreflightReport`.
A model passes when its key is in this worker's environment (the configured
``api_key_env``, else ``OPENAI_API_KEY`` for a model that goes straight over HTTP and what
litellm knows the provider needs for the others; a loopback API base needs none) and one
minimal call (one token) answers. The call passes the fleet-wide limiter like any other and
is counted in the run's usage. A queue's models are checked at the same time, one thread
each: a sweep over ten models waits for its slowest answer before anything is sent, not for
the sum of ten.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from schemas.errors import ModelCallFailed
from schemas.manifest import RunManifest
from schemas.preflight import ModelCheck, PreflightReport, models_for
from worker.models.client import DIRECT_KEY_ENV, GatedModelClient, goes_direct, loopback, request_key

PREFLIGHT_ATTEMPTS = 2
"""Attempts of the minimal call: a transient 5xx gets one more try, a dead endpoint fails fast."""


def missing_key(client: GatedModelClient, model: str) -> str | None:
    """Why ``model`` has no key on this worker, or None when it has one (or needs none)."""
    limits = client.config.for_model(model)
    if limits.api_key_env:
        return None if os.environ.get(limits.api_key_env) else f"environment variable {limits.api_key_env} is not set"
    if loopback(limits.api_base):
        return None
    if goes_direct(limits):
        missing = None if request_key(limits) else [DIRECT_KEY_ENV]
    else:
        from worker.models.via_litellm import missing_keys  # litellm: only for a model that goes through it

        missing = missing_keys(model)
    if missing is None:
        return None
    names = ", ".join(missing) or "a provider key"
    return f"{names} not set on this worker (or name the variable with api_key_env in the model config)"


def check_model(client: GatedModelClient, model: str) -> ModelCheck:
    why = missing_key(client, model)
    if why is not None:
        return ModelCheck(model=model, ok=False, why=why)
    try:
        client.complete(
            model, [{"role": "user", "content": "Reply with OK."}], max_tokens=1, attempts=PREFLIGHT_ATTEMPTS
        )
    except ModelCallFailed as exc:
        # The report names the model before its reason; the client's error names it too.
        return ModelCheck(model=model, ok=False, why=exc.detail.removeprefix(f"{model}: "))
    return ModelCheck(model=model, ok=True)


def upstream_fails(client: GatedModelClient, model: str) -> str | None:
    """The worker's own minimal call to ``model``, out of any agent's reach: None when it was
    answered, else why not. A harness shard's end calls it before blaming the upstream
    (worker/executor/harness_end.py): one call, through the fleet's limiter, on that rare path only."""
    check = check_model(client, model)
    return None if check.ok else check.why


MAX_PARALLEL_CHECKS = 16
"""Models checked at once; a larger sweep is checked in rounds of this many."""


def check_models(client: GatedModelClient, models: Sequence[str]) -> list[ModelCheck]:
    """Check each model at the same time (one thread each); the checks in ``models``' order."""
    if len(models) <= 1:
        return [check_model(client, m) for m in models]
    with ThreadPoolExecutor(min(len(models), MAX_PARALLEL_CHECKS), thread_name_prefix="preflight") as pool:
        return list(pool.map(lambda m: check_model(client, m), models))


def run_preflight(client: GatedModelClient, manifest: RunManifest, queue: str) -> PreflightReport:
    checks = check_models(client, models_for(manifest, queue))
    return PreflightReport(queue=queue, worker=f"{socket.gethostname()}:{os.getpid()}", checks=checks)
