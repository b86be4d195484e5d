"""Where a harness's model traffic may go, and what the proxy must never let out.

- **Base URLs per protocol.** A model's ``api_base`` in the model config is written once
  for both protocols, so it is normalised: Anthropic clients append ``/v1/messages`` to the
  host root (``https://api.anthropic.com``), OpenAI clients append ``/responses`` to a base
  that ends in ``/v1`` (``https://api.openai.com/v1``). ``http://h:1/v1``, ``http://h:1``
  and ``http://h:1/v1/messages`` all name the same Anthropic upstream ``http://h:1``.
- **Model paths.** The proxy forwards only the model API's own paths; the rest of what a
  harness asks for (Claude Code's ``/api/claude_cli/bootstrap``, ``/api/eval/...``) is
  answered locally and never leaves the worker. The OpenAI protocol has two model paths:
  the Responses API (Codex) and chat completions (OpenCode's OpenAI-compatible provider);
  both are priced, budgeted and pinned alike. The Gemini protocol (Gemini CLI) puts the model
  in the path: ``/v1beta/models/<model>:streamGenerateContent`` (:mod:`harnesses.gemini_api`).
- **Scrubbing.** An upstream error body can quote part of the key it was sent; every
  stretch of a response that matches :data:`SCRUB_MIN` or more consecutive characters of
  the real key is replaced before the harness sees it.

Pure: strings in, strings out.
"""

from __future__ import annotations

from typing import Literal

Protocol = Literal["anthropic", "openai", "gemini"]

DEFAULT_UPSTREAM: dict[str, str] = {
    "anthropic": "https://api.anthropic.com",
    "openai": "https://api.openai.com/v1",
    "gemini": "https://generativelanguage.googleapis.com",
}
MODEL_PATHS: dict[str, frozenset[tuple[str, str]]] = {
    "anthropic": frozenset({("POST", "/v1/messages"), ("POST", "/v1/messages/count_tokens"), ("GET", "/v1/models")}),
    "openai": frozenset({("POST", "/v1/responses"), ("POST", "/v1/chat/completions"), ("GET", "/v1/models")}),
    "gemini": frozenset(),  # the model is in the path: harnesses.gemini_api.is_model_path
}
SCRUB_MIN = 6
REDACTED = "[redacted]"


def normalise_upstream(protocol: Protocol, api_base: str | None) -> str:
    """The upstream base of ``protocol`` for a configured ``api_base`` (None: the provider's)."""
    base = (api_base or DEFAULT_UPSTREAM[protocol]).rstrip("/")
    if protocol == "gemini":  # Gemini clients append /v1beta/models/<model>:<method> to the host root
        for suffix in ("/v1beta", "/v1"):
            if base.endswith(suffix):
                return base[: -len(suffix)]
        return base
    if protocol == "anthropic":
        for suffix in ("/v1/messages", "/v1"):
            if base.endswith(suffix):
                return base[: -len(suffix)]
        return base
    for suffix in ("/responses", "/chat/completions"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
    return base if base.endswith("/v1") else base + "/v1"


def upstream_url(protocol: Protocol, upstream: str, path: str, query: str) -> str:
    """The upstream URL of an allowed request ``path`` (which starts with ``/v1``)."""
    tail = path if protocol in ("anthropic", "gemini") else path[len("/v1") :]
    return upstream + tail + (f"?{query}" if query else "")


def is_model_path(protocol: Protocol, method: str, path: str) -> bool:
    """True when ``method path`` is a model API call the proxy forwards."""
    if protocol == "gemini":
        from harnesses.gemini_api import is_model_path as gemini_path

        return gemini_path(method, path)
    return (method, path.rstrip("/")) in MODEL_PATHS[protocol]


def scrub(text: str, secret: str) -> str:
    """``text`` with every run of SCRUB_MIN+ characters that also occurs in ``secret`` redacted."""
    if not secret or len(secret) < SCRUB_MIN or not text:
        return text
    covered = [False] * len(text)
    for start in range(len(secret) - SCRUB_MIN + 1):
        piece = secret[start : start + SCRUB_MIN]
        at = text.find(piece)
        while at >= 0:
            for i in range(at, at + SCRUB_MIN):
                covered[i] = True
            at = text.find(piece, at + 1)
    if not any(covered):
        return text
    out, i = [], 0
    while i < len(text):
        if covered[i]:
            while i < len(text) and covered[i]:
                i += 1
            out.append(REDACTED)
        else:
            out.append(text[i])
            i += 1
    return "".join(out)
