"""The litellm transport: every provider litellm knows, with its model quirks.

Importing this module imports litellm (seconds of CPU, over 100 MB), so the client imports it
only for a model that takes this path, and the worker's start-up preloads it only when the
run may need it (worker/warmup.py). litellm's own retries (``num_retries``) and the provider
SDK's (``max_retries``) are off: a hidden retry would bypass the fleet-wide limiter.
"""

from __future__ import annotations

import logging
import os
import threading
import warnings
from typing import Any

# Importing litellm must never reach for the network (its remote cost map stalls on retries
# here); this has to be set before the first import anywhere in the process.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm

from harnesses.endpoints import normalise_upstream
from harnesses.model_record import ModelToolCall
from schemas.trajectory import Usage
from worker.models.base import ModelReply, ModelRequest
from worker.models.direct import parse_arguments
from worker.models.prices import dearest_per_token

litellm.suppress_debug_info = True  # its "Give Feedback" banner goes to stdout on every error

WARM_UP_KEY = "offline-no-key"
"""Key of the mocked warm-up call (no request leaves the process)."""


def parse_reply(response: Any, attempts: int, cost_usd: float | None) -> ModelReply:
    """A :class:`ModelReply` from a litellm ``ModelResponse``."""
    choice = response.choices[0]
    message = choice.message
    calls = tuple(
        ModelToolCall(call_id=c.id, name=c.function.name, arguments=parse_arguments(c.function.arguments))
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
        if dearest_per_token(model) is None:  # not a priced model's one-off failure: none in its table
            _mark_unpriced(model)
        return None
    return float(cost)


def token_cost(model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """What ``model`` charges for these tokens in USD, None when litellm has no price for it
    (a harness's calls, which pass the proxy rather than the client, are priced here)."""
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
                "api_key": WARM_UP_KEY,
            }
        )
    except Exception:  # only a warm-up: the first real call pays instead
        logging.getLogger(__name__).warning("litellm warm-up call failed", exc_info=True)


class LiteLLM:
    """The litellm transport (stateless: litellm keeps its own HTTP clients)."""

    def send(self, request: ModelRequest) -> Any:
        kwargs: dict[str, Any] = {
            "model": request.model,
            "messages": request.messages,
            "timeout": request.timeout_s,
            "num_retries": 0,  # litellm's wrapper retries: off, every retry passes the limiter
            "max_retries": 0,  # the provider SDK's own retries: off, likewise
        }
        if request.api_base:
            # litellm's Anthropic provider appends /v1/messages: give it the host root.
            anthropic = request.model.startswith("anthropic/")
            kwargs["api_base"] = normalise_upstream("anthropic", request.api_base) if anthropic else request.api_base
        if request.api_key:
            kwargs["api_key"] = request.api_key
        if request.tools:
            kwargs["tools"] = request.tools
        if request.max_tokens is not None:
            kwargs["max_tokens"] = request.max_tokens
        return _quiet_completion(kwargs)

    def reply(self, request: ModelRequest, response: Any, attempts: int) -> ModelReply:
        return parse_reply(response, attempts, _cost(response, request.model))


def missing_keys(model: str) -> list[str] | None:
    """The environment variables litellm says ``model`` needs and this process lacks; None when all are set."""
    found = litellm.validate_environment(model=model)
    if found.get("keys_in_environment"):
        return None
    return list(found.get("missing_keys") or [])
