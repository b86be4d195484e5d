"""What the proxy reads of a request at most, before it reads the request."""

from __future__ import annotations

MAX_REQUEST_BYTES = 32 * 1024 * 1024
"""The largest request body the proxy reads. A harness's request carries its whole conversation,
each tool result already cut to the sandbox's output cap; a bigger body is an agent's, and the
proxy would otherwise hold all of it in the worker's memory before judging it."""


def content_length(header: str | None) -> int | None:
    """The body's length from its header (0 when absent); None when it is no length or over the bound."""
    if header is None:
        return 0
    try:
        length = int(header)
    except ValueError:
        return None
    return length if 0 <= length <= MAX_REQUEST_BYTES else None
