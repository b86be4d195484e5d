"""Build a harness trajectory from the proxy's record, cross-checked against the harness's stream.

What the model said and which tools it called (names, arguments) come from the responses
the proxy forwarded: the agent can write into its harness's output, it cannot change what
the proxy saw. The harness's stream contributes what only it knows, the tool results,
paired by call id. A tool call the stream claims that no proxied response contains (or
that names a different tool) is rejected: left out of the trajectory, with its result,
and flagged.
"""

from __future__ import annotations

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
