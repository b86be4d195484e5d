"""The model client: every attempt passes the fleet-wide limiter and the run's budget.

A request reaches its model by the transport :class:`worker.models.transports.Transports`
picks (``transport`` in the model config): straight over HTTP for an OpenAI-compatible
endpoint (worker/models/direct.py: a model named ``openai/...`` with an ``api_base``, by
default), else through litellm (worker/models/via_litellm.py, imported only when a model
takes that path). Neither retries
on its own: this client retries instead, with exponential backoff and full jitter, for 429
(honouring Retry-After and starting the shared cool-down), 5xx, malformed responses,
connection errors and timeouts, up to the configured attempts. Past them it raises
:class:`ModelCallFailed`; other errors (4xx: a bad request, a missing key) raise it at once.
The caller maps ModelCallFailed to ``executor-failed`` or ``grader-dispatch-failed``.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import random
import re
import sys
import threading
import time
from typing import Any
from urllib.parse import urlparse

import redis

from engine.budget import OverShare, Reservation, RunBudget, is_out_of_credit
from engine.redis_retry import with_redis_retry
from engine.usage import queue_usage, record_usage, usage_totals
from schemas.errors import BudgetExhausted, ContextOverflow, ModelCallFailed, ShareSpent
from schemas.model_config import ModelConfig, ModelLimits, RetrySettings
from schemas.trajectory import Usage
from schemas.words import plural
from worker.models.base import ModelReply, ModelRequest
from worker.models.direct import EndpointUnreachable, MalformedReply
from worker.models.limiter import Lease, Limiter
from worker.models.prices import dearest_per_token
from worker.models.transports import Transports, goes_direct

__all__ = [
    "GatedModelClient",
    "estimate_tokens",
    "goes_direct",
    "is_retryable",
    "loopback",
    "request_key",
    "retry_after_s",
    "usage_totals",
]

DEFAULT_COMPLETION_ESTIMATE = 1024
"""Completion tokens assumed before a call without ``max_tokens`` (corrected after it)."""
OFFLINE_API_KEY = "offline-no-key"
"""Key sent to a loopback API base when none is configured (the offline server ignores it)."""
DIRECT_KEY_ENV = "OPENAI_API_KEY"
"""Where a direct model's key is looked for when the config names no variable (litellm's rule for ``openai/``)."""
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def loopback(api_base: str | None) -> bool:
    """Whether ``api_base`` is on this host (a local server: it needs no key of the operator's)."""
    return bool(api_base) and urlparse(api_base).hostname in _LOOPBACK


def request_key(limits: ModelLimits) -> str | None:
    """The key a call of this model carries; None when there is none to send (through litellm:
    litellm's own lookup of the provider's variable decides).

    The configured variable's value; else, for a loopback endpoint, a placeholder, never a
    provider key (a local server has no business with the operator's OpenAI key); else, for a
    direct model, ``OPENAI_API_KEY``, as litellm would take for an ``openai/`` model.
    """
    if limits.api_key_env:
        return os.environ.get(limits.api_key_env) or None
    if loopback(limits.api_base):
        return OFFLINE_API_KEY
    return (os.environ.get(DIRECT_KEY_ENV) or None) if goes_direct(limits) else None


def estimate_tokens(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, max_tokens: int | None) -> int:
    """Tokens a call may use, guessed before it: ~4 characters per prompt token + the completion cap."""
    prompt_chars = len(json.dumps(messages, default=str)) + (len(json.dumps(tools)) if tools else 0)
    return math.ceil(prompt_chars / 4) + (max_tokens or DEFAULT_COMPLETION_ESTIMATE)


def estimate_cost(model: str, tokens: int) -> float | None:
    """An upper-side guess of a call's cost before it is made; None when the model's price is unknown."""
    price = dearest_per_token(model)
    return None if price is None else price * tokens


def retry_after_s(err: BaseException) -> float | None:
    """Seconds from a 429's ``Retry-After`` (or ``retry-after-ms``) header; None when absent."""
    response = getattr(err, "response", None)
    headers = getattr(response, "headers", None) or {}
    try:
        if headers.get("retry-after-ms") is not None:
            return float(headers["retry-after-ms"]) / 1000.0
        if headers.get("retry-after") is not None:
            return float(headers["retry-after"])
    except (TypeError, ValueError):
        return None  # an HTTP-date Retry-After: fall back to the default cool-down
    return None


def _loaded(module: str, name: str) -> type | tuple[()]:
    """Exception class ``module.name`` when that module is loaded (an error from it implies it is),
    else an empty tuple, which matches nothing: classifying an error never imports litellm."""
    found = getattr(sys.modules.get(module), name, None)
    return found if isinstance(found, type) else ()


def is_retryable(err: BaseException) -> bool:
    """429, 5xx, connection errors, timeouts and malformed responses are worth another attempt.

    Authentication and permission errors never are: a missing or refused key stays missing.
    """
    if isinstance(err, EndpointUnreachable | MalformedReply | json.JSONDecodeError):
        return True
    refused = tuple(_loaded("litellm.exceptions", name) for name in ("AuthenticationError", "PermissionDeniedError"))
    if isinstance(err, refused):
        return False
    garbled = (_loaded("openai", "APIConnectionError"), _loaded("openai", "APIResponseValidationError"))
    if isinstance(err, garbled):
        return True
    if "missing credentials" in str(err).lower() or "api_key client option must be set" in str(err):
        return False  # the provider SDK refusing to send without a key: no retry can supply one
    status = getattr(err, "status_code", None)
    if isinstance(status, int):
        return status == 429 or status >= 500
    return isinstance(err, _loaded("litellm.exceptions", "APIError"))  # no status: a garbled response


_OVERFLOW_RE = re.compile(
    r"context[_ ]length[_ ]exceeded|context[_ ]window|maximum context length|prompt is too long"
    r"|input is too long|too many (?:input )?tokens|reduce the length of the messages",
    re.IGNORECASE,
)


def is_context_overflow(err: BaseException) -> bool:
    """True when a provider refused a request because the conversation is longer than the
    model's context (litellm's ``ContextWindowExceededError``, or a 400/413 saying so)."""
    if isinstance(err, _loaded("litellm.exceptions", "ContextWindowExceededError")):
        return True
    status = getattr(err, "status_code", None)
    return status in (400, 413, None) and bool(_OVERFLOW_RE.search(str(err)))


class GatedModelClient:
    """:class:`worker.models.base.ModelClient` whose every attempt is gated by the fleet-wide
    limiter and the run's budget, and retried by the rules above.

    ``transports`` carries the requests (:class:`worker.models.transports.Transports`: a
    worker's Context shares one per process; without it the client makes its own). It is safe
    to share between threads. ``run_id`` tags the usage counters of
    :func:`engine.usage.usage_totals`.
    """

    def __init__(
        self,
        config: ModelConfig,
        redis_client: redis.Redis,
        *,
        run_id: str | None = None,
        budget: RunBudget | None = None,
        transports: Transports | None = None,
    ) -> None:
        self.config = config
        self.transports = transports if transports is not None else Transports()
        self.redis = redis_client
        self.run_id = run_id
        self.budget = budget
        """The run's fleet-wide caps; every attempt reserves its estimate there first."""
        self._limiters: dict[str, Limiter] = {}
        self._lock = threading.Lock()

    def limiter(self, model: str) -> Limiter:
        """The limiter of ``model`` (created on first use, once even when threads race for it)."""
        with self._lock:
            if model not in self._limiters:
                self._limiters[model] = Limiter(self.redis, self.config.for_model(model), self.config.limiter)
            return self._limiters[model]

    def _api_key(self, limits: ModelLimits) -> str | None:
        """:func:`request_key`; a configured variable that is not set raises ModelCallFailed."""
        if limits.api_key_env and not os.environ.get(limits.api_key_env):
            raise ModelCallFailed(f"{limits.name}: environment variable {limits.api_key_env} is not set")
        return request_key(limits)

    def complete(
        self,
        model: str,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        max_tokens: int | None = None,
        timeout_s: float | None = None,
        attempts: int | None = None,
        own: Usage | None = None,
    ) -> ModelReply:
        """One completion, retried within the budget (or ``attempts``); raises ModelCallFailed past it.

        ``own``: what the calling executor's shard has spent so far; the run's cap refusing a
        shard past its share raises :class:`ShareSpent` (behaviour) rather than BudgetExhausted.
        """
        limiter = self.limiter(model)
        limits = limiter.limits
        retry = self.config.retry
        max_attempts = attempts or retry.max_attempts
        request = ModelRequest(
            model=model,
            messages=messages,
            tools=tools or None,
            max_tokens=max_tokens,
            timeout_s=timeout_s or limits.timeout_s,
            api_base=limits.api_base,
            api_key=self._api_key(limits),
        )
        transport = self.transports.for_model(limits)
        estimate = estimate_tokens(messages, tools, max_tokens)
        last_error: BaseException | None = None
        called = time.monotonic()
        for attempt in range(1, max_attempts + 1):
            reservation = self._reserve(model, estimate, own)
            with limiter.acquire(estimate) as lease:
                sent = time.monotonic()
                try:
                    response = transport.send(request)
                except Exception as err:
                    last_error = err
                    self._on_error(limiter, lease, err)
                    self._settle(reservation, 0, None)
                    if self.budget is not None and is_out_of_credit(err):
                        self.budget.mark_out_of_credit(model, _short(err))
                        why = f"{model}: the provider says the key is out of credit: {_short(err)}"
                        raise BudgetExhausted(why) from err
                    if not is_retryable(err):
                        break
                else:
                    answered_s = time.monotonic() - sent
                    reply = transport.reply(request, response, attempt)
                    self._settle(reservation, reply.usage.total_tokens, reply.usage.cost_usd)
                    self._count_success(lease, model, reply)
                    waited_s = max(0.0, time.monotonic() - called - answered_s)
                    return dataclasses.replace(reply, waited_s=waited_s)
            if attempt < max_attempts:
                _back_off(retry, attempt)
        record_usage(self.redis, model, self.run_id, failed=1)
        raise _failure(model, attempt, last_error) from last_error

    def _count_success(self, lease: Lease, model: str, reply: ModelReply) -> None:
        """Settle the lease with the reply's tokens and queue its usage counters (one round trip)."""
        counts = functools.partial(
            queue_usage,
            model=model,
            run_id=self.run_id,
            calls=1,
            attempts=1,
            prompt_tokens=reply.usage.prompt_tokens,
            completion_tokens=reply.usage.completion_tokens,
            cost_usd=reply.usage.cost_usd,
        )
        lease.settle(reply.usage.total_tokens, success=True, also=counts)

    def _reserve(self, model: str, tokens: int, own: Usage | None) -> Reservation | None:
        """Reserve the call's estimate in the run's budget; raise BudgetExhausted when it may not start."""
        if self.budget is None:
            return None
        # The budget is Redis state like any other: an outage is retried as every state call is,
        # so it ends as the host's fault, never as the agent's executor-failed. (Usage counters
        # are best effort and never raise.)
        # An uncapped run never prices the estimate: the price table is no business of its first call.
        cost = estimate_cost(model, tokens) if self.budget.capped else None
        got = with_redis_retry(functools.partial(self.budget.reserve, model, tokens, cost, own=own))
        if isinstance(got, OverShare):
            raise ShareSpent(got.why)
        if isinstance(got, str):
            raise BudgetExhausted(got)
        return got

    def _settle(self, reservation: Reservation | None, tokens: int, cost_usd: float | None) -> None:
        if self.budget is not None and reservation is not None:
            with_redis_retry(functools.partial(self.budget.settle, reservation, tokens, cost_usd))

    def _on_error(self, limiter: Limiter, lease: Lease, err: BaseException) -> None:
        if getattr(err, "status_code", None) == 429:
            # The provider refused before doing work: give the tokens back, start the cool-down.
            lease.settle(0, success=False)
            limiter.report_rate_limited(retry_after_s(err), lease)
            record_usage(self.redis, limiter.limits.name, self.run_id, attempts=1, rate_limited=1)
        else:
            lease.settle(None, success=False)
            record_usage(self.redis, limiter.limits.name, self.run_id, attempts=1, errors=1)


def _back_off(retry: RetrySettings, attempt: int) -> None:
    """Sleep before the next attempt: full jitter under an exponential, capped ceiling (a 429's
    cool-down is not this: it waits in the limiter's acquire)."""
    ceiling = min(retry.max_delay_s, retry.base_delay_s * 2 ** (attempt - 1))
    time.sleep(random.uniform(0, ceiling))


def _failure(model: str, attempts: int, last_error: BaseException | None) -> ModelCallFailed:
    """The error of a call that got no completion: ContextOverflow when the conversation is too long."""
    if last_error is not None and is_context_overflow(last_error):
        return ContextOverflow(f"{model}: the conversation exceeds the model's context: {_short(last_error)}")
    kind = type(last_error).__name__ if last_error else "unknown"
    return ModelCallFailed(
        f"{model}: no completion after {plural(attempts, 'attempt')}; last error: {kind}: {_short(last_error)}"
    )


def _short(err: BaseException | None, limit: int = 300) -> str:
    text = " ".join(str(err).split()) if err else ""
    return text if len(text) <= limit else text[: limit - 3] + "..."
