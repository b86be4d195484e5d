"""The model client interface shared by the executor and the judge."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from schemas.trajectory import Usage


@dataclass(frozen=True)
class ToolCall:
    """A tool call the model asked for."""

    id: str
    name: str
    arguments: dict[str, Any]
    """Parsed arguments; ``{"_raw": text}`` when the model sent unparseable JSON."""


@dataclass(frozen=True)
class ModelReply:
    """One completion."""

    content: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = "stop"
    raw: dict[str, Any] = field(default_factory=dict)


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
