"""What a harness's request may ask of the upstream: the shard's model, bounded limits, client-side tools.

The agent can reach its own proxy (the loopback URL its harness was given) and send it any
request; the proxy carries the operator's real key. So the proxy forwards a request only as
the shard allows it (``docs/design/harnesses.md``):

- **the shard's model**: a body naming another model is refused (``MODEL_NOT_ALLOWED``),
  never rewritten, so the agent learns why and the record says it asked;
- **bounded limits**: ``max_tokens`` (and the protocols' other names for it) and the
  thinking budget are clamped to the shard's ``max_output``; ``n`` to one answer;
- **client-side tools only**: a tool the provider itself would run (web search and fetch,
  code execution, computer use, file search, MCP connectors, the provider-defined
  bash/text-editor schemas, ...) gives the agent what its sandbox denies it, the network
  included: every tool whose type is not a plain function is refused
  (``SERVER_TOOL_REFUSED``), and so are the body fields that attach such services
  (``mcp_servers``, ``container``, ``web_search_options``: ``BODY_FIELD_REFUSED``). A Responses
  ``tool_search`` with ``"execution": "client"`` is the client's: Codex offers it with a model of
  its built-in list and runs the search itself, in the sandbox, over the tools it already holds
  (its deferred MCP tools); the tools a ``tool_search_output`` item of the input hands the model
  must be client-side too, or the request is refused like any provider-side tool;
- **the case's tools**: when a case names its allowed tools and the harness has no flag of its
  own for them, the request's ``tools`` keep only those (:attr:`RequestRules.tools`; a namespace
  keeps the members allowed, by ``<namespace>__<member>``; a tool search, by ``tool_search``), and
  so do the tools a ``tool_search_output`` hands it, so the model is never offered another;
- **known headers**: only the names and ``anthropic-beta`` values the harness really sends
  pass (:func:`forwarded_headers`); the rest is dropped and noted.

Pure: bytes and dicts in, bytes and dicts out.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from harnesses import gemini_api
from harnesses.appended_context import without_appended_context
from harnesses.endpoints import Protocol
from schemas.model_config import DEFAULT_MAX_OUTPUT_TOKENS

MODEL_NOT_ALLOWED = "MODEL_NOT_ALLOWED"
SERVER_TOOL_REFUSED = "SERVER_TOOL_REFUSED"
BODY_FIELD_REFUSED = "BODY_FIELD_REFUSED"
BAD_REQUEST_BODY = "BAD_REQUEST_BODY"


PROTOCOL_HEADERS: dict[str, frozenset[str]] = {
    "anthropic": frozenset({"content-type", "accept", "anthropic-version", "anthropic-beta"}),
    "openai": frozenset({"content-type", "accept"}),
    "gemini": frozenset({"content-type", "accept"}),
}
"""Request headers forwarded per protocol when no harness names its own (credentials are the proxy's)."""

_CLIENT_TOOL_TYPES = {"anthropic": frozenset({"custom"}), "openai": frozenset({"function", "custom"})}
"""Tool types the client runs itself (an Anthropic tool without a type is one too)."""
_NAMESPACE = "namespace"
"""An OpenAI Responses group of tools (Codex's sub-agent tools): allowed when every member is."""
_CLIENT_SEARCH = "tool_search"
"""An OpenAI Responses tool search: the client's when its ``execution`` is ``"client"``."""
_REFUSED_FIELDS = {
    "anthropic": ("mcp_servers", "container"),
    "openai": ("web_search_options", "background", "prompt", "conversation", "previous_response_id"),
}
"""Body fields that attach a provider-side service or state the shard does not own."""
_MAX_FIELDS = {"anthropic": ("max_tokens",), "openai": ("max_output_tokens", "max_tokens", "max_completion_tokens")}


class RequestRefused(Exception):
    """A request the shard does not allow; ``code`` names the rule, ``str()`` says why."""

    def __init__(self, code: str, why: str) -> None:
        super().__init__(f"{code}: {why}")
        self.code = code


@dataclass(frozen=True)
class RequestRules:
    """One shard's rules: the bare model its provider knows, the output cap, the headers it passes."""

    protocol: Protocol
    model: str
    max_output: int = DEFAULT_MAX_OUTPUT_TOKENS
    headers: frozenset[str] = frozenset()
    """Header names forwarded (lower case); empty: :data:`PROTOCOL_HEADERS` of the protocol."""
    betas: frozenset[str] | None = None
    """``anthropic-beta`` values forwarded; None: every value (no harness named its own)."""
    tools: frozenset[str] | None = None
    """The tool names the request may offer (a namespace's members as ``<namespace>__<member>``);
    None: every tool the harness offers."""
    harness: str | None = None
    """The harness whose own appended instruction files are taken out of tool results
    (:mod:`harnesses.appended_context`); None: none."""


def _tool_refusal(protocol: str, tool: Any) -> str | None:
    if not isinstance(tool, dict):
        return "a tool that is not an object"
    kind = tool.get("type")
    if kind is None and protocol == "anthropic":
        return None
    if kind == _NAMESPACE and protocol == "openai":
        members = tool.get("tools")
        if not isinstance(members, list):
            return "a tool namespace without its tools"
        return next((why for why in (_tool_refusal(protocol, m) for m in members) if why), None)
    if kind in _CLIENT_TOOL_TYPES[protocol]:
        return None
    if kind == _CLIENT_SEARCH and protocol == "openai" and tool.get("execution") == "client":
        return None
    return f"tool type {str(kind)[:80]!r} ({str(tool.get('name', ''))[:80]!r}) runs on the provider's side"


def _check(rules: RequestRules, body: dict[str, Any]) -> None:
    asked = body.get("model")
    if asked != rules.model:
        raise RequestRefused(MODEL_NOT_ALLOWED, f"model {str(asked)[:120]!r} is not this shard's model {rules.model!r}")
    for name in _REFUSED_FIELDS[rules.protocol]:
        if body.get(name) not in (None, False, [], {}):
            raise RequestRefused(BODY_FIELD_REFUSED, f"{name!r} attaches a provider-side service")
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise RequestRefused(BAD_REQUEST_BODY, "'tools' is not a list")
    for tool in [*(tools or []), *_searched_tools(body.get("input"))]:
        why = _tool_refusal(rules.protocol, tool)
        if why is not None:
            raise RequestRefused(SERVER_TOOL_REFUSED, why)


def _searched_tools(items: Any) -> list[Any]:
    """The tools the input's ``tool_search_output`` items hand the model (the API offers them as
    it offers ``tools``): a forged output cannot bring a provider-side tool in that way."""
    if not isinstance(items, list):
        return []
    found: list[Any] = []
    for item in items:
        if isinstance(item, dict) and item.get("type") == "tool_search_output":
            tools = item.get("tools")
            found += tools if isinstance(tools, list) else ["a tool_search_output without a list of tools"]
    return found


def _clamp(rules: RequestRules, body: dict[str, Any]) -> dict[str, Any]:
    out = dict(body)
    for name in _MAX_FIELDS[rules.protocol]:
        value = out.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool) and value > rules.max_output:
            out[name] = rules.max_output
    thinking = out.get("thinking")
    if isinstance(thinking, dict) and isinstance(thinking.get("budget_tokens"), int):
        ceiling = int(out.get("max_tokens") or rules.max_output) - 1
        if thinking["budget_tokens"] > ceiling:
            out["thinking"] = {**thinking, "budget_tokens": max(ceiling, 0)}
    if isinstance(out.get("n"), int) and out["n"] > 1:
        out["n"] = 1
    if rules.tools is not None and isinstance(out.get("tools"), list):
        out["tools"] = _allowed_tools(out["tools"], rules.tools)
    if rules.tools is not None and _searched_tools(out.get("input")):
        allowed = rules.tools
        out["input"] = [_searched_allowed(item, allowed) for item in out["input"]]
    return out


