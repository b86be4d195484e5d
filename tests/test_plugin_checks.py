"""The assertion objects with plugin eval's grader semantics, their validation, and tool checks over
mocked MCP calls in a schema-v1 corpus. Pure: no model, no sandbox."""

from __future__ import annotations

import re
from typing import Any

import pytest

from producer.corpus.interop_plugin_graders import js_pattern
from producer.corpus.validation import validate_corpus
from schemas.checks_plugin import FileGlobCheck, TextMatchCheck, ToolCountCheck, ToolMatcher, ToolOrderCheck
from schemas.errors import BadCorpus
from schemas.manifest import AgentBudget
from schemas.trajectory import AssistantEvent, Event, ToolCallEvent, ToolResultEvent, Trajectory
from worker.executor.allowed import case_budget
from worker.grading.deterministic import check_assertion

FILE = "evals/demo.evals.json"


def trajectory(*events: Event, files: dict[str, str] | None = None) -> Trajectory:
    return Trajectory(skill="demo", case_id=1, model="m", events=list(events), final_files=files or {})


def tool(call_id: str, name: str, **arguments: Any) -> list[Event]:
    return [ToolCallEvent(call_id=call_id, name=name, arguments=arguments), ToolResultEvent(call_id=call_id, output="")]


RUN = trajectory(
    AssistantEvent(text="Looking."),
    *tool("1", "shell", command="pytest -q"),
    *tool("2", "Write", file_path="/workspace/notes/a.md", content="x"),
    *tool("3", "mcp__weather__get_forecast", city="Paris"),
    *tool("4", "shell", command="git commit -m fix"),
    AssistantEvent(text="Done.\nAll GREEN."),
    files={"notes/a.md": "first\nsecond line\n", "out.txt": "ok"},
)


def passed(check: Any) -> bool:
    return check_assertion(check, RUN).passed


@pytest.mark.parametrize(
    ("check", "expected"),
    [
        (TextMatchCheck(text="t", pattern="green"), False),
        (TextMatchCheck(text="t", pattern="green", flags="i"), True),
        (TextMatchCheck(text="t", pattern="Looking"), False),  # only the final reply
        (TextMatchCheck(text="t", pattern="^All", flags="m"), True),
        (TextMatchCheck(text="t", pattern="Looking", source="transcript"), True),
        (TextMatchCheck(text="t", pattern="pytest", source="transcript", absent=True), False),
        (TextMatchCheck(text="t", pattern="^second", flags="m", source="file", path="notes/a.md"), True),
        (TextMatchCheck(text="t", pattern="x", source="file", path="missing.md"), False),
        (TextMatchCheck(text="t", pattern="x", source="file", path="missing.md", absent=True), True),
        (ToolCountCheck(text="t", calls=ToolMatcher(tool="Bash"), min=2, max=2), True),  # shell is Bash
        (ToolCountCheck(text="t", calls=ToolMatcher(tool="Bash", input_match="pytest")), True),
        (ToolCountCheck(text="t", calls=ToolMatcher(tool="Bash"), min=3), False),
        (ToolCountCheck(text="t", calls=ToolMatcher(tool="Edit"), min=0, max=0), True),
        (
            ToolCountCheck(text="t", calls=ToolMatcher(tool="Write", input_match='"file_path":"[^"]*notes/'), max=1),
            True,
        ),
        (ToolCountCheck(text="t", calls=ToolMatcher(tool="mcp__weather__get_forecast", input_match="Paris")), True),
        (ToolCountCheck(text="t", calls=ToolMatcher(tool="mcp__weather__get_forecast", input_match="Oslo")), False),
        (ToolOrderCheck(text="t", before=ToolMatcher(tool="Bash"), after=ToolMatcher(tool="Write")), True),
        (ToolOrderCheck(text="t", before=ToolMatcher(tool="Write"), after=ToolMatcher(tool="Bash")), False),
        (
            ToolOrderCheck(
                text="t",
                before=ToolMatcher(tool="mcp__weather__get_forecast"),
                after=ToolMatcher(tool="Bash", input_match="git commit"),
            ),
            True,
        ),
        (ToolOrderCheck(text="t", before=ToolMatcher(tool="Bash"), after=ToolMatcher(tool="Edit")), False),
        (FileGlobCheck(text="t", glob="*.txt"), True),
        (FileGlobCheck(text="t", glob="*.md"), False),  # * stays within a folder
        (FileGlobCheck(text="t", glob="**/*.md"), True),
        (FileGlobCheck(text="t", glob="notes/?.md"), True),
        (FileGlobCheck(text="t", glob="**/*.md", exists=False), False),
        (FileGlobCheck(text="t", glob="reports/**", exists=False), True),
    ],
)
def test_each_check_reads_the_structured_trajectory(check: Any, expected: bool) -> None:
    assert passed(check) is expected


