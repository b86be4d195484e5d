"""One shard's model proxy: where its requests go, with which key, within which budgets and rules."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from harnesses.base import PLACEHOLDER_KEY, bare_model
from harnesses.endpoints import Protocol
from harnesses.model_record import ModelTurn
from harnesses.request_rules import RequestRules
from schemas.model_config import DEFAULT_MAX_OUTPUT_TOKENS


@dataclass(frozen=True)
class ProxyConfig:
    """One shard's proxy: where to, with which key, within which budgets."""

    protocol: Protocol
    upstream: str
    """Normalised upstream base (:func:`harnesses.endpoints.normalise_upstream`)."""
    real_key: str
    model: str
    """The litellm model name (limiter and usage counters are keyed by it)."""
    wall_clock_s: float = 900.0
    max_tokens: int = 2_000_000
    max_turns: int = 200
    timeout_s: float = 600.0
    placeholder: str = PLACEHOLDER_KEY
    watch: str = ""
    """Text whose presence in a request body sets ``ProxyRecord.body_sent`` (the skill's body)."""
    stop_when: Callable[[ModelTurn], bool] | None = None
    """A trigger shard: once a model response satisfies this (it activated a skill), further calls are
    refused and the shard ends ``skill-activated``."""
    max_output: int = DEFAULT_MAX_OUTPUT_TOKENS
    """Output tokens one request may ask for (``max_tokens`` and its kin are clamped to it)."""
    headers: frozenset[str] = frozenset()
    """Request header names forwarded; empty: the protocol's (:data:`harnesses.request_rules.PROTOCOL_HEADERS`)."""
    betas: frozenset[str] | None = None
    """``anthropic-beta`` values forwarded; None: any (no harness named its own)."""
    answered_empty: frozenset[str] = frozenset()
    """Paths of the harness's own calls that are no model call, answered ``{}`` locally (its adapter's)."""
    opening: str = ""
    """The prompt the harness was given: a request none of whose user messages holds it (or a
    call of the conversation) is a side request (:func:`harnesses.conversation.continues`)."""
    tools: frozenset[str] | None = None
    """The tools a request may offer the model (the case's allowed tools, in the harness's names);
    None: the harness's own set (:attr:`harnesses.request_rules.RequestRules.tools`)."""

    harness: str | None = None
    """The harness's name: the instruction files it appends to tool results on its own are taken
    out (:mod:`harnesses.appended_context`)."""

    def rules(self) -> RequestRules:
        return RequestRules(
            protocol=self.protocol,
            model=bare_model(self.model),
            max_output=self.max_output,
            headers=self.headers,
            betas=self.betas,
            tools=self.tools,
            harness=self.harness,
        )
