"""The GitHub Copilot CLI adapter: its plan (offline, one model, the placeholder key, no repo
instructions), its JSON-lines stream read from hostile input without failing, and activation."""

from __future__ import annotations

import json
from pathlib import Path

from harnesses.base import PLACEHOLDER_KEY, HarnessRequest, Invoke
from harnesses.copilot_cli import REPO_CONFIG_DIRS, CopilotCli, read_copilot_json
from harnesses.repo_hiding import hidden_binds
from harnesses.stream_json import ERROR_PREFIX
from schemas.trajectory import AssistantEvent, ToolCallEvent, ToolResultEvent


def request() -> HarnessRequest:
    return HarnessRequest(
        binary="/run/copilot",
        model="openai/gpt-5",
        skill="greet",
        skill_files={"SKILL.md": b"# greet\n"},
        prompt="Greet.",
        invoke=Invoke.EXPLICIT,
        workspace="/workspace",
        home="/home/agent",
    )


def test_the_plan_is_offline_with_one_model_the_placeholder_key_and_no_repo_instructions() -> None:
    plan = CopilotCli().plan(request())
    assert plan.env["COPILOT_OFFLINE"] == "true" and plan.env["COPILOT_PROVIDER_API_KEY"] == PLACEHOLDER_KEY
    assert plan.env["COPILOT_MODEL"] == plan.env["COPILOT_AGENT_MODEL"] == "gpt-5"
    assert plan.argv[plan.argv.index("--model") + 1] == "gpt-5"
    assert {"--no-custom-instructions", "--disable-builtin-mcps", "--no-auto-update"} <= set(plan.argv)
    assert "--trust-folder" not in plan.argv
    assert set(plan.home_files) == {".copilot/skills/greet/SKILL.md"}


def test_the_repos_skill_and_agent_folders_are_hidden(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    for folder in (".github/skills", ".claude/skills", ".agents/skills", ".github/workflows"):
        (workspace / folder).mkdir(parents=True)
    binds = hidden_binds(REPO_CONFIG_DIRS, workspace, "/workspace", tmp_path)
    hidden = {binds[i + 2] for i in range(0, len(binds), 3)}
    assert hidden == {"/workspace/.github/skills", "/workspace/.claude", "/workspace/.agents"}


def test_the_stream_gives_calls_by_the_models_ids_results_errors_and_text_and_skips_junk() -> None:
    lines = [
        "not json",
        json.dumps([1, 2]),
        json.dumps({"type": "assistant.message", "data": "junk"}),
        json.dumps(
            {
                "type": "assistant.message",
                "data": {
                    "content": "Looking.",
                    "toolRequests": [
                        {"toolCallId": "c1", "name": "bash", "arguments": {"command": "ls"}},
                        {"toolCallId": "c2", "name": "view", "arguments": "not an object"},
                        "junk",
                    ],
                },
            }
        ),
        json.dumps(
            {
                "type": "tool.execution_complete",
                "data": {
                    "toolCallId": "c1",
                    "success": True,
                    "result": {"content": "a\nb"},
                    "shellExecution": {"exitCode": 0},
                },
            }
        ),
        json.dumps(
            {
                "type": "tool.execution_complete",
                "data": {"toolCallId": "c2", "success": False, "error": {"message": "no"}},
            }
        ),
        json.dumps({"type": "tool.execution_complete", "data": {"toolCallId": "c3", "success": "yes", "result": 5}}),
        json.dumps({"type": "result", "exitCode": 1}),
    ]
    parsed = read_copilot_json(lines)
    assert parsed.saw_result and parsed.result_is_error and parsed.usage.calls == 2
    assert [type(e).__name__ for e in parsed.events] == [
        "AssistantEvent",
        "ToolCallEvent",
        "ToolCallEvent",
        "ToolCallEvent",
        "ToolResultEvent",
        "ToolResultEvent",
        "ToolResultEvent",
    ]
    calls = [e for e in parsed.events if isinstance(e, ToolCallEvent)]
    assert [(c.call_id, c.name, c.arguments) for c in calls][:2] == [
        ("c1", "bash", {"command": "ls"}),
        ("c2", "view", {"input": "not an object"}),
    ]
    results = [e for e in parsed.events if isinstance(e, ToolResultEvent)]
    assert [(r.call_id, r.output, r.exit_code) for r in results] == [
        ("c1", "a\nb", 0),
        ("c2", ERROR_PREFIX + "no", None),
        ("c3", ERROR_PREFIX + "failed", None),
    ]
    assert isinstance(parsed.events[0], AssistantEvent) and parsed.events[0].text == "Looking."


def test_activation_is_a_skill_call_naming_it_or_a_read_of_its_skill_md() -> None:
    copilot = CopilotCli()
    call = ToolCallEvent(call_id="a", name="skill", arguments={"skill": "greet"})
    other = ToolCallEvent(call_id="b", name="skill", arguments={"skill": ["greet"]})
    read = ToolCallEvent(call_id="c", name="view", arguments={"path": "/h/.copilot/skills/greet/SKILL.md"})
    assert copilot.activated([call], "greet", "greet", False) and copilot.activated([read], "greet", "greet", False)
    assert not copilot.activated([other], "greet", "greet", False)
    assert [copilot.skills_in(e, frozenset({"greet"})) for e in (call, other, read)] == [["greet"], [], ["greet"]]
