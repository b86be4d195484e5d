"""Which installed skills an executor activated, in order, read from its recorded tool calls. Pure.

What counts per executor (docs/design/triggers.md):

- ``agent`` (built-in): a ``load_skill`` call naming an installed skill, plain or ``plugin:skill``.
- ``claude-code``: a ``Skill`` tool call naming it, plain, ``/``-prefixed or plugin-qualified
  (``plugin:skill``), or a read (Read, Bash, Grep, Glob) of its ``skills/<name>/SKILL.md``.
- ``codex``: no Skill tool; a command whose arguments name its ``skills/<name>/SKILL.md``.
- ``gemini-cli``: an ``activate_skill`` call naming it, or a read (read_file, read_many_files,
  run_shell_command, grep_search, glob) of its ``skills/<name>/SKILL.md``.

Only names of installed skills count: a made-up name is no activation, whatever the agent says.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from harnesses.model_record import ModelTurn
from schemas.trajectory import Event, ToolCallEvent

_SKILL_MD = re.compile(r"skills/([a-z0-9][a-z0-9-]*)/SKILL\.md")
_CLAUDE_READS = frozenset({"Read", "Bash", "Grep", "Glob"})
_GEMINI_READS = frozenset({"read_file", "read_many_files", "run_shell_command", "grep_search", "glob"})


def named_skill(value: object, installed: frozenset[str]) -> str | None:
    """The installed skill a Skill-tool value names: ``name``, ``/name`` or ``plugin:name``."""
    if not isinstance(value, str):
        return None
    name = value.strip().lstrip("/").rsplit(":", 1)[-1]
    return name if name in installed else None


def _read_skill_files(arguments: dict[str, Any], installed: frozenset[str]) -> list[str]:
    text = json.dumps(arguments, ensure_ascii=False)
    return [m for m in _SKILL_MD.findall(text) if m in installed]


def _event_skills(executor: str, event: ToolCallEvent, installed: frozenset[str]) -> list[str]:
    args = event.arguments
    if executor == "agent":
        found = named_skill(args.get("name"), installed) if event.name == "load_skill" else None
        return [found] if found else []
    if executor == "claude-code":
        if event.name == "Skill":
            found = named_skill(args.get("skill") or args.get("command"), installed)
            return [found] if found else []
        return _read_skill_files(args, installed) if event.name in _CLAUDE_READS else []
    if executor == "codex":
        return _read_skill_files(args, installed)
    if executor == "gemini-cli":
        if event.name == "activate_skill":
            found = named_skill(args.get("name"), installed)
            return [found] if found else []
        return _read_skill_files(args, installed) if event.name in _GEMINI_READS else []
    return []


def skills_fired(executor: str, events: Iterable[Event], installed: Iterable[str]) -> list[str]:
    """Every installed skill ``executor`` activated in ``events``, in order of first activation."""
    known = frozenset(installed)
    fired: list[str] = []
    for event in events:
        if isinstance(event, ToolCallEvent):
            for skill in _event_skills(executor, event, known):
                if skill not in fired:
                    fired.append(skill)
    return fired


def turn_activates(executor: str, turn: ModelTurn, installed: Iterable[str]) -> bool:
    """Whether one model response's tool calls activate an installed skill (the proxy's trigger stop)."""
    events = [ToolCallEvent(call_id=c.call_id, name=c.name, arguments=c.arguments) for c in turn.tool_calls]
    return bool(skills_fired(executor, events, installed))