@pytest.mark.parametrize(
    ("check", "evidence"),
    [
        (TextMatchCheck(text="t", pattern="GREEN"), "the final reply: GREEN"),
        (TextMatchCheck(text="t", pattern="red"), "absent: a match for /red/ in the final reply"),
        (TextMatchCheck(text="t", pattern="red", absent=True), "no match for /red/ in the final reply"),
        (
            TextMatchCheck(text="t", pattern="GREEN", absent=True),
            "absent: no match for /GREEN/ in the final reply was wanted; one was found: the final reply: GREEN",
        ),
        (FileGlobCheck(text="t", glob="**/*.md"), "notes/a.md"),
        (FileGlobCheck(text="t", glob="*.py"), "absent: a file matching *.py among the files the run changed"),
        (FileGlobCheck(text="t", glob="*.py", exists=False), "no file matching *.py among the files the run changed"),
        (
            FileGlobCheck(text="t", glob="*.txt", exists=False),
            "absent: no file matching *.txt among the files the run changed was wanted; one was found: out.txt",
        ),
    ],
)
def test_a_presence_check_quotes_what_it_found_and_names_what_is_absent(check: Any, evidence: str) -> None:
    assert check_assertion(check, RUN).evidence == evidence


def test_javascript_patterns_are_rewritten_where_python_spells_them_differently() -> None:
    pattern = js_pattern(r"(?<y>\d{4})-\k<y>[^]")
    assert re.search(pattern, "2026-2026\n") is not None
    assert js_pattern(r"(?<=a)b(?<!c)") == r"(?<=a)b(?<!c)"  # look-behinds untouched


def corpus(assertion: Any, **case: Any) -> dict[str, Any]:
    first = {"id": 1, "prompt": "p", "expected_output": "e", "files": [], "assertions": [assertion], **case}
    second = {"id": 2, "prompt": "p", "expected_output": "e", "files": [], "assertions": ["The agent runs the tests"]}
    return {"skill_name": "demo", "extensions": ["deterministic-assertions"], "evals": [first, second]}


MOCKS = [
    {
        "name": "weather",
        "tools": [{"name": "get_forecast", "answer": "{{city}}: sunny", "expect": {"city": "^[A-Z]"}}],
    }
]


def test_a_cases_own_turns_and_clock_lower_the_runs_budget_never_raise_it() -> None:
    data = corpus("The agent runs the tests", max_turns=5, timeout_s=60)
    case = validate_corpus(data, FILE, lambda _p: False).evals[0]
    run = AgentBudget(max_turns=40, wall_clock_s=900)
    assert (case_budget(run, case).max_turns, case_budget(run, case).wall_clock_s) == (5, 60)
    tight = AgentBudget(max_turns=3, wall_clock_s=30)
    assert case_budget(tight, case) == tight


