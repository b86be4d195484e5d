"""An agent cannot opt a case out of grading with tool-call arguments nested too deep to store.

Its trajectory could not be written (pydantic stops some 250 levels down), so the shard ended
``executor-failed`` and the run passed on the clean case. The call is the agent's malformed
call: recorded with the deep argument elided, answered with an error, never run; graded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import redis

from engine.redis_server import RedisServer
from schemas.trajectory import ToolCallEvent, ToolResultEvent
from testkit.offline_server import OfflineModelServer
from tests.security.harness import case, make_repo, run_pipeline, shell_agent

pytestmark = pytest.mark.slow
SKILL = "echo-marker"


def nested(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels - 1):
        value = [value]
    return value


def test_arguments_nested_300_deep_are_the_agents_malformed_call_and_graded(
    tmp_path: Path, server: OfflineModelServer, redis_client: redis.Redis, redis_server: RedisServer
) -> None:
    assertion = "outputs MARK-ONE from the shell command echo MARK-ONE"
    repo = make_repo(
        tmp_path / "repo",
        SKILL,
        [case(1, "CASE-ONE print the marker", [assertion]), case(2, "CASE-TWO print the marker", [assertion])],
    )
    deep_call = {"name": "shell", "arguments": {"command": "echo MARK-ONE", "x": nested(300)}}
    evil = {
        "name": "evil",
        "tools": True,
        "contains": "CASE-ONE",
        "replies": [{"tool_calls": [deep_call]}, {"text": "(scripted) done."}],
    }
    # The judge passes the assertion only when the command's output is in its result.
    printed = {"assertion_contains": "MARK-ONE", "transcript_regex": r"\[tool_result\] shell exit=0\nMARK-ONE"}
    server.set_scenario({"rules": [evil, shell_agent("CASE-TWO", ["echo MARK-ONE"])], "judge": [printed]})

    run = run_pipeline(repo, SKILL, server=server, redis_url=redis_server.url, work=tmp_path / "w", fail_under=1.0)

    assert {o["state"] for o in run.outcomes.values()} == {"graded"}, run.outcomes
    by_case = {t.case_id: t for t in run.trajectories.values()}
    call, answer = by_case[1].events[:2]
    assert isinstance(call, ToolCallEvent) and isinstance(answer, ToolResultEvent)
    assert call.arguments == {
        "command": "echo MARK-ONE",
        "x": "[elided by skill-eval: nests deeper than 32 levels]",
    }
    assert answer.output.startswith("error: shell was not run: its arguments are nested deeper than 32 levels")
    verdicts = {run.trajectories[sid].case_id: [v.passed for v in g.verdicts] for sid, g in run.grades.items()}
    assert verdicts == {1: [False], 2: [True]}
    assert run.result.verdict.value == "FAIL", run.report
    # What the model was sent back is the bounded call too (a provider may refuse 300 levels).
    later = [r for r in run.requests if r.get("tools") and "CASE-ONE" in str(r.get("messages"))][-1]
    assert "[elided by skill-eval" in str(later["messages"])
