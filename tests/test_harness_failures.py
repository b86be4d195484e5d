"""How a real Claude Code shard ends: infra only when the proxy's record says so, behaviour otherwise."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest

from harnesses.base import Harness
from harnesses.claude_code import ClaudeCode
from harnesses.codex import Codex
from schemas.corpus import EvalCase
from schemas.errors import ExecutorFailed
from schemas.manifest import AgentBudget
from schemas.model_config import ModelLimits
from schemas.status import SandboxMode
from schemas.trajectory import EndReason, ToolCallEvent, Trajectory
from testkit.offline_server import OfflineModelServer
from worker.executor.harness import HarnessShard, harness_limits, run_harness
from worker.sandbox import SandboxLimits, open_sandbox

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
MODEL = "anthropic/claude-sonnet-4-5"


def bash(command: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "Bash", "arguments": {"command": command, "description": "run"}}]}


def run(
    replies: list[dict[str, Any]],
    budget: AgentBudget | None = None,
    harness: Harness | None = None,
    model: str = MODEL,
) -> Trajectory:
    with OfflineModelServer({"rules": [{"contains": "Do the task", "replies": replies}]}) as server:
        workspace = Path(tempfile.mkdtemp(prefix="harness-failure-"))
        (workspace / "skills" / "task").mkdir(parents=True)
        (workspace / "skills" / "task" / "SKILL.md").write_text("# task\n")
        sandbox = open_sandbox(workspace, SandboxMode.BWRAP, harness_limits(SandboxLimits(), wall_clock_s=120))
        case = EvalCase(id=1, prompt="Do the task.", expected_output="", files=(), assertions=())
        return run_harness(
            HarnessShard(harness or ClaudeCode(), model, "task", case, budget=budget or AgentBudget(wall_clock_s=120)),
            sandbox=sandbox,
            limits=ModelLimits(name=model, api_base=server.base_url),
            limiter=None,
        )


def test_an_upstream_that_refuses_the_first_call_is_executor_failed_not_a_behavioural_result() -> None:
    with pytest.raises(ExecutorFailed) as err:
        run([{"status": 400, "error_message": "model not available"}])
    assert "before its first model response" in err.value.detail


def test_running_out_of_turns_is_behaviour_graded_on_what_the_agent_did() -> None:
    trajectory = run([bash("echo one"), bash("echo two"), bash("echo three")], AgentBudget(max_turns=2))
    assert trajectory.end_reason is EndReason.MAX_TURNS
    assert [e.arguments["command"] for e in trajectory.events if isinstance(e, ToolCallEvent)] == [
        "echo one",
        "echo two",
    ]


def test_an_agent_that_kills_its_harness_after_the_first_answer_is_behaviour_not_infra() -> None:
    trajectory = run([bash("kill -9 $PPID; sleep 5"), {"text": "never reached"}])
    calls = [e for e in trajectory.events if isinstance(e, ToolCallEvent)]
    assert [c.arguments["command"] for c in calls] == ["kill -9 $PPID; sleep 5"]
    assert trajectory.usage.calls == 1


def test_claude_codes_own_sleep_after_a_429_is_recorded_as_the_fleets_wait() -> None:
    # Claude Code gets the 429 with its Retry-After and sleeps before it retries; nothing of it
    # waits in the proxy, yet the sleep is the provider's rate limit, not the agent's time.
    trajectory = run([{**bash("echo hi"), "status": 429, "retry_after": 3, "times": 1}, {"text": "Done."}])
    assert trajectory.end_reason is EndReason.COMPLETED
    assert [e.arguments["command"] for e in trajectory.events if isinstance(e, ToolCallEvent)] == ["echo hi"]
    assert 2.5 <= trajectory.waited_s < 3.5  # its sleep, at most the 3 s it was told


def test_codexs_own_sleep_after_a_429_is_recorded_as_the_fleets_wait() -> None:
    shell = {"tool_calls": [{"name": "shell", "arguments": {"command": "echo hi"}}]}
    trajectory = run(
        [{**shell, "status": 429, "retry_after": 2, "times": 1}, {"text": "Done."}],
        harness=Codex(),
        model="openai/gpt-5-codex",
    )
    assert trajectory.end_reason is EndReason.COMPLETED
    assert len([e for e in trajectory.events if isinstance(e, ToolCallEvent)]) == 1
    assert 1.5 <= trajectory.waited_s < 2.5  # its sleep, at most the 2 s it was told