def _searched_allowed(item: Any, allowed: frozenset[str]) -> Any:
    """A ``tool_search_output`` item handing the model only the case's allowed tools."""
    if isinstance(item, dict) and item.get("type") == "tool_search_output" and isinstance(item.get("tools"), list):
        return {**item, "tools": _allowed_tools(item["tools"], allowed)}
    return item


def _allowed_tools(tools: list[Any], allowed: frozenset[str]) -> list[Any]:
    """The offered tools the case allows: a namespace with its allowed members, when it has any."""
    kept: list[Any] = []
    for tool in tools:
        name = str(tool.get("name") or tool.get("type") or "")  # a tool search is named by its type
        if tool.get("type") == _NAMESPACE:
            members = [m for m in tool.get("tools") or [] if f"{name}__{m.get('name', '')}" in allowed]
            if members:
                kept.append({**tool, "tools": members})
        elif name in allowed:
            kept.append(tool)
    return kept


def pin_request(rules: RequestRules, path: str, body: bytes) -> tuple[bytes, dict[str, Any] | None]:
    """The body to forward for a request to ``path`` (``/v1/...``), and its parsed JSON (None
    without a body); raise :class:`RequestRefused`.

    A request without a body (``GET /v1/models``) passes as it is. A body is re-encoded only
    when a limit was clamped or the harness's appended instruction files were taken out, so the
    harness's own bytes go upstream otherwise.
    """
    if not body.strip() and path.endswith("/models"):
        return body, None
    if rules.protocol == "gemini":
        return _pin_gemini(rules, path, body)
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise RequestRefused(BAD_REQUEST_BODY, f"the body is not JSON ({type(exc).__name__})") from None
    if not isinstance(parsed, dict):
        raise RequestRefused(BAD_REQUEST_BODY, "the body is not a JSON object")
    _check(rules, parsed)
    clamped = without_appended_context(rules.harness, _clamp(rules, parsed))
    if clamped == parsed:
        return body, parsed
    return json.dumps(clamped, ensure_ascii=False, separators=(",", ":")).encode(), clamped


