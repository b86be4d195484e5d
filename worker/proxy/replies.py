"""What the proxy answers on its own and what it reads from an upstream's failed reply: error
bodies in each protocol's shape, the retry hints a harness's sleep is excused by."""

from __future__ import annotations

import json
import math
from typing import Any

import httpx

from harnesses import gemini_api
from harnesses.conversation import strings
from harnesses.endpoints import Protocol
from schemas.manifest import FLEET_WAIT_ALLOWANCE_S

RETRYABLE = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
UNHINTED_BACKOFF_S = 8.0
"""How long a harness's own retry sleep after a failed call without Retry-After is excused at
most: the longest the Anthropic and OpenAI client libraries sleep between attempts by default.
A longer sleep is the harness's own time."""


def error_body(protocol: Protocol, status: int, message: str) -> bytes:
    if protocol == "gemini":
        return gemini_api.error_body(status, message)
    if protocol == "anthropic":
        kind = "rate_limit_error" if status == 429 else "invalid_request_error" if status < 500 else "api_error"
        return json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()
    return json.dumps({"error": {"message": message, "type": "invalid_request_error", "code": status}}).encode()


def holds(parsed: Any, watch: str) -> bool:
    """True when ``watch`` (whitespace-normalised) occurs in the parsed JSON request's strings."""
    return any(watch in " ".join(text.split()) for text in strings(parsed))


def backoff_hint(response: httpx.Response | None) -> float:
    """How long a harness's sleep after this failed reply is excused at most: its Retry-After
    (which the SDKs honour) up to the allowance, else ``UNHINTED_BACKOFF_S``."""
    hint = retry_after(response)
    return UNHINTED_BACKOFF_S if hint is None else min(hint, FLEET_WAIT_ALLOWANCE_S)


def retry_after(response: httpx.Response | None) -> float | None:
    """The reply's Retry-After in seconds; None when absent, a date, or not a finite, non-negative number."""
    if response is None:
        return None
    if "retry-after" not in response.headers:  # the Gemini API tells its wait in the body
        return gemini_api.retry_delay(response.content)
    try:
        value = float(response.headers.get("retry-after", ""))
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None
