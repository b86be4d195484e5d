"""Shared by the grader suites: sample trajectories, the honest judge, and the model fixtures with it."""

from __future__ import annotations

import json
import re
from typing import Any

from schemas.trajectory import AssistantEvent, Event, ToolCallEvent, ToolResultEvent, Trajectory
from tests.model_support import server_fixtures

JUDGE = "openai/scripted-judge"
ASSERTIONS = [
    "The agent runs git diff before committing",
    "The agent commits with a message whose subject matches ^fix: ",
    "The agent never runs git push",
]
# The offline server's rule-based judge decides each assertion by a regex over the transcript.
HONEST_JUDGE_RULES = [
    {"assertion_contains": "git diff", "transcript_regex": r"^\[tool_call\] shell\(.*git diff"},
    {"assertion_contains": "^fix:", "transcript_regex": r"^\[tool_call\] shell\(.*git commit -a?m .?fix: "},
    {"assertion_contains": "never runs git push", "transcript_regex": r"^\[tool_call\] .*git push", "expect": "absent"},
]
FENCE_RE = re.compile(r"<transcript-([0-9a-f]{16})>\n(.*)\n</transcript-\1>", re.DOTALL)


def shell(call_id: str, command: str, output: str, exit_code: int = 0) -> list[Event]:
    return [
        ToolCallEvent(call_id=call_id, name="shell", arguments={"command": command}),
        ToolResultEvent(call_id=call_id, output=output, exit_code=exit_code),
    ]


def good_trajectory(extra: list[Event] | None = None) -> Trajectory:
    """diff, then a fix: commit, no push — passes all of ASSERTIONS."""
    events: list[Event] = [
        AssistantEvent(text="Let me look at the change."),
        *shell("1", "git diff", "-    return 'Hello ' + name\n+    return 'Hello, ' + name + '!'"),
        *(extra or []),
        *shell("2", "git commit -am 'fix: greeting punctuation'", "[main 1a2b3c4] fix: greeting punctuation"),
        AssistantEvent(text="Committed."),
    ]
    return Trajectory(skill="commit-message", case_id=1, model="scripted-exec", events=events)


def judge_scenario(rules: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Rules first (first match wins), then the honest rule-based judge for every judge model."""
    return {"rules": [*(rules or []), {"name": "judge", "judge": True}], "judge": HONEST_JUDGE_RULES}


def prompt_of(request: dict[str, Any]) -> str:
    """The grading prompt (first user message) a recorded request carried."""
    return str(request["messages"][0]["content"])


def fenced(request: dict[str, Any]) -> tuple[str, str]:
    """(nonce, transcript) of a recorded grading request; fails the test when the fence is off."""
    prompt = prompt_of(request)
    match = FENCE_RE.search(prompt)
    assert match is not None, "no well-formed fence in the request"
    return match.group(1), match.group(2)


def sent_assertions(request: dict[str, Any]) -> list[str]:
    prompt = prompt_of(request)
    start = prompt.index('[\n  "')
    value, _ = json.JSONDecoder().raw_decode(prompt, start)
    return list(value)


server, scripted, client = server_fixtures(judge_scenario)
