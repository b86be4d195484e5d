"""Build a harness trajectory from the proxy's record, cross-checked against the harness's stream.

What the model said and which tools it called (names, arguments) come from the responses
the proxy forwarded: the agent can write into its harness's output, it cannot change what
the proxy saw. The harness's stream says which of those calls the harness ran, and their
results: by call id (Claude Code), or by order and command (Codex). So a tool call enters
the trajectory only when both hold it:

- a call the stream claims that no proxied response of the harness's conversation contains
  (or that names a different tool) is rejected: left out as a call, with its result, and
  flagged; a rejected command of a stream paired by order (Codex) is still shown to the judge,
  as a note saying it is no verified call, so that a command which ran never disappears;
- a call the record holds that the stream never claims (the agent asked its proxy for it on
  the side, or the harness never got to run it) is "model proposed, never run": listed
  apart, never an event, never a call, never shown to the judge;
- a reply to a side request (:mod:`harnesses.conversation`) contributes nothing: its text is
  left out and its calls are listed as proposed;
- a text of the conversation's replies enters only when the harness's stream reports it too (a
  request copying the harness's prompt passes for the harness's own): others are listed as
  proposed, never the judge's;
- a call whose conversation gave the model two different results (the agent's forged one among
  them) keeps its place, with the stream's result marked contested; grading fails the case.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from harnesses.model_record import ModelToolCall, ModelTurn, ProxyRecord
from harnesses.shell_words import runs_command
from harnesses.stream_json import ERROR_PREFIX, result_event, with_output
from schemas.event_bounds import bound_arguments
from schemas.trajectory import AssistantEvent, Event, ToolCallEvent, ToolResultEvent


@dataclass(frozen=True)
class CheckedEvents:
    """The trajectory's events, what was rejected from the stream, and what the model proposed alone."""

    events: list[Event]
    rejected: list[str]
    """One line per rejected claim, naming the call id and tool."""
    proposed: list[str] = field(default_factory=list)
    """One line per call the record holds and the harness never ran (model proposed, never run)."""


def proposed_line(call: ModelToolCall, side: bool) -> str:
    """How a call the harness never ran is listed: its tool, arguments (cut) and id."""
    arguments = json.dumps(call.arguments, ensure_ascii=False, sort_keys=True)
    arguments = arguments if len(arguments) <= 300 else arguments[:300] + f"... ({len(arguments) - 300} chars cut)"
    where = "in a side request, not the harness's conversation" if side else "never claimed by the harness's stream"
    return f"{call.name}({arguments}) [call {call.call_id!r}]: model proposed, never run ({where})"


def forged_output_line(call_id: str) -> str:
    """How a call is flagged whose conversation gave the model two different results for it."""
    return (
        f"tool call {call_id!r}: the agent sent its model proxy a second, different result for it (a "
        "forged tool result): neither is taken, the harness's stream's own result is shown contested, "
        "and the case fails"
    )


def unsaid_line(text: str) -> str:
    """How a text of a proxied reply the harness's stream never reported is listed."""
    flat = " ".join(text.split())
    flat = flat if len(flat) <= 300 else flat[:300] + f"... ({len(flat) - 300} chars cut)"
    return f"text {flat!r}: model proposed, never reported by the harness's stream"


def _said(stream: Iterable[Event]) -> str:
    """Every assistant text the harness's stream reports, whitespace collapsed, joined."""
    return "\n".join(" ".join(e.text.split()) for e in stream if isinstance(e, AssistantEvent))


def _events(record: ProxyRecord, ran: Mapping[str, ToolResultEvent | None], said: str) -> tuple[list[Event], list[str]]:
    """Texts of the conversation's turns that the stream reports (``said``) and the calls in ``ran``
    (with their results, contested where the agent forged one), in model order; every other call
    and text as a proposed line. A text is the model's only: a reply to a request the agent sent
    can copy the conversation, so the harness must also have reported it."""
    events: list[Event] = []
    proposed: list[str] = []
    for turn in record.turns:
        for text in turn.texts if not turn.side else ():
            flat = " ".join(text.split())
            if flat and flat in said:
                events.append(AssistantEvent(text=text))
            elif flat:
                proposed.append(unsaid_line(text))
        for call in turn.tool_calls:
            if turn.side or call.call_id not in ran:
                proposed.append(proposed_line(call, turn.side))
                continue
            events.append(ToolCallEvent(call_id=call.call_id, name=call.name, arguments=call.arguments))
            result = ran[call.call_id]
            if result is not None:
                contested = call.call_id in record.forged_outputs
                events.append(result.model_copy(update={"contested": True}) if contested else result)
    return events, proposed


def _side_calls(record: ProxyRecord) -> dict[str, ModelToolCall]:
    return {c.call_id: c for t in record.turns if t.side for c in t.tool_calls}


