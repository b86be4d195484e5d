"""Which installed skills an executor activated, in order, read from its recorded tool calls. Pure.

What counts is the executor's own rule (docs/design/triggers.md): one function from a tool call
to the installed skills it activates. The built-in agent's is :func:`load_skill_calls` (a
``load_skill`` call naming an installed skill, plain or ``plugin:skill``); a harness's is its
adapter's ``skills_in`` (``harnesses/<harness>.py``).

Only names of installed skills count: a made-up name is no activation, whatever the agent says.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from typing import Any

from harnesses.model_record import ModelTurn
from schemas.trajectory import Event, ToolCallEvent

ActivationRule = Callable[[ToolCallEvent, frozenset[str]], list[str]]
"""An executor's rule: the installed skills (second argument) one tool call activates."""
_SKILL_MD = re.compile(r"skills/([a-z0-9][a-z0-9-]*)/SKILL\.md")


def named_skill(value: object, installed: frozenset[str]) -> str | None:
    """The installed skill a Skill-tool value names: ``name``, ``/name`` or ``plugin:name``."""
    if not isinstance(value, str):
        return None
    name = value.strip().lstrip("/").rsplit(":", 1)[-1]
    return name if name in installed else None


def skill_md_reads(arguments: dict[str, Any], installed: frozenset[str]) -> list[str]:
    """The installed skills whose ``skills/<name>/SKILL.md`` a tool call's arguments name."""
    text = json.dumps(arguments, ensure_ascii=False)
    return [m for m in _SKILL_MD.findall(text) if m in installed]


def load_skill_calls(event: ToolCallEvent, installed: frozenset[str]) -> list[str]:
    """The built-in agent's rule: a ``load_skill`` call naming an installed skill."""
    found = named_skill(event.arguments.get("name"), installed) if event.name == "load_skill" else None
    return [found] if found else []


def skills_fired(rule: ActivationRule, events: Iterable[Event], installed: Iterable[str]) -> list[str]:
    """Every installed skill ``rule`` finds activated in ``events``, in order of first activation."""
    known = frozenset(installed)
    fired: list[str] = []
    for event in events:
        if isinstance(event, ToolCallEvent):
            for skill in rule(event, known):
                if skill not in fired:
                    fired.append(skill)
    return fired


def turn_activates(rule: ActivationRule, turn: ModelTurn, installed: Iterable[str]) -> bool:
    """Whether one model response's tool calls activate an installed skill (the proxy's trigger stop)."""
    events = [ToolCallEvent(call_id=c.call_id, name=c.name, arguments=c.arguments) for c in turn.tool_calls]
    return bool(skills_fired(rule, events, installed))
