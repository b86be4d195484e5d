"""How a real Claude Code shard ends: infra only when the proxy's record says so, behaviour otherwise."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest

from harnesses.base import FORWARDER_PORT, PLACEHOLDER_KEY, Harness
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
    files: dict[str, str] | None = None,
    probe: bool = False,
    rules: list[dict[str, Any]] | None = None,
) -> Trajectory:
    """Run the task case with ``replies`` scripted; ``files`` (path, text) written into the workspace
    first; ``probe``: run it as the harness's canary; ``rules``: the server's other rules, first."""
    with OfflineModelServer({"rules": [*(rules or []), {"contains": "Do the task", "replies": replies}]}) as server:
        workspace = Path(tempfile.mkdtemp(prefix="harness-failure-"))
        (workspace / "skills" / "task").mkdir(parents=True)
        (workspace / "skills" / "task" / "SKILL.md").write_text("# task\n")
        for name, text in (files or {}).items():
            (workspace / name).parent.mkdir(parents=True, exist_ok=True)
            (workspace / name).write_text(text)
        sandbox = open_sandbox(workspace, SandboxMode.BWRAP, harness_limits(SandboxLimits(), wall_clock_s=120))
        case = EvalCase(id=1, prompt="Do the task.", expected_output="", files=(), assertions=())
        budget = budget or AgentBudget(wall_clock_s=120)
        return run_harness(
            HarnessShard(harness or ClaudeCode(), model, "task", case, budget=budget, probe=probe),
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


KILL_HOOK = {
    ".claude-plugin/plugin.json": json.dumps({"name": "p", "version": "0.0.1"}),
    "hooks/hooks.json": json.dumps(
        {"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": "sh ${CLAUDE_PLUGIN_ROOT}/h.sh"}]}]}}
    ),
    "h.sh": "for p in /proc/[0-9]*; do case $(cat $p/comm) in harness*) kill -9 ${p#/proc/};; esac; done\n",
}
"""A plugin whose hook (the repo's code, run by Claude Code before its first model call) kills it."""


def test_a_harness_its_plugin_hook_kills_before_any_model_call_is_behaviour_but_infra_in_its_canary() -> None:
    trajectory = run([bash("echo never")], files=KILL_HOOK)
    assert trajectory.end_reason is EndReason.NO_MODEL_CALL
    assert trajectory.events == [] and trajectory.usage.calls == 0
    with pytest.raises(ExecutorFailed) as err:  # the canary runs nothing of a repo: a silent harness is broken
        run([bash("echo never")], files=KILL_HOOK, probe=True)
    assert "before its first model response, no model call" in err.value.detail


def test_an_agent_s_side_requests_the_upstream_fails_do_not_make_its_killed_harness_infra() -> None:
    side = (
        f"curl -s http://127.0.0.1:{FORWARDER_PORT}/v1/messages -H 'x-api-key: {PLACEHOLDER_KEY}' "
        "-H 'anthropic-version: 2023-06-01' -H 'content-type: application/json' "
        '-d \'{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"SIDE-FLOOD-7731"}]}\''
    )
    command = f"{side}; {side}; kill -9 $PPID; sleep 5"
    replies = [bash(command), {"text": "never reached"}]
    trajectory = run(replies, rules=[{"contains": "SIDE-FLOOD-7731", "replies": [{"status": 429, "retry_after": 1}]}])
    # Graded on what it did (one call), not executor-failed: the 429s answered the agent's own requests.
    assert [e.arguments["command"] for e in trajectory.events if isinstance(e, ToolCallEvent)] == [command]
    assert trajectory.usage.calls == 1
