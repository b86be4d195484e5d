"""The checks of ``plugin eval``'s deterministic graders (schemas/checks_plugin.py). Pure.

Each reads the structured trajectory: tool calls are the recorded ``ToolCallEvent``s (a
harness's calls are only those its proxied model responses contained), the reply is the last
assistant message, files are ``Trajectory.final_files`` (the files the run created or changed).
A tool's input is matched as compact JSON in the order the agent gave it, as Claude Code
serialises it. Claude Code's tool names also match the built-in agent's equivalents and other
harnesses' (Codex's ``exec_command`` for ``Bash``), so one suite grades every executor alike.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from functools import cache

from schemas.checks_plugin import (
    BUILTIN_EQUIVALENTS,
    HARNESS_EQUIVALENTS,
    FileGlobCheck,
    TextMatchCheck,
    ToolCountCheck,
    ToolMatcher,
    ToolOrderCheck,
)
from schemas.mocks import MCP_PREFIX
from schemas.patterns import bounded
from schemas.trajectory import AssistantEvent, ToolCallEvent, ToolResultEvent, Trajectory
from schemas.verdict import AssertionVerdict
from schemas.words import noun, plural
from worker.grading.check_verdict import EVIDENCE_CHARS, Checker, check_verdict, cut, presence_verdict


def tool_input(call: ToolCallEvent) -> str:
    return json.dumps(call.arguments, ensure_ascii=False, separators=(",", ":"))


def matches(call: ToolCallEvent, matcher: ToolMatcher) -> bool:
    same = (matcher.tool, BUILTIN_EQUIVALENTS.get(matcher.tool), *HARNESS_EQUIVALENTS.get(matcher.tool, ()))
    if call.name not in same:
        return False
    return matcher.input_match is None or bounded(matcher.input_match).search(tool_input(call)) is not None


def _calls(trajectory: Trajectory) -> list[ToolCallEvent]:
    return [e for e in trajectory.events if isinstance(e, ToolCallEvent)]


def _quote(call: ToolCallEvent) -> str:
    text = f"[tool_call] {call.name}({tool_input(call)})"
    return cut(text)


def _subject(check: TextMatchCheck, trajectory: Trajectory) -> tuple[str | None, str]:
    if check.source == "file":
        path = check.path or ""
        return trajectory.final_files.get(path), f"the final {path}"
    if check.source == "transcript":
        return trajectory.render(), "the trace"
    if check.source == "files":
        return changed_files_text(trajectory), "the files the run changed"
    if check.source == "mock_calls":
        return mock_calls_text(trajectory), "the mocked tool calls"
    replies = [e.text for e in trajectory.events if isinstance(e, AssistantEvent)]
    return (replies[-1] if replies else ""), "the final reply"


def changed_files_text(trajectory: Trajectory) -> str:
    """The files the run created or changed, as plugin eval's ``files`` target reads the working
    tree's changes: each file's path on a line of its own, then its final content, in path order.
    Bounded where they are collected (worker/executor/final_files.py: at most 50 files of 20,000
    characters, read without following a link, regular files only)."""
    return "\n".join(f"{path}\n{trajectory.final_files[path]}" for path in sorted(trajectory.final_files))


def mock_calls_text(trajectory: Trajectory) -> str:
    """The mocked MCP calls as plugin eval shows them to a grader: a JSON object per call."""
    results = {e.call_id: e for e in trajectory.events if isinstance(e, ToolResultEvent)}
    lines = []
    for call in _calls(trajectory):
        if not call.name.startswith(MCP_PREFIX):
            continue  # no real MCP server ever runs: every mcp__ tool is a mock
        entry: dict[str, object] = {"tool": call.name, "input": call.arguments}
        result = results.get(call.call_id)
        if result is not None:
            entry["output"] = result.output
            if result.exit_code not in (0, None):
                entry["isError"] = True
        lines.append(json.dumps(entry, ensure_ascii=False, separators=(",", ":")))
    return "\n".join(lines)


def _check_count(check: TextMatchCheck, subject: str, where: str) -> AssertionVerdict:
    found = sum(1 for _ in bounded(check.pattern, check.flags).finditer(subject))
    return check_verdict(
        check,
        found == check.count,
        f"found {plural(found, 'match')} of /{check.pattern}/ in {where} (expected {check.count})",
    )


def check_text_match(check: TextMatchCheck, trajectory: Trajectory) -> AssertionVerdict:
    subject, where = _subject(check, trajectory)
    if subject is not None and check.count is not None:
        return _check_count(check, subject, where)
    if subject is None:
        # plugin eval: a file that does not exist matches nothing
        if check.absent:
            return check_verdict(check, True, f"{where} does not exist among the files the run changed")
        return check_verdict(check, False, f"absent: {where} among the files the run changed")
    match = bounded(check.pattern, check.flags).search(subject)
    quote = f"{where}: {match.group(0)[:EVIDENCE_CHARS]}" if match else None
    return presence_verdict(check, not check.absent, f"match for /{check.pattern}/ in {where}", quote)


def check_tool_count(check: ToolCountCheck, trajectory: Trajectory) -> AssertionVerdict:
    matching = [c for c in _calls(trajectory) if matches(c, check.calls)]
    first = f"; first {_quote(matching[0])}" if matching else ""
    calls = f"{len(matching)} matching {noun(len(matching), 'call')}"
    said = f"{calls} of {check.calls.tool}, allowed {check.allowed()}{first}"
    return check_verdict(check, check.admits(len(matching)), said)


def _first(calls: Sequence[ToolCallEvent], matcher: ToolMatcher) -> int | None:
    return next((i for i, c in enumerate(calls) if matches(c, matcher)), None)


def check_tool_order(check: ToolOrderCheck, trajectory: Trajectory) -> AssertionVerdict:
    calls = _calls(trajectory)
    before, after = _first(calls, check.before), _first(calls, check.after)
    if before is None:
        return check_verdict(check, False, f"absent: a call of {check.before.tool} matching the 'before' side")
    if after is None:
        return check_verdict(check, False, f"absent: a call of {check.after.tool} matching the 'after' side")
    passed = before < after
    order = "before" if passed else "after"
    return check_verdict(check, passed, f"first {_quote(calls[before])} comes {order} first {_quote(calls[after])}")


@cache
def glob_pattern(glob: str) -> re.Pattern[str]:
    """A glob as a regex over repo-relative paths: ``**/`` any folders, ``*`` and ``?`` within one."""
    out, i = [], 0
    while i < len(glob):
        if glob.startswith("**/", i):
            out.append("(?:[^/]+/)*")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif glob[i] == "*":
            out.append("[^/]*")
            i += 1
        elif glob[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(glob[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def check_file_glob(check: FileGlobCheck, trajectory: Trajectory) -> AssertionVerdict:
    pattern = glob_pattern(check.glob.removeprefix("./"))
    found = min((p for p in trajectory.final_files if pattern.match(p)), default=None)
    return presence_verdict(check, check.exists, f"file matching {check.glob} among the files the run changed", found)


PLUGIN_CHECKERS: dict[str, Checker] = {
    "text_match": check_text_match,
    "tool_count": check_tool_count,
    "tool_order": check_tool_order,
    "file_glob": check_file_glob,
}
"""A plugin-eval check's ``kind`` -> the function that gives its verdict on a trajectory."""
