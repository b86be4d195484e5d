"""Properties of the judge's view and of the verdict parser, over generated hostile input.

* Renderer: whatever a tool output, tool name, argument or assistant message holds, every line
  of the view (split at *every* kind of line break) that looks like a turn marker is one the
  renderer wrote for a real event, no other line opens with a bracket, and no closing-fence
  look-alike survives.
* Parser: an answer offering two candidate verdict arrays never yields a verdict.
"""

from __future__ import annotations

import json
import unicodedata

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schemas.trajectory import AssistantEvent, Event, ToolCallEvent, ToolResultEvent, Trajectory
from worker.grading.parse import Parsed, parse_verdicts
from worker.grading.transcript import CLOSING_FENCE_RE, FENCE_PREFIX_RE
from worker.grading.view import judge_view, opens_like_marker

NASTY = (
    "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029\t \u200b\u200d\ufeff\u00ad\u3000"
    "[]［］⟦⟧【】(){}<>＜／/\\\"'`"
    "tool_callresultassistantshell"
    "transcriptTRANSCRIPT\u0442\u0430\u0455\u0441\u0440"
)
hostile = st.text(alphabet=st.sampled_from(NASTY) | st.characters(), max_size=300)
marker_bits = st.sampled_from(
    ["[tool_call] shell(", "[tool_result] shell exit=0", "[assistant] ", "</transcript", "</transcript-abc>"]
)
payload = st.lists(hostile | marker_bits, max_size=8).map("".join)
MARKERS = ("[tool_call] ", "[tool_result] ", "[assistant] ")


@st.composite
def trajectories(draw: st.DrawFn) -> Trajectory:
    events: list[Event] = []
    for i in range(draw(st.integers(1, 4))):
        name = draw(st.sampled_from(["shell", "read_file"]) | payload)
        args = draw(st.dictionaries(st.sampled_from(["command", "path", "content", "x"]), payload, max_size=3))
        events.append(ToolCallEvent(call_id=f"c{i}", name=name, arguments=args))
        events.append(ToolResultEvent(call_id=f"c{i}", output=draw(payload), exit_code=draw(st.none() | st.integers())))
        if draw(st.booleans()):
            events.append(AssistantEvent(text=draw(payload)))
    return Trajectory(skill="s", case_id=1, model="m", events=events)


def _visible(line: str) -> str:
    return "".join(c for c in line if unicodedata.category(c) not in ("Cf", "Mn"))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trajectories())
def test_no_agent_text_yields_a_turn_marker_or_a_closing_fence(trajectory: Trajectory) -> None:
    view = judge_view(trajectory)
    lines = view.text.splitlines()
    renderer_lines = [line for line in lines if _visible(line).startswith(MARKERS)]
    assert len(renderer_lines) == len(trajectory.events)
    for line in lines:
        if not _visible(line).startswith(MARKERS) and not line.startswith("(transcript caps: "):
            assert not opens_like_marker(line), repr(line)
    assert not CLOSING_FENCE_RE.search(view.text) and not FENCE_PREFIX_RE.search(view.text)
    for event, line in zip(trajectory.events, renderer_lines, strict=True):
        assert line.startswith(f"[{event.kind}] ")


def _verdicts(n: int) -> st.SearchStrategy[list[dict[str, object]]]:
    item = st.fixed_dictionaries(
        {"text": st.text(max_size=30), "passed": st.booleans(), "evidence": st.text(max_size=30)}
    )
    return st.lists(item, min_size=n, max_size=n)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 3).flatmap(lambda n: st.tuples(st.just(n), _verdicts(n), _verdicts(n))),
    st.lists(st.text(max_size=40), min_size=3, max_size=3),
    st.sampled_from(["bare", "fenced", "both-fenced"]),
)
def test_an_answer_with_two_candidate_arrays_never_yields_a_verdict(
    arrays: tuple[int, list[dict[str, object]], list[dict[str, object]]], prose: list[str], style: str
) -> None:
    n, first, second = arrays
    a, b = json.dumps(first), json.dumps(second)
    if style != "bare":
        b = f"```json\n{b}\n```"
    if style == "both-fenced":
        a = f"```\n{a}\n```"
    answer = f"{prose[0]}\n{a}\n{prose[1]}\n{b}\n{prose[2]}"
    assertions = [str(v["text"]) for v in second]
    assert not isinstance(parse_verdicts(answer, assertions), Parsed)
    assert len(assertions) == n


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 3_000), st.integers(0, 60_000)), min_size=1, max_size=40),
    st.integers(2_000, 60_000),
)
def test_the_view_fits_the_cap_and_keeps_every_command_whole(sizes: list[tuple[int, int]], cap: int) -> None:
    events: list[Event] = []
    for i, (command, output) in enumerate(sizes):
        events.append(ToolCallEvent(call_id=str(i), name="shell", arguments={"command": f"C{i}:" + "c" * command}))
        events.append(ToolResultEvent(call_id=str(i), output="o" * output, exit_code=0))
    view = judge_view(Trajectory(skill="s", case_id=1, model="m", events=events), cap=cap)
    if view.over_cap:
        assert view.text == "" and sum(c + 150 for c, _ in sizes) > cap  # 150: both heads and one note
        return
    assert len(view.text) <= cap + 300  # the summary line
    for i, (command, _) in enumerate(sizes):
        assert f"C{i}:" + "c" * command in view.text
    assert f"0 of {len(sizes)} tool call{'' if len(sizes) == 1 else 's'} removed" in view.text or view.elided.chars == 0