def cross_check(stream_events: Iterable[Event], record: ProxyRecord) -> CheckedEvents:
    """Events in model order: texts and calls from ``record``, each call claimed by the stream's
    call id and tool, results from the stream."""
    stream = list(stream_events)
    seen = record.tool_calls()
    side = _side_calls(record)
    results = {e.call_id: e for e in stream if isinstance(e, ToolResultEvent)}
    rejected = []
    ran: dict[str, ToolResultEvent | None] = {}
    for event in stream:
        if not isinstance(event, ToolCallEvent):
            continue
        real = seen.get(event.call_id)
        if real is None:
            where = "only in a side request" if event.call_id in side else "in no model response the proxy forwarded"
            rejected.append(
                f"tool call {event.call_id!r} ({event.name}) is in the harness's stream but {where}: rejected"
            )
        elif real.name != event.name:
            rejected.append(
                f"tool call {event.call_id!r} is {real.name} in the model's response but {event.name} in "
                "the harness's stream: the stream's claim is rejected"
            )
        else:
            ran[real.call_id] = results.get(real.call_id)
    events, proposed = _events(record, ran, _said(stream))
    return CheckedEvents(events=events, rejected=rejected, proposed=proposed)


@dataclass(frozen=True)
class OrderRules:
    """How a harness whose stream carries no call ids is paired with the record: its tool names."""

    shell_tools: frozenset[str]
    """The model's tools that run a command (``cmd`` or ``command`` argument)."""
    patch_tools: frozenset[str] = frozenset()
    """The model's tools that apply a patch (a shell call whose command names one counts too)."""
    patch_claims: frozenset[str] = frozenset()
    """The stream's items that claim a patch call by the paths it changed (``paths`` argument)."""
    namespaced_claims: str = ""
    """Name prefix of the stream's claims of a namespaced call (Codex's MCP tool calls, ``mcp__``):
    each claims the next call of the conversation made in a namespace, of the same full name and
    input. Empty: none."""
    named_claims: frozenset[str] = frozenset()
    """The stream's claims of a plain function call by its name and input (Codex reports its own
    MCP resource tools as MCP calls of its own server)."""
    answered_tools: frozenset[str] = frozenset()
    """The model's tools no stream item reports (Codex's ``write_stdin``, the poll of a command
    still running): such a call ran when the harness's own conversation later gave the model its
    output, and that output is its result."""


def _claim_answered(record: ProxyRecord, ran: dict[str, ToolResultEvent | None], rules: OrderRules) -> None:
    """Claim each call of :attr:`OrderRules.answered_tools` whose output the harness sent its model
    in a request continuing its conversation (the record keeps no side request's outputs)."""
    for turn in record.turns:
        for call in turn.tool_calls:
            answered = record.tool_outputs.get(call.call_id)
            if not turn.side and call.name in rules.answered_tools and call.call_id not in ran and answered is not None:
                ran[call.call_id] = result_event(call.call_id, answered)


def _raw_command(arguments: dict[str, object]) -> object:
    return arguments.get("cmd", arguments.get("command", ""))


def _command_of(arguments: dict[str, object]) -> str:
    raw = _raw_command(arguments)
    return " ".join(str(part) for part in raw) if isinstance(raw, list) else str(raw)


def _shell_calls(turns: Iterable[ModelTurn], rules: OrderRules) -> list[ModelToolCall]:
    return [c for t in turns if not t.side for c in t.tool_calls if c.name in rules.shell_tools]


def cross_check_by_order(stream_events: Iterable[Event], record: ProxyRecord, rules: OrderRules) -> CheckedEvents:
    """As :func:`cross_check`, for a stream whose items do not carry the model's call ids.

    Each command the stream reports, in order, claims the next shell call of the harness's
    conversation (in the proxy's order) whose command it runs exactly
    (:func:`harnesses.shell_words.runs_command`); calls it passes over were proposed and never
    run. A command with no such call is rejected, and shown to the judge as a note at the end of
    the events (:func:`_unverified_run`). Patch calls are
    claimed the same way by the stream's patch items, whose listed paths the patch must name.
    The tool names are the harness's (``rules``).
    """
    stream = list(stream_events)
    results_by_stream_id = {e.call_id: e for e in stream if isinstance(e, ToolResultEvent)}
    ran: dict[str, ToolResultEvent | None] = {}
    rejected = []
    claims = [e for e in stream if isinstance(e, ToolCallEvent)]
    prefix = rules.namespaced_claims
    named = [c for c in claims if (prefix and c.name.startswith(prefix)) or c.name in rules.named_claims]
    commands = [c for c in claims if c.name not in rules.patch_claims and not any(c is n for n in named)]
    shell = _shell_calls(record.turns, rules)
    unmatched = _claim_in_order(
        commands,
        shell,
        lambda claimed, call: runs_command(_raw_command(call.arguments), _command_of(claimed.arguments)),
        results_by_stream_id,
        ran,
    )
    rejected += [
        f"command {_command_of(claimed.arguments)[:120]!r} is in the harness's stream but matches "
        "no shell call in the model responses the proxy forwarded: rejected (shown to the judge as unverified)"
        for claimed in unmatched
    ]
    rejected += _claim_patches(claims, record, ran, rules)
    rejected += _claim_named(named, record, ran, results_by_stream_id, rules)
    _claim_answered(record, ran, rules)
    events, proposed = _events(record, ran, _said(stream))
    events += [_unverified_run(claimed, results_by_stream_id.get(claimed.call_id)) for claimed in unmatched]
    return CheckedEvents(events=events, rejected=rejected, proposed=proposed)


