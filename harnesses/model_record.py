"""What the model proxy saw: the model's turns, parsed from the proxied responses.

The proxy is the source of truth for what the model answered (text, tool calls, stop
reasons, usage): a harness's own event stream can be forged by the agent it runs, the
traffic the proxy forwarded cannot. This module parses one proxied response body, in the
Anthropic Messages format (JSON or server-sent events) or the OpenAI Responses format, into
a :class:`ModelTurn`. Pure: bytes in, values out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from harnesses import gemini_api
from harnesses.chat_completions import chunk_parts, completion_parts
from harnesses.sse import sse_objects

ELISION_MARKS = ("<tool_output_masked",)
"""What Gemini CLI puts in place of a large old result it sent before, to save context: such a later
version is the harness's own shortening, no second result. No other harness elides, so for them the
mark is text like any other (a command's output can print it)."""
ELIDING_PROTOCOLS = frozenset({"gemini"})
"""The wire protocols of the harnesses that elide old results (Gemini CLI's)."""


def elided(output: str, protocol: str) -> bool:
    """True when ``output`` is the harness's elision of a result it sent before: only on the wire of
    a harness that elides."""
    return protocol in ELIDING_PROTOCOLS and any(mark in output for mark in ELISION_MARKS)


@dataclass(frozen=True)
class ModelToolCall:
    """One tool call as the model emitted it: in a reply to the product's own client, or in a
    response the harness proxy recorded."""

    call_id: str
    name: str
    arguments: dict[str, Any]
    """Parsed arguments; ``{"_raw": text}`` when the model sent unparseable JSON."""
    namespace: str | None = None
    """The Responses API namespace the call names (Codex lists a server's MCP tools as one,
    ``mcp__<server>``); ``name`` is then ``<namespace>__<tool>``, the name every executor gives
    a mocked tool. A call named so without a namespace is another call: its harness runs none."""


@dataclass(frozen=True)
class ModelTurn:
    """One model response: its text, its tool calls, why it stopped and what it cost in tokens."""

    texts: tuple[str, ...] = ()
    tool_calls: tuple[ModelToolCall, ...] = ()
    stop_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model: str | None = None
    """The model the upstream says answered (None when the reply names none)."""
    side: bool = False
    """The request did not continue the harness's own conversation (:mod:`harnesses.conversation`):
    the trajectory takes nothing from this reply."""


@dataclass
class ProxyRecord:
    """Everything one shard's proxy did; read after the harness has exited."""

    turns: list[ModelTurn] = field(default_factory=list)
    forwarded: int = 0
    """Requests forwarded upstream (retries and side requests included)."""
    asked: int = 0
    """Requests of the harness's own conversation sent upstream (a model-answer path, not a side
    request; retries included). Only these speak for the upstream: the fields below count them alone,
    since the agent can send its proxy any request it likes and have it fail."""
    upstream_failures: int = 0
    """Requests of the harness's own conversation that came back 429/5xx or did not come back."""
    last_upstream_ok: bool = True
    """False when the last request of the harness's own conversation failed: the harness gave up on a
    failing upstream."""
    last_error: str = ""
    refused: list[str] = field(default_factory=list)
    """Requests answered locally with a refusal (path, key, budget, request rules), one line each."""
    agent_refusals: list[str] = field(default_factory=list)
    """Requests refused for what they asked of the upstream (another model, a provider-side tool):
    the agent's doing, listed in its trajectory."""
    dropped: list[str] = field(default_factory=list)
    """Headers and beta values the proxy did not forward, each once."""
    body_sent: bool = False
    """True once a request to the model held the watched text (the skill's body)."""
    tool_outputs: dict[str, str] = field(default_factory=dict)
    """What the harness sent the model as each tool call's result, by its call id (Gemini:
    ``functionResponse`` parts; its stream shows only a display text, empty for a file read). A call
    whose requests gave two different results has none here: see :attr:`forged_outputs`."""
    forged_outputs: list[str] = field(default_factory=list)
    """Call ids for which requests continuing the conversation gave the model two different
    results: one of them is the agent's (the harness resends what it sent), and which one cannot be
    told by order (the agent can send its forgery before or after the harness's). Neither is taken,
    no turn is dropped for it, and the case fails: the agent tampered with its record."""
    budget_end: str | None = None
    """``max-tokens``, ``max-turns``, ``wall-clock`` or ``budget-share`` (past its share of the run's
    cap, engine/budget.py) once the proxy refused a request for that budget."""
    run_budget_end: str | None = None
    """Why the *run's* cap (``--max-cost`` / ``--max-tokens``) refused a request: the shard is then
    budget-exhausted, not judged (unlike its own budgets above, which end it as behaviour)."""

    @property
    def prompt_tokens(self) -> int:
        return sum(t.prompt_tokens for t in self.turns)

    @property
    def completion_tokens(self) -> int:
        return sum(t.completion_tokens for t in self.turns)

    def take_outputs(self, outputs: dict[str, str], protocol: str) -> None:
        """Keep the results a request of the conversation gave the model; a second, different
        result for a call marks it forged and drops both. The one exception is the harness's own
        elision of a result already taken, on the wire of a harness that elides (:func:`elided`)."""
        for call_id, output in outputs.items():
            if call_id in self.forged_outputs or (call_id in self.tool_outputs and elided(output, protocol)):
                continue
            if call_id in self.tool_outputs and self.tool_outputs[call_id] != output:
                del self.tool_outputs[call_id]
                self.forged_outputs.append(call_id)
            else:
                self.tool_outputs[call_id] = output

    def tool_calls(self) -> dict[str, ModelToolCall]:
        """Every tool call the model emitted in the harness's own conversation, by call id."""
        return {c.call_id: c for t in self.turns if not t.side for c in t.tool_calls}


def _anthropic_message(message: dict[str, Any]) -> ModelTurn:
    texts, calls = [], []
    for block in message.get("content") or []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and block.get("text"):
            texts.append(str(block["text"]))
        elif block.get("type") == "tool_use":
            raw = block.get("input")
            calls.append(
                ModelToolCall(
                    str(block.get("id", "")), str(block.get("name", "")), raw if isinstance(raw, dict) else {}
                )
            )
    usage = message.get("usage") or {}
    prompt = sum(
        int(usage.get(k) or 0) for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )
    model = message.get("model")
    return ModelTurn(
        tuple(texts),
        tuple(calls),
        message.get("stop_reason"),
        prompt,
        int(usage.get("output_tokens") or 0),
        model=str(model) if isinstance(model, str) and model else None,
    )


def _anthropic_stream(events: list[dict[str, Any]]) -> ModelTurn:
    message: dict[str, Any] = {"content": [], "usage": {}}
    partial: dict[int, list[str]] = {}
    for event in events:
        kind = event.get("type")
        if kind == "message_start":
            start = event.get("message") or {}
            message["usage"] = dict(start.get("usage") or {})
            message["model"] = start.get("model")
        elif kind == "content_block_start":
            block = dict(event.get("content_block") or {})
            index = int(event.get("index", len(message["content"])))
            while len(message["content"]) <= index:
                message["content"].append({})
            message["content"][index] = block
            partial[index] = []
        elif kind == "content_block_delta":
            index, delta = int(event.get("index", 0)), event.get("delta") or {}
            if index >= len(message["content"]):
                continue
            if delta.get("type") == "text_delta":
                block = message["content"][index]
                block["text"] = block.get("text", "") + str(delta.get("text", ""))
            elif delta.get("type") == "input_json_delta":
                partial.setdefault(index, []).append(str(delta.get("partial_json", "")))
        elif kind == "message_delta":
            message["stop_reason"] = (event.get("delta") or {}).get("stop_reason")
            message["usage"].update({k: v for k, v in (event.get("usage") or {}).items() if v is not None})
    for index, pieces in partial.items():
        block = message["content"][index]
        if block.get("type") == "tool_use" and pieces:
            try:
                block["input"] = json.loads("".join(pieces))
            except json.JSONDecodeError:
                block["input"] = {"_raw": "".join(pieces)}
    return _anthropic_message(message)


def _responses_object(response: dict[str, Any]) -> ModelTurn:
    texts, calls = [], []
    for item in response.get("output") or []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "message":
            texts += [
                str(p.get("text", "")) for p in item.get("content") or [] if isinstance(p, dict) and p.get("text")
            ]
        elif item.get("type") == "custom_tool_call":  # a freeform tool (Codex's apply_patch): its input is text
            calls.append(_responses_call(item, {"input": str(item.get("input") or "")}))
        elif item.get("type") == "function_call":
            raw = item.get("arguments")
            try:
                arguments = json.loads(raw) if isinstance(raw, str) else {}
            except json.JSONDecodeError:
                arguments = {"_raw": raw}
            if not isinstance(arguments, dict):
                arguments = {"input": arguments}
            calls.append(_responses_call(item, arguments))
    usage = response.get("usage") or {}
    model = response.get("model")
    return ModelTurn(
        tuple(texts),
        tuple(calls),
        response.get("status"),
        int(usage.get("input_tokens") or 0),
        int(usage.get("output_tokens") or 0),
        model=str(model) if isinstance(model, str) and model else None,
    )


def _responses_call(item: dict[str, Any], arguments: dict[str, Any]) -> ModelToolCall:
    name, namespace = str(item.get("name", "")), item.get("namespace")
    if isinstance(namespace, str) and namespace:
        return ModelToolCall(str(item.get("call_id", "")), f"{namespace}__{name}", arguments, namespace=namespace)
    return ModelToolCall(str(item.get("call_id", "")), name, arguments)


def parse_model_response(protocol: str, body: bytes) -> ModelTurn | None:
    """The model turn in one successful proxied response body; None when it holds none.

    ``protocol`` is ``anthropic`` (a ``message`` object or its event stream) or ``openai``
    (a Responses ``response`` object or its event stream ending in ``response.completed``, or
    a ``chat.completion`` or its chunks: :mod:`harnesses.chat_completions`) or ``gemini``
    (a ``GenerateContentResponse`` or its event stream: :mod:`harnesses.gemini_api`).
    """
    text = body.lstrip()
    if protocol == "gemini":
        return _chat_turn(gemini_api.response_parts(body))
    if protocol == "anthropic":
        if text.startswith(b"{"):
            try:
                message = json.loads(text)
            except json.JSONDecodeError:
                return None
            return _anthropic_message(message) if message.get("type") == "message" else None
        events = sse_objects(body)
        return _anthropic_stream(events) if any(e.get("type") == "message_start" for e in events) else None
    if text.startswith(b"{"):
        try:
            response = json.loads(text)
        except json.JSONDecodeError:
            return None
        if not isinstance(response, dict):
            return None
        if response.get("object") == "chat.completion":
            return _chat_turn(completion_parts(response))
        return _responses_object(response) if response.get("object") == "response" else None
    events = sse_objects(body)
    done = [e for e in events if e.get("type") == "response.completed"]
    if done:
        return _responses_object(done[-1].get("response") or {})
    return _chat_turn(chunk_parts(events))


def _chat_turn(parts: dict[str, Any] | None) -> ModelTurn | None:
    if parts is None:
        return None
    calls = tuple(ModelToolCall(call_id, name, arguments) for call_id, name, arguments in parts["calls"])
    return ModelTurn(
        tuple(parts["texts"]), calls, parts["stop"], parts["prompt"], parts["completion"], model=parts["model"]
    )
