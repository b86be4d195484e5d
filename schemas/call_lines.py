"""The mocked tool calls and HTTP requests of a run, one line each, as the reports list them per shard.

Pure: a trajectory in, lines out. The lines hold agent-chosen text (a call's input, a URL): the
renderers escape them as any text of a report. At most :data:`MAX_LINES` of each are listed; the
rest is counted on one more line.
"""

from __future__ import annotations

import json

from schemas.mocks import MCP_PREFIX
from schemas.trajectory import ToolCallEvent, ToolResultEvent, Trajectory

MAX_LINES = 50
INPUT_CHARS = 200
ANSWER_CHARS = 120


def _cut(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[:chars] + f"... ({len(text) - chars} chars cut)"


def _capped(lines: list[str]) -> list[str]:
    if len(lines) <= MAX_LINES:
        return lines
    return [*lines[:MAX_LINES], f"... and {len(lines) - MAX_LINES} more"]


def mock_call_lines(trajectory: Trajectory) -> list[str]:
    """Each mocked MCP call: ``mcp__<server>__<tool> <input> -> ok`` or ``-> error: <answer>``
    (``-> no result`` when the run ended before one)."""
    results = {e.call_id: e for e in trajectory.events if isinstance(e, ToolResultEvent)}
    lines = []
    for call in (e for e in trajectory.events if isinstance(e, ToolCallEvent) and e.name.startswith(MCP_PREFIX)):
        given = _cut(json.dumps(call.arguments, ensure_ascii=False, separators=(",", ":")), INPUT_CHARS)
        result = results.get(call.call_id)
        if result is None:
            status = "no result"
        elif result.exit_code in (0, None):
            status = "ok"
        else:
            # a mock's error answer already reads ``error: ...``; it is named once
            answer = " ".join(result.output.split()).removeprefix("error: ")
            status = "error: " + _cut(answer, ANSWER_CHARS)
        lines.append(f"{call.name} {given} -> {status}")
    return _capped(lines)


def http_call_lines(trajectory: Trajectory) -> list[str]:
    """Each request the sandbox's HTTP proxy recorded: ``GET "<url>" -> 200 mocked`` or
    ``-> 403 refused (<why>)``."""
    lines = []
    for call in trajectory.http_calls:
        url = _cut(json.dumps(call.url, ensure_ascii=True), INPUT_CHARS)
        how = "mocked" if call.mocked else "refused"
        note = f" ({_cut(call.note, ANSWER_CHARS)})" if call.note else ""
        lines.append(f"{call.method} {url} -> {call.status} {how}{note}")
    return _capped(lines)
