"""Server-sent events as the model APIs stream them: every ``data:`` line that holds a JSON object."""

from __future__ import annotations

import json
from typing import Any


def sse_objects(body: bytes) -> list[dict[str, Any]]:
    """The JSON objects of ``body``'s ``data:`` lines, in order; any other line, or data that is not
    a JSON object (``[DONE]``, a keep-alive), is passed over."""
    out = []
    for line in body.decode("utf-8", errors="replace").splitlines():
        if line.startswith("data:"):
            try:
                value = json.loads(line[5:].strip())
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict):
                out.append(value)
    return out