def _pin_gemini(rules: RequestRules, path: str, body: bytes) -> tuple[bytes, dict[str, Any] | None]:
    """The Gemini API: the model is the path's, the tools are ``tools[].functionDeclarations``."""
    parts = gemini_api.split_path(path)
    asked = parts[0] if parts else None
    if asked != rules.model:
        raise RequestRefused(MODEL_NOT_ALLOWED, f"model {str(asked)[:120]!r} is not this shard's model {rules.model!r}")
    try:
        parsed = json.loads(body) if body.strip() else {}
    except (ValueError, RecursionError) as exc:
        raise RequestRefused(BAD_REQUEST_BODY, f"the body is not JSON ({type(exc).__name__})") from None
    if not isinstance(parsed, dict):
        raise RequestRefused(BAD_REQUEST_BODY, "the body is not a JSON object")
    for name in gemini_api.REFUSED_FIELDS:
        if parsed.get(name) not in (None, False, "", [], {}):
            raise RequestRefused(BODY_FIELD_REFUSED, f"{name!r} attaches a provider-side service")
    tools = parsed.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise RequestRefused(BAD_REQUEST_BODY, "'tools' is not a list")
    for tool in tools or []:
        why = gemini_api.tool_refusal(tool)
        if why is not None:
            raise RequestRefused(SERVER_TOOL_REFUSED, why)
    clamped = without_appended_context(rules.harness, gemini_api.clamp(parsed, rules.max_output))
    if clamped == parsed:
        return body, parsed
    return json.dumps(clamped, ensure_ascii=False, separators=(",", ":")).encode(), clamped


def forwarded_headers(rules: RequestRules, headers: Iterable[tuple[str, str]]) -> tuple[dict[str, str], list[str]]:
    """The request headers to forward, and one note per header or beta value dropped."""
    allowed = rules.headers or PROTOCOL_HEADERS[rules.protocol]
    kept: dict[str, str] = {}
    dropped: list[str] = []
    for name, value in headers:
        key = name.lower()
        if key in ("x-api-key", "authorization", "host", "content-length", "connection"):
            continue  # the proxy's own: credentials swapped, framing redone by its client
        if key not in allowed:
            dropped.append(f"header {key[:80]!r}")
            continue
        if key == "anthropic-beta" and rules.betas is not None:
            value, refused = _betas(value, rules.betas)
            dropped += [f"anthropic-beta {b[:80]!r}" for b in refused]
            if not value:
                continue
        kept[key] = value
    return kept, dropped


def _betas(value: str, allowed: frozenset[str]) -> tuple[str, list[str]]:
    wanted = [b.strip() for b in value.split(",") if b.strip()]
    return ",".join(b for b in wanted if b in allowed), [b for b in wanted if b not in allowed]
