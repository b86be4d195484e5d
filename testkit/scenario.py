"""Scripted behaviour of the offline model server: rules matched against one request.

A scenario is a JSON object::

    {
      "rules": [
        {
          "name": "commit-fix",              # optional, for logs and tests
          "model": "scripted-demo",          # optional: exact model name, or a suffix after '/'
          "contains": "Please commit it",     # optional: substring of the messages' text
          "regex": "fix(ed)? the greeting",  # optional: regex searched in the messages' text
          "tools": true,                      # optional: request has (true) / lacks (false) tools
          "judge": false,                     # optional: true -> answer with the rule-based judge
          "replies": [ REPLY, REPLY, ... ]    # chosen by turn index; past the end, the last one
        }
      ],
      "judge": [ {"assertion_contains": "...", "transcript_regex": "...", "expect": "present"} ],
      "default": REPLY,                       # optional; used when no rule matches
      "seed": 0                               # optional; seeds every ``pick``
    }

REPLY is one object; any of these keys, combined:

- ``text``: assistant text. ``tool_calls``: ``[{"name", "arguments"}]`` (or ``"arguments_raw"``
  to send an unparseable argument string; ``"arguments_from": {"command": REGEX}`` takes an
  argument from the request's text, the regex's first group, e.g. a command the prompt quotes;
  ``{"regex": REGEX, "int": true}`` sends a group of digits as a number, e.g. a session id).
  ``verdicts``: a list, sent as JSON text.
- ``delay_s``: latency before answering. ``hang``: true, never answers (until the server stops).
- ``status``: an HTTP error status (429, 500, 503, ...) with an OpenAI-style error body;
  ``retry_after``: seconds, sent as ``Retry-After`` with a 429; ``error_message`` and
  ``error_code`` replace the error body's message and code (``context_length_exceeded``).
- ``malformed``: true, a 200 whose body is not JSON.
- ``pick``: ``[{"weight": W, "reply": REPLY}, ...]``: one of these replies at random, each with
  probability ``W / sum(W)`` (a model whose behaviour is random with known probabilities). The
  draw is a hash of the scenario's ``seed`` (top level, 0 by default), the rule, the turn, the
  conversation and how many times this (rule, turn, conversation) was asked before: the same
  seed gives the same sequence of draws for a conversation whatever the order of requests.
- ``answered_by``: the model the reply names (Anthropic and Responses), as an upstream that
  answers with another model than asked would; default: the request's.
- ``times``: apply the fault keys (``status``, ``hang``, ``malformed``) only to the first N
  requests of the same conversation at this turn; later retries get the normal reply. This is
  the one piece of state, kept per (rule, turn, conversation) so concurrent conversations stay
  deterministic.

The turn index is the number of assistant messages already in the request, so a scripted tool
loop needs no server-side session: each request says how far its conversation got.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCENARIO_DIR = Path(__file__).resolve().parent / "scenarios"
FAULT_KEYS = ("status", "hang", "malformed")


class ScenarioError(ValueError):
    """A scenario file or dict is not well-formed; the message names the rule and key."""


@dataclass(frozen=True)
class JudgeRule:
    """Decides assertions containing ``assertion_contains`` by searching the transcript."""

    assertion_contains: str
    transcript_regex: re.Pattern[str]
    expect: str = "present"
    """``present``: passed when the regex is found; ``absent``: passed when it is not."""


@dataclass(frozen=True)
class Rule:
    """One scripted conversation: match conditions and the replies per turn."""

    index: int
    name: str
    replies: tuple[dict[str, Any], ...]
    model: str | None = None
    contains: str | None = None
    regex: re.Pattern[str] | None = None
    tools: bool | None = None
    judge: bool = False

    def matches(self, model: str, text: str, has_tools: bool) -> bool:
        if self.model is not None and not _model_matches(self.model, model):
            return False
        if self.contains is not None and self.contains not in text:
            return False
        if self.regex is not None and not self.regex.search(text):
            return False
        return self.tools is None or self.tools == has_tools

    def reply_for(self, turn: int) -> dict[str, Any]:
        if not self.replies:
            return {}
        return self.replies[min(turn, len(self.replies) - 1)]


@dataclass(frozen=True)
class Scenario:
    """A parsed scenario: rules in order (first match wins), judge rules, a default reply."""

    rules: tuple[Rule, ...] = ()
    judge_rules: tuple[JudgeRule, ...] = ()
    default: dict[str, Any] = field(
        default_factory=lambda: {"text": "(scripted model: no scenario rule matched this request)"}
    )
    seed: int = 0
    """Seeds every ``pick`` (see :func:`pick_reply`)."""


def _model_matches(wanted: str, model: str) -> bool:
    # litellm strips the provider prefix ("openai/scripted-demo" arrives as "scripted-demo").
    return model == wanted or model.endswith("/" + wanted) or wanted.endswith("/" + model)


def _compile(pattern: str, where: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern, re.MULTILINE)
    except re.error as err:
        raise ScenarioError(f"{where}: bad regex {pattern!r}: {err}") from err


def parse_scenario(data: dict[str, Any]) -> Scenario:
    """Validate and compile a scenario dict; raise :class:`ScenarioError` naming the bad part."""
    if not isinstance(data, dict):
        raise ScenarioError("scenario: expected a JSON object")
    rules: list[Rule] = []
    for i, raw in enumerate(data.get("rules", [])):
        where = f"rules[{i}]"
        if not isinstance(raw, dict):
            raise ScenarioError(f"{where}: expected an object")
        replies = raw.get("replies", [])
        if not isinstance(replies, list) or not all(isinstance(r, dict) for r in replies):
            raise ScenarioError(f"{where}.replies: expected a list of objects")
        if not replies and not raw.get("judge"):
            raise ScenarioError(f"{where}.replies: a rule needs replies (or judge: true)")
        for j, reply in enumerate(replies):
            _check_pick(reply, f"{where}.replies[{j}]")
        regex = raw.get("regex")
        rules.append(
            Rule(
                index=i,
                name=str(raw.get("name", where)),
                replies=tuple(replies),
                model=raw.get("model"),
                contains=raw.get("contains"),
                regex=_compile(regex, f"{where}.regex") if regex else None,
                tools=raw.get("tools"),
                judge=bool(raw.get("judge", False)),
            )
        )
    judge_rules: list[JudgeRule] = []
    for i, raw in enumerate(data.get("judge", [])):
        where = f"judge[{i}]"
        try:
            expect = raw.get("expect", "present")
            if expect not in ("present", "absent"):
                raise ScenarioError(f"{where}.expect: must be 'present' or 'absent'")
            judge_rules.append(
                JudgeRule(
                    assertion_contains=str(raw["assertion_contains"]),
                    transcript_regex=_compile(str(raw["transcript_regex"]), f"{where}.transcript_regex"),
                    expect=expect,
                )
            )
        except (KeyError, AttributeError) as err:
            raise ScenarioError(f"{where}: needs assertion_contains and transcript_regex") from err
    seed = data.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ScenarioError("seed: expected an integer")
    scenario = Scenario(rules=tuple(rules), judge_rules=tuple(judge_rules), seed=seed)
    if "default" in data:
        if not isinstance(data["default"], dict):
            raise ScenarioError("default: expected an object")
        scenario = Scenario(rules=scenario.rules, judge_rules=scenario.judge_rules, default=data["default"], seed=seed)
    return scenario


def _check_pick(reply: dict[str, Any], where: str) -> None:
    if "pick" not in reply:
        return
    picks = reply["pick"]
    if not isinstance(picks, list) or not picks:
        raise ScenarioError(f"{where}.pick: expected a non-empty list of {{weight, reply}}")
    for k, p in enumerate(picks):
        weight = p.get("weight") if isinstance(p, dict) else None
        if not isinstance(weight, int | float) or isinstance(weight, bool) or not 0 <= weight < math.inf:
            raise ScenarioError(f"{where}.pick[{k}].weight: expected a finite number >= 0")
        if not isinstance(p.get("reply"), dict):
            raise ScenarioError(f"{where}.pick[{k}].reply: expected an object")
    if sum(p["weight"] for p in picks) <= 0:
        raise ScenarioError(f"{where}.pick: the weights sum to 0")


def pick_reply(reply: dict[str, Any], seed: int, key: tuple[int, int, str], occurrence: int) -> dict[str, Any]:
    """``reply`` with its ``pick`` resolved: the draw for (rule, turn, conversation) ``key`` asked
    for the ``occurrence``-th time (0 first), uniform from a SHA-256 of those and the seed."""
    picks = reply.get("pick")
    if not picks:
        return reply
    raw = f"{seed}\x1f{key[0]}\x1f{key[1]}\x1f{key[2]}\x1f{occurrence}".encode()
    u = int.from_bytes(hashlib.sha256(raw).digest()[:8], "big") / 2**64
    total = sum(p["weight"] for p in picks)
    edge = 0.0
    for p in picks:
        edge += p["weight"] / total
        if u < edge:
            return {**{k: v for k, v in reply.items() if k != "pick"}, **p["reply"]}
    return {**{k: v for k, v in reply.items() if k != "pick"}, **picks[-1]["reply"]}


def fill_arguments(reply: dict[str, Any], text: str) -> dict[str, Any]:
    """``reply`` with every tool call's ``arguments_from`` resolved against the request ``text``."""
    calls = reply.get("tool_calls")
    if not calls or not any("arguments_from" in c for c in calls):
        return reply
    filled = []
    for call in calls:
        wanted = call.get("arguments_from") or {}
        arguments = dict(call.get("arguments") or {})
        for key, pattern in wanted.items():
            as_int = isinstance(pattern, dict) and bool(pattern.get("int"))
            found = re.search(str(pattern["regex"] if isinstance(pattern, dict) else pattern), text, re.DOTALL)
            value = found.group(1) if found else ""
            arguments[key] = int(value) if as_int and value.isdigit() else value
        filled.append({k: v for k, v in {**call, "arguments": arguments}.items() if k != "arguments_from"})
    return {**reply, "tool_calls": filled}


