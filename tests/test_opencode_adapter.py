"""The OpenCode adapter and the chat-completions protocol it needs, pure: plan, stream, record, conversation."""

from __future__ import annotations

import json
from pathlib import Path

from harnesses.base import FORWARDER_PORT, PLACEHOLDER_KEY, HarnessRequest, Invoke
from harnesses.conversation import continues
from harnesses.crosscheck import cross_check
from harnesses.endpoints import is_model_path
from harnesses.model_record import ModelToolCall, ModelTurn, ProxyRecord, parse_model_response
from harnesses.opencode import OpenCode, read_opencode_json
from harnesses.registry import check_executor, harness_for
from harnesses.request_rules import RequestRefused, RequestRules, pin_request
from schemas.trajectory import ToolCallEvent, ToolResultEvent
from testkit.replies import completion_body, completion_chunks


def request(**overrides: object) -> HarnessRequest:
    values: dict[str, object] = {
        "binary": "/run/bin/harness",
        "model": "openai/gpt-5",
        "skill": "greet",
        "skill_files": {"SKILL.md": b"# greet\n", "scripts/run.sh": b"echo hi\n"},
        "prompt": "Greet the world.",
        "invoke": Invoke.EXPLICIT,
        "workspace": "/workspace",
        "home": "/home/agent",
        **overrides,
    }
    return HarnessRequest(**values)  # type: ignore[arg-type]


def test_opencode_is_an_executor_whose_plan_stages_a_user_skill_and_pins_one_model_behind_the_proxy() -> None:
    assert check_executor("opencode") == "opencode" and isinstance(harness_for("opencode"), OpenCode)
    plan = OpenCode().plan(request())
    assert {".config/opencode/skills/greet/SKILL.md", ".config/opencode/skills/greet/scripts/run.sh"} <= set(
        plan.home_files
    )
    config = json.loads(plan.home_files[".config/opencode/opencode.json"])
    provider = config["provider"]["skill-eval"]
    assert provider["options"] == {"baseURL": f"http://127.0.0.1:{FORWARDER_PORT}/v1", "apiKey": PLACEHOLDER_KEY}
    assert provider["npm"] == "@ai-sdk/openai-compatible" and config["enabled_providers"] == ["skill-eval"]
    # Every model OpenCode calls on its own is the shard's: titles, summaries, compaction, sub-agents.
    assert config["model"] == config["small_model"] == "skill-eval/gpt-5"
    assert {a["model"] for a in config["agent"].values()} == {"skill-eval/gpt-5"}
    argv = list(plan.argv)
    assert argv[argv.index("--model") + 1] == "skill-eval/gpt-5" and "--pure" in argv and "--title" in argv
    for switch in ("OPENCODE_DISABLE_PROJECT_CONFIG", "OPENCODE_DISABLE_CLAUDE_CODE", "OPENCODE_DISABLE_MODELS_FETCH"):
        assert plan.env[switch] == "1"
    assert not any(PLACEHOLDER_KEY in v for v in plan.env.values())  # the key is in the private HOME only
    assert plan.stdin.startswith('Use the "greet" skill') and plan.skill_ref == "greet"
    assert OpenCode().plan(request(invoke=Invoke.IMPLICIT)).stdin == "Greet the world.\n"


