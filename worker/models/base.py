"""The model client interface shared by the executor and the judge."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from harnesses.model_record import ModelToolCall
from schemas.trajectory import Usage


@dataclass(frozen=True)
class ModelReply:
    """One completion."""

    content: str | None
    tool_calls: tuple[ModelToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = "stop"
    raw: dict[str, Any] = field(default_factory=dict)
    waited_s: float = 0.0
    """Seconds of the call not spent on this answer: the limiter's wait (a slot, the pace, a
    429's cool-down), retry backoff and the attempts that failed before it. The fleet's doing,
    not the agent's: its wall clock does not count them."""


@dataclass(frozen=True)
class ModelRequest:
    """One attempt's request, as a transport sends it (credentials resolved)."""

    model: str
    """The model name of the run's config (litellm's, provider prefix included)."""
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    max_tokens: int | None
    timeout_s: float
    api_base: str | None
    api_key: str | None


class Transport(Protocol):
    """How a request reaches a model: litellm (worker/models/via_litellm.py) or straight over
    HTTP to an OpenAI-compatible endpoint (worker/models/direct.py).

    ``send`` makes one attempt and raises whatever failed (the client's retry rules read it);
    ``reply`` turns what it returned into a :class:`ModelReply` outside the attempt.
    """

    def send(self, request: ModelRequest) -> Any: ...

    def reply(self, request: ModelRequest, response: Any, attempts: int) -> ModelReply: ...


class ModelClient(Protocol):
    """Chat completions through the fleet-wide limiter.

    Raises :class:`schemas.errors.ModelCallFailed` once its retry budget is spent.
    """

    def complete(
        self,
        model: str,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        max_tokens: int | None = None,
        timeout_s: float | None = None,
        own: Usage | None = None,
    ) -> ModelReply:
        """``own``: what the calling executor's shard has spent so far (judges pass none); with it
        the run's cap may refuse the call as the shard's own doing (:class:`ShareSpent`)."""
        ...
