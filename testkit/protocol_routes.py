"""The model API routes of the offline server, one function per protocol: each reads its request
shape, asks the handler for the scenario's reply and plays it back in its response shape.

Chat completions (OpenAI, what OpenCode speaks), Messages (Anthropic: :mod:`testkit.anthropic_api`),
Responses (OpenAI, what Codex speaks: :mod:`testkit.responses_api`), generateContent (the Gemini API:
:mod:`testkit.gemini_api`). A new protocol is one function here and one line in :func:`route`.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, Protocol

from testkit import anthropic_api, gemini_api, responses_api
from testkit.replies import completion_body, completion_chunks
from testkit.scenario import message_text

ErrorShape = Callable[[int, str], dict[str, Any]]
"""(status, message) -> the protocol's error body."""
Render = Callable[[dict[str, Any], str, str, int], dict[str, Any]]
"""(reply, model, prompt text, seq) -> the protocol's response body."""
Stream = Callable[[dict[str, Any]], list[bytes]]
"""A response body -> the server-sent events that stream it."""


class Answering(Protocol):
    """What a route needs of the HTTP handler."""

    def scripted(
        self,
        body: dict[str, Any],
        model: str,
        messages: list[dict[str, Any]],
        text: str,
        has_tools: bool,
        error: ErrorShape,
    ) -> dict[str, Any] | None: ...

    def play(
        self,
        reply: dict[str, Any],
        model: str,
        prompt_text: str,
        error: ErrorShape,
        render: Render,
        *,
        stream: Stream | None = None,
    ) -> None: ...

    def json_reply(self, status: int, value: Any, headers: dict[str, str] | None = None) -> None: ...


def openai_error(status: int, message: str) -> dict[str, Any]:
    """An OpenAI-style error body."""
    kind = "rate_limit_error" if status == 429 else "server_error"
    return {"error": {"message": message, "type": kind, "code": status}}


def answer_chat(handler: Answering, body: dict[str, Any]) -> None:
    model = str(body.get("model", ""))
    messages = body.get("messages") or []
    reply = handler.scripted(body, model, messages, message_text(messages), bool(body.get("tools")), openai_error)
    if reply is not None:
        stream = completion_chunks if body.get("stream") else None
        handler.play(reply, model, message_text(messages), openai_error, completion_body, stream=stream)


def answer_anthropic(handler: Answering, body: dict[str, Any]) -> None:
    model = str(body.get("model", ""))
    chat = anthropic_api.as_chat_messages(body)
    text = anthropic_api.messages_text(body)
    reply = handler.scripted(body, model, chat, text, bool(body.get("tools")), anthropic_api.error_body)
    if reply is None:
        return
    stream = bool(body.get("stream"))

    def render(r: dict[str, Any], m: str, _text: str, seq: int) -> dict[str, Any]:
        return anthropic_api.message_body(r, m, anthropic_api.prompt_text(body), seq)

    handler.play(
        reply, model, text, anthropic_api.error_body, render, stream=anthropic_api.sse_events if stream else None
    )


def answer_responses(handler: Answering, body: dict[str, Any]) -> None:
    model = str(body.get("model", ""))
    chat = responses_api.as_chat_messages(body)
    text = responses_api.input_text(body)
    reply = handler.scripted(body, model, chat, text, bool(body.get("tools")), openai_error)
    if reply is None:
        return

    def render(r: dict[str, Any], m: str, _text: str, seq: int) -> dict[str, Any]:
        return responses_api.response_body(r, m, body, seq)

    stream = responses_api.sse_events if body.get("stream") else None
    handler.play(reply, model, text, openai_error, render, stream=stream)


def answer_gemini(handler: Answering, path: str, body: dict[str, Any]) -> None:
    model, method = gemini_api.route(path) or ("", "")
    if method == "countTokens":
        handler.json_reply(200, gemini_api.count_tokens_body(body))
        return
    text = gemini_api.contents_text(body)
    chat = gemini_api.as_chat_messages(body)
    reply = handler.scripted(body, model, chat, text, bool(body.get("tools")), gemini_api.error_body)
    if reply is None:
        return

    def render(r: dict[str, Any], m: str, _text: str, seq: int) -> dict[str, Any]:
        return gemini_api.response_body(r, m, body, seq)

    stream = gemini_api.sse_events if method == "streamGenerateContent" else None
    error = partial(gemini_api.error_body, retry_after=reply.get("retry_after"))
    handler.play(reply, model, text, error, render, stream=stream)


def route(path: str) -> Callable[[Answering, dict[str, Any]], None] | None:
    """The protocol function answering a model request to ``path`` (query string removed), or None."""
    if path in ("/v1/chat/completions", "/chat/completions"):
        return answer_chat
    if path in ("/v1/messages", "/messages"):
        return answer_anthropic
    if path in ("/v1/messages/count_tokens", "/messages/count_tokens"):
        return lambda handler, body: handler.json_reply(200, anthropic_api.count_tokens_body(body))
    if path in ("/v1/responses", "/responses"):
        return answer_responses
    if gemini_api.route(path) is not None:
        return partial(_gemini_at, path=path)
    return None


def _gemini_at(handler: Answering, body: dict[str, Any], *, path: str) -> None:
    answer_gemini(handler, path, body)