def _unverified_run(claimed: ToolCallEvent, result: ToolResultEvent | None) -> AssistantEvent:
    """A command the stream says the harness ran that no model reply holds, as the judge reads it:
    never a tool call (the stream can be written by the agent), never left out (a command that ran
    and fooled the matching must still be seen). See docs/design/harnesses.md."""
    text = (
        "(not a verified tool call: the harness's stream reports it ran the command "
        f"{_command_of(claimed.arguments)!r}, but no model reply the proxy forwarded holds it"
    )
    if result is None:
        return AssistantEvent(text=text + "; the stream gives no result)")
    code = "" if result.exit_code is None else f", exit code {result.exit_code}"
    return AssistantEvent(text=f"{text}{code}; the stream's output: {result.output!r})")


def _claim_named(
    claims: list[ToolCallEvent],
    record: ProxyRecord,
    ran: dict[str, ToolResultEvent | None],
    results: Mapping[str, ToolResultEvent],
    rules: OrderRules,
) -> list[str]:
    """Pair the stream's claims by name, in order, with the conversation's calls of the same name
    and input: namespaced calls for the namespaced prefix, plain calls for ``named_claims``. A call
    named like a namespaced one but made outside a namespace never matches: its harness would not
    have run it."""
    calls = [
        c
        for t in record.turns
        if not t.side
        for c in t.tool_calls
        if c.call_id not in ran and (c.namespace is not None or c.name in rules.named_claims)
    ]
    unmatched = _claim_in_order(
        claims,
        calls,
        # The stream's event holds its input bounded as every event does; the model's call is bounded alike.
        lambda claimed, call: call.name == claimed.name and bound_arguments(call.arguments)[0] == claimed.arguments,
        results,
        ran,
    )
    return [
        f"tool call {claimed.name[:120]!r} is in the harness's stream but matches no call of that "
        "tool and input in the model responses the proxy forwarded: rejected"
        for claimed in unmatched
    ]


def _claim_in_order(
    claims: list[ToolCallEvent],
    calls: list[ModelToolCall],
    same: Callable[[ToolCallEvent, ModelToolCall], bool],
    results: Mapping[str, ToolResultEvent],
    ran: dict[str, ToolResultEvent | None],
) -> list[ToolCallEvent]:
    """Each claim, in order, takes the next call after the last one taken that is ``same``; its
    stream result becomes that call's (in ``ran``). Calls passed over stay unclaimed; the claims
    with no such call are returned (rejected)."""
    rejected: list[ToolCallEvent] = []
    at = 0
    for claimed in claims:
        match = next((i for i in range(at, len(calls)) if same(claimed, calls[i])), None)
        if match is None:
            rejected.append(claimed)
            continue
        real, at = calls[match], match + 1
        result = results.get(claimed.call_id)
        ran[real.call_id] = result.model_copy(update={"call_id": real.call_id}) if result is not None else None
    return rejected


def _claim_patches(
    claims: list[ToolCallEvent], record: ProxyRecord, ran: dict[str, ToolResultEvent | None], rules: OrderRules
) -> list[str]:
    """Pair the stream's patch items, in order, with the conversation's patch calls."""
    patches = [
        c
        for t in record.turns
        if not t.side
        for c in t.tool_calls
        if c.call_id not in ran
        and (
            c.name in rules.patch_tools
            or (c.name in rules.shell_tools and any(p in _command_of(c.arguments) for p in rules.patch_tools))
        )
    ]
    rejected: list[str] = []
    at = 0
    for claimed in (c for c in claims if c.name in rules.patch_claims):
        raw = claimed.arguments.get("paths")
        paths = [str(p) for p in raw] if isinstance(raw, list) else []
        match = next((i for i in range(at, len(patches)) if _names_paths(patches[i], paths)), None)
        if match is None:
            rejected.append(
                f"file change of {', '.join(paths)[:120]!r} is in the harness's stream but matches no patch call "
                "in the model responses the proxy forwarded: rejected"
            )
            continue
        ran[patches[match].call_id], at = None, match + 1
    return rejected


def _names_paths(call: ModelToolCall, paths: list[str]) -> bool:
    text = json.dumps(call.arguments, ensure_ascii=False)
    return all(p.rsplit("/", 1)[-1] in text for p in paths)


def with_sent_outputs(checked: CheckedEvents, record: ProxyRecord) -> CheckedEvents:
    """``checked`` with each result replaced by the one the harness sent the model for that call
    (kept in ``record``), for a harness whose stream shows a shortened display text of it; a
    result the stream marks as an error stays marked."""
    events: list[Event] = []
    for event in checked.events:
        sent = record.tool_outputs.get(event.call_id) if isinstance(event, ToolResultEvent) else None
        if isinstance(event, ToolResultEvent) and sent is not None:
            prefix = ERROR_PREFIX if event.output.startswith(ERROR_PREFIX) else ""
            event = with_output(event, prefix + sent)
        events.append(event)
    return CheckedEvents(events=events, rejected=checked.rejected, proposed=checked.proposed)
