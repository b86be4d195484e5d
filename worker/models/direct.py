"""Chat completions sent straight to an OpenAI-compatible endpoint over HTTP, without litellm.

A self-hosted model server (vLLM, Ollama, LM Studio, a gateway, the offline test server)
speaks one protocol: ``POST {api_base}/chat/completions``, a bearer key, JSON in and out.
litellm adds nothing to that but cost: seconds of CPU and over 100 MB to import in every
worker process (the whole of a run's start-up on a slow machine), and about 10 ms of CPU per
call under the interpreter lock every shard's thread shares. This transport sends the same
request with one shared httpx client per process and endpoint, checks the reply's shape, and
maps failures onto the client's retry rules:

* an HTTP error status raises :class:`EndpointError` (``status_code``, ``response`` for the
  Retry-After header, ``body`` and ``code`` for the out-of-credit check);
* no answer (refused, reset, timed out) raises :class:`EndpointUnreachable`;
* a 2xx that is not a chat completion raises :class:`MalformedReply`.

Which models take this path is decided in worker/models/client.py (``transport`` in the
model config). Providers' own APIs, with their model quirks, stay with litellm.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import ssl
import threading
from typing import Any

import httpx

from harnesses.model_record import ModelToolCall
from schemas.trajectory import Usage
from worker.models.base import ModelReply, ModelRequest
from worker.models.prices import dearest_per_token, tokens_cost

__all__ = ["EndpointError", "EndpointUnreachable", "MalformedReply", "OpenAICompatible"]


class EndpointError(Exception):
    """The endpoint answered with an HTTP error status."""

    def __init__(self, status_code: int, message: str, response: httpx.Response, body: Any) -> None:
        super().__init__(f"HTTP {status_code}: {message}")
        self.status_code = status_code
        self.response = response
        self.body = body
        error = body.get("error") if isinstance(body, dict) else None
        self.code = error.get("code") or error.get("type") if isinstance(error, dict) else None


class EndpointUnreachable(Exception):
    """No HTTP answer: the connection was refused or reset, or the timeout passed."""


class MalformedReply(Exception):
    """A success status whose body is not a chat completion."""


def wire_name(model: str) -> str:
    """The model name the endpoint is asked for: without the ``openai/`` routing prefix, as litellm sends it."""
    return model.split("/", 1)[1] if model.startswith("openai/") else model


def _error_message(response: httpx.Response) -> tuple[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return (" ".join(response.text.split())[:500] or response.reason_phrase), response.text
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return error["message"], body
    if isinstance(error, str):
        return error, body
    return json.dumps(body)[:500], body


def _text(content: Any) -> str | None:
    """A message's content as text: a string, or the text parts of a list of parts."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    raise MalformedReply(f"message content is a {type(content).__name__}, not text")


def parse_arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw or "{}")
    except (TypeError, ValueError, RecursionError):  # not JSON, or past the parser's limits: malformed
        return {"_raw": raw}
    return value if isinstance(value, dict) else {"_raw": raw}


def _tool_calls(message: dict[str, Any]) -> tuple[ModelToolCall, ...]:
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        raise MalformedReply("tool_calls is not a list")
    parsed = []
    for index, call in enumerate(calls):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise MalformedReply(f"tool call {index} has no function name")
        call_id = call.get("id")
        parsed.append(
            ModelToolCall(
                call_id=call_id if isinstance(call_id, str) and call_id else f"call_{index}",
                name=function["name"],
                arguments=parse_arguments(function.get("arguments")),
            )
        )
    return tuple(parsed)


def _count(usage: dict[str, Any], key: str) -> int:
    value = usage.get(key)
    if isinstance(value, float) and not math.isfinite(value):  # JSON's Infinity and NaN, as Python reads them
        raise MalformedReply(f"usage.{key} is {value}")
    return int(value) if isinstance(value, int | float) and value > 0 else 0


