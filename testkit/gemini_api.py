"""The Gemini API as the offline server speaks it (the protocol Gemini CLI uses).

A request is ``POST /v1beta/models/<model>:generateContent`` (one JSON response) or
``:streamGenerateContent?alt=sse`` (server-sent events, each a ``GenerateContentResponse``),
with ``contents`` (turns of role ``user`` or ``model``, whose ``parts`` are ``text``,
``functionCall``, ``functionResponse``...), ``systemInstruction``, ``tools``
(``functionDeclarations``) and ``generationConfig``. ``:countTokens`` answers
``{"totalTokens": N}``. A scripted reply becomes one candidate whose parts are the text and
one ``functionCall`` per scripted tool call; streamed, the text and the calls come as
separate events and the last one carries ``finishReason`` and ``usageMetadata``.

A scripted call named ``shell`` takes Gemini CLI's shell tool (``run_shell_command``) when
the request offers it, so one scenario can drive every harness.

Pure: values in, values out; the HTTP side is :mod:`testkit.offline_server`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from testkit.replies import estimate_tokens

_PATH = re.compile(r"^(?:/v1beta|/v1)?/models/([^/:]+):(generateContent|streamGenerateContent|countTokens)$")
"""Gemini CLI asks under ``/v1beta``; litellm's ``gemini/`` provider appends ``/models/...`` to its api_base."""
SHELL_TOOL = "run_shell_command"
RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"


def route(path: str) -> tuple[str, str] | None:
    """``(model, method)`` of a Gemini API path; None for any other."""
    found = _PATH.match(path)
    return (found.group(1), found.group(2)) if found else None


def _part_text(part: Any) -> str:
    if not isinstance(part, dict):
        return ""
    if isinstance(part.get("text"), str) and not part.get("thought"):
        return str(part["text"])
    if isinstance(part.get("functionCall"), dict):
        call = part["functionCall"]
        return json.dumps({"name": call.get("name"), "arguments": call.get("args")}, sort_keys=True)
    if isinstance(part.get("functionResponse"), dict):
        return json.dumps(part["functionResponse"].get("response"), default=str)
    return ""


def _contents(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in body.get("contents") or [] if isinstance(c, dict)]


def contents_text(body: dict[str, Any]) -> str:
    """All text of a request's turns (not the system instruction): what scenario rules match."""
    return "\n".join(_part_text(p) for c in _contents(body) for p in c.get("parts") or [])


def as_chat_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The turns as role/content pairs (``model`` is the assistant), for the scenario's turn logic."""
    return [
        {
            "role": "assistant" if c.get("role") == "model" else "user",
            "content": "\n".join(_part_text(p) for p in c.get("parts") or []),
        }
        for c in _contents(body)
    ]


def _offered(body: dict[str, Any]) -> set[str]:
    names = set()
    for tool in body.get("tools") or []:
        for declaration in (tool.get("functionDeclarations") or []) if isinstance(tool, dict) else []:
            if isinstance(declaration, dict):
                names.add(str(declaration.get("name", "")))
    return names


def _call_part(call: dict[str, Any], offered: set[str]) -> dict[str, Any]:
    name = str(call["name"])
    arguments = dict(call.get("arguments") or {})
    if name == "shell" and name not in offered and SHELL_TOOL in offered:
        name = SHELL_TOOL
    return {"functionCall": {"name": name, "args": arguments}}


def response_body(reply: dict[str, Any], model: str, body: dict[str, Any], seq: int) -> dict[str, Any]:
    """A ``GenerateContentResponse`` for a scripted reply."""
    parts: list[dict[str, Any]] = []
    text = json.dumps(reply["verdicts"]) if "verdicts" in reply else reply.get("text")
    if text:
        parts.append({"text": str(text)})
    offered = _offered(body)
    parts += [_call_part(call, offered) for call in reply.get("tool_calls") or []]
    prompt = json.dumps(body.get("systemInstruction") or "") + contents_text(body) + json.dumps(body.get("tools") or [])
    answer = "".join(p.get("text") or json.dumps(p.get("functionCall")) for p in parts)
    prompt_tokens, output_tokens = estimate_tokens(prompt), max(1, estimate_tokens(answer))
    return {
        "candidates": [
            {"content": {"role": "model", "parts": parts or [{"text": ""}]}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {
            "promptTokenCount": prompt_tokens,
            "candidatesTokenCount": output_tokens,
            "totalTokenCount": prompt_tokens + output_tokens,
        },
        "modelVersion": str(reply.get("answered_by") or model),
        "responseId": f"scripted-{seq:06d}",
    }


def sse_events(response: dict[str, Any]) -> list[bytes]:
    """The server-sent events that stream ``response``: one per part, the last with the finish
    reason and usage (as the API sends them)."""
    candidate = response["candidates"][0]
    parts = candidate["content"]["parts"]
    events = []
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        piece: dict[str, Any] = {"content": {"role": "model", "parts": [part]}, "index": 0}
        event: dict[str, Any] = {"candidates": [piece], "modelVersion": response["modelVersion"]}
        event["responseId"] = response["responseId"]
        if last:
            piece["finishReason"] = candidate["finishReason"]
            event["usageMetadata"] = response["usageMetadata"]
        events.append(b"data: " + json.dumps(event).encode() + b"\r\n\r\n")
    return events


def error_body(status: int, message: str, retry_after: float | None = None) -> dict[str, Any]:
    """The Gemini API's error shape; a wait is told as the API tells it, a ``google.rpc.RetryInfo`` detail."""
    kind = {400: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED", 503: "UNAVAILABLE"}
    error: dict[str, Any] = {"code": status, "message": message, "status": kind.get(status, "INTERNAL")}
    if retry_after is not None:
        error["details"] = [{"@type": RETRY_INFO, "retryDelay": f"{retry_after}s"}]
    return {"error": error}


def count_tokens_body(body: dict[str, Any]) -> dict[str, Any]:
    """What ``:countTokens`` answers."""
    return {"totalTokens": estimate_tokens(contents_text(body) or json.dumps(body))}
