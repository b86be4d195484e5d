"""The Qwen Code adapter: its plan (one model everywhere, no key, the repo's configuration
hidden), activation through its skill tool, and results taken from what the harness sent the
model, read from hostile request bodies without failing."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from harnesses.base import PLACEHOLDER_KEY, HarnessRequest, Invoke
from harnesses.chat_completions import tool_messages
from harnesses.crosscheck import CheckedEvents, with_sent_outputs
from harnesses.model_record import ModelToolCall, ModelTurn, ProxyRecord
from harnesses.qwen_code import AUXILIARY_MODELS, BASH_ENV_FILE, QwenCode
from harnesses.stream_json import ERROR_PREFIX
from schemas.trajectory import ToolCallEvent, ToolResultEvent


def request() -> HarnessRequest:
    return HarnessRequest(
        binary="/run/node",
        model="openai/gpt-5",
        skill="greet",
        skill_files={"SKILL.md": b"# greet\n"},
        prompt="Greet.",
        invoke=Invoke.EXPLICIT,
        workspace="/workspace",
        home="/home/agent",
        other_skills={"pdf": {"SKILL.md": b"# pdf\n"}},
    )


def test_the_plan_names_one_model_everywhere_the_placeholder_key_and_only_the_staged_skills() -> None:
    plan = QwenCode().plan(request())
    settings = json.loads(plan.home_files[".qwen/settings.json"])
    assert settings["model"]["name"] == "gpt-5" and all(settings[k] == "gpt-5" for k in AUXILIARY_MODELS)
    assert plan.env["OPENAI_MODEL"] == "gpt-5" and plan.env["OPENAI_API_KEY"] == PLACEHOLDER_KEY
    assert set(settings["skills"]["disabledLevels"]) == {"project", "extension", "bundled"}
    assert settings["context"]["fileName"].startswith(".qwen/")  # only inside the hidden folder
    assert {".qwen/skills/greet/SKILL.md", ".qwen/skills/pdf/SKILL.md"} <= set(plan.home_files)
    assert plan.argv[plan.argv.index("--model") + 1] == "gpt-5" and "--yolo" in plan.argv


def test_the_repos_qwen_folder_is_hidden_but_a_symlink_out_of_the_workspace_is_not_followed(tmp_path: Path) -> None:
    workspace, outside = tmp_path / "ws", tmp_path / "outside"
    (workspace / ".qwen").mkdir(parents=True)
    outside.mkdir()
    node, binds = QwenCode().prepare(tmp_path / "pkg" / "cli-entry.js", workspace, "/workspace", tmp_path)
    assert node.name.startswith("node") and binds[-3:] == ["--ro-bind", str(tmp_path / "empty"), "/workspace/.qwen"]
    (workspace / ".qwen").rmdir()
    (workspace / ".qwen").symlink_to(outside)
    _node, binds = QwenCode().prepare(tmp_path / "pkg" / "cli-entry.js", workspace, "/workspace", tmp_path)
    assert binds == ["--ro-bind", str(tmp_path / "pkg"), "/run/skill-eval-qwen"]


def test_activation_is_a_skill_call_naming_it_directly_or_through_its_deferred_tool_runner() -> None:
    qwen = QwenCode()
    direct = ToolCallEvent(call_id="a", name="skill", arguments={"skill": "greet"})
    deferred = ToolCallEvent(call_id="b", name="tool_call", arguments={"name": "skill", "arguments": {"skill": "pdf"}})
    hostile = ToolCallEvent(call_id="c", name="tool_call", arguments={"name": "skill", "arguments": "greet"})
    read = ToolCallEvent(call_id="d", name="read_file", arguments={"file_path": "/h/.qwen/skills/greet/SKILL.md"})
    assert qwen.activated([direct], "greet", "greet", False)
    assert not qwen.activated([hostile], "greet", "greet", False)
    assert qwen.activated([read], "greet", "greet", False)
    installed = frozenset({"greet", "pdf"})
    assert [qwen.skills_in(e, installed) for e in (direct, deferred, hostile, read)] == [
        ["greet"],
        ["pdf"],
        [],
        ["greet"],
    ]


def test_tool_messages_read_what_the_harness_sent_and_pass_over_junk() -> None:
    body = {
        "messages": [
            "junk",
            {"role": "tool", "tool_call_id": "c1", "content": "plain"},
            {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "a"}, 7, {"type": "text"}]},
            {"role": "tool", "tool_call_id": 5, "content": "no id"},
            {"role": "user", "tool_call_id": "c3", "content": "not a tool message"},
            {"role": "tool", "tool_call_id": "c4", "content": {"x": 1}},
        ]
    }
    assert tool_messages(body) == {"c1": "plain", "c2": "a\n", "c4": '{"x": 1}'}
    assert tool_messages({"messages": "nope"}) == {}


def test_a_result_is_the_one_sent_to_the_model_and_an_error_stays_one() -> None:
    turn = ModelTurn(tool_calls=(ModelToolCall("c1", "run_shell_command", {"command": "x"}),))
    record = ProxyRecord(turns=[turn], tool_outputs={"c1": "Output: full text", "c9": "unclaimed"})
    shown = ToolResultEvent(call_id="c1", output="Output: full...")
    checked = with_sent_outputs(CheckedEvents(events=[shown], rejected=[]), record)
    assert [e.output for e in checked.events if isinstance(e, ToolResultEvent)] == ["Output: full text"]
    failed = ToolResultEvent(call_id="c1", output=ERROR_PREFIX + "short")
    checked = with_sent_outputs(CheckedEvents(events=[failed], rejected=[]), record)
    assert [e.output for e in checked.events if isinstance(e, ToolResultEvent)] == [ERROR_PREFIX + "Output: full text"]
    other = ToolResultEvent(call_id="c2", output="kept")
    assert with_sent_outputs(CheckedEvents(events=[other], rejected=[]), record).events == [other]


def test_each_shell_call_lingers_after_its_command_keeps_its_status_and_passes_nothing_on(tmp_path: Path) -> None:
    plan = QwenCode().plan(request())
    assert plan.env["BASH_ENV"] == "/home/agent/" + BASH_ENV_FILE
    bash_env = tmp_path / "bash-env"
    bash_env.write_bytes(plan.home_files[BASH_ENV_FILE])
    began = time.monotonic()
    done = subprocess.run(
        ["bash", "-c", 'echo "out:$BASH_ENV:"; bash -c "exit 0"; exit 3'],
        env={"PATH": os.environ["PATH"], "BASH_ENV": str(bash_env)},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (done.returncode, done.stdout) == (3, "out::\n")  # the status kept; the command saw no BASH_ENV
    assert time.monotonic() - began >= 0.2  # the shell lingered after the command
