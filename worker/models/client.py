"""The litellm model client: every attempt passes the fleet-wide limiter.

litellm's own retries (``num_retries``) and the provider SDK's (``max_retries``) are switched
off, because a hidden retry would bypass the limiter; this client retries instead, with
exponential backoff and full jitter, for 429 (honouring Retry-After and starting the shared
cool-down), 5xx, malformed responses, connection errors and timeouts, up to the configured
attempts. Past them it raises :class:`ModelCallFailed`; other errors (4xx: a bad request, a
missing key) raise it at once. The caller maps ModelCallFailed to ``executor-failed`` or
``grader-dispatch-failed``.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import os
import random
import re
import threading
import time
import warnings
from typing import Any
from urllib.parse import urlparse

# Importing litellm must never reach for the network (its remote cost map stalls on retries
# here); this has to be set before the first import anywhere in the process.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm
import openai
import redis

from engine.budget import OverShare, Reservation, RunBudget, is_out_of_credit
from engine.usage import queue_usage, record_usage, usage_totals
from harnesses.endpoints import normalise_upstream
from schemas.errors import BudgetExhausted, ContextOverflow, ModelCallFailed, ShareSpent
from schemas.model_config import ModelConfig, ModelLimits
from schemas.trajectory import Usage
from worker.context import with_redis_retry
from worker.models.base import ModelReply, ToolCall
from worker.models.limiter import Lease, Limiter

__all__ = ["LiteLLMClient", "estimate_tokens", "is_retryable", "retry_after_s", "usage_totals"]

litellm.suppress_debug_info = True  # its "Give Feedback" banner goes to stdout on every error

DEFAULT_COMPLETION_ESTIMATE = 1024
"""Completion tokens assumed before a call without ``max_tokens`` (corrected after it)."""
OFFLINE_API_KEY = "offline-no-key"
"""Key sent to a loopback API base when none is configured (the offline server ignores it)."""


def estimate_tokens(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, max_tokens: int | None) -> int:
    """Tokens a call may use, guessed before it: ~4 characters per prompt token + the completion cap."""
    prompt_chars = len(json.dumps(messages, default=str)) + (len(json.dumps(tools)) if tools else 0)
    return math.ceil(prompt_chars / 4) + (max_tokens or DEFAULT_COMPLETION_ESTIMATE)


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


def is_retryable(err: BaseException) -> bool:
    """429, 5xx, connection errors, timeouts and malformed responses are worth another attempt.

    Authentication and permission errors never are: a missing or refused key stays missing.
    """
    if isinstance(err, litellm.exceptions.AuthenticationError | litellm.exceptions.PermissionDeniedError):
        return False
    if isinstance(err, openai.APIConnectionError | openai.APIResponseValidationError | json.JSONDecodeError):
        return True
    if "missing credentials" in str(err).lower() or "api_key client option must be set" in str(err):
        return False  # the provider SDK refusing to send without a key: no retry can supply one
    status = getattr(err, "status_code", None)
    if isinstance(status, int):
        return status == 429 or status >= 500
    return isinstance(err, litellm.exceptions.APIError)  # an APIError with no status: a garbled response


_OVERFLOW_RE = re.compile(
    r"context[_ ]length[_ ]exceeded|context[_ ]window|maximum context length|prompt is too long"
    r"|input is too long|too many (?:input )?tokens|reduce the length of the messages",
    re.IGNORECASE,
)


def is_context_overflow(err: BaseException) -> bool:
    """True when a provider refused a request because the conversation is longer than the
    model's context (litellm's ``ContextWindowExceededError``, or a 400/413 saying so)."""
    if isinstance(err, litellm.exceptions.ContextWindowExceededError):
        return True
    status = getattr(err, "status_code", None)
    return status in (400, 413, None) and bool(_OVERFLOW_RE.search(str(err)))


def _parse_arguments(raw: str | None) -> dict[str, Any]:
    try:
        value = json.loads(raw or "{}")
    except json.JSONDecodeError:
        return {"_raw": raw}
    return value if isinstance(value, dict) else {"_raw": raw}


def parse_reply(response: Any, attempts: int, cost_usd: float | None) -> ModelReply:
    """A :class:`ModelReply` from a litellm ``ModelResponse``."""
    choice = response.choices[0]
    message = choice.message
    calls = tuple(
        ToolCall(id=c.id, name=c.function.name, arguments=_parse_arguments(c.function.arguments))
        for c in (message.tool_calls or [])
    )
    usage = getattr(response, "usage", None)
    return ModelReply(
        content=message.content,
        tool_calls=calls,
        usage=Usage(
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            calls=attempts,
            cost_usd=cost_usd,
        ),
        finish_reason=str(choice.finish_reason or "stop"),
        raw=response.model_dump(),
    )


@functools.cache
def _price_per_token(model: str) -> float | None:
    """The dearer of a model's input and output prices per token, from litellm's local table."""
    entry = litellm.model_cost.get(model) or litellm.model_cost.get(model.split("/", 1)[-1])
    if not entry:
        return None
    prices = [float(entry.get(k) or 0.0) for k in ("input_cost_per_token", "output_cost_per_token")]
    return max(prices) or None


def estimate_cost(model: str, tokens: int) -> float | None:
    """An upper-side guess of a call's cost before it is made; None when the model's price is unknown."""
    price = None if model in _UNPRICED else _price_per_token(model)
    return None if price is None else price * tokens


_UNPRICED: set[str] = set()
"""Models litellm could not price, seen by this process. Each is then registered with litellm at
price zero, so that it stops searching its table for them on every later call (fuzzy family
matches and a zero-cost diagnostic: about a fifth of its CPU per call); their cost is still
reported as unknown (None) here, never as zero."""
_UNPRICED_LOCK = threading.Lock()


def unpriced(model: str) -> bool:
    """Whether litellm had no price for ``model`` (its costs are unknown, not zero)."""
    return model in _UNPRICED


def _mark_unpriced(model: str) -> None:
    with _UNPRICED_LOCK:
        if model in _UNPRICED:
            return
        _UNPRICED.add(model)
        entry = {"input_cost_per_token": 0.0, "output_cost_per_token": 0.0, "mode": "chat"}
        if "/" in model:
            entry["litellm_provider"] = model.split("/", 1)[0]
        quiet = logging.getLogger("LiteLLM")
        level = quiet.level
        quiet.setLevel(logging.ERROR)  # it warns that a model it does not know has no cache prices
        try:
            litellm.register_model({model: entry})
        except Exception:  # only a speed-up: litellm keeps searching, the cost stays unknown
            logging.getLogger(__name__).warning("could not register %s with litellm", model, exc_info=True)
        finally:
            quiet.setLevel(level)


def _cost(response: Any, model: str) -> float | None:
    """The call's cost in USD, None when litellm has no price for ``model``.

    litellm already prices every response in its own bookkeeping (``_hidden_params``); that
    figure is reused rather than computed a second time.
    """
    if model in _UNPRICED:
        return None
    hidden = getattr(response, "_hidden_params", None) or {}
    cost = hidden["response_cost"] if "response_cost" in hidden else _completion_cost(response)
    if cost is None:
        if _price_per_token(model) is None:  # not a priced model's one-off failure: none in its table
            _mark_unpriced(model)
        return None
    return float(cost)


def token_cost(model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """What ``model`` charges for these tokens in USD, None when litellm has no price for it
    (a harness's calls, which pass the proxy rather than this client, are priced here)."""
    if model in _UNPRICED:
        return None
    try:
        prompt_cost, completion_cost = litellm.cost_per_token(
            model=model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens
        )
    except Exception:  # unknown to litellm's cost map: cost unknown, not zero
        return None
    return float(prompt_cost + completion_cost)


def _completion_cost(response: Any) -> float | None:
    try:
        return float(litellm.completion_cost(completion_response=response))
    except Exception:  # litellm raises several kinds for unknown models; cost is then unknown
        return None


# litellm builds pydantic schemas for TypedDicts with ReadOnly items inside its calls, and
# pydantic warns about each one; with warnings as errors (the test suite) that would fail the
# call. The filter is this narrow so nothing else is hidden. (catch_warnings swaps process-wide
# state; two threads racing here can at worst leave this same narrow filter installed.)
_READONLY_WARNING = r".*using the `ReadOnly` qualifier"


try:
    # litellm's marker for a call whose logging and billing another call does: inside it, litellm
    # skips its per-call success logging, a payload built on its logging thread for callbacks
    # (about 1 ms of CPU per call, under the interpreter lock every shard's thread shares). The
    # product counts usage itself and sets no litellm callback, so nothing reads that payload.
    # Not part of litellm's public API: without it the logging simply runs.
    from litellm._internal_context import internal_sub_call as _unlogged_call
except ImportError:  # pragma: no cover - a litellm without the marker
    _unlogged_call = None  # type: ignore[assignment]


def litellm_logging_wanted() -> bool:
    """Whether a litellm callback is configured (someone's logger): then every call is logged as usual."""
    return bool(litellm.callbacks or litellm.success_callback or litellm._async_success_callback)


def _quiet_completion(kwargs: dict[str, Any]) -> Any:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_READONLY_WARNING, category=UserWarning)
        if _unlogged_call is None or litellm_logging_wanted():
            return litellm.completion(**kwargs)
        with _unlogged_call():
            return litellm.completion(**kwargs)


