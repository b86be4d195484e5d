"""End to end with the real Claude Code binary: the fixture plugin's suite, its MCP server replaced by
the mock (run inside the sandbox through ``--mcp-config``), the allowed tools only, graded and scored
as plugin eval scores it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from testkit.offline_server import OfflineModelServer
from tests.e2e_support import Env, git_init, reports, scenario
from tests.harness_e2e import call, canary_rule, model_fixtures

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

FIXTURE = Path(__file__).parent / "fixtures" / "plugin-weather"
MODEL = "anthropic/claude-sonnet-4-5"
RULES = [
    canary_rule("Bash"),
    {
        "name": "sunny-day",
        "contains": "weather in Paris tomorrow",
        "replies": [
            call("mcp__weather__get_forecast", city="Paris", day="tomorrow"),
            call("Write", file_path="/workspace/forecast.txt", content="Paris: sunny\n"),
            call("Bash", command="cat forecast.txt", description="check"),
            {"text": "Tomorrow in Paris it will be sunny."},
        ],
    },
    {"name": "oslo", "contains": "raining in Oslo", "replies": [{"text": "It is sunny in Oslo."}]},
]
JUDGE = [{"assertion_contains": "forecast for Paris", "transcript_regex": r"^\[assistant\].*sunny"}]


server, env = model_fixtures(scenario(RULES, JUDGE))


def test_claude_code_calls_the_mock_in_the_sandbox_and_the_suite_is_scored(
    env: Env, server: OfflineModelServer, tmp_path: Path
) -> None:
    repo = tmp_path / "plugin-weather"
    shutil.copytree(FIXTURE, repo)
    # The plugin's own server leaves server-ran.txt behind if it ever starts: it must not.
    never = "---\ntype: file_exists\npath: server-ran.txt\nexists: false\n---\nThe repo's MCP server never runs.\n"
    (repo / "evals" / "sunny-day" / "graders" / "z-server-never-ran.md").write_text(never)
    git_init(repo)

    res = env.run(repo, "--all-evals", "--executor", "claude-code", models=(MODEL,))

    doc, _ = reports(env.out, "forecast", res.run_id)
    [current] = [s for s in doc["variants"] if s["variant"] == "current"]
    runs = {r["case_id"]: r for r in current["runs"]}
    assert {i: r["state"] for i, r in runs.items()} == {1: "graded", 2: "graded"}, res.stdout + res.stderr
    # Claude Code reached the mock server: its answer went back to the model as the tool's result.
    sent = json.dumps([b.get("messages") for b in server.requests() if b.get("model") == "claude-sonnet-4-5"])
    assert "Paris tomorrow: sunny, 24 \\u00b0C." in sent
    assert [v["passed"] for v in runs[2]["verdicts"]] == [True] * 9
    # Only the allowed tools, and the mocked one, were offered in the case that names them.
    offered = [sorted(t["name"] for t in b.get("tools") or []) for b in server.requests()]
    assert ["Bash", "Read", "Write", "mcp__weather__get_forecast"] in offered
    [scores] = current["plugin_scores"]
    assert [round(c["score"], 6) for c in scores["cases"]] == [round(1 / 3, 6), 1.0]