def parse_completion(model: str, data: Any, attempts: int) -> ModelReply:
    """A :class:`ModelReply` from a chat completion's JSON; MalformedReply when it is not one."""
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise MalformedReply("the body has no choices")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise MalformedReply("the first choice has no message")
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    prompt, completion = _count(usage, "prompt_tokens"), _count(usage, "completion_tokens")
    details = usage.get("prompt_tokens_details")
    cached = _count(details, "cached_tokens") if isinstance(details, dict) else 0
    return ModelReply(
        content=_text(message.get("content")),
        tool_calls=_tool_calls(message),
        usage=Usage(
            prompt_tokens=prompt,
            completion_tokens=completion,
            calls=attempts,
            cost_usd=tokens_cost(model, prompt, completion, cached),
        ),
        finish_reason=str(choices[0].get("finish_reason") or "stop"),
        raw=data,
    )


_tls_lock = threading.Lock()
_tls_context: ssl.SSLContext | None = None


def _tls() -> ssl.SSLContext:
    """This process's verifying TLS context (httpx's defaults: certifi, or SSL_CERT_FILE/SSL_CERT_DIR).

    Shared by every client: httpx builds a new one per client otherwise, reading the CA bundle
    each time (about 40 ms of CPU). Built once, also when the warm-up and a first https call
    ask at the same moment."""
    global _tls_context
    with _tls_lock:
        if _tls_context is None:
            _tls_context = httpx.create_ssl_context()
        return _tls_context


def _verify(base_url: str) -> ssl.SSLContext | bool:
    """What a client for ``base_url`` verifies with: the shared context, unless the endpoint is
    plain HTTP (a local model server), which never shakes hands: its client's requests are all
    relative to that base and never follow a redirect, so no CA bundle is read for it. The
    scheme is read as httpx reads it (``HTTPS://`` is https), and anything not plain HTTP
    verifies."""
    try:
        plain = httpx.URL(base_url).scheme == "http"
    except httpx.InvalidURL:
        plain = False
    return False if plain else _tls()


def warm_up() -> None:
    """Load what httpx imports on its first client (its transport, httpcore) during the worker's
    start-up, not inside its first model call."""
    httpx.Client(verify=False).close()


def warm_up_rest() -> None:
    """What a first call needs only for an https endpoint (the TLS context) or only once its reply
    is in (the price table): built once the node's first task has begun (worker/warmup.py)."""
    _tls()
    dearest_per_token("openai/warm-up")


class OpenAICompatible:
    """The direct transport: one pooled httpx client per process and endpoint, shared by all threads."""

    def __init__(self) -> None:
        self._clients: dict[tuple[int, str], httpx.Client] = {}
        self._lock = threading.Lock()

    def _client(self, api_base: str) -> httpx.Client:
        # Keyed by pid too: a client made before a fork must not share its sockets with the child.
        key = (os.getpid(), api_base.rstrip("/"))
        with self._lock:
            client = self._clients.get(key)
            if client is None:
                client = httpx.Client(
                    base_url=key[1],
                    limits=httpx.Limits(max_connections=None, max_keepalive_connections=64),
                    follow_redirects=False,
                    verify=_verify(key[1]),
                )
                self._clients[key] = client
            return client

    def send(self, request: ModelRequest) -> ModelReply:
        """POST the request; the reply of a 2xx (MalformedReply when it is not a chat completion)."""
        if not request.api_base:
            raise ValueError(f"{request.model}: the direct transport needs an api_base")
        body: dict[str, Any] = {"model": wire_name(request.model), "messages": request.messages}
        if request.tools:
            body["tools"] = request.tools
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        headers = {"content-type": "application/json"}
        if request.api_key:
            headers["authorization"] = f"Bearer {request.api_key}"
        try:
            response = self._client(request.api_base).post(
                "/chat/completions", content=json.dumps(body), headers=headers, timeout=request.timeout_s
            )
        except httpx.TransportError as err:  # refused, reset, timed out, a broken HTTP exchange
            raise EndpointUnreachable(f"{type(err).__name__}: {err}") from err
        if response.status_code >= 300:
            message, error_body = _error_message(response)
            raise EndpointError(response.status_code, message, response, error_body)
        try:
            data = response.json()
        except ValueError as err:
            raise MalformedReply(f"the body is not JSON: {response.text[:200]!r}") from err
        return parse_completion(request.model, data, 1)  # the shape is checked inside the attempt

    def reply(self, request: ModelRequest, response: Any, attempts: int) -> ModelReply:
        reply: ModelReply = response
        if attempts == reply.usage.calls:
            return reply
        return dataclasses.replace(reply, usage=reply.usage.model_copy(update={"calls": attempts}))

    def close(self) -> None:
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            client.close()
