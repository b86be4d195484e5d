"""The OpenAI ``chat.completion`` objects the offline server answers with."""

from __future__ import annotations

import json
import math
import time
from typing import Any


def estimate_tokens(text: str) -> int:
    """About four characters per token: the usage figure the scripted model reports."""
    return max(1, math.ceil(len(text) / 4)) if text else 0


def completion_body(reply: dict[str, Any], model: str, prompt_text: str, seq: int) -> dict[str, Any]:
    """An OpenAI chat.completion object for a scripted reply."""
    content: str | None = reply.get("text")
    if "verdicts" in reply:
        content = json.dumps(reply["verdicts"])
    message: dict[str, Any] = {"role": "assistant", "content": content}
    calls: list[dict[str, Any]] = []
    for i, call in enumerate(reply.get("tool_calls") or []):
        arguments = call.get("arguments_raw")
        if arguments is None:
            arguments = json.dumps(call.get("arguments", {}))
        calls.append(
            {
                "id": f"call_{seq}_{i}",
                "type": "function",
                "function": {"name": call["name"], "arguments": arguments},
            }
        )
    if calls:
        message["tool_calls"] = calls
    completion_text = (content or "") + "".join(c["function"]["arguments"] for c in calls)
    prompt_tokens, completion_tokens = estimate_tokens(prompt_text), estimate_tokens(completion_text)
    return {
        "id": f"chatcmpl-scripted-{seq}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def _chunk(body: dict[str, Any], delta: dict[str, Any], finish: str | None) -> bytes:
    chunk = {
        "id": body["id"],
        "object": "chat.completion.chunk",
        "created": body["created"],
        "model": body["model"],
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


def completion_chunks(body: dict[str, Any]) -> list[bytes]:
    """The server-sent events that stream a ``chat.completion`` (``"stream": true``): a role
    chunk, the text, one chunk per tool call, the finish reason, a usage chunk, ``[DONE]``."""
    choice = body["choices"][0]
    message = choice["message"]
    events = [_chunk(body, {"role": "assistant", "content": ""}, None)]
    if message.get("content"):
        events.append(_chunk(body, {"content": message["content"]}, None))
    for index, call in enumerate(message.get("tool_calls") or []):
        events.append(_chunk(body, {"tool_calls": [{"index": index, **call}]}, None))
    events.append(_chunk(body, {}, choice["finish_reason"]))
    usage = {**json.loads(_chunk(body, {}, None)[6:]), "choices": [], "usage": body["usage"]}
    events.append(b"data: " + json.dumps(usage).encode() + b"\n\n")
    events.append(b"data: [DONE]\n\n")
    return events
