"""The OpenAI Responses API as the offline server speaks it (the protocol Codex uses).

A request carries ``instructions``, ``input`` (a list of items: ``message`` with
``input_text``/``output_text`` parts, ``function_call``, ``function_call_output``,
``reasoning``...), ``tools`` and ``"stream": true``. A scripted reply becomes a ``response``
whose ``output`` holds a ``message`` item (the text) and one ``function_call`` item per
scripted tool call; streamed, it is ``response.created``, per item
``response.output_item.added`` (+ ``response.output_text.delta`` for text) and
``response.output_item.done``, then ``response.completed`` with the usage.

Tool names vary by model and client version (``shell``, ``exec_command``, ``shell_command``),
so a scripted call named ``shell`` takes the name of whichever shell tool the request offers,
and its ``command`` string is given the argument shape that tool declares. A request may offer
tools grouped in a ``namespace`` (Codex lists an MCP server's tools as ``mcp__<server>``): a
scripted call named ``<namespace>__<tool>`` for an offered member is sent as ``<tool>`` in that
namespace, as the API does; any other name is sent as it is (``"namespace": false`` in the
script keeps even an offered member's call flat). A scripted call with an ``input`` string calls a
freeform (``custom``) tool, as Codex's ``apply_patch`` is with a model of its built-in list: a
``custom_tool_call`` item whose ``input`` is that text. A call named ``tool_search``, when the request
offers Codex's client-run search, is a ``tool_search_call`` with its arguments (``query``).

Pure: values in, values out; the HTTP side is :mod:`testkit.offline_server`.
"""

from __future__ import annotations

import json
from typing import Any

from testkit.replies import estimate_tokens

_SHELL_TOOLS = ("shell", "exec_command", "shell_command", "local_shell")
_ASSISTANT_ITEMS = frozenset(
    {"function_call", "reasoning", "custom_tool_call", "local_shell_call", "web_search_call", "tool_search_call"}
)


def _item_text(item: dict[str, Any]) -> str:
    kind = item.get("type", "message")
    if kind == "message":
        content = item.get("content")
        if isinstance(content, str):
            return content
        return "\n".join(str(p.get("text", "")) for p in content or [] if isinstance(p, dict))
    if kind in ("function_call", "custom_tool_call"):
        name = f"{item['namespace']}__{item.get('name')}" if item.get("namespace") else item.get("name")
        return json.dumps({"name": name, "arguments": item.get("arguments") or item.get("input")})
    if kind in ("function_call_output", "custom_tool_call_output"):
        output = item.get("output")
        return output if isinstance(output, str) else json.dumps(output)
    return ""


def _items(body: dict[str, Any]) -> list[dict[str, Any]]:
    raw = body.get("input")
    if isinstance(raw, str):
        return [{"type": "message", "role": "user", "content": raw}]
    return [i for i in raw or [] if isinstance(i, dict)]


def input_text(body: dict[str, Any]) -> str:
    """All text of a request's input items: what scenario rules match."""
    return "\n".join(_item_text(i) for i in _items(body))


