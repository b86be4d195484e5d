"""Harness adapters, pure: executor names, command lines, staging, stream parsing, activation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harnesses.base import PLACEHOLDER_KEY, HarnessRequest, Invoke, skill_body_marker
from harnesses.claude_code import ClaudeCode
from harnesses.codex import Codex, read_codex_json
from harnesses.model_record import ModelToolCall, ModelTurn, ProxyRecord, parse_model_response
from harnesses.registry import check_executor, harness_for
from schemas.errors import ConfigError
from schemas.trajectory import AssistantEvent, ToolCallEvent, ToolResultEvent
from testkit.anthropic_api import message_body, sse_events
from testkit.responses_api import response_body
from testkit.responses_api import sse_events as response_events


def request(**overrides: object) -> HarnessRequest:
    values: dict[str, object] = {
        "binary": "/run/bin/harness",
        "model": "anthropic/claude-sonnet-4-5",
        "skill": "greet",
        "skill_files": {"SKILL.md": b"# greet\n", "agents/helper.md": b"# helper\n"},
        "prompt": "Greet the world.",
        "invoke": Invoke.EXPLICIT,
        "workspace": "/workspace",
        "home": "/home/agent",
        **overrides,
    }
    return HarnessRequest(**values)  # type: ignore[arg-type]


def test_an_unknown_executor_name_is_a_config_error_that_lists_the_known_ones() -> None:
    for good in ("agent", "claude-code", "codex", "cmd:claude -p"):
        assert check_executor(good) == good
    with pytest.raises(ConfigError) as err:
        check_executor("claude_code")
    assert "CONFIG_ERROR" in str(err.value) and "claude-code" in str(err.value) and "codex" in str(err.value)
    with pytest.raises(ConfigError):
        check_executor("cmd:  ")
    assert harness_for("agent") is None and harness_for("codex") is not None


def test_claude_code_stages_the_skill_in_the_private_home_and_pins_one_model_and_no_outside_config() -> None:
    plan = ClaudeCode().plan(request())
    assert set(plan.home_files) == {".claude/skills/greet/SKILL.md", ".claude/skills/greet/agents/helper.md"}
    argv = list(plan.argv)
    for flag in ("--dangerously-skip-permissions", "--strict-mcp-config", "--verbose"):
        assert flag in argv
    assert argv[argv.index("--setting-sources") + 1] == "user"  # the repo's .claude/settings.json and hooks never run
    assert argv[argv.index("--model") + 1] == "claude-sonnet-4-5"
    assert plan.env["ANTHROPIC_API_KEY"] == PLACEHOLDER_KEY
    for pinned in ("ANTHROPIC_DEFAULT_HAIKU_MODEL", "CLAUDE_CODE_SUBAGENT_MODEL"):
        assert plan.env[pinned] == "claude-sonnet-4-5"
    assert plan.env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1" and plan.env["DISABLE_TELEMETRY"] == "1"
    assert plan.env["CLAUDE_CODE_DISABLE_CLAUDE_MDS"] == "1"  # the repo's CLAUDE.md files never enter the prompt
    assert plan.stdin.startswith('Use the "greet" skill')


def test_implicit_invocation_gives_the_bare_prompt_and_a_plugin_repo_loads_with_plugin_dir() -> None:
    plan = ClaudeCode().plan(request(invoke=Invoke.IMPLICIT))
    assert plan.stdin == "Greet the world.\n"
    plugin = ClaudeCode().plan(request(plugin_name="zuvo"))
    assert plugin.argv[plugin.argv.index("--plugin-dir") + 1] == "/workspace"
    assert plugin.skill_ref == "zuvo:greet" and plugin.home_files == {}
    codex = Codex().plan(request(invoke=Invoke.EXPLICIT, model="openai/gpt-5-codex"))
    assert codex.stdin.startswith("$greet ") and ".agents/skills/greet/SKILL.md" in codex.home_files
    assert 'wire_api="responses"' in " ".join(codex.argv) and codex.env["SKILL_EVAL_PROXY_KEY"] == PLACEHOLDER_KEY
    assert codex.argv[codex.argv.index("project_doc_max_bytes=0") - 1] == "-c"  # no AGENTS.md in the prompt


def test_codex_runs_its_binary_with_the_repos_skill_folder_hidden(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / ".agents" / "skills").mkdir(parents=True)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    binary = tmp_path / "codex"
    assert Codex().prepare(binary, workspace, "/workspace", scratch) == (
        binary,
        ["--ro-bind", str(scratch / "empty"), "/workspace/.agents"],
    )


def test_activation_is_a_skill_call_naming_the_skill_or_a_read_of_its_skill_md() -> None:
    cc = ClaudeCode()

    def call(name: str, **arguments: object) -> list[ToolCallEvent]:
        return [ToolCallEvent(call_id="1", name=name, arguments=arguments)]

    assert cc.activated(call("Skill", skill="greet"), "greet", "greet", False)
    assert cc.activated(call("Skill", skill="zuvo:greet"), "greet", "zuvo:greet", False)
    assert cc.activated(call("Read", file_path="/home/agent/.claude/skills/greet/SKILL.md"), "greet", "greet", False)
    assert not cc.activated(call("Skill", skill="other"), "greet", "greet", True)
    assert not cc.activated(call("Bash", command="echo greet"), "greet", "greet", False)
    assert Codex().activated([], "greet", "greet", True) and not Codex().activated([], "greet", "greet", False)
    assert skill_body_marker(b"---\nname: x\n---\n# greet\n\nRun echo hello-<thing>.\n").startswith("# greet Run")


def test_the_proxy_record_parses_streamed_and_plain_responses_of_both_protocols() -> None:
    reply = {"text": "Listing.", "tool_calls": [{"name": "Bash", "arguments": {"command": "ls " + "y" * 50}}]}
    message = message_body(reply, "claude-sonnet-4-5", "prompt text", 7)
    for body in (json.dumps(message).encode(), b"".join(sse_events(message))):
        turn = parse_model_response("anthropic", body)
        assert turn is not None and turn.texts == ("Listing.",)
        assert turn.tool_calls == (ModelToolCall("toolu_000007_0", "Bash", {"command": "ls " + "y" * 50}),)
        assert turn.prompt_tokens > 0 and turn.completion_tokens > 0
    offered = {"tools": [{"type": "function", "name": "exec_command"}]}
    response = response_body({"tool_calls": [{"name": "shell", "arguments": {"command": "ls"}}]}, "m", offered, 3)
    for body in (json.dumps(response).encode(), b"".join(response_events(response))):
        turn = parse_model_response("openai", body)
        assert turn is not None and turn.tool_calls == (ModelToolCall("call_000003_0", "exec_command", {"cmd": "ls"}),)
    assert parse_model_response("anthropic", b'{"type": "error"}') is None


def test_codex_commands_pair_with_the_proxied_shell_calls_by_order_and_a_forged_one_is_rejected() -> None:
    lines = [
        json.dumps(
            {
                "type": "item.completed",
                "item": {
                    "id": "item_1",
                    "type": "command_execution",
                    "command": "/bin/bash -lc 'tr '\"'\"'\\0'\"'\"' x'",
                    "aggregated_output": "out",
                    "exit_code": 0,
                },
            }
        ),
        json.dumps(
            {
                "type": "item.completed",
                "item": {
                    "id": "item_2",
                    "type": "command_execution",
                    "command": "/bin/bash -lc 'rm -rf /'",
                    "aggregated_output": "gone",
                    "exit_code": 0,
                },
            }
        ),
        json.dumps({"type": "turn.completed", "usage": {"input_tokens": 5, "output_tokens": 2}}),
    ]
    parsed = read_codex_json(lines)
    assert parsed.saw_result and parsed.usage.total_tokens == 7
    record = ProxyRecord(
        turns=[ModelTurn(tool_calls=(ModelToolCall("call_1", "exec_command", {"cmd": "tr '\\0' x"}),))]
    )
    checked = Codex().cross_check(parsed.events, record)
    calls = [(e.kind, e.call_id) for e in checked.events if isinstance(e, ToolCallEvent | ToolResultEvent)]
    assert calls == [("tool_call", "call_1"), ("tool_result", "call_1")]
    assert len(checked.rejected) == 1 and "rm -rf" in checked.rejected[0]
    # The rejected command ran: the judge still reads it, as a note that is no verified call.
    (note,) = [e for e in checked.events if isinstance(e, AssistantEvent)]
    assert "not a verified tool call" in note.text and "rm -rf /" in note.text and "gone" in note.text


def test_a_skill_folder_linked_outside_the_workspace_stages_nothing_and_linked_files_are_skipped(
    tmp_path: Path,
) -> None:
    from worker.executor.harness_stage import skill_files

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "SKILL.md").write_text("secret from the host")
    workspace = tmp_path / "ws"
    (workspace / "skills" / "real").mkdir(parents=True)
    (workspace / "skills" / "real" / "SKILL.md").write_text("# real")
    (workspace / "skills" / "real" / "leak.md").symlink_to(outside / "SKILL.md")
    (workspace / "skills" / "linked").symlink_to(outside)
    assert skill_files(workspace / "skills" / "linked", workspace) == {}
    assert skill_files(workspace / "skills" / "real", workspace) == {"SKILL.md": b"# real"}
