"""The judge's view of a trajectory: rendered so that nothing the agent produced can pass for
the renderer's own lines, capped so that no tool call is ever hidden. Pure.

Only this module writes a line starting with ``[assistant]``, ``[tool_call]``,
``[tool_result]`` or ``[http_call]`` (a request the HTTP mock proxy recorded, after the
events). Free text (tool output, assistant prose) is made safe *per event, after its own
cap*, so a cut can never expose a forged marker:

* every character a reader could take for a line break (CR, VT, FF, FS/GS/RS, NEL, U+2028,
  U+2029) becomes ``\\n``; other C0/C1 controls become visible ``\\xNN``;
* every free-text line whose first visible character opens a bracket (``[``, ``［``, ``⟦``,
  ``(``, ``<`` and every other Unicode opening punctuation, zero-width characters skipped)
  is indented by one space, so no free-text line can look like a turn marker;
* a tool name that is not a plain identifier is shown as escaped JSON, tagged ``unknown-tool``;
  arguments are one line of JSON with the Unicode separators escaped too.

Caps: results and prose are capped at ``BLOCK_CAP_CHARS`` each, long non-command argument
strings (a file body) at ``ARG_CAP_CHARS``; then, if the whole is still over
``TRANSCRIPT_CAP_CHARS``, results and prose share what the calls leave, largest first.
Every cut says in place how many characters it removed, and a first line sums them up. A
tool call's command is never cut and no call is ever dropped: when the calls alone exceed
the cap the view is ``over_cap`` and the caller grades that as the agent's behaviour.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass

from schemas.constants import BLOCK_CAP_CHARS, TRANSCRIPT_CAP_CHARS
from schemas.http_mocks import HttpCall
from schemas.trajectory import AssistantEvent, EndReason, ToolCallEvent, Trajectory
from schemas.visible import escape_char
from schemas.words import plural
from worker.grading.transcript import neutralise_fences

ARG_CAP_CHARS = 2_000
NOTE_ROOM_CHARS = 80  # room kept for each result's or message's elision note when the whole cap bites
# Argument keys that carry what a call *does*: never elided, whatever their length.
COMMAND_KEYS = frozenset({"command", "cmd", "argv", "args", "script", "code", "path", "file_path", "pattern", "url"})
BREAKS = "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
_BREAK_RE = re.compile(f"\r\n|[{BREAKS}]")
_CONTROL_RE = re.compile(r"[\x00-\x08\x0e-\x1b\x1f\x7f-\x84\x86-\x9f]")
_INVISIBLE = {"Cf", "Mn", "Me", "Zs"}
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:-]{0,63}$")
_LT_LIKE = "<\uff1c\ufe64\u2039\u2329\u3008\u27e8\u276e"


def flatten_breaks(text: str) -> str:
    """Every line-break-like character as ``\\n``, other control characters as visible escapes."""
    text = _BREAK_RE.sub("\n", text)
    return _CONTROL_RE.sub(escape_char, text)


def opens_like_marker(line: str) -> bool:
    """True when the first visible character of ``line`` opens a bracket (ASCII or not)."""
    for char in line:
        if char == "\t" or (unicodedata.category(char) in _INVISIBLE and char != " "):
            continue
        folded = unicodedata.normalize("NFKC", char)[:1] or char
        return unicodedata.category(folded) in ("Ps", "Pi") or char in _LT_LIKE or folded in _LT_LIKE
    return False


def safe_text(text: str) -> str:
    """Free text made unable to forge a renderer line (see module docstring). Idempotent."""
    lines = flatten_breaks(text).split("\n")
    return "\n".join(" " + line if opens_like_marker(line) else line for line in lines)


def _json_line(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return re.sub(f"[{BREAKS}\x7f-\x9f]", lambda m: f"\\u{ord(m.group()):04x}", text)


def tool_label(name: str) -> str:
    """The tool name as rendered: plain when it is an identifier, else tagged escaped JSON."""
    return name if _NAME_RE.match(name) else "unknown-tool:" + json.dumps(name, ensure_ascii=True)


def cut(text: str, keep: int, what: str) -> tuple[str, int]:
    """``text`` with its middle elided down to about ``keep`` characters; (result, chars removed)."""
    if len(text) <= keep:
        return text, 0
    half = keep // 2
    removed = len(text) - 2 * half
    note = f"... [{removed} chars elided from this {what}] ..."
    if half == 0:
        return note, removed
    return f"{text[:half]}\n{note}\n{text[-half:]}", removed


@dataclass
class _Block:
    kind: str  # assistant | tool_call | tool_result | end
    head: str  # the renderer's own first line (without free text)
    body: str = ""  # free text (already safe), or "" for calls
    what: str = ""  # "tool result" / "assistant message", for the elision note
    cut_chars: int = 0

    def text(self) -> str:
        if self.kind in ("tool_result", "http_call"):
            return f"{self.head}\n{self.body}"
        return f"{self.head}{self.body}"


@dataclass(frozen=True)
class Elisions:
    """What the caps cut from a view: characters, and how many blocks of each kind lost some."""

    chars: int = 0
    """Characters removed in all (call arguments, results, messages)."""
    results: int = 0
    """Tool results and recorded HTTP calls cut."""
    messages: int = 0
    """Assistant messages cut."""
    arguments: int = 0
    """Long non-command call arguments cut."""

    def summary(self, calls: int) -> str:
        """The view's first line, saying what was cut and that none of its ``calls`` tool calls was."""
        return (
            f"(transcript caps: {plural(self.chars, 'character')} elided from {plural(self.results, 'tool result')}, "
            f"{plural(self.messages, 'assistant message')} and {plural(self.arguments, 'call argument')}; "
            f"0 of {plural(calls, 'tool call')} removed, no command shortened)"
        )


