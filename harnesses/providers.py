"""Which models a harness can run: the providers served over the one protocol its proxy forwards. Pure.

A harness reaches its model only through the shard's proxy, and the proxy forwards only its
harness's protocol (``harnesses.endpoints``) to the model's upstream: an Anthropic Messages
client cannot be given an OpenAI model, nor a Gemini API client an Anthropic one. A model
name says its provider the litellm way (``anthropic/claude-sonnet-4-5``, ``openai/gpt-5``,
``gemini/gemini-2.5-pro``); a name without one says nothing a harness could rely on, so a
harness refuses it (the built-in agent, which calls any litellm model, and an external
``cmd:`` agent, which calls its own, take every name).
"""

from __future__ import annotations

from harnesses.endpoints import Protocol

PROTOCOL_PROVIDERS: dict[str, frozenset[str]] = {
    "anthropic": frozenset({"anthropic"}),
    "openai": frozenset({"openai"}),
    "gemini": frozenset({"gemini"}),
}
"""Protocol -> the litellm providers whose API it is (an OpenAI-compatible server is ``openai/...``
with an ``api_base``)."""


def providers_for(protocol: Protocol) -> frozenset[str]:
    """The providers a harness speaking ``protocol`` can run."""
    return PROTOCOL_PROVIDERS[protocol]


def provider_of(model: str) -> str | None:
    """The litellm provider a model name gives (``openai`` of ``openai/gpt-5``); None when it gives none."""
    head, slash, rest = model.partition("/")
    return head if slash and head and rest else None


def speaks(providers: frozenset[str], model: str) -> bool:
    """Whether a harness running ``providers`` can run ``model``."""
    return provider_of(model) in providers
