"""Parse an agent CLI's JSON-lines event stream into trajectory events.

The format is Claude Code's print mode (``claude -p --output-format stream-json
--verbose``): one JSON object per line, ``type`` one of

- ``system`` (``subtype: init`` with session id, model and tools) - ignored;
- ``assistant``: ``message.content`` holds ``text`` blocks and ``tool_use`` blocks
  ``{id, name, input}`` (``thinking`` blocks are ignored), ``message.usage`` its tokens;
- ``user``: ``message.content`` holds ``tool_result`` blocks ``{tool_use_id, content,
  is_error}``, where ``content`` is a string or a list of ``text``/``image`` blocks;
- ``result``: the end of the run, with ``subtype`` (``success``, ``error_max_turns``, ...),
  ``num_turns``, ``usage`` and ``total_cost_usd``.

Anything else - blank lines, log output on stderr, half-written lines, unknown types - is
skipped and counted, never fatal: the stream is evidence, and one bad line must not throw
away the rest of it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from schemas.event_bounds import capped_text
from schemas.trajectory import (
    AssistantEvent,
    EndReason,
    Event,
    ToolCallEvent,
    ToolResultEvent,
    Trajectory,
    Usage,
)

ERROR_PREFIX = "[tool error] "


@dataclass
class ParsedStream:
    """What a stream held: events in order, usage, and how the run ended."""

    events: list[Event] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    end_reason: EndReason = EndReason.COMPLETED
    saw_result: bool = False
    """True when the stream's closing ``result`` line arrived (a crash leaves it out)."""
    result_is_error: bool = False
    skipped_lines: int = 0
    junk_lines: list[int] = field(default_factory=list)
    """1-based numbers of the non-blank lines that were not JSON (an importer names them)."""

    def trajectory(self, skill: str, case_id: int, model: str) -> Trajectory:
        """The stream as a :class:`Trajectory` of no shard yet."""
        return Trajectory(
            skill=skill, case_id=case_id, model=model, events=self.events, end_reason=self.end_reason, usage=self.usage
        )


def json_objects(lines: Iterable[str], out: ParsedStream) -> Iterator[dict[str, Any]]:
    """The JSON objects of a JSON-lines stream; a line that is not JSON (and not blank) is counted
    in ``out.skipped_lines``, one that is JSON but no object is passed over."""
    for raw in lines:
        try:
            data = json.loads(raw)
        except json.JSONDecodeError:
            out.skipped_lines += bool(raw.strip())
            continue
        if isinstance(data, dict):
            yield data


def result_event(call_id: str, output: str, exit_code: int | None = None) -> ToolResultEvent:
    """A tool result a stream reported, capped as every executor caps one (head and tail, the cut
    counted): what a harness or a recording printed does not grow the trajectory, report or page."""
    kept, cut = capped_text(output)
    return ToolResultEvent(call_id=call_id, output=kept, exit_code=exit_code, truncated=cut)


def with_output(event: ToolResultEvent, output: str) -> ToolResultEvent:
    """``event`` with ``output`` as its result, capped alike."""
    kept, cut = capped_text(output)
    return event.model_copy(update={"output": kept, "truncated": cut or event.truncated})


def _block_text(content: Any) -> str:
    """Flatten a tool_result ``content`` (a string or a list of blocks) to text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "text":
                parts.append(str(block.get("text", "")))
            elif isinstance(block, dict):
                parts.append(f"[{block.get('type', 'block')}]")
        return "\n".join(parts)
    return "" if content is None else json.dumps(content, ensure_ascii=False)


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, dict):
        return Usage()
    prompt = sum(
        int(raw.get(key) or 0) for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )
    return Usage(prompt_tokens=prompt, completion_tokens=int(raw.get("output_tokens") or 0))


class _Parser:
    def __init__(self) -> None:
        self.out = ParsedStream()
        self.assistant_usage = Usage()
        self.seen_messages: set[Any] = set()

    def assistant(self, message: dict[str, Any]) -> None:
        for block in message.get("content") or []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and str(block.get("text", "")).strip():
                self.out.events.append(AssistantEvent(text=str(block["text"])))
            elif block.get("type") == "tool_use":
                arguments = block.get("input")
                self.out.events.append(
                    ToolCallEvent(
                        call_id=str(block.get("id", "")),
                        name=str(block.get("name", "?")),
                        arguments=arguments if isinstance(arguments, dict) else {"input": arguments},
                    )
                )
        # Claude Code writes one line per content block, each repeating the message's usage.
        message_id = message.get("id")
        if message_id is None or message_id not in self.seen_messages:
            self.seen_messages.add(message_id)
            self.assistant_usage = self.assistant_usage.add(
                _usage(message.get("usage")).model_copy(update={"calls": 1})
            )

    def user(self, message: dict[str, Any]) -> None:
        content = message.get("content")
        if not isinstance(content, list):
            return  # a plain user prompt echoed back, not a tool result
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                text = _block_text(block.get("content"))
                output = (ERROR_PREFIX + text) if block.get("is_error") else text
                self.out.events.append(result_event(str(block.get("tool_use_id", "")), output))

    def result(self, line: dict[str, Any]) -> None:
        self.out.saw_result = True
        self.out.result_is_error = bool(line.get("is_error"))
        if line.get("subtype") == "error_max_turns":
            self.out.end_reason = EndReason.MAX_TURNS
        usage = _usage(line.get("usage"))
        if usage.total_tokens:
            turns = line.get("num_turns")
            cost = line.get("total_cost_usd")
            self.out.usage = usage.model_copy(
                update={
                    "calls": int(turns) if isinstance(turns, int) else self.assistant_usage.calls,
                    "cost_usd": float(cost) if isinstance(cost, int | float) else None,
                }
            )

    def feed(self, raw_line: str, number: int = 0) -> None:
        line = raw_line.strip()
        if not line:
            return
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            self.out.skipped_lines += 1
            self.out.junk_lines.append(number)
            return
        kind = data.get("type") if isinstance(data, dict) else None
        message = data.get("message") if isinstance(data, dict) else None
        if kind == "assistant" and isinstance(message, dict):
            self.assistant(message)
        elif kind == "user" and isinstance(message, dict):
            self.user(message)
        elif kind == "result":
            self.result(data)
        elif kind != "system":
            self.out.skipped_lines += 1


def read_stream_json(lines: Iterable[str]) -> ParsedStream:
    """Parse stream-json lines; junk lines are skipped and counted in ``skipped_lines``.

    Usage comes from the ``result`` line when it reports tokens, else it is the sum of the
    assistant messages' usage (a stream cut short still accounts for what it shows).
    """
    parser = _Parser()
    for number, line in enumerate(lines, 1):
        parser.feed(line, number)
    if not parser.out.usage.total_tokens:
        parser.out.usage = parser.assistant_usage
    return parser.out


def parse_stream_json(lines: Iterable[str], *, skill: str, case_id: int, model: str) -> Trajectory:
    """Parse a recorded stream-json log into a :class:`Trajectory` of no shard yet (junk lines skipped)."""
    return read_stream_json(lines).trajectory(skill, case_id, model)