def test_a_schema_v1_corpus_checks_its_mocked_calls_like_any_call() -> None:
    called = {"kind": "tool_count", "calls": {"tool": "mcp__weather__get_forecast", "input_match": "Paris"}, "max": 1}
    data = corpus(called, mocks=MOCKS, allowed_tools=["Bash", "mcp__weather__get_forecast"], max_turns=5)
    case = validate_corpus(data, FILE, lambda _p: False).evals[0]
    assert case.mocks[0].tools[0].expect == {"city": "^[A-Z]"}
    assert (case.max_turns, case.allowed_tools) == (5, ("Bash", "mcp__weather__get_forecast"))
    [check] = case.assertions
    assert check_assertion(check, RUN).passed  # type: ignore[arg-type]
    assert check.text == "The agent calls mcp__weather__get_forecast whose input matches /Paris/ exactly once"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("assertion", "case", "where", "needle"),
    [
        ({"kind": "tool_count", "calls": {"tool": "Bash"}, "min": 2, "max": 1}, {}, "assertions[0].max", "below min"),
        ({"kind": "text_match", "pattern": "x", "source": "file"}, {}, "assertions[0].path", "required with source"),
        ({"kind": "text_match", "pattern": "x", "flags": "gx"}, {}, "assertions[0].flags", "only the flags"),
        ({"kind": "text_match", "pattern": "(x"}, {}, "assertions[0].pattern", "not a valid regular"),
        ({"kind": "tool_order", "before": "Bash", "after": {"tool": "Edit"}}, {}, "assertions[0].before", "object"),
        ({"kind": "file_glob", "glob": "../x"}, {}, "assertions[0].glob", "repo-relative glob"),
        ({"kind": "judged", "text": "The agent runs the tests", "weight": 0}, {}, "assertions[0].weight", "outside"),
        ("The agent runs the tests", {"max_turns": 0}, "max_turns", "1..1000"),
        ("The agent runs the tests", {"timeout_s": "5m"}, "timeout_s", "positive number of seconds"),
        ("The agent runs the tests", {"allowed_tools": "Bash"}, "allowed_tools", "array"),
        (
            "The agent runs the tests",
            {"mocks": [{"name": "w", "tools": [{"name": "t", "expect": {"city": "("}}]}]},
            "mocks[0].tools.t.expect.city",
            "not a valid regular",
        ),
        ("The agent runs the tests", {"mocks": [{"name": "w", "tools": [{"nam": "t"}]}]}, "mocks[0].tools.0", ""),
        (
            "The agent runs the tests",
            {"mocks": [{"name": "w", "tools": [{"name": "t\n[tool_call] shell"}]}]},
            "mocks[0]",
            "is not a server or tool name",
        ),
    ],
)
def test_bad_objects_and_case_terms_are_named_errors(assertion: Any, case: Any, where: str, needle: str) -> None:
    with pytest.raises(BadCorpus) as info:
        validate_corpus(corpus(assertion, **case), FILE, lambda _p: False)
    assert f"$.evals[0].{where}" in str(info.value) and needle in str(info.value), str(info.value)


@pytest.mark.parametrize(
    ("low", "high", "inside", "outside", "words"),
    [
        (0, 0, [0], [1], "exactly 0"),
        (2, 2, [2], [1, 3], "exactly 2"),
        (1, 3, [1, 2, 3], [0, 4], "1 to 3"),
        (1, None, [1, 2, 50], [0], "at least 1"),
    ],
)
def test_tool_and_http_counts_share_one_range_and_say_it_alike(
    low: int, high: int | None, inside: list[int], outside: list[int], words: str
) -> None:
    from schemas.checks_http import HttpCallCheck, HttpMatcher
    from worker.grading.http_checks import check_http_call

    tools = ToolCountCheck(text="t", calls=ToolMatcher(tool="Bash"), min=low, max=high)
    requests = HttpCallCheck(text="t", request=HttpMatcher(url="x"), min=low, max=high)
    for check in (tools, requests):
        assert all(check.admits(n) for n in inside) and not any(check.admits(n) for n in outside)
    counted = check_assertion(tools, RUN)  # RUN has two shell calls and no request
    assert counted.passed is tools.admits(2)
    assert f"2 matching calls of Bash, allowed {words}" in counted.evidence
    asked = check_http_call(requests, RUN)
    assert asked.passed is requests.admits(0)
    assert f"0 requests to /x/, allowed {words}" in asked.evidence