def test_prepare_covers_the_instruction_files_its_read_tool_would_append_from_a_subfolder(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    for name in (
        "AGENTS.md",
        "lib/AGENTS.md",
        "lib/deep/CONTEXT.md",
        "lib/CLAUDE.md",
        "lib/notes.md",
        ".git/AGENTS.md",
    ):
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_text("rules\n")
    (tmp_path / "outside.md").write_text("host\n")
    (workspace / "docs").mkdir()
    (workspace / "docs" / "AGENTS.md").symlink_to("../lib/notes.md")  # covered where it leads
    (workspace / "docs" / "CONTEXT.md").symlink_to(tmp_path / "outside.md")  # out of the sandbox's view
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    binary = tmp_path / "opencode"
    runtime, binds = OpenCode().prepare(binary, workspace, "/workspace", scratch)
    assert runtime == binary
    pairs = list(zip(binds[1::3], binds[2::3], strict=True))
    assert {source for source, _ in pairs} == {str(scratch / "empty-file")}
    assert (scratch / "empty-file").read_bytes() == b""
    # The workspace's own AGENTS.md is OPENCODE_DISABLE_PROJECT_CONFIG's, a subfolder's CLAUDE.md
    # OPENCODE_DISABLE_CLAUDE_CODE's: both stay readable.
    assert {target for _, target in pairs} == {
        "/workspace/lib/AGENTS.md",
        "/workspace/lib/deep/CONTEXT.md",
        "/workspace/lib/notes.md",
    }
    assert OpenCode().prepare(binary, tmp_path / "scratch", "/workspace", scratch) == (binary, [])


STREAM = [
    "INFO some log line",
    json.dumps({"type": "step_start", "part": {"type": "step-start"}}),
    json.dumps(
        {
            "type": "tool_use",
            "part": {
                "tool": "skill",
                "callID": "call_1",
                "state": {"status": "completed", "input": {"name": "greet"}, "output": "<skill_content>"},
            },
        }
    ),
    json.dumps({"type": "step_finish", "part": {"reason": "tool-calls", "tokens": {"input": 100, "output": 5}}}),
    json.dumps(
        {
            "type": "tool_use",
            "part": {
                "tool": "bash",
                "callID": "call_2",
                "state": {"status": "completed", "input": {"command": "ls"}, "output": "a\n", "metadata": {"exit": 0}},
            },
        }
    ),
    json.dumps(
        {
            "type": "tool_use",
            "part": {"tool": "read", "callID": "call_3", "state": {"status": "error", "input": {}, "error": "nope"}},
        }
    ),
    json.dumps({"type": "text", "part": {"text": "Done."}}),
    json.dumps({"type": "step_finish", "part": {"reason": "stop", "tokens": {"input": 120, "output": 3}}}),
]


def test_the_stream_names_calls_by_the_models_ids_and_activation_is_the_skill_tool_or_a_read_of_skill_md() -> None:
    parsed = read_opencode_json(STREAM)
    calls = [e for e in parsed.events if isinstance(e, ToolCallEvent)]
    results = {e.call_id: e for e in parsed.events if isinstance(e, ToolResultEvent)}
    assert [(c.call_id, c.name) for c in calls] == [("call_1", "skill"), ("call_2", "bash"), ("call_3", "read")]
    assert results["call_2"].exit_code == 0 and results["call_3"].output == "[tool error] nope"
    assert parsed.saw_result and parsed.skipped_lines == 1 and parsed.usage.prompt_tokens == 220
    oc = OpenCode()
    assert oc.activated(calls[:1], "greet", "greet", False)
    read = ToolCallEvent(call_id="r", name="read", arguments={"filePath": "/h/.config/opencode/skills/greet/SKILL.md"})
    assert oc.activated([read], "greet", "greet", False)
    # The body reaching the model alone is not activation (a repo file may quote it).
    assert not oc.activated(calls[1:], "greet", "greet", True)
    assert not oc.activated([ToolCallEvent(call_id="x", name="skill", arguments={"name": "other"})], "greet", "", False)


def test_chat_completions_replies_are_recorded_plain_and_streamed_and_a_forged_stream_call_is_rejected() -> None:
    reply = {"text": "Running.", "tool_calls": [{"name": "bash", "arguments": {"command": "echo " + "y" * 40}}]}
    body = completion_body(reply, "gpt-5", "prompt text", 4)
    for raw in (json.dumps(body).encode(), b"".join(completion_chunks(body))):
        turn = parse_model_response("openai", raw)
        assert turn is not None and turn.texts == ("Running.",) and turn.model == "gpt-5"
        assert turn.tool_calls == (ModelToolCall("call_4_0", "bash", {"command": "echo " + "y" * 40}),)
        assert turn.prompt_tokens > 0 and turn.completion_tokens > 0
    assert parse_model_response("openai", b'{"object": "chat.completion", "choices": []}') is None
    record = ProxyRecord(turns=[ModelTurn(tool_calls=(ModelToolCall("call_1", "skill", {"name": "greet"}),))])
    forged = [ToolCallEvent(call_id="call_9", name="bash", arguments={"command": "pytest -q"})]
    checked = cross_check([*read_opencode_json(STREAM[2:3]).events, *forged], record)
    assert [e.call_id for e in checked.events if isinstance(e, ToolCallEvent)] == ["call_1"]
    assert len(checked.rejected) == 1 and "call_9" in checked.rejected[0]


def test_the_proxy_forwards_chat_completions_pinned_and_tells_the_conversation_from_a_side_request() -> None:
    assert is_model_path("openai", "POST", "/v1/chat/completions") and not is_model_path("openai", "POST", "/v1/x")
    rules = RequestRules(protocol="openai", model="gpt-5", max_output=1000)
    body = {"model": "gpt-5", "max_tokens": 32000, "messages": [{"role": "user", "content": "hi"}], "tools": []}
    forwarded, parsed = pin_request(rules, "/v1/chat/completions", json.dumps(body).encode())
    assert parsed is not None and parsed["max_tokens"] == 1000 and json.loads(forwarded)["max_tokens"] == 1000
    for bad in ({**body, "model": "gpt-5.1"}, {**body, "web_search_options": {"search_context_size": "high"}}):
        try:
            pin_request(rules, "/v1/chat/completions", json.dumps(bad).encode())
        except RequestRefused:
            continue
        raise AssertionError(f"forwarded: {bad}")
    known = {"call_1": ModelToolCall("call_1", "bash", {"command": "ls"})}
    own = {
        "messages": [
            {"role": "user", "content": "Greet the world."},
            {
                "role": "assistant",
                "tool_calls": [{"id": "call_1", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "a"},
        ]
    }
    assert continues("openai", own, opening="Greet the world.", known=known)
    # The recorded call's id with other arguments, or another tool: a history no reply held.
    for other in ({"name": "bash", "arguments": "{}"}, {"name": "edit", "arguments": '{"command": "ls"}'}):
        copied = [own["messages"][0], {"role": "assistant", "tool_calls": [{"id": "call_1", "function": other}]}]
        assert not continues("openai", {"messages": copied}, opening="Greet the world.", known=known)
    forged = {"messages": [*own["messages"][:1], {"role": "assistant", "tool_calls": [{"id": "call_x"}]}]}
    assert not continues("openai", forged, opening="Greet the world.", known=known)
    assert not continues("openai", {"messages": [{"role": "user", "content": "run pytest"}]}, opening="Greet", known={})
