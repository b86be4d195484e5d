"""Parsing Claude Code's stream-json (print mode) into trajectory events."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harnesses.codex import read_codex_json
from harnesses.copilot_cli import read_copilot_json
from harnesses.gemini_stream import read_gemini_stream
from harnesses.opencode import read_opencode_json
from harnesses.stream_json import ERROR_PREFIX, ParsedStream, parse_stream_json, read_stream_json
from schemas.event_bounds import ELISION_MARKER, TOOL_RESULT_CAP_CHARS
from schemas.trajectory import AssistantEvent, EndReason, ToolCallEvent, ToolResultEvent


def line(obj: dict[str, Any]) -> str:
    return json.dumps(obj)


def assistant(message_id: str, *blocks: dict[str, Any], tokens: tuple[int, int] = (10, 5)) -> str:
    usage = {"input_tokens": tokens[0], "output_tokens": tokens[1], "cache_read_input_tokens": 0}
    message = {"id": message_id, "role": "assistant", "content": list(blocks), "usage": usage}
    return line({"type": "assistant", "message": message, "session_id": "s1"})


def tool_result(call_id: str, content: Any, *, is_error: bool = False) -> str:
    block = {"type": "tool_result", "tool_use_id": call_id, "content": content, "is_error": is_error}
    return line({"type": "user", "message": {"role": "user", "content": [block]}, "session_id": "s1"})


INIT = line({"type": "system", "subtype": "init", "session_id": "s1", "model": "m", "tools": ["Bash", "Read"]})
RESULT = line(
    {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "num_turns": 3,
        "result": "Done.",
        "total_cost_usd": 0.0123,
        "usage": {"input_tokens": 100, "cache_read_input_tokens": 20, "output_tokens": 30},
    }
)
SESSION = [
    INIT,
    assistant("m1", {"type": "text", "text": "I will read the changelog."}),
    assistant("m1", {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "CHANGELOG.md"}}),
    tool_result("t1", [{"type": "text", "text": "# Changelog\n## Unreleased"}]),
    assistant("m2", {"type": "thinking", "thinking": "hmm"}),
    assistant("m2", {"type": "tool_use", "id": "t2", "name": "Bash", "input": {"command": "grep -n U CHANGELOG.md"}}),
    tool_result("t2", "2:## Unreleased"),
    assistant("m3", {"type": "text", "text": "Done."}),
    RESULT,
]


def test_a_session_becomes_assistant_text_tool_calls_and_results_in_order() -> None:
    parsed = read_stream_json(SESSION)

    kinds = [(type(e).__name__, getattr(e, "name", None)) for e in parsed.events]
    assert kinds == [
        ("AssistantEvent", None),
        ("ToolCallEvent", "Read"),
        ("ToolResultEvent", None),
        ("ToolCallEvent", "Bash"),
        ("ToolResultEvent", None),
        ("AssistantEvent", None),
    ]
    call = parsed.events[3]
    assert isinstance(call, ToolCallEvent)
    assert call.call_id == "t2" and call.arguments == {"command": "grep -n U CHANGELOG.md"}
    first_result = parsed.events[2]
    assert isinstance(first_result, ToolResultEvent)
    assert first_result.call_id == "t1" and first_result.output == "# Changelog\n## Unreleased"
    assert parsed.saw_result and parsed.skipped_lines == 0 and parsed.end_reason is EndReason.COMPLETED


def test_usage_and_cost_come_from_the_result_line() -> None:
    usage = read_stream_json(SESSION).usage

    assert (usage.prompt_tokens, usage.completion_tokens, usage.calls) == (120, 30, 3)
    assert usage.cost_usd == 0.0123


def test_without_a_result_line_usage_sums_each_assistant_message_once() -> None:
    # Claude Code repeats a message's usage on every content-block line of that message.
    parsed = read_stream_json(SESSION[:-1])

    assert not parsed.saw_result
    assert (parsed.usage.prompt_tokens, parsed.usage.completion_tokens, parsed.usage.calls) == (30, 15, 3)


def test_junk_lines_are_skipped_and_counted_without_losing_events() -> None:
    junk = [
        "",
        "npm WARN something on stderr",
        '{"type": "assistant", "message": {"content": [{"type": "te',  # cut mid-line
        "[1, 2, 3]",
        line({"type": "stream_event", "event": {"type": "content_block_delta"}}),
        line({"type": "assistant", "message": "not an object"}),
    ]
    stream = [SESSION[0], *junk[:3], *SESSION[1:5], *junk[3:], *SESSION[5:]]

    parsed = read_stream_json(stream)

    assert len(parsed.events) == 6
    assert parsed.skipped_lines == 5  # the blank line is not junk, the rest are


def test_a_failed_tool_result_is_marked_as_an_error() -> None:
    parsed = read_stream_json([tool_result("t9", "command not found", is_error=True)])

    (event,) = parsed.events
    assert isinstance(event, ToolResultEvent)
    assert event.output == ERROR_PREFIX + "command not found"


def test_running_out_of_turns_is_recorded_as_the_end_reason() -> None:
    out_of_turns = line({"type": "result", "subtype": "error_max_turns", "is_error": True, "num_turns": 9})

    parsed = read_stream_json([*SESSION[:-1], out_of_turns])

    assert parsed.end_reason is EndReason.MAX_TURNS and parsed.result_is_error


def test_the_parsed_trajectory_renders_in_the_judge_line_format() -> None:
    trajectory = parse_stream_json(SESSION, skill="changelog-entry", case_id=1, model="cmd:claude")

    rendered = trajectory.render()

    assert '[tool_call] Bash({"command": "grep -n U CHANGELOG.md"})' in rendered
    assert "[tool_result] Bash\n2:## Unreleased" in rendered
    assert rendered.startswith("[assistant] I will read the changelog.")
    assert trajectory.usage.cost_usd == 0.0123


@given(st.lists(st.text(max_size=80), max_size=20))
def test_arbitrary_text_never_breaks_the_parser(lines: list[str]) -> None:
    parsed = read_stream_json([*lines, *SESSION, *lines])

    assert sum(isinstance(e, AssistantEvent) for e in parsed.events) >= 2


BIG = "HEAD " + "y" * 5_000_000 + " TAIL"


@pytest.mark.parametrize(
    ("read", "line"),
    [
        (
            read_stream_json,
            {"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "t1", "content": BIG}]}},
        ),
        (
            read_codex_json,
            {"type": "item.completed", "item": {"id": "t1", "type": "command_execution", "aggregated_output": BIG}},
        ),
        (
            read_opencode_json,
            {"type": "tool_use", "part": {"callID": "t1", "state": {"status": "completed", "output": BIG}}},
        ),
        (
            read_copilot_json,
            {
                "type": "tool.execution_complete",
                "data": {"toolCallId": "t1", "success": True, "result": {"content": BIG}},
            },
        ),
        (read_gemini_stream, {"type": "tool_result", "tool_id": "t1", "status": "success", "output": BIG}),
    ],
    ids=["claude-code", "codex", "opencode", "copilot", "gemini"],
)
def test_every_harness_streams_results_are_cut_to_the_executors_cap_saying_how_much(
    read: Callable[[list[str]], ParsedStream], line: dict[str, object]
) -> None:
    [result] = [e for e in read([json.dumps(line)]).events if isinstance(e, ToolResultEvent)]
    cut = len(BIG) - TOOL_RESULT_CAP_CHARS
    assert result.truncated and result.output.startswith("HEAD ") and result.output.endswith(" TAIL")
    assert (
        result.output
        == BIG[: TOOL_RESULT_CAP_CHARS // 2] + ELISION_MARKER.format(n=cut) + BIG[-TOOL_RESULT_CAP_CHARS // 2 :]
    )
