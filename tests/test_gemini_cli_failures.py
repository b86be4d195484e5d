"""How a real Gemini CLI shard ends: a refused first call is infra, running out of turns (the proxy's
refusal, a Gemini API error to the harness) is behaviour: the same rules as for Claude Code."""

from __future__ import annotations

from typing import Any

import pytest

from harnesses.gemini_cli import GeminiCli
from schemas.errors import ExecutorFailed
from schemas.manifest import AgentBudget
from schemas.trajectory import EndReason, ToolCallEvent
from tests.test_harness_failures import run

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
MODEL = "gemini/gemini-2.5-pro"


def shell(command: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "run_shell_command", "arguments": {"command": command}}]}


def test_an_upstream_that_refuses_gemini_clis_first_call_is_executor_failed() -> None:
    with pytest.raises(ExecutorFailed) as err:
        run([{"status": 400, "error_message": "model not available"}], harness=GeminiCli(), model=MODEL)
    assert "before its first model response" in err.value.detail


def test_gemini_cli_running_out_of_turns_is_behaviour_graded_on_what_the_agent_did() -> None:
    replies = [shell("echo one"), shell("echo two"), shell("echo three")]
    trajectory = run(replies, AgentBudget(max_turns=2), harness=GeminiCli(), model=MODEL)
    assert trajectory.end_reason is EndReason.MAX_TURNS
    calls = [e.arguments["command"] for e in trajectory.events if isinstance(e, ToolCallEvent)]
    assert calls == ["echo one", "echo two"]
    assert trajectory.executor == "gemini-cli" and trajectory.usage.calls == 2
