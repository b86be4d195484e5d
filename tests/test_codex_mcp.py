"""Codex and mocked MCP tools, pure: the mock servers on its command line, its namespaced calls in
the proxy's record, their claims in its stream cross-checked, and the case's allowed tools offered.

Codex lists an MCP server's tools to the model as one Responses API ``namespace`` tool,
``mcp__<server>``; the model calls ``<tool>`` in it. The proxy's record names that call
``mcp__<server>__<tool>``, the name every executor gives a mocked tool.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from harnesses.base import MOCK_FILE, MOCK_SERVER, HarnessRequest, Invoke
from harnesses.codex import Codex, read_codex_json
from harnesses.model_record import ModelToolCall, ModelTurn, ProxyRecord, parse_model_response
from harnesses.request_rules import RequestRules, pin_request
from schemas.trajectory import ToolCallEvent, ToolResultEvent
from testkit.responses_api import input_text, response_body

FORECAST = {"type": "function", "name": "get_forecast", "parameters": {"type": "object"}}
TOOLS: list[dict[str, Any]] = [
    {"type": "function", "name": "exec_command", "parameters": {}},
    {"type": "function", "name": "view_image", "parameters": {}},
    {"type": "function", "name": "update_plan", "parameters": {}},
    {"type": "namespace", "name": "mcp__weather", "description": "", "tools": [FORECAST]},
    {"type": "namespace", "name": "multi_agent_v1", "description": "", "tools": [{**FORECAST, "name": "spawn_agent"}]},
]


def request(**overrides: object) -> HarnessRequest:
    values: dict[str, object] = {
        "binary": "/run/bin/codex",
        "model": "openai/gpt-5-codex",
        "skill": "forecast",
        "skill_files": {"SKILL.md": b"# forecast\n"},
        "prompt": "What is the weather in Paris?",
        "invoke": Invoke.IMPLICIT,
        "workspace": "/workspace",
        "home": "/home/agent",
        "mock_servers": {"weather": ("get_forecast",)},
    }
    values.update(overrides)
    return HarnessRequest(**values)  # type: ignore[arg-type]


def item(kind: str, **fields: Any) -> str:
    return json.dumps({"type": kind, "item": {"id": "item_1", "type": "mcp_tool_call", "server": "weather", **fields}})


def test_each_mocked_server_is_given_to_codex_as_the_mock_server_run_by_the_sandboxs_python() -> None:
    argv = Codex().plan(request()).argv
    at = argv.index("mcp_servers.weather=" + f'{{command="python3", args=["{MOCK_SERVER}", "{MOCK_FILE}", "weather"]}}')
    assert argv[at - 1] == "-c" and argv[-1] == "-"
    assert not any("mcp_servers" in a for a in Codex().plan(request(mock_servers={})).argv)


def test_the_scripted_model_calls_a_mocked_tool_in_its_namespace_and_the_record_names_it_in_full() -> None:
    body = {"model": "gpt-5-codex", "tools": TOOLS, "input": "weather"}
    reply = {"tool_calls": [{"name": "mcp__weather__get_forecast", "arguments": {"city": "Paris"}}]}
    sent = response_body(reply, "gpt-5-codex", body, 1)
    [call] = sent["output"]
    assert (call["namespace"], call["name"]) == ("mcp__weather", "get_forecast")
    turn = parse_model_response("openai", json.dumps(sent).encode())
    assert turn is not None
    assert turn.tool_calls == (
        ModelToolCall("call_000001_0", "mcp__weather__get_forecast", {"city": "Paris"}, namespace="mcp__weather"),
    )
    # The next request's input names the call in full, so scenario rules can match on it.
    assert "mcp__weather__get_forecast" in input_text({"input": [call]})
    # A call scripted flat, or naming a tool no namespace offers, is sent flat: no namespace.
    flat = {"tool_calls": [{"name": "mcp__weather__get_forecast", "arguments": {}, "namespace": False}]}
    assert "namespace" not in response_body(flat, "m", body, 2)["output"][0]
    other = {"tool_calls": [{"name": "mcp__weather__get_alerts", "arguments": {}}]}
    assert "namespace" not in response_body(other, "m", body, 3)["output"][0]


def mcp_stream(arguments: dict[str, Any], text: str = "Paris: sunny") -> list[str]:
    result = {"content": [{"type": "text", "text": text}], "structured_content": None}
    return [
        item("item.started", tool="get_forecast", arguments=arguments, result=None, status="in_progress"),
        item("item.completed", tool="get_forecast", arguments=arguments, result=result, status="completed"),
        json.dumps({"type": "turn.completed", "usage": {"input_tokens": 5, "output_tokens": 2}}),
    ]


def test_codexs_mcp_tool_call_claims_the_namespaced_call_of_the_same_tool_and_input_with_its_result() -> None:
    parsed = read_codex_json(mcp_stream({"city": "Paris"}))
    assert [(type(e).__name__, getattr(e, "name", None)) for e in parsed.events] == [
        ("ToolCallEvent", "mcp__weather__get_forecast"),
        ("ToolResultEvent", None),
    ]
    call = ModelToolCall("call_7", "mcp__weather__get_forecast", {"city": "Paris"}, namespace="mcp__weather")
    checked = Codex().cross_check(parsed.events, ProxyRecord(turns=[ModelTurn(tool_calls=(call,))]))
    assert not checked.rejected and not checked.proposed
    [claimed, result] = checked.events
    assert isinstance(claimed, ToolCallEvent) and claimed.call_id == "call_7"
    assert isinstance(result, ToolResultEvent) and (result.call_id, result.output) == ("call_7", "Paris: sunny")


def test_a_call_whose_input_nests_too_deep_is_claimed_as_every_event_records_it_bounded() -> None:
    deep: Any = "sunny"
    for _ in range(300):
        deep = {"k": deep}
    parsed = read_codex_json(mcp_stream({"city": "Paris", "filter": deep}))
    call = ModelToolCall(
        "call_7", "mcp__weather__get_forecast", {"city": "Paris", "filter": deep}, namespace="mcp__weather"
    )
    checked = Codex().cross_check(parsed.events, ProxyRecord(turns=[ModelTurn(tool_calls=(call,))]))
    assert not checked.rejected and not checked.proposed
    claimed = checked.events[0]
    assert isinstance(claimed, ToolCallEvent) and claimed.arguments["city"] == "Paris"
    assert claimed.arguments["filter"] == "[elided by skill-eval: nests deeper than 32 levels]"


@pytest.mark.parametrize(
    "recorded",
    [
        # The model asked about Oslo; the stream claims Paris.
        ModelToolCall("call_7", "mcp__weather__get_forecast", {"city": "Oslo"}, namespace="mcp__weather"),
        # The model called a flat function of that name: Codex runs no such call ("unsupported call").
        ModelToolCall("call_7", "mcp__weather__get_forecast", {"city": "Paris"}),
    ],
)
def test_a_claim_of_a_mock_call_the_model_never_made_in_its_namespace_is_rejected(recorded: ModelToolCall) -> None:
    parsed = read_codex_json(mcp_stream({"city": "Paris"}))
    checked = Codex().cross_check(parsed.events, ProxyRecord(turns=[ModelTurn(tool_calls=(recorded,))]))
    assert checked.events == [] and len(checked.rejected) == 1
    assert "mcp__weather__get_forecast" in checked.rejected[0] and len(checked.proposed) == 1


def test_a_failed_mcp_call_is_an_error_result() -> None:
    line = item(
        "item.completed", tool="get_forecast", arguments={}, result=None, error={"message": "boom"}, status="failed"
    )
    [_, result] = read_codex_json([line]).events
    assert isinstance(result, ToolResultEvent) and (result.output, result.exit_code) == ("boom", 1)


def test_codexs_requests_offer_only_the_cases_allowed_tools_in_codexs_names() -> None:
    offered = Codex().offered_tools(request(allowed_tools=("Bash", "mcp__weather__get_forecast")))
    assert offered is not None and {"exec_command", "write_stdin", "mcp__weather__get_forecast"} <= offered
    assert Codex().offered_tools(request()) is None
    rules = RequestRules(protocol="openai", model="gpt-5-codex", tools=offered)
    body, parsed = pin_request(rules, "/v1/responses", json.dumps({"model": "gpt-5-codex", "tools": TOOLS}).encode())
    assert parsed is not None and json.loads(body) == parsed
    assert [(t["name"], [m["name"] for m in t.get("tools", [])]) for t in parsed["tools"]] == [
        ("exec_command", []),
        ("mcp__weather", ["get_forecast"]),
    ]
    # Without the mocked tool allowed, its namespace is not offered at all.
    rules = RequestRules(protocol="openai", model="gpt-5-codex", tools=frozenset({"exec_command"}))
    _, parsed = pin_request(rules, "/v1/responses", json.dumps({"model": "gpt-5-codex", "tools": TOOLS}).encode())
    assert parsed is not None and [t["name"] for t in parsed["tools"]] == ["exec_command"]


def test_codexs_own_mcp_resource_tools_claim_its_plain_calls_and_an_unoffered_call_is_a_finding() -> None:
    from worker.executor.allowed import not_offered

    result = {"content": [{"type": "text", "text": "[]"}]}
    line = json.dumps(
        {
            "type": "item.completed",
            "item": {"id": "item_3", "type": "mcp_tool_call", "server": "codex", "tool": "list_mcp_resources"}
            | {"arguments": {}, "result": result, "status": "completed"},
        }
    )
    parsed = read_codex_json([line])
    record = ProxyRecord(turns=[ModelTurn(tool_calls=(ModelToolCall("call_9", "list_mcp_resources", {}),))])
    checked = Codex().cross_check(parsed.events, record)
    assert not checked.rejected and [e.call_id for e in checked.events] == ["call_9", "call_9"]
    assert not_offered(checked.events, frozenset({"exec_command"})) == [
        "list_mcp_resources: called, but the case does not allow it (never offered to the model)"
    ]
    assert not_offered(checked.events, None) == []


def test_a_plugin_suites_bash_and_write_graders_read_codexs_shell_and_patch_calls() -> None:
    from schemas.checks_plugin import ToolMatcher
    from worker.grading.plugin_checks import matches

    shell = ToolCallEvent(call_id="1", name="exec_command", arguments={"cmd": "cat forecast.txt"})
    patch = ToolCallEvent(call_id="2", name="apply_patch", arguments={"input": "*** Add File: a.txt"})
    assert matches(shell, ToolMatcher(tool="Bash", input_match="cat forecast"))
    assert not matches(shell, ToolMatcher(tool="Read"))
    assert matches(patch, ToolMatcher(tool="Write")) and matches(patch, ToolMatcher(tool="Edit"))