def warm_litellm() -> None:
    """One mocked completion (no request leaves the process), so that the modules litellm imports
    on its first call (the HTTP client's, its logging and pricing helpers: ~0.3 s of CPU) are
    loaded during the worker's start-up rather than inside the first real call."""
    try:
        _quiet_completion(
            {
                "model": "openai/warm-up",
                "messages": [{"role": "user", "content": "-"}],
                "mock_response": "-",
                "api_key": OFFLINE_API_KEY,
            }
        )
    except Exception:  # only a warm-up: the first real call pays instead
        logging.getLogger(__name__).warning("litellm warm-up call failed", exc_info=True)


class LiteLLMClient:
    """:class:`worker.models.base.ModelClient` over litellm, gated by the Redis limiter.

    One instance per worker process is enough; it is safe to share between threads.
    ``run_id`` tags the usage counters of :func:`engine.usage.usage_totals`.
    """

    def __init__(
        self,
        config: ModelConfig,
        redis_client: redis.Redis,
        *,
        run_id: str | None = None,
        budget: RunBudget | None = None,
    ) -> None:
        self.config = config
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

    def _credentials(self, limits: ModelLimits) -> dict[str, Any]:
        kwargs: dict[str, Any] = {}
        if limits.api_base:
            # litellm's Anthropic provider appends /v1/messages: give it the host root.
            anthropic = limits.name.startswith("anthropic/")
            kwargs["api_base"] = normalise_upstream("anthropic", limits.api_base) if anthropic else limits.api_base
        if limits.api_key_env:
            key = os.environ.get(limits.api_key_env)
            if not key:
                raise ModelCallFailed(f"{limits.name}: environment variable {limits.api_key_env} is not set")
            kwargs["api_key"] = key
        elif limits.api_base and urlparse(limits.api_base).hostname in ("127.0.0.1", "localhost", "::1"):
            kwargs["api_key"] = OFFLINE_API_KEY
        return kwargs

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
        kwargs: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "timeout": timeout_s or limits.timeout_s,
            "num_retries": 0,  # litellm's wrapper retries: off, every retry passes the limiter
            "max_retries": 0,  # the provider SDK's own retries: off, likewise
            **self._credentials(limits),
        }
        if tools:
            kwargs["tools"] = tools
        if max_tokens is not None:
            kwargs["max_tokens"] = max_tokens
        estimate = estimate_tokens(messages, tools, max_tokens)
        last_error: BaseException | None = None
        for attempt in range(1, max_attempts + 1):
            reservation = self._reserve(model, estimate, own)
            with limiter.acquire(estimate) as lease:
                try:
                    response = _quiet_completion(kwargs)
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
                    reply = parse_reply(response, attempt, _cost(response, model))
                    self._settle(reservation, reply.usage.total_tokens, reply.usage.cost_usd)
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
                    lease.settle(reply.usage.total_tokens, success=True, also=counts)  # one round trip
                    return reply
            if attempt < max_attempts:
                ceiling = min(retry.max_delay_s, retry.base_delay_s * 2 ** (attempt - 1))
                time.sleep(random.uniform(0, ceiling))  # full jitter; a 429's cool-down waits in acquire
        record_usage(self.redis, model, self.run_id, failed=1)
        kind = type(last_error).__name__ if last_error else "unknown"
        if last_error is not None and is_context_overflow(last_error):
            raise ContextOverflow(f"{model}: the conversation exceeds the model's context: {_short(last_error)}")
        raise ModelCallFailed(
            f"{model}: no completion after {attempt} attempt(s); last error: {kind}: {_short(last_error)}"
        ) from last_error

    def _reserve(self, model: str, tokens: int, own: Usage | None) -> Reservation | None:
        """Reserve the call's estimate in the run's budget; raise BudgetExhausted when it may not start."""
        if self.budget is None:
            return None
        # The budget is Redis state like any other: an outage is retried as every state call is,
        # so it ends as the host's fault, never as the agent's executor-failed. (Usage counters
        # are best effort and never raise.)
        got = with_redis_retry(
            functools.partial(self.budget.reserve, model, tokens, estimate_cost(model, tokens), own=own)
        )
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


def _short(err: BaseException | None, limit: int = 300) -> str:
    text = " ".join(str(err).split()) if err else ""
    return text if len(text) <= limit else text[: limit - 3] + "..."
