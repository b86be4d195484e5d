"""What a ``focused`` or ``baseline`` judge reads (schemas/checks_focus.py), made safe. Pure.

Each part of the run is capped first and defanged after, as the trace is in
:mod:`worker.grading.view`: line-break look-alikes become ``\\n``, other controls visible
escapes, a line opening with a bracket of any script is indented, and every closing-fence
look-alike is neutralised, so nothing the agent wrote (or a reference run holds) can end the
fence, forge a renderer line or pass for the judge's answer format.
"""

from __future__ import annotations

import json
from typing import Any

from schemas.checks_focus import FocusedCheck
from schemas.constants import BLOCK_CAP_CHARS, TRANSCRIPT_CAP_CHARS
from schemas.trajectory import AssistantEvent, Trajectory
from worker.grading.plugin_checks import mock_calls_text
from worker.grading.transcript import neutralise_fences
from worker.grading.view import JudgeView, cut, safe_text, tool_label

REFERENCE_CAP_CHARS = TRANSCRIPT_CAP_CHARS // 2
"""The reference run's share of a baseline prompt (the new run's trace has the full cap)."""
FOCUS_NAMES = {
    "last_message": "the agent's final message",
    "trace": "the trace of the agent's run: its messages, tool calls and tool results",
    "files": "the files the agent's run created or changed, each with its final content",
    "mock_calls": "the agent's calls of mocked MCP tools, one JSON object per call",
    "file": "the final content of the file {path}",
}


def _defang(text: str, cap: int, what: str) -> str:
    body, _gone = cut(text, cap, what)
    return neutralise_fences(safe_text(body))


def _files_text(files: dict[str, str]) -> str:
    if not files:
        return "(the run created or changed no file)"
    share = max(BLOCK_CAP_CHARS // 8, (TRANSCRIPT_CAP_CHARS - 200 * len(files)) // len(files))
    parts = []
    for path in sorted(files):
        body, _gone = cut(files[path], min(share, BLOCK_CAP_CHARS), "file")
        parts.append(f"=== file {json.dumps(path, ensure_ascii=True)} ===\n{safe_text(body)}")
    return "\n".join(parts)


def focus_subject(check: FocusedCheck, trajectory: Trajectory, view: JudgeView) -> str:
    """The part of the run ``check`` names, capped and made safe (the trace is the judge's view)."""
    if check.focus == "trace":
        return view.text
    if check.focus == "files":
        text = _files_text(trajectory.final_files)
    elif check.focus == "file":
        content = trajectory.final_files.get(check.path or "")
        text = content if content is not None else f"(the run did not create or change {check.path})"
    elif check.focus == "mock_calls":
        text = mock_calls_text(trajectory) or "(no mocked tool was called)"
    else:
        replies = [e.text for e in trajectory.events if isinstance(e, AssistantEvent)]
        text = replies[-1] if replies and replies[-1].strip() else "(the agent ended without a message)"
    return _defang(text, TRANSCRIPT_CAP_CHARS, "output")


def focus_name(check: FocusedCheck) -> str:
    """How the prompt names what the judge reads."""
    return FOCUS_NAMES[check.focus].format(path=json.dumps(check.path or "", ensure_ascii=True))


def _content(value: Any) -> str:
    """A message's content (a string or Claude's blocks) as text."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        return json.dumps(value, ensure_ascii=False)
    parts = []
    for block in value:
        if not isinstance(block, dict):
            parts.append(str(block))
        elif block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif block.get("type") == "tool_use":
            name = tool_label(str(block.get("name", "?")))
            parts.append(f"(tool call) {name}({json.dumps(block.get('input', {}), ensure_ascii=False)})")
        elif block.get("type") == "tool_result":
            parts.append(f"(tool result) {_content(block.get('content', ''))}")
        elif block.get("type") != "thinking":
            parts.append(json.dumps(block, ensure_ascii=False))
    return "\n".join(parts)


def reference_view(reference: str) -> str:
    """A reference run (a JSON message per line: a Claude Code session's entries or
    ``{role, content}``) as ``[baseline <role>]`` lines, each message capped, made safe."""
    lines = []
    per_message = BLOCK_CAP_CHARS // 4
    for raw in reference.splitlines():
        if not raw.strip():
            continue
        try:
            entry = json.loads(raw)
        except ValueError:
            entry = {"role": "unknown", "content": raw}
        message = entry.get("message") if isinstance(entry, dict) else None
        if not isinstance(message, dict):
            message = entry if isinstance(entry, dict) else {"content": entry}
        role = str(message.get("role") or (entry.get("type") if isinstance(entry, dict) else "") or "unknown")
        if role not in ("user", "assistant", "system"):
            role = "other"
        body, _gone = cut(_content(message.get("content", "")), per_message, "message")
        lines.append(f"[baseline {role}] {safe_text(body)}")
    text, gone = cut("\n".join(lines), REFERENCE_CAP_CHARS, "reference run")
    # A cut may land right after a forged line's indent: make the kept tail safe again.
    return neutralise_fences(safe_text(text) if gone else text)
