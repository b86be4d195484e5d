"""OpenAI chat completions as the proxy records them (the wire API of OpenCode's provider).

A reply is a ``chat.completion`` object, or its stream: ``chat.completion.chunk`` events
whose ``delta`` carries text pieces and tool-call pieces keyed by ``index`` (the call's id
and name in its first piece, its arguments spread over the rest), a ``finish_reason``, and
the usage in a last chunk without choices. Only the first choice is read (the proxy pins
``n`` to one). Pure: values in, values out.
"""

from __future__ import annotations

import json
from typing import Any


def _obj(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one (the stream is not trusted to be well formed)."""
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw) if isinstance(raw, str) and raw.strip() else {}
    except json.JSONDecodeError:
        return {"_raw": raw}
    return value if isinstance(value, dict) else {"input": value}


def call_arguments(call: Any) -> dict[str, Any]:
    """The parsed arguments of one ``tool_calls`` entry of a chat message (as a reply's are recorded)."""
    return _arguments(_obj(_obj(call).get("function")).get("arguments"))


def call_name(call: Any) -> str:
    return str(_obj(_obj(call).get("function")).get("name", ""))


def completion_parts(body: dict[str, Any]) -> dict[str, Any] | None:
    """``{texts, calls: [(id, name, arguments)], stop, prompt, completion, model}`` of a
    ``chat.completion`` object; None when ``body`` is not one."""
    choices = body.get("choices")
    if body.get("object") != "chat.completion" or not isinstance(choices, list) or not choices:
        return None
    choice = _obj(choices[0])
    message = _obj(choice.get("message"))
    calls = []
    for call in message.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            calls.append(
                (str(call.get("id", "")), str(function.get("name", "")), _arguments(function.get("arguments")))
            )
    content = message.get("content")
    return _parts([content] if isinstance(content, str) else [], calls, choice.get("finish_reason"), body)


def chunk_parts(chunks: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The same parts, put together from a stream's ``chat.completion.chunk`` events (None without any)."""
    chunks = [c for c in chunks if c.get("object") == "chat.completion.chunk"]
    if not chunks:
        return None
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    stop, model = None, None
    usage: dict[str, Any] = {}
    for chunk in chunks:
        model = model or chunk.get("model")
        usage = _obj(chunk.get("usage")) or usage
        choices = _list(chunk.get("choices"))
        choice = _obj(choices[0]) if choices else {}
        stop = choice.get("finish_reason") or stop
        delta = _obj(choice.get("delta"))
        if isinstance(delta.get("content"), str):
            text.append(delta["content"])
        for piece in delta.get("tool_calls") or []:
            if not isinstance(piece, dict) or not isinstance(piece.get("index", 0), int):
                continue
            call = calls.setdefault(piece.get("index", 0), {"id": "", "name": "", "arguments": []})
            call["id"] = call["id"] or str(piece.get("id") or "")
            function = _obj(piece.get("function"))
            call["name"] = call["name"] or str(function.get("name") or "")
            if isinstance(function.get("arguments"), str):
                call["arguments"].append(function["arguments"])
    assembled = [(c["id"], c["name"], _arguments("".join(c["arguments"]))) for _, c in sorted(calls.items())]
    joined = "".join(text)
    return _parts([joined] if joined else [], assembled, stop, {"usage": usage, "model": model})


def _parts(
    texts: list[str], calls: list[tuple[str, str, dict[str, Any]]], stop: Any, body: dict[str, Any]
) -> dict[str, Any]:
    usage = _obj(body.get("usage"))
    model = body.get("model")
    return {
        "texts": [t for t in texts if t],
        "calls": calls,
        "stop": str(stop) if stop else None,
        "prompt": int(usage.get("prompt_tokens") or 0),
        "completion": int(usage.get("completion_tokens") or 0),
        "model": model if isinstance(model, str) and model else None,
    }


def tool_messages(body: dict[str, Any]) -> dict[str, str]:
    """Call id -> the result text of each ``tool`` message of a chat completions request (its
    string content, or its text parts joined): what the harness gave the model for that call."""
    out: dict[str, str] = {}
    for message in _list(body.get("messages")):
        message = _obj(message)
        call_id = message.get("tool_call_id")
        if message.get("role") != "tool" or not isinstance(call_id, str) or not call_id:
            continue
        content = message.get("content")
        if isinstance(content, list):
            content = "\n".join(str(_obj(p).get("text", "")) for p in content if _obj(p).get("type") == "text")
        out[call_id] = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    return out
