"""Gemini CLI's ``--output-format stream-json`` lines, and the cross-check of its calls by content.

The stream (0.61): ``init`` (session, model), ``message`` (``role``, ``content``; assistant
text comes as ``delta`` pieces), ``tool_use`` (``tool_name``, ``tool_id``, ``parameters``),
``tool_result`` (``tool_id``, ``status`` ``success``/``error``, ``output`` the result's display
text, ``error.message``), ``error`` (``severity``, ``message``) and ``result`` (``status``,
``stats`` with the tokens). Junk lines are skipped and counted.

The ``tool_id`` is Gemini CLI's own (``<tool>__<name>_<time>_<n>`` unless the model named the
call), so a claim cannot be matched by id: each ``tool_use``, in order, claims the next call of
the harness's conversation in the proxy's record with the same tool name and the same
arguments; calls passed over were proposed and never run, a claim with no such call is
rejected. Pure: lines and records in, events out.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from harnesses.crosscheck import CheckedEvents, _events, _said
from harnesses.model_record import ModelToolCall, ProxyRecord
from harnesses.stream_json import ERROR_PREFIX, ParsedStream, json_objects, result_event, with_output
from schemas.event_bounds import bound_arguments
from schemas.trajectory import AssistantEvent, EndReason, Event, ToolCallEvent, ToolResultEvent, Usage


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _result(data: dict[str, Any]) -> ToolResultEvent:
    call_id = str(data.get("tool_id", ""))
    error = _obj(data.get("error"))
    output = data.get("output")
    text = output if isinstance(output, str) else ""
    if data.get("status") == "error" or error:
        return result_event(call_id, ERROR_PREFIX + str(error.get("message") or text))
    return result_event(call_id, text)


def read_gemini_stream(lines: Iterable[str]) -> ParsedStream:
    """Parse ``gemini --output-format stream-json`` lines (junk skipped)."""
    out = ParsedStream()
    text: list[str] = []

    def flush() -> None:
        joined = "".join(text)
        if joined.strip():
            out.events.append(AssistantEvent(text=joined))
        text.clear()

    for data in json_objects(lines, out):
        kind = data.get("type")
        if kind == "message" and data.get("role") == "assistant" and isinstance(data.get("content"), str):
            text.append(data["content"])
        elif kind == "tool_use":
            flush()
            arguments = _obj(data.get("parameters"))
            out.events.append(
                ToolCallEvent(
                    call_id=str(data.get("tool_id", "")), name=str(data.get("tool_name", "")), arguments=arguments
                )
            )
        elif kind == "tool_result":
            flush()
            out.events.append(_result(data))
        elif kind == "result":
            flush()
            out.saw_result = True
            out.result_is_error = data.get("status") != "success"
            stats = _obj(data.get("stats"))
            out.usage = Usage(
                prompt_tokens=int(stats.get("input_tokens") or 0),
                completion_tokens=int(stats.get("output_tokens") or 0),
                calls=0,
            )
        elif kind == "error" and data.get("severity") == "error":
            out.result_is_error = True
    flush()
    out.end_reason = EndReason.COMPLETED
    return out


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _same_arguments(real: ModelToolCall, claimed: dict[str, Any]) -> bool:
    return _canon(bound_arguments(real.arguments)[0]) == _canon(claimed)  # the event holds them bounded


def _sent_output(record: ProxyRecord, claimed: ToolCallEvent) -> str | None:
    """The result the harness sent the model for a claimed call: its stream id is
    ``<tool>__<id>``, the ``functionResponse`` it sent names ``<id>``."""
    for key in (claimed.call_id, claimed.call_id.removeprefix(f"{claimed.name}__")):
        if key in record.tool_outputs:
            return record.tool_outputs[key]
    return None


def cross_check_by_content(stream_events: Iterable[Event], record: ProxyRecord) -> CheckedEvents:
    """As :func:`harnesses.crosscheck.cross_check`, for a stream whose call ids are the harness's own.

    Each ``tool_use``, in order, claims the next call of the conversation with its tool name and
    arguments (results move to the record's call id); a claim no call matches is rejected.
    """
    stream = list(stream_events)
    results = {e.call_id: e for e in stream if isinstance(e, ToolResultEvent)}
    calls = [c for t in record.turns if not t.side for c in t.tool_calls]
    side = [c for t in record.turns if t.side for c in t.tool_calls]
    ran: dict[str, ToolResultEvent | None] = {}
    rejected: list[str] = []
    at = 0
    for claimed in (e for e in stream if isinstance(e, ToolCallEvent)):
        match = next(
            (
                i
                for i in range(at, len(calls))
                if calls[i].name == claimed.name and _same_arguments(calls[i], claimed.arguments)
            ),
            None,
        )
        if match is None:
            in_side = any(c.name == claimed.name and _same_arguments(c, claimed.arguments) for c in side)
            where = "only in a side request" if in_side else "in no model response the proxy forwarded"
            rejected.append(
                f"tool call {claimed.call_id!r} ({claimed.name}) is in the harness's stream but {where}: rejected"
            )
            continue
        real, at = calls[match], match + 1
        result = results.get(claimed.call_id)
        sent = _sent_output(record, claimed)
        if result is not None and not result.output.strip() and sent is not None:
            # The stream shows a display text (empty for a file read); the model got the result itself.
            result = with_output(result, sent)
        ran[real.call_id] = result.model_copy(update={"call_id": real.call_id}) if result is not None else None
    events, proposed = _events(record, ran, _said(stream))
    return CheckedEvents(events=events, rejected=rejected, proposed=proposed)
