"""Attack: an agent that runs its own tool loop fills the workspace past its quota.

The built-in agent's workspace is measured after every tool call; a harness (the real Claude
Code here) or a ``cmd:`` executor runs its whole loop inside one sandboxed command, and was
never measured: 210,000 entries against a 200,000-entry quota ended ``completed`` and were
graded, on a workspace that lives in memory. Now every executor's workspace is watched while
its command runs (the command is stopped past the quota) and measured again after it; either
way the shard ends ``workspace-quota``, the agent's doing (graded), never infra.

The quotas are lowered so the attack stays cheap; the entries and bytes written exceed them.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from harnesses.claude_code import ClaudeCode
from schemas.corpus import EvalCase
from schemas.model_config import ModelLimits
from schemas.status import SandboxMode
from schemas.trajectory import EndReason, ToolCallEvent, Trajectory
from testkit.offline_server import OfflineModelServer
from worker.executor.external import ExternalExecutor, external_limits, run_external
from worker.executor.harness import HarnessShard, harness_limits, run_harness
from worker.executor.prompt import ExecutorInputs
from worker.sandbox import SandboxLimits, open_sandbox

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

MODEL = "anthropic/claude-sonnet-4-5"
QUOTA = SandboxLimits(workspace_files=2_000, workspace_mb=20)
MANY = "mkdir many && cd many && seq 1 3000 | xargs touch && cd .. && echo hello > hello.txt"
LINGER_S = 240
"""How long each attack sleeps after filling the workspace: a watched run ends long before."""


def _workspace(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    (workspace / "skills" / "hi").mkdir(parents=True)
    (workspace / "skills" / "hi" / "SKILL.md").write_text("---\nname: hi\ndescription: says hi\n---\n# hi\n")
    return workspace


def _claude_code(server: OfflineModelServer, tmp_path: Path, command: str) -> tuple[Trajectory, float]:
    bash = {"name": "Bash", "arguments": {"command": command, "description": "fill", "timeout": 600_000}}
    server.set_scenario({"rules": [{"contains": "QUOTA-ATTACK", "replies": [{"tool_calls": [bash]}, {"text": "ok"}]}]})
    limits = harness_limits(QUOTA, wall_clock_s=LINGER_S * 2)
    sandbox = open_sandbox(_workspace(tmp_path), SandboxMode.BWRAP, limits)
    private = tmp_path / "private"
    private.mkdir()
    case = EvalCase(id=1, prompt="QUOTA-ATTACK write hello.txt", expected_output="", files=(), assertions=())
    started = time.monotonic()
    trajectory = run_harness(
        HarnessShard(ClaudeCode(), MODEL, "hi", case),
        sandbox=sandbox,
        limits=ModelLimits(name=MODEL, api_base=server.base_url),
        limiter=None,
        tmp_parent=private,
    )
    return trajectory, time.monotonic() - started


def test_a_harness_agent_that_makes_more_entries_than_the_quota_ends_workspace_quota(
    server: OfflineModelServer, tmp_path: Path
) -> None:
    trajectory, _ = _claude_code(server, tmp_path, MANY)

    assert trajectory.end_reason is EndReason.WORKSPACE_QUOTA
    assert any(isinstance(e, ToolCallEvent) and "xargs touch" in str(e.arguments) for e in trajectory.events)
    assert "over its 2000 quota" in trajectory.model_dump_json()


def test_a_harness_agent_filling_the_workspace_is_stopped_while_it_runs(
    server: OfflineModelServer, tmp_path: Path
) -> None:
    fill = f"for i in $(seq 1 30); do head -c 1000000 /dev/zero > junk$i; done; sleep {LINGER_S}; echo still-''running"

    trajectory, took = _claude_code(server, tmp_path, fill)

    assert trajectory.end_reason is EndReason.WORKSPACE_QUOTA
    assert took < LINGER_S, "the harness ran on past the quota until its command ended"
    assert "still-running" not in trajectory.model_dump_json()
    assert "over its 20 MB quota" in trajectory.model_dump_json()


def test_a_harness_agent_filling_its_private_home_is_stopped_as_if_it_were_the_workspace(
    server: OfflineModelServer, tmp_path: Path
) -> None:
    """The harness's HOME is a host folder bound into the sandbox, next to the workspaces."""
    fill = f"head -c 30000000 /dev/zero > ~/junk; sleep {LINGER_S}"

    trajectory, took = _claude_code(server, tmp_path, fill)

    assert trajectory.end_reason is EndReason.WORKSPACE_QUOTA
    assert took < LINGER_S, "the harness ran on past the quota until its command ended"


_RESULT = json.dumps({"type": "result", "subtype": "success", "is_error": False, "num_turns": 1, "result": "ok"})


@pytest.mark.parametrize(
    ("fill", "said"),
    [(MANY, "over its 2000 quota"), ("head -c 30000000 /dev/zero > junk", "over its 20 MB quota")],
    ids=["entries", "bytes"],
)
def test_a_cmd_executor_filling_the_workspace_is_stopped_and_ends_workspace_quota(
    tmp_path: Path, fill: str, said: str
) -> None:
    command = f"cat >/dev/null; {fill}; sleep {LINGER_S}; echo '{_RESULT}'"
    sandbox = open_sandbox(_workspace(tmp_path), SandboxMode.BWRAP, external_limits(QUOTA, wall_clock_s=LINGER_S * 2))
    case = EvalCase(id=1, prompt="p", expected_output="", files=(), assertions=())
    started = time.monotonic()

    trajectory = run_external(ExternalExecutor(command), ExecutorInputs("hi", "", {}, case), sandbox=sandbox)

    assert trajectory.end_reason is EndReason.WORKSPACE_QUOTA
    assert time.monotonic() - started < LINGER_S
    assert said in trajectory.model_dump_json()
