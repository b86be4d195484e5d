"""HTTP mocks under the real Claude Code binary: its Bash commands reach the mock proxy through
``HTTPS_PROXY`` while its own model traffic stays on the loopback forwarder (``NO_PROXY``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harnesses.claude_code import ClaudeCode
from schemas.corpus import EvalCase
from schemas.http_mocks import HttpMock
from schemas.model_config import ModelLimits
from schemas.status import SandboxMode
from schemas.trajectory import ToolResultEvent
from testkit.offline_server import OfflineModelServer
from worker.executor.harness import HarnessShard, harness_limits, run_harness
from worker.grading.view import judge_view
from worker.sandbox import SandboxLimits, open_sandbox

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

MODEL = "anthropic/claude-sonnet-4-5"
COMMAND = "curl -sS https://api.example.com/v1/weather?city=Paris; echo; curl -sS -o /dev/null -w '%{http_code}' https://other.example.org/"


@pytest.fixture
def server() -> Iterator[OfflineModelServer]:
    bash = {"name": "Bash", "arguments": {"command": COMMAND, "description": "fetch"}}
    rules = [{"contains": "Fetch the weather", "replies": [{"tool_calls": [bash]}, {"text": "It is sunny."}]}]
    with OfflineModelServer({"rules": rules}) as s:
        yield s


def test_claude_codes_commands_get_the_mocks_and_every_request_is_recorded(
    server: OfflineModelServer, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    (workspace / "skills" / "hi").mkdir(parents=True)
    (workspace / "skills" / "hi" / "SKILL.md").write_text("---\nname: hi\ndescription: says hi\n---\n# hi\n")
    sandbox = open_sandbox(workspace, SandboxMode.BWRAP, harness_limits(SandboxLimits(), wall_clock_s=120))
    (tmp_path / "private").mkdir()
    mocks = (HttpMock(url=r"^https://api\.example\.com/v1/weather\?city=Paris$", body='{"sky": "sunny"}'),)
    case = EvalCase(
        id=1, prompt="Fetch the weather for Paris.", expected_output="", files=(), assertions=(), http_mocks=mocks
    )
    limits = ModelLimits(name=MODEL, api_base=server.base_url)

    trajectory = run_harness(
        HarnessShard(ClaudeCode(), MODEL, "hi", case),
        sandbox=sandbox,
        limits=limits,
        limiter=None,
        tmp_parent=tmp_path / "private",
    )

    [result] = [e for e in trajectory.events if isinstance(e, ToolResultEvent)]
    assert result.output.strip().splitlines() == ['{"sky": "sunny"}', "403"]
    assert [(c.url, c.status, c.mocked) for c in trajectory.http_calls] == [
        ("https://api.example.com/v1/weather?city=Paris", 200, True),
        ("https://other.example.org/", 403, False),
    ]  # and nothing of the harness's own traffic: its model calls went to the loopback forwarder
    assert '[http_call] GET "https://other.example.org/" -> 403 refused' in judge_view(trajectory).text