@dataclass(frozen=True)
class JudgeView:
    """A prepared trajectory: the text the judge reads and what the caps did."""

    text: str
    evidence_blocks: tuple[str, ...]
    """The tool call and tool result blocks of ``text``: the only places evidence may quote."""
    elided: Elisions = Elisions()
    calls: int = 0
    over_cap: bool = False
    """The tool calls alone exceed the whole cap: nothing was sent; grade it as behaviour."""


def _call_block(event: ToolCallEvent) -> tuple[_Block, int, int]:
    arguments: dict[str, object] = {}
    removed, cut_args = 0, 0
    for key, value in event.arguments.items():
        if isinstance(value, str) and key not in COMMAND_KEYS and len(value) > ARG_CAP_CHARS:
            value, gone = cut(value, ARG_CAP_CHARS, "argument")
            removed, cut_args = removed + gone, cut_args + 1
        arguments[key] = value
    return _Block("tool_call", f"[tool_call] {tool_label(event.name)}({_json_line(arguments)})"), removed, cut_args


def _http_block(call: HttpCall) -> _Block:
    """A request the product's HTTP mock proxy recorded: its line is the renderer's (the URL as
    escaped JSON), what was sent and answered is free text."""
    answered = "mocked" if call.mocked else "refused"
    head = f"[http_call] {tool_label(call.method)} {_json_line(call.url)} -> {call.status} {answered}"
    parts = [f"request body: {call.request_body}"] if call.request_body else []
    parts += [f"answer: {call.body}"] if call.body else []
    parts += [f"note: {call.note}"] if call.note else []
    body, gone = cut("\n".join(parts), BLOCK_CAP_CHARS, "HTTP call")
    return _Block("http_call", head, safe_text(body), "HTTP call", gone)


def _blocks(trajectory: Trajectory) -> tuple[list[_Block], int, int]:
    names = {e.call_id: e.name for e in trajectory.events if isinstance(e, ToolCallEvent)}
    blocks: list[_Block] = []
    removed = cut_args = 0
    for event in trajectory.events:
        if isinstance(event, AssistantEvent):
            body, gone = cut(event.text, BLOCK_CAP_CHARS, "assistant message")
            blocks.append(_Block("assistant", "[assistant] ", safe_text(body), "assistant message", gone))
        elif isinstance(event, ToolCallEvent):
            block, gone, n = _call_block(event)
            blocks.append(block)
            removed, cut_args = removed + gone, cut_args + n
        else:
            head = event.head(names.get(event.call_id, "?"), tool_label)
            body, gone = cut(event.output, BLOCK_CAP_CHARS, "tool result")
            blocks.append(_Block("tool_result", head, safe_text(body), "tool result", gone))
    blocks += [_http_block(call) for call in trajectory.http_calls]
    if trajectory.end_reason is not EndReason.COMPLETED:
        blocks.append(_Block("end", f"[assistant] (run ended: {trajectory.end_reason.value})"))
    return blocks, removed, cut_args


def _share(sizes: list[int], budget: int) -> int:
    """The largest per-block allowance L with sum(min(size, L)) <= budget (water filling)."""
    lo, hi = 0, max(sizes, default=0)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if sum(min(s, mid) for s in sizes) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo


def judge_view(trajectory: Trajectory, *, cap: int = TRANSCRIPT_CAP_CHARS) -> JudgeView:
    """Render, make safe and cap ``trajectory`` for the judge (see module docstring)."""
    blocks, arg_chars, cut_args = _blocks(trajectory)
    fixed = sum(len(b.text()) - len(b.body) + 1 for b in blocks)
    free = [b for b in blocks if b.body]
    calls = sum(b.kind == "tool_call" for b in blocks)
    budget = cap - fixed - NOTE_ROOM_CHARS * len(free)  # room for the elision notes
    if budget < 0:  # the calls (and one note per result) alone do not fit: the agent's own volume
        return JudgeView(text="", evidence_blocks=(), calls=calls, over_cap=True)
    if sum(len(b.body) for b in free) > budget:
        allowance = _share([len(b.body) for b in free], budget)
        for b in free:
            if len(b.body) > allowance:
                b.body, gone = cut(b.body, allowance, b.what)
                b.body = safe_text(b.body)
                b.cut_chars += gone
    elided = Elisions(
        chars=arg_chars + sum(b.cut_chars for b in free),
        results=sum(1 for b in free if b.cut_chars and b.kind in ("tool_result", "http_call")),
        messages=sum(1 for b in free if b.cut_chars and b.kind == "assistant"),
        arguments=cut_args,
    )
    lines = [neutralise_fences(b.text()) for b in blocks]
    evidence = tuple(
        line for b, line in zip(blocks, lines, strict=True) if b.kind in ("tool_call", "tool_result", "http_call")
    )
    if elided.chars:
        lines.insert(0, elided.summary(calls))
    text = "\n".join(lines) + ("\n" if lines else "")
    return JudgeView(text=text, evidence_blocks=evidence, elided=elided, calls=calls)