def as_chat_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The input as role/content pairs; consecutive model output items count as one assistant turn."""
    out: list[dict[str, Any]] = []
    for item in _items(body):
        kind = item.get("type", "message")
        role = "assistant" if kind in _ASSISTANT_ITEMS else str(item.get("role") or "tool")
        if role == "assistant" and out and out[-1]["role"] == "assistant":
            out[-1]["content"] += "\n" + _item_text(item)
            continue
        out.append({"role": role, "content": _item_text(item)})
    return out


def _tool_names(body: dict[str, Any]) -> list[str]:
    names = []
    for tool in body.get("tools") or []:
        if isinstance(tool, dict):
            names.append(str(tool.get("name") or tool.get("type") or ""))
    return names


def _namespaced(body: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """``<namespace>__<member>`` -> (namespace, member) for every member of an offered namespace,
    or of one a ``tool_search_output`` of the input handed the model."""
    out: dict[str, tuple[str, str]] = {}
    found = [t for i in _items(body) if i.get("type") == "tool_search_output" for t in i.get("tools") or []]
    for tool in [*(body.get("tools") or []), *found]:
        if isinstance(tool, dict) and tool.get("type") == "namespace":
            space = str(tool.get("name", ""))
            for member in tool.get("tools") or []:
                if isinstance(member, dict):
                    out[f"{space}__{member.get('name', '')}"] = (space, str(member.get("name", "")))
    return out


def _tool_call(call: dict[str, Any], offered: list[str]) -> tuple[str, str]:
    """(name, arguments JSON) of a scripted call, adapted to the shell tool the request offers."""
    name = str(call["name"])
    arguments = dict(call.get("arguments") or {})
    if call.get("arguments_raw") is not None:
        return name, str(call["arguments_raw"])
    if name == "shell" and name not in offered:
        name = next((n for n in _SHELL_TOOLS if n in offered), name)
    command = arguments.get("command")
    if isinstance(command, str):
        if name == "shell":
            arguments["command"] = ["bash", "-lc", command]
        elif name == "exec_command":
            arguments = {"cmd": command, **{k: v for k, v in arguments.items() if k != "command"}}
    return name, json.dumps(arguments)


def response_body(reply: dict[str, Any], model: str, body: dict[str, Any], seq: int) -> dict[str, Any]:
    """A completed ``response`` object for a scripted reply."""
    output: list[dict[str, Any]] = []
    text = json.dumps(reply["verdicts"]) if "verdicts" in reply else reply.get("text")
    if text:
        output.append(
            {
                "type": "message",
                "id": f"msg_{seq:06d}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": str(text), "annotations": []}],
            }
        )
    offered, spaces = _tool_names(body), _namespaced(body)
    for i, call in enumerate(reply.get("tool_calls") or []):
        if call["name"] == "tool_search" and any(
            isinstance(t, dict) and t.get("type") == "tool_search" for t in body.get("tools") or []
        ):
            ids = {"id": f"ts_{seq:06d}_{i}", "call_id": f"call_{seq:06d}_{i}", "status": "completed"}
            search = {
                "type": "tool_search_call",
                **ids,
                "execution": "client",
                "arguments": call.get("arguments") or {},
            }
            output.append(search)
            continue
        if isinstance(call.get("input"), str):
            ids = {"id": f"ctc_{seq:06d}_{i}", "call_id": f"call_{seq:06d}_{i}", "status": "completed"}
            output.append({"type": "custom_tool_call", **ids, "name": str(call["name"]), "input": call["input"]})
            continue
        name, arguments = _tool_call(call, offered)
        item = {"type": "function_call", "id": f"fc_{seq:06d}_{i}", "call_id": f"call_{seq:06d}_{i}"}
        if name in spaces and call.get("namespace") is not False:
            item["namespace"], name = spaces[name]
        output.append({**item, "name": name, "arguments": arguments, "status": "completed"})
    prompt = str(body.get("instructions") or "") + input_text(body) + json.dumps(body.get("tools") or [])
    out_text = "".join(
        o["content"][0]["text"] if o["type"] == "message" else str(o.get("arguments", o.get("input", "")))
        for o in output
    )
    input_tokens, output_tokens = estimate_tokens(prompt), max(1, estimate_tokens(out_text))
    return {
        "id": f"resp_scripted_{seq:06d}",
        "object": "response",
        "created_at": 0,
        "status": "completed",
        "model": str(reply.get("answered_by") or model),
        "output": output,
        "usage": {
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + output_tokens,
        },
    }


def _event(data: dict[str, Any]) -> bytes:
    return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n".encode()


def sse_events(response: dict[str, Any]) -> list[bytes]:
    """The server-sent events that stream ``response``, ending in ``response.completed``."""
    pending = {**response, "status": "in_progress", "output": [], "usage": None}
    events = [_event({"type": "response.created", "response": pending})]
    for index, item in enumerate(response["output"]):
        events.append(_event({"type": "response.output_item.added", "output_index": index, "item": item}))
        if item["type"] == "message":
            delta = item["content"][0]["text"]
            events.append(
                _event(
                    {
                        "type": "response.output_text.delta",
                        "item_id": item["id"],
                        "output_index": index,
                        "content_index": 0,
                        "delta": delta,
                    }
                )
            )
        events.append(_event({"type": "response.output_item.done", "output_index": index, "item": item}))
    events.append(_event({"type": "response.completed", "response": response}))
    return events