def message_text(messages: list[dict[str, Any]]) -> str:
    """All text of a request's messages, joined; tool-call arguments included."""
    parts: list[str] = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):  # OpenAI content parts
            parts.extend(str(p.get("text", "")) for p in content if isinstance(p, dict))
        for call in message.get("tool_calls") or []:
            parts.append(json.dumps(call.get("function", {}), sort_keys=True))
    return "\n".join(parts)


def turn_index(messages: list[dict[str, Any]]) -> int:
    """How many assistant messages the request already holds: the conversation's turn."""
    return sum(1 for m in messages if m.get("role") == "assistant")


def conversation_key(messages: list[dict[str, Any]]) -> str:
    """A stable id for a conversation: the hash of its first user message."""
    first = next((m for m in messages if m.get("role") == "user"), messages[0] if messages else {})
    raw = json.dumps(first.get("content"), sort_keys=True, default=str)
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def select_rule(scenario: Scenario, model: str, messages: list[dict[str, Any]], has_tools: bool) -> Rule | None:
    """The first rule matching this request, or None."""
    text = message_text(messages)
    return next((r for r in scenario.rules if r.matches(model, text, has_tools)), None)


def load_scenario(source: str | Path | dict[str, Any] | None) -> Scenario:
    """A scenario from a dict, a JSON file, or the name of a bundled one (``demo``)."""
    if source is None:
        return Scenario()
    if isinstance(source, dict):
        return parse_scenario(source)
    return parse_scenario(scenario_data(source))


def scenario_data(source: str | Path) -> dict[str, Any]:
    """The JSON of a scenario file, or of the bundled scenario of that name (``demo``)."""
    path = Path(source)
    if not path.exists() and (SCENARIO_DIR / f"{source}.json").exists():
        path = SCENARIO_DIR / f"{source}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise ScenarioError(f"{path}: {err}") from err
    if not isinstance(data, dict):
        raise ScenarioError(f"{path}: a scenario is a JSON object")
    return data
