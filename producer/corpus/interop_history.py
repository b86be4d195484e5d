"""A plugin eval case's ``context.history_file``: a recorded Claude Code session (JSONL, a
``claude --resume`` file) read as the case's ``history`` turns. Pure.

Each line that is a ``user`` or ``assistant`` entry of the main conversation gives its message's
text; a tool call or its result becomes a line of text in its turn (``[earlier tool call]
Bash({...})``, ``[earlier tool result] ...``), since the executor that continues the conversation
may not have those tools. Thinking, side chains and meta entries are left out; consecutive
entries of one role are one turn. The turns are then held to the ``history`` rules
(producer/corpus/validation_history.py), naming the file.
"""

from __future__ import annotations

import json
from typing import Any

from producer.corpus.parse import parse_json
from schemas.errors import BadCorpus

MAX_LINES = 5_000


def _block_text(block: Any) -> str:
    if isinstance(block, str):
        return block
    if not isinstance(block, dict):
        return ""
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text") or "")
    if kind == "tool_use":
        shown = json.dumps(block.get("input") or {}, ensure_ascii=False, sort_keys=True)
        return f"[earlier tool call] {block.get('name')}({shown})"
    if kind == "tool_result":
        content = block.get("content")
        inner = content if isinstance(content, str) else "\n".join(_block_text(b) for b in content or [])
        return f"[earlier tool result] {inner}"
    return ""  # thinking, images: not carried over


def _entry(line: str, file: str, number: int) -> tuple[str, str] | None:
    try:
        entry = parse_json(line, file)
    except BadCorpus as exc:
        raise BadCorpus(file, f"line {number}", exc.problem) from None
    if not isinstance(entry, dict) or entry.get("type") not in ("user", "assistant"):
        return None
    if entry.get("isSidechain") or entry.get("isMeta"):
        return None
    message = entry.get("message")
    if not isinstance(message, dict):
        raise BadCorpus(file, f"line {number}.message", "a user or assistant entry needs its message")
    content = message.get("content")
    blocks = content if isinstance(content, list) else [content]
    text = "\n".join(t for t in (_block_text(b) for b in blocks) if t.strip())
    return (str(entry["type"]), text) if text.strip() else None


def read_history(text: str, file: str) -> list[dict[str, str]]:
    """The session's turns as ``[{"role", "content"}]`` (consecutive entries of one role joined)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) > MAX_LINES:
        raise BadCorpus(file, "$", f"holds {len(lines)} lines; at most {MAX_LINES} are read")
    turns: list[dict[str, str]] = []
    for number, line in enumerate(lines, start=1):
        found = _entry(line, file, number)
        if found is None:
            continue
        role, content = found
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"] += "\n\n" + content
        else:
            turns.append({"role": role, "content": content})
    return turns
