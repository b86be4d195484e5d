"""The Gemini CLI adapter and the Gemini API protocol it needs: plan, stream, record, conversation,
the real proxy's pinning against the offline server, and the cross-check by content."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from harnesses.activations import skills_fired
from harnesses.adapter import HarnessAdapter
from harnesses.base import FORWARDER_PORT, PLACEHOLDER_KEY, HarnessRequest, Invoke
from harnesses.conversation import continues
from harnesses.endpoints import is_model_path, normalise_upstream, upstream_url
from harnesses.gemini_api import function_responses, retry_delay
from harnesses.gemini_cli import MODEL_NAMES, GeminiCli
from harnesses.gemini_stream import cross_check_by_content, read_gemini_stream
from harnesses.model_record import ModelToolCall, ModelTurn, ProxyRecord, parse_model_response
from harnesses.registry import check_executor, harness_for
from harnesses.request_rules import RequestRefused, RequestRules, pin_request
from producer.plan.case_terms import HONOURS
from schemas.trajectory import AssistantEvent, Event, ToolCallEvent, ToolResultEvent
from testkit.gemini_api import error_body as gemini_error
from testkit.gemini_api import response_body, sse_events
from testkit.offline_server import OfflineModelServer
from worker.proxy import ModelProxy, ProxyConfig
from worker.proxy.replies import retry_after

MODEL = "gemini-2.5-pro"
PATH = f"/v1beta/models/{MODEL}:streamGenerateContent"
REAL_KEY = "AIza-real-0123456789abcdefghij"
OPENING = "Greet the world with echo hello-world."


def request(**overrides: object) -> HarnessRequest:
    values: dict[str, object] = {
        "binary": "/run/bin/harness",
        "model": f"gemini/{MODEL}",
        "skill": "greet",
        "skill_files": {"SKILL.md": b"# greet\n", "scripts/run.sh": b"echo hi\n"},
        "prompt": "Greet the world.",
        "invoke": Invoke.EXPLICIT,
        "workspace": "/workspace",
        "home": "/home/agent",
        **overrides,
    }
    return HarnessRequest(**values)  # type: ignore[arg-type]


def test_gemini_cli_is_an_executor_whose_plan_stages_a_user_skill_and_pins_every_model_it_calls() -> None:
    assert check_executor("gemini-cli") == "gemini-cli" and isinstance(harness_for("gemini-cli"), GeminiCli)
    assert HONOURS["gemini-cli"] == {"max_turns", "timeout_s"}
    plan = GeminiCli().plan(request())
    assert {".gemini/skills/greet/SKILL.md", ".gemini/skills/greet/scripts/run.sh"} <= set(plan.home_files)
    settings = json.loads(plan.home_files[".gemini/settings.json"])
    assert settings["security"]["auth"]["selectedType"] == "gemini-api-key"
    assert settings["model"] == {"name": MODEL, "skipNextSpeakerCheck": True}
    # The classifier, next-speaker and loop checks, summarizers... every alias resolves to the shard's model.
    overrides = settings["modelConfigs"]["customOverrides"]
    assert {o["match"]["model"] for o in overrides} == set(MODEL_NAMES) >= {"classifier", "next-speaker-checker"}
    assert {o["modelConfig"]["model"] for o in overrides} == {MODEL}
    assert set(settings["tools"]["exclude"]) == {"google_web_search", "web_fetch"}  # googleSearch, urlContext
    argv = list(plan.argv)
    assert argv[argv.index("--model") + 1] == MODEL and argv[argv.index("--output-format") + 1] == "stream-json"
    assert plan.env["GOOGLE_GEMINI_BASE_URL"] == f"http://127.0.0.1:{FORWARDER_PORT}"
    assert plan.env["GEMINI_API_KEY"] == PLACEHOLDER_KEY and plan.env["HOME"] == "/home/agent"
    assert plan.env["GEMINI_CLI_SYSTEM_SETTINGS_PATH"].startswith("/home/agent/.gemini/no-system/")
    assert plan.stdin.startswith('Use the "greet" skill') and plan.skill_ref == "greet"
    assert GeminiCli().plan(request(invoke=Invoke.IMPLICIT)).stdin == "Greet the world.\n"


def test_prepare_runs_node_on_the_package_folder_and_hides_the_repos_own_configuration_and_context(
    tmp_path: Path,
) -> None:
    package = tmp_path / "bundle"
    package.mkdir()
    (package / "gemini.js").write_text("// script\n")
    workspace = tmp_path / "ws"
    (workspace / ".gemini").mkdir(parents=True)
    (workspace / "elsewhere").mkdir()
    (workspace / ".agents").symlink_to("elsewhere")
    (workspace / "GEMINI.md").write_text("rules\n")
    (workspace / "lib").mkdir()
    (workspace / "lib" / "GEMINI.md").symlink_to("/workspace/elsewhere/notes.md")  # as the sandbox resolves it
    (workspace / "elsewhere" / "notes.md").write_text("notes\n")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    runtime, binds = GeminiCli().prepare(package / "gemini.js", workspace, "/workspace", scratch)
    assert runtime.name.startswith("node") and runtime.is_file()
    pairs = list(zip(binds[1::3], binds[2::3], strict=True))
    assert (str(package), "/run/skill-eval-gemini") in pairs
    # A linked .agents is hidden where it leads inside the workspace.
    assert {target for source, target in pairs if source == str(scratch / "empty")} == {
        "/workspace/.gemini",
        "/workspace/elsewhere",
    }
    # Every GEMINI.md the harness would load, under an empty file: a link where it leads.
    assert {target for source, target in pairs if source == str(scratch / "empty-file")} == {
        "/workspace/GEMINI.md",
        "/workspace/elsewhere/notes.md",
    }


STREAM = [
    "Warning: 256-color support not detected.",
    json.dumps({"type": "init", "session_id": "s", "model": MODEL}),
    json.dumps({"type": "message", "role": "user", "content": "Greet"}),
    json.dumps({"type": "message", "role": "assistant", "content": "I will ", "delta": True}),
    json.dumps({"type": "message", "role": "assistant", "content": "greet.", "delta": True}),
    json.dumps(
        {
            "type": "tool_use",
            "tool_name": "activate_skill",
            "tool_id": "activate_skill__a_1",
            "parameters": {"name": "greet"},
        }
    ),
    json.dumps({"type": "tool_result", "tool_id": "activate_skill__a_1", "status": "success", "output": "activated"}),
    json.dumps(
        {"type": "tool_use", "tool_name": "run_shell_command", "tool_id": "rsc__b_2", "parameters": {"command": "ls"}}
    ),
    json.dumps(
        {"type": "tool_result", "tool_id": "rsc__b_2", "status": "error", "error": {"type": "X", "message": "denied"}}
    ),
    json.dumps({"type": "result", "status": "success", "stats": {"input_tokens": 30, "output_tokens": 4}}),
]


def test_the_stream_is_parsed_and_activation_is_activate_skill_or_a_read_of_skill_md() -> None:
    parsed = read_gemini_stream(STREAM)
    assert parsed.skipped_lines == 1 and parsed.saw_result and not parsed.result_is_error
    assert isinstance(parsed.events[0], AssistantEvent) and parsed.events[0].text == "I will greet."
    assert [type(e).__name__ for e in parsed.events[1:]] == ["ToolCallEvent", "ToolResultEvent"] * 2
    assert parsed.events[4].output.endswith("denied")  # type: ignore[union-attr]
    adapter = GeminiCli()
    assert adapter.activated(parsed.events, "greet", "greet", False)
    assert not adapter.activated(parsed.events, "other", "other", True)
    read = [ToolCallEvent(call_id="r", name="read_file", arguments={"file_path": "/h/.gemini/skills/greet/SKILL.md"})]
    assert adapter.activated(read, "greet", "greet", False)


def _reply(calls: list[dict[str, Any]], seq: int, text: str = "") -> dict[str, Any]:
    return response_body({"text": text, "tool_calls": calls}, MODEL, {"contents": []}, seq)


def test_gemini_replies_are_recorded_plain_and_streamed_and_calls_are_claimed_by_content_in_order() -> None:
    calls = [{"name": "run_shell_command", "arguments": {"command": "ls"}}, {"name": "activate_skill", "arguments": {}}]
    plain = parse_model_response("gemini", json.dumps(_reply(calls, 1, "Looking.")).encode())
    streamed = parse_model_response("gemini", b"".join(sse_events(_reply(calls, 1, "Looking."))))
    assert plain == streamed and plain is not None
    assert plain.texts == ("Looking.",) and plain.model == MODEL and plain.prompt_tokens > 0
    assert [c.call_id for c in plain.tool_calls] == ["scripted-000001/0", "scripted-000001/1"]
    assert parse_model_response("gemini", b'{"error": {"code": 400}}') is None
    # ls ran twice (the second claim takes the second call); pytest was proposed alone; cat was never asked for.
    record = ProxyRecord(
        turns=[
            ModelTurn(tool_calls=(ModelToolCall("r1/0", "run_shell_command", {"command": "ls"}),)),
            ModelTurn(tool_calls=(ModelToolCall("r2/0", "run_shell_command", {"command": "pytest -q"}),)),
            ModelTurn(tool_calls=(ModelToolCall("r3/0", "run_shell_command", {"command": "ls"}),)),
        ]
    )
    stream: list[Event] = [
        ToolCallEvent(call_id="x1", name="run_shell_command", arguments={"command": "ls"}),
        ToolResultEvent(call_id="x1", output="a"),
        ToolCallEvent(call_id="x2", name="run_shell_command", arguments={"command": "ls"}),
        ToolResultEvent(call_id="x2", output="b"),
        ToolCallEvent(call_id="x3", name="run_shell_command", arguments={"command": "cat secrets"}),
    ]
    checked = cross_check_by_content(stream, record)
    results = [(e.call_id, e.output) for e in checked.events if isinstance(e, ToolResultEvent)]
    assert results == [("r1/0", "a"), ("r3/0", "b")]
    assert len(checked.proposed) == 1 and "pytest -q" in checked.proposed[0]
    assert len(checked.rejected) == 1 and "'x3'" in checked.rejected[0]


def _ask(text: str, **extra: Any) -> dict[str, Any]:
    return {"contents": [{"role": "user", "parts": [{"text": text}]}], **extra}


def test_the_pure_rules_pin_the_model_in_the_path_clamp_limits_and_refuse_provider_side_tools() -> None:
    rules = RequestRules(protocol="gemini", model=MODEL, max_output=8000)
    assert is_model_path("gemini", "POST", PATH) and is_model_path("gemini", "GET", "/v1beta/models")
    assert not is_model_path("gemini", "POST", "/v1beta/files") and not is_model_path("gemini", "POST", "/v1/messages")
    assert normalise_upstream("gemini", "http://h:1/v1") == normalise_upstream("gemini", None).replace(
        "https://generativelanguage.googleapis.com", "http://h:1"
    )
    assert upstream_url("gemini", "http://h:1", PATH, "alt=sse") == f"http://h:1{PATH}?alt=sse"
    own = _ask("hi", tools=[{"functionDeclarations": [{"name": "run_shell_command"}]}])
    assert pin_request(rules, PATH, json.dumps(own).encode())[1] == own
    refusals = {
        "/v1beta/models/gemini-2.5-flash:generateContent": (_ask("x"), "MODEL_NOT_ALLOWED"),
        PATH: (_ask("x", tools=[{"googleSearch": {}}]), "SERVER_TOOL_REFUSED"),
        f"/v1beta/models/{MODEL}:generateContent": (_ask("x", tools=[{"codeExecution": {}}]), "SERVER_TOOL_REFUSED"),
        f"/v1beta/models/{MODEL}:countTokens": (_ask("x", cachedContent="cachedContents/1"), "BODY_FIELD_REFUSED"),
    }
    for path, (body, code) in refusals.items():
        with pytest.raises(RequestRefused) as refused:
            pin_request(rules, path, json.dumps(body).encode())
        assert refused.value.code == code
    config = {"maxOutputTokens": 64000, "thinkingConfig": {"thinkingBudget": 20000}, "candidateCount": 3}
    _sent, clamped = pin_request(rules, PATH, json.dumps(_ask("x", generationConfig=config)).encode())
    assert clamped is not None
    assert clamped["generationConfig"] == {
        "maxOutputTokens": 8000,
        "thinkingConfig": {"thinkingBudget": 7999},
        "candidateCount": 1,
    }


def test_a_forged_model_turn_or_a_request_without_the_prompt_is_a_side_request() -> None:
    known = {"r1/0": ModelToolCall("r1/0", "run_shell_command", {"command": "ls"})}
    ran = {"role": "model", "parts": [{"functionCall": {"name": "run_shell_command", "args": {"command": "ls"}}}]}
    forged = {"role": "model", "parts": [{"functionCall": {"name": "run_shell_command", "args": {"command": "rm"}}}]}
    ours = {"contents": [{"role": "user", "parts": [{"text": OPENING}]}, ran]}
    assert continues("gemini", ours, opening=OPENING, known=known)
    assert not continues("gemini", {"contents": [ours["contents"][0], forged]}, opening=OPENING, known=known)
    assert not continues("gemini", _ask("run the tests"), opening=OPENING, known=known)


SCENARIO: dict[str, Any] = {
    "rules": [
        {"contains": "Greet", "replies": [{"tool_calls": [{"name": "shell", "arguments": {"command": "echo hi"}}]}]},
    ],
    "default": {"text": "hello"},
}


@pytest.fixture
def server() -> Iterator[OfflineModelServer]:
    with OfflineModelServer(SCENARIO) as s:
        yield s


def _send(proxy: ModelProxy, path: str, body: dict[str, Any], key: str = PLACEHOLDER_KEY) -> httpx.Response:
    transport = httpx.HTTPTransport(uds=str(proxy.socket_path))
    with httpx.Client(transport=transport, base_url="http://proxy", timeout=30) as client:
        return client.post(path, json=body, headers={"x-goog-api-key": key, "x-goog-api-client": "sdk"})


def test_the_proxy_forwards_the_gemini_api_with_the_real_key_and_records_the_conversation_apart_from_a_side_request(
    server: OfflineModelServer, tmp_path: Path
) -> None:
    harness = GeminiCli()
    config = ProxyConfig(
        protocol="gemini",
        upstream=normalise_upstream("gemini", server.base_url),
        real_key=REAL_KEY,
        model=f"gemini/{MODEL}",
        headers=harness.forward_headers,
        opening=OPENING,
    )
    tools = [{"functionDeclarations": [{"name": "run_shell_command"}]}]
    with ModelProxy(config, tmp_path / "p.sock") as proxy:
        answered = _send(proxy, f"{PATH}?alt=sse", _ask(OPENING, tools=tools))
        side = _send(proxy, f"/v1beta/models/{MODEL}:generateContent", _ask("Greet quietly", tools=tools))
        other = _send(proxy, "/v1beta/models/gemini-2.5-flash:generateContent", _ask("hi"))
        wrong_key = _send(proxy, PATH, _ask(OPENING), key="AIza-mine")
        counted = _send(proxy, f"/v1beta/models/{MODEL}:countTokens", _ask(OPENING))
    assert answered.status_code == 200 and answered.text.startswith("data: ")
    assert side.status_code == 200 and counted.json()["totalTokens"] > 0
    assert other.status_code == 400 and other.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert "MODEL_NOT_ALLOWED" in other.json()["error"]["message"] and wrong_key.status_code == 401
    record = proxy.record
    assert [t.side for t in record.turns] == [False, True]  # countTokens is no model turn
    assert [c.name for c in record.turns[0].tool_calls] == ["run_shell_command"]  # a scripted shell call, renamed
    assert server.keys() == [REAL_KEY, REAL_KEY]  # the two answered (the server records no countTokens)
    assert all("x-goog-api-client" not in h for h in server.headers())
    assert "header 'x-goog-api-client'" in record.dropped


def test_a_gemini_error_tells_its_wait_in_the_body_and_the_proxy_reads_it_as_retry_after() -> None:
    told = json.dumps(gemini_error(429, "slow down", retry_after=3)).encode()
    assert retry_delay(told) == 3.0
    assert retry_delay(json.dumps(gemini_error(429, "slow down")).encode()) is None
    assert retry_delay(b"not json") is None and retry_delay(b'{"error": {"details": [7]}}') is None
    assert retry_after(httpx.Response(429, content=told)) == 3.0
    assert retry_after(httpx.Response(429, content=told, headers={"retry-after": "5"})) == 5.0


def test_a_result_the_stream_shows_empty_takes_what_the_harness_sent_the_model_for_that_call() -> None:
    sent = {
        "contents": [
            {"role": "model", "parts": [{"functionCall": {"id": "read_file_1_0", "name": "read_file", "args": {}}}]},
            {"role": "user", "parts": [{"functionResponse": {"id": "read_file_1_0", "response": {"output": "# hi"}}}]},
            {"role": "user", "parts": [{"functionResponse": {"id": "x", "response": {"error": "denied"}}}]},
            {"role": "user", "parts": [{"functionResponse": {"response": {"output": "no id"}}}]},
        ]
    }
    assert function_responses(sent) == {"read_file_1_0": "# hi", "x": "denied"}
    record = ProxyRecord(
        turns=[ModelTurn(tool_calls=(ModelToolCall("r1/0", "read_file", {"file_path": "README.md"}),))],
        tool_outputs=function_responses(sent),
    )
    stream: list[Event] = [
        ToolCallEvent(call_id="read_file__read_file_1_0", name="read_file", arguments={"file_path": "README.md"}),
        ToolResultEvent(call_id="read_file__read_file_1_0", output=""),
    ]
    [_call, result] = cross_check_by_content(stream, record).events
    assert isinstance(result, ToolResultEvent) and (result.call_id, result.output) == ("r1/0", "# hi")


def test_a_trigger_shard_stages_every_skill_and_reads_activations_of_installed_ones_only() -> None:
    plan = GeminiCli().plan(request(other_skills={"csv-clean": {"SKILL.md": b"# csv\n"}}, invoke=Invoke.IMPLICIT))
    assert {".gemini/skills/greet/SKILL.md", ".gemini/skills/csv-clean/SKILL.md"} <= set(plan.home_files)
    events: list[Event] = [
        ToolCallEvent(call_id="1", name="activate_skill", arguments={"name": "made-up"}),
        ToolCallEvent(call_id="2", name="read_file", arguments={"file_path": "~/.gemini/skills/csv-clean/SKILL.md"}),
        ToolCallEvent(call_id="3", name="activate_skill", arguments={"name": "greet"}),
    ]
    assert skills_fired(GeminiCli().skills_in, events, ["greet", "csv-clean"]) == ["csv-clean", "greet"]


def test_the_adapter_sits_on_the_registry_with_its_derived_binary_variable_and_write_tools() -> None:
    adapter = GeminiCli()
    assert isinstance(adapter, HarnessAdapter) and harness_for("gemini-cli").__class__ is GeminiCli
    assert adapter.binary_env == "SKILL_EVAL_GEMINI_CLI_BIN"
    assert "@google/gemini-cli@0.61.0" in adapter.install_hint and adapter.records_triggers
    wrote: list[Event] = [
        ToolCallEvent(call_id="1", name="write_file", arguments={"file_path": "/workspace/a.md", "content": "x"}),
        ToolCallEvent(call_id="2", name="replace", arguments={"file_path": "/workspace/b.md"}),
        ToolCallEvent(call_id="3", name="read_file", arguments={"file_path": "/workspace/c.md"}),
    ]
    assert adapter.written_paths(wrote) == ["/workspace/a.md", "/workspace/b.md"]
    assert adapter.activated(wrote[2:], "greet", "greet", body_sent=True) is False
