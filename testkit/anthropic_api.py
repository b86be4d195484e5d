"""The Anthropic Messages API as the offline server speaks it: request text, replies, SSE streams.

Claude Code (and litellm's ``anthropic/`` provider) send ``POST /v1/messages`` with a
``system`` prompt, ``messages`` whose ``content`` is a string or a list of blocks (``text``,
``tool_use``, ``tool_result``, ``image``...), ``tools`` and usually ``"stream": true``. A
scripted reply (see :mod:`testkit.scenario`) becomes one assistant message: a ``text``
block, then one ``tool_use`` block per scripted tool call; streamed, it is the event
sequence ``message_start``, per block ``content_block_start`` / ``content_block_delta``
(``text_delta`` or ``input_json_delta``) / ``content_block_stop``, ``message_delta`` (stop
reason, output tokens) and ``message_stop``. ``count_tokens`` answers ``{"input_tokens": N}``.

Pure: values in, values out; the HTTP side is :mod:`testkit.offline_server`.
"""

from __future__ import annotations

import json
from typing import Any

from testkit.replies import estimate_tokens

# input_json_delta pieces are cut this small, so a client that only handles one piece per
# tool call (a real bug class) fails against the offline server as it would against the API.
_JSON_PIECE = 24


def _block_text(block: Any) -> str:
    if isinstance(block, str):
        return block
    if not isinstance(block, dict):
        return ""
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "tool_use":
        return json.dumps({"name": block.get("name"), "input": block.get("input")}, sort_keys=True)
    if kind == "tool_result":
        content = block.get("content")
        if isinstance(content, list):
            return "\n".join(_block_text(b) for b in content)
        return "" if content is None else str(content)
    return ""


def content_text(content: Any) -> str:
    """The text of one message's ``content`` (a string or a list of blocks)."""
    if isinstance(content, list):
        return "\n".join(_block_text(b) for b in content)
    return _block_text(content)


def messages_text(body: dict[str, Any]) -> str:
    """All text of a request's messages (not the system prompt): what scenario rules match."""
    messages = body.get("messages") or []
    return "\n".join(content_text(m.get("content")) for m in messages if isinstance(m, dict))


def prompt_text(body: dict[str, Any]) -> str:
    """Everything the model would read (system, messages, tool definitions): for the usage figure."""
    system = body.get("system")
    system_text = content_text(system) if system is not None else ""
    tools = json.dumps(body.get("tools") or [])
    return "\n".join((system_text, messages_text(body), tools))


def as_chat_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The request's messages as role/content pairs, so the scenario's turn and conversation logic applies."""
    return [
        {"role": m.get("role"), "content": content_text(m.get("content"))}
        for m in body.get("messages") or []
        if isinstance(m, dict)
    ]


def message_body(reply: dict[str, Any], model: str, prompt: str, seq: int) -> dict[str, Any]:
    """A complete Anthropic ``message`` object for a scripted reply."""
    content: list[dict[str, Any]] = []
    text = json.dumps(reply["verdicts"]) if "verdicts" in reply else reply.get("text")
    if text:
        content.append({"type": "text", "text": str(text)})
    for i, call in enumerate(reply.get("tool_calls") or []):
        raw = call.get("arguments_raw")
        arguments = call.get("arguments", {}) if raw is None else {"_raw": raw}
        content.append({"type": "tool_use", "id": f"toolu_{seq:06d}_{i}", "name": call["name"], "input": arguments})
    stop = reply.get("stop_reason") or ("tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn")
    out_text = "".join(b.get("text", "") or json.dumps(b.get("input")) for b in content)
    return {
        "id": f"msg_scripted_{seq:06d}",
        "type": "message",
        "role": "assistant",
        "model": str(reply.get("answered_by") or model),
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": estimate_tokens(prompt), "output_tokens": max(1, estimate_tokens(out_text))},
    }


def _event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


def sse_events(message: dict[str, Any]) -> list[bytes]:
    """The server-sent events that stream ``message``, in order."""
    start = {**message, "content": [], "stop_reason": None, "usage": {**message["usage"], "output_tokens": 1}}
    events = [_event("message_start", {"type": "message_start", "message": start})]
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            events.append(
                _event(
                    "content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}},
                )
            )
            delta = {"type": "text_delta", "text": block["text"]}
            events.append(
                _event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
            )
        else:
            head = {**block, "input": {}}
            events.append(
                _event("content_block_start", {"type": "content_block_start", "index": index, "content_block": head})
            )
            raw = block["input"].get("_raw") if set(block["input"]) == {"_raw"} else None
            payload = raw if isinstance(raw, str) else json.dumps(block["input"])
            for at in range(0, len(payload), _JSON_PIECE):
                delta = {"type": "input_json_delta", "partial_json": payload[at : at + _JSON_PIECE]}
                events.append(
                    _event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
                )
        events.append(_event("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(
        _event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": message["usage"]["output_tokens"]},
            },
        )
    )
    events.append(_event("message_stop", {"type": "message_stop"}))
    return events


def count_tokens_body(body: dict[str, Any]) -> dict[str, Any]:
    """The ``/v1/messages/count_tokens`` answer for a request."""
    return {"input_tokens": estimate_tokens(prompt_text(body))}


def error_body(status: int, message: str) -> dict[str, Any]:
    """An Anthropic-style error object."""
    kinds = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error", 429: "rate_limit_error"}
    kind = kinds.get(status, "overloaded_error" if status == 529 else "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}}
