"""Whether a proxied request continues the harness's own conversation, or is a side request.

The agent can send its proxy a conversation of its own (a forged history, or a fresh
conversation asking the model for the tool call it wants on record). Such a request is a
*side request*: the proxy forwards it (it is still the shard's model, budgets and tools) but
marks its turn, and the trajectory takes nothing from its reply.

A request continues the harness's conversation when

- every tool call in its history is one the proxy recorded from an earlier reply of that
  conversation (a forged assistant turn names calls no reply held), with the tool and arguments
  that reply gave it (chat completions, whose history carries them), and
- one of its user messages holds the prompt the harness was given, or the text of a call
  the conversation made (a sub-agent's conversation opens with its parent's call).

Content can be copied, so this is the first filter only: a call still enters the trajectory
only when the harness's own stream claims it (:mod:`harnesses.crosscheck`), and a call's result
as sent is taken only when the conversation's requests agree on it
(:meth:`harnesses.model_record.ProxyRecord.take_outputs`).

Pure: dicts in, booleans out.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from harnesses import chat_completions, gemini_api
from harnesses.model_record import ModelToolCall

_ANCHOR_MIN = 16
"""Shorter call arguments (``ls``, a path) open no conversation: too easy to meet by chance."""
_HISTORY_CALLS = frozenset({"function_call", "custom_tool_call", "local_shell_call"})


def _norm(text: str) -> str:
    return " ".join(text.split())


def _objects(value: Any) -> list[dict[str, Any]]:
    """The objects of a JSON array; none when ``value`` is not one (a request's body is the agent's to shape)."""
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _user_texts(content: Any) -> list[str]:
    """The texts of an OpenAI user message's content: a string, or a list of parts."""
    parts = content if isinstance(content, list) else [{"text": content}]
    return [str(p["text"]) for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)]


def _anthropic(messages: Any) -> tuple[set[str], list[str]]:
    calls: set[str] = set()
    texts: list[str] = []
    for message in _objects(messages):
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        for block in blocks:
            if not isinstance(block, dict):
                continue
            if message.get("role") == "assistant" and block.get("type") in ("tool_use", "server_tool_use"):
                calls.add(str(block.get("id", "")))
            elif message.get("role") == "user" and block.get("type") == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
    return calls, texts


def _responses(items: Any) -> tuple[set[str], list[str]]:
    if isinstance(items, str):
        return set(), [items]
    calls: set[str] = set()
    texts: list[str] = []
    for item in _objects(items):
        if item.get("type") in _HISTORY_CALLS:
            calls.add(str(item.get("call_id", "")))
        elif item.get("role") == "user":
            texts += _user_texts(item.get("content"))
    return calls, texts


def _chat(messages: Any) -> tuple[set[str], list[str]]:
    """OpenAI chat completions: assistant messages name their ``tool_calls`` by id."""
    calls: set[str] = set()
    texts: list[str] = []
    for message in _objects(messages):
        if message.get("role") == "assistant":
            calls |= {str(c.get("id", "")) for c in _objects(message.get("tool_calls"))}
        elif message.get("role") == "user":
            texts += _user_texts(message.get("content"))
    return calls, texts


def _chat_replayed(messages: Any, known: Mapping[str, ModelToolCall]) -> bool:
    """True when every recorded call a chat request's assistant turns name is the call the model
    made: same tool, same arguments (a history that quotes a real call id with other content is
    no reply the proxy forwarded)."""
    for message in _objects(messages):
        if message.get("role") != "assistant":
            continue
        for call in _objects(message.get("tool_calls")):
            real = known.get(str(call.get("id", "")))
            if real is not None and (
                chat_completions.call_name(call) != real.name or chat_completions.call_arguments(call) != real.arguments
            ):
                return False
    return True


def history(protocol: str, body: Mapping[str, Any]) -> tuple[set[str], list[str]]:
    """The call ids of a request's earlier assistant turns, and its user messages' texts."""
    if protocol == "anthropic":
        return _anthropic(body.get("messages"))
    if protocol == "gemini":  # calls by signature: ids do not survive the Gemini wire
        return gemini_api.history(dict(body))
    if "input" not in body and "messages" in body:  # chat completions, the other OpenAI wire API
        return _chat(body.get("messages"))
    return _responses(body.get("input"))


def strings(value: Any) -> Iterator[str]:
    """Every string inside a JSON value, depth first."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def continues(protocol: str, body: Mapping[str, Any], *, opening: str, known: Mapping[str, ModelToolCall]) -> bool:
    """True when ``body`` continues the conversation whose recorded calls are ``known``.

    ``opening``: the prompt the harness was given ("" when the proxy was told none: then only
    the history is checked).
    """
    calls, texts = history(protocol, body)
    names = {gemini_api.signature(c.name, c.arguments) for c in known.values()} if protocol == "gemini" else set(known)
    if not calls <= names:
        return False
    chat = protocol == "openai" and "input" not in body and "messages" in body
    if chat and not _chat_replayed(body.get("messages"), known):
        return False
    if not opening.strip():
        return True
    joined = [_norm(t) for t in texts]
    anchors = [_norm(opening), *_anchors(known.values())]
    return any(anchor and anchor in text for anchor in anchors for text in joined)


def _anchors(calls: Iterable[ModelToolCall]) -> Iterator[str]:
    for call in calls:
        for text in strings(call.arguments):
            norm = _norm(text)
            if len(norm) >= _ANCHOR_MIN:
                yield norm


_OUTPUT_ITEMS = frozenset({"function_call_output", "custom_tool_call_output"})


def sent_outputs(body: Mapping[str, Any]) -> dict[str, str]:
    """Call id -> what an OpenAI request gives the model as that call's result: the ``tool``
    messages of chat completions, or the Responses input's ``function_call_output`` and
    ``custom_tool_call_output`` items (their text; a list of parts joined)."""
    if "input" not in body and "messages" in body:
        return chat_completions.tool_messages(dict(body))
    out: dict[str, str] = {}
    for item in _objects(body.get("input")):
        call_id, output = item.get("call_id"), item.get("output")
        if item.get("type") not in _OUTPUT_ITEMS or not isinstance(call_id, str) or not call_id:
            continue
        if isinstance(output, list):
            output = "\n".join(str(p.get("text", "")) for p in _objects(output) if isinstance(p.get("text"), str))
        out[call_id] = output if isinstance(output, str) else ""
    return out
