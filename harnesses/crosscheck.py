"""Build a harness trajectory from the proxy's record, cross-checked against the harness's stream.

What the model said and which tools it called (names, arguments) come from the responses
the proxy forwarded: the agent can write into its harness's output, it cannot change what
the proxy saw. The harness's stream contributes what only it knows, the tool results,
paired by call id. A tool call the stream claims that no proxied response contains (or
that names a different tool) is rejected: left out of the trajectory, with its result,
and flagged.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from dataclasses import dataclass

from harnesses.model_record import ProxyRecord
from schemas.trajectory import AssistantEvent, Event, ToolCallEvent, ToolResultEvent


@dataclass(frozen=True)
class CheckedEvents:
    """The trajectory's events and what was rejected from the stream."""

    events: list[Event]
    rejected: list[str]
    """One line per rejected claim, naming the call id and tool."""


def cross_check(stream_events: Iterable[Event], record: ProxyRecord) -> CheckedEvents:
    """Events in model order (texts and calls from ``record``, results from the stream)."""
    stream = list(stream_events)
    seen = record.tool_calls()
    results = {e.call_id: e for e in stream if isinstance(e, ToolResultEvent)}
    rejected = []
    for event in stream:
        if not isinstance(event, ToolCallEvent):
            continue
        real = seen.get(event.call_id)
        if real is None:
            rejected.append(
                f"tool call {event.call_id!r} ({event.name}) is in the harness's stream but in no model "
                "response the proxy forwarded: rejected"
            )
        elif real.name != event.name:
            rejected.append(
                f"tool call {event.call_id!r} is {real.name} in the model's response but {event.name} in "
                "the harness's stream: the stream's claim is rejected"
            )
    events: list[Event] = []
    for turn in record.turns:
        events += [AssistantEvent(text=text) for text in turn.texts if text.strip()]
        for call in turn.tool_calls:
            events.append(ToolCallEvent(call_id=call.call_id, name=call.name, arguments=call.arguments))
            if call.call_id in results:
                events.append(results[call.call_id])
    return CheckedEvents(events=events, rejected=rejected)


SHELL_TOOLS = frozenset({"shell", "exec_command", "shell_command", "local_shell"})


def _command_of(arguments: dict[str, object]) -> str:
    raw = arguments.get("cmd", arguments.get("command", ""))
    return " ".join(str(part) for part in raw) if isinstance(raw, list) else str(raw)


def _same_command(sent: str, reported: str) -> bool:
    """True when the stream's ``reported`` command line runs the command the model ``sent``.

    Codex reports ``/bin/bash -lc '<command>'``, shell-quoted: compare with its words too.
    """
    if sent in reported:
        return True
    try:
        words = shlex.split(reported)
    except ValueError:
        return False
    return sent in words


def cross_check_by_order(stream_events: Iterable[Event], record: ProxyRecord) -> CheckedEvents:
    """As :func:`cross_check`, for a stream whose items do not carry the model's call ids (Codex).

    The n-th command the stream reports pairs with the n-th shell call the proxy saw, and
    must contain that call's command text; a command with no such call is rejected.
    """
    stream = list(stream_events)
    shell_calls = [c for t in record.turns for c in t.tool_calls if c.name in SHELL_TOOLS]
    results_by_stream_id = {e.call_id: e for e in stream if isinstance(e, ToolResultEvent)}
    results: dict[str, ToolResultEvent] = {}
    rejected = []
    for n, claimed in enumerate(e for e in stream if isinstance(e, ToolCallEvent)):
        real = shell_calls[n] if n < len(shell_calls) else None
        claimed_text = _command_of(claimed.arguments)
        if real is None or not _same_command(_command_of(real.arguments), claimed_text):
            rejected.append(
                f"command {claimed_text[:120]!r} is in the harness's stream but matches no shell call in the "
                "model responses the proxy forwarded: rejected"
            )
            continue
        result = results_by_stream_id.get(claimed.call_id)
        if result is not None:
            results[real.call_id] = result.model_copy(update={"call_id": real.call_id})
    events: list[Event] = []
    for turn in record.turns:
        events += [AssistantEvent(text=text) for text in turn.texts if text.strip()]
        for call in turn.tool_calls:
            events.append(ToolCallEvent(call_id=call.call_id, name=call.name, arguments=call.arguments))
            if call.call_id in results:
                events.append(results[call.call_id])
    return CheckedEvents(events=events, rejected=rejected)
