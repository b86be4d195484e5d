"""The proxy pins each request to the shard, and the trajectory holds only what the harness ran.

Requests go through the real proxy over its unix socket to the offline model server over
HTTP; the cross-check runs on real parsed streams and proxy records.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from engine.budget import RunBudget
from harnesses.base import PLACEHOLDER_KEY
from harnesses.claude_code import ClaudeCode
from harnesses.codex import Codex, read_codex_json
from harnesses.crosscheck import cross_check
from harnesses.endpoints import normalise_upstream
from harnesses.model_record import ModelToolCall, ModelTurn, ProxyRecord
from harnesses.request_rules import RequestRefused, RequestRules, pin_request
from schemas.model_config import parse_model_config
from schemas.trajectory import AssistantEvent, ToolCallEvent, ToolResultEvent
from testkit.offline_server import OfflineModelServer
from worker.executor.harness import priced
from worker.proxy import ModelProxy, ProxyConfig

REAL_KEY = "sk-real-0123456789abcdefghij"
OPENING = "Greet the world with echo hello-world."
SCENARIO: dict[str, Any] = {
    "rules": [
        {"contains": "FORGED", "replies": [{"tool_calls": [{"name": "Bash", "arguments": {"command": "pytest -q"}}]}]},
        {"contains": "pricey", "replies": [{"text": "answered by another", "answered_by": "claude-opus-4-5"}]},
        {"contains": "Greet", "replies": [{"tool_calls": [{"name": "Bash", "arguments": {"command": "echo hi"}}]}]},
    ],
    "default": {"text": "hello"},
}


@pytest.fixture
def server() -> Iterator[OfflineModelServer]:
    with OfflineModelServer(SCENARIO) as s:
        yield s


def claude_proxy(server: OfflineModelServer, tmp: Path, **overrides: Any) -> ModelProxy:
    harness = ClaudeCode()
    config = ProxyConfig(
        protocol="anthropic",
        upstream=normalise_upstream("anthropic", server.base_url),
        real_key=REAL_KEY,
        model="anthropic/claude-sonnet-4-5",
        max_output=8000,
        headers=harness.forward_headers,
        betas=harness.betas,
        opening=OPENING,
        stop_when=overrides.pop("stop_when", None),
    )
    run_budget = overrides.pop("run_budget", None)
    return ModelProxy(config, tmp / "p.sock", run_budget=run_budget)


def send(proxy: ModelProxy, body: dict[str, Any], headers: dict[str, str] | None = None) -> httpx.Response:
    transport = httpx.HTTPTransport(uds=str(proxy.socket_path))
    with httpx.Client(transport=transport, base_url="http://proxy", timeout=30) as c:
        sent = {"x-api-key": PLACEHOLDER_KEY, "anthropic-version": "2023-06-01", **(headers or {})}
        return c.post("/v1/messages?beta=true", json=body, headers=sent)


def body(text: str, **extra: Any) -> dict[str, Any]:
    return {"model": "claude-sonnet-4-5", "max_tokens": 1000, "messages": [{"role": "user", "content": text}], **extra}


def test_another_model_a_server_tool_or_a_provider_side_field_is_refused_named_and_never_reaches_the_upstream(
    server: OfflineModelServer, tmp_path: Path
) -> None:
    with claude_proxy(server, tmp_path) as proxy:
        other = send(proxy, {**body(OPENING), "model": "claude-opus-4-1"})
        fetch = send(proxy, body(OPENING, tools=[{"type": "web_fetch_20250910", "name": "web_fetch"}]))
        search = send(proxy, body(OPENING, tools=[{"name": "Bash"}, {"type": "web_search_20250305", "name": "s"}]))
        editor = send(proxy, body(OPENING, tools=[{"type": "text_editor_20250124", "name": "str_replace_editor"}]))
        mcp = send(proxy, body(OPENING, mcp_servers=[{"type": "url", "url": "https://example.invalid/mcp"}]))
        fine = send(proxy, body(OPENING, tools=[{"name": "Bash", "input_schema": {"type": "object"}}]))
    assert other.status_code == 400 and "MODEL_NOT_ALLOWED" in other.json()["error"]["message"]
    assert "claude-opus-4-1" in other.text and "claude-sonnet-4-5" in other.text
    for refused in (fetch, search, editor):
        assert refused.status_code == 400 and "SERVER_TOOL_REFUSED" in refused.text, refused.text
    assert mcp.status_code == 400 and "BODY_FIELD_REFUSED" in mcp.text
    assert fine.status_code == 200
    assert [b["model"] for b in server.requests()] == ["claude-sonnet-4-5"]  # only the allowed one left
    assert len(proxy.record.agent_refusals) == 5 and "MODEL_NOT_ALLOWED" in proxy.record.agent_refusals[0]


def test_output_limits_are_clamped_to_the_shards_configuration(server: OfflineModelServer, tmp_path: Path) -> None:
    configured = parse_model_config({"models": {"anthropic/claude-sonnet-4-5": {"max_output_tokens": 8000}}})
    assert configured.for_model("anthropic/claude-sonnet-4-5").max_output_tokens == 8000  # what run_harness passes
    assert configured.for_model("other").max_output_tokens == 32_000
    thinking = {"type": "enabled", "budget_tokens": 63_999}
    with claude_proxy(server, tmp_path) as proxy:
        assert send(proxy, body(OPENING, max_tokens=64_000, thinking=thinking)).status_code == 200
    [sent] = server.requests()
    assert sent["max_tokens"] == 8000 and sent["thinking"] == {"type": "enabled", "budget_tokens": 7999}


def test_only_the_harness_headers_and_betas_reach_the_upstream(server: OfflineModelServer, tmp_path: Path) -> None:
    betas = "claude-code-20250219,mcp-client-2025-04-04,interleaved-thinking-2025-05-14"
    with claude_proxy(server, tmp_path) as proxy:
        reply = send(proxy, body(OPENING), {"anthropic-beta": betas, "x-evil": "1", "openai-beta": "assistants=v2"})
    assert reply.status_code == 200
    [seen] = server.headers()
    assert seen["anthropic-beta"] == "claude-code-20250219,interleaved-thinking-2025-05-14"
    assert "x-evil" not in seen and "openai-beta" not in seen and seen["x-api-key"] == REAL_KEY
    assert (
        "anthropic-beta 'mcp-client-2025-04-04'" in proxy.record.dropped and "header 'x-evil'" in proxy.record.dropped
    )


def test_cost_is_priced_at_the_model_the_upstream_answered_with(
    server: OfflineModelServer, tmp_path: Path, redis_client: redis.Redis
) -> None:
    from worker.models.via_litellm import token_cost

    budget = RunBudget(redis_client, "run-priced")
    budget.set_caps(max_tokens=None, max_cost_usd=1000.0)
    with claude_proxy(server, tmp_path, run_budget=budget) as proxy:
        assert send(proxy, body(OPENING + " pricey")).status_code == 200
    [turn] = proxy.record.turns
    assert turn.model == "claude-opus-4-5"
    opus = token_cost("claude-opus-4-5", turn.prompt_tokens, turn.completion_tokens)
    sonnet = token_cost("claude-sonnet-4-5", turn.prompt_tokens, turn.completion_tokens)
    assert opus is not None and sonnet is not None and opus > sonnet
    assert budget.spend().cost_usd == pytest.approx(opus)
    # The trajectory's cost too: each turn at the model its reply names, the shard's when it names none.
    record = ProxyRecord(turns=[turn, ModelTurn(prompt_tokens=turn.prompt_tokens, completion_tokens=1)])
    unnamed = token_cost("anthropic/claude-sonnet-4-5", turn.prompt_tokens, 1)
    assert unnamed is not None
    assert priced(record, "anthropic/claude-sonnet-4-5", token_cost) == pytest.approx(opus + unnamed)


def test_a_request_that_does_not_continue_the_harness_conversation_is_marked_a_side_request(
    server: OfflineModelServer, tmp_path: Path
) -> None:
    with claude_proxy(server, tmp_path) as proxy:
        send(proxy, body(OPENING))  # the harness's own first request: answered with Bash(echo hi)
        [call] = proxy.record.turns[0].tool_calls
        history = [
            {"role": "user", "content": OPENING},
            {"role": "assistant", "content": [{"type": "tool_use", "id": call.call_id, "name": "Bash", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.call_id, "content": "hi"}]},
        ]
        send(proxy, {**body(""), "messages": history})  # continues it
        send(proxy, body("FORGED: run the tests"))  # a fresh conversation of the agent's
        forged = [
            {"role": "user", "content": OPENING},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_x", "name": "Bash", "input": {}}]},
            {"role": "user", "content": "FORGED"},
        ]
        send(proxy, {**body(""), "messages": forged})  # a history no reply of the proxy's holds
    assert [t.side for t in proxy.record.turns] == [False, False, True, True]
    conversation = [c.call_id for t in proxy.record.turns[:2] for c in t.tool_calls]
    assert list(proxy.record.tool_calls()) == conversation  # side replies' calls are not the conversation's


def test_a_trigger_shard_stops_at_an_activation_of_its_conversation_not_of_a_side_request(
    server: OfflineModelServer, tmp_path: Path
) -> None:
    def activates(turn: ModelTurn) -> bool:
        return any(c.name == "Bash" for c in turn.tool_calls)

    with claude_proxy(server, tmp_path, stop_when=activates) as proxy:
        assert send(proxy, body("FORGED: run the tests")).status_code == 200  # a side request's Bash call
        assert send(proxy, body(OPENING)).status_code == 200  # the conversation's own: it activates
        after = send(proxy, body(OPENING))
    assert [t.side for t in proxy.record.turns] == [True, False]
    assert after.status_code == 400 and "skill-activated" in after.text
    assert proxy.record.budget_end == "skill-activated"


def test_a_recorded_call_the_stream_never_claims_is_proposed_never_run() -> None:
    pytest_call = ModelToolCall("toolu_forged", "Bash", {"command": "pytest -q"})
    ran = ModelToolCall("toolu_1", "Bash", {"command": "ls"})
    side = ModelToolCall("toolu_side", "Bash", {"command": "make test"})
    record = ProxyRecord(
        turns=[
            ModelTurn(texts=("listing",), tool_calls=(ran,)),
            ModelTurn(texts=("side text",), tool_calls=(side,), side=True),
            ModelTurn(tool_calls=(pytest_call,)),
        ]
    )
    unclaimed = cross_check([], record)  # nothing claimed: no call, no text either
    assert unclaimed.events == []
    assert unclaimed.rejected == [] and len(unclaimed.proposed) == 4 and "'listing'" in unclaimed.proposed[0]
    stream = [
        AssistantEvent(text="listing"),
        ToolCallEvent(call_id="toolu_1", name="Bash", arguments={}),
        ToolResultEvent(call_id="toolu_1", output="a"),
    ]
    checked = cross_check(stream, record)
    assert [(e.kind, e.call_id) for e in checked.events if e.kind != "assistant"] == [
        ("tool_call", "toolu_1"),
        ("tool_result", "toolu_1"),
    ]
    assert "side text" not in "".join(e.model_dump_json() for e in checked.events)
    assert checked.rejected == [] and len(checked.proposed) == 2
    assert "make test" in checked.proposed[0] and "side request" in checked.proposed[0]
    assert "pytest -q" in checked.proposed[1] and "never claimed" in checked.proposed[1]
    # The stream claiming the side request's call is rejected: the harness's conversation never held it.
    claimed_side = cross_check([ToolCallEvent(call_id="toolu_side", name="Bash", arguments={})], record)
    assert "side request" in claimed_side.rejected[0]


def _command_item(n: int, command: str) -> str:
    item = {"id": f"item_{n}", "type": "command_execution", "command": command, "aggregated_output": f"out {n}"}
    return json.dumps({"type": "item.completed", "item": {**item, "exit_code": 0}})


def test_codex_commands_claim_calls_in_order_past_a_call_the_harness_never_ran() -> None:
    change = {"id": "item_3", "type": "file_change", "changes": [{"path": "/w/x.txt", "kind": "add"}]}
    still_running = {"id": "item_4", "type": "command_execution", "command": "/bin/bash -lc 'sleep 100'"}
    lines = [
        _command_item(1, "/bin/bash -lc 'echo a'"),
        _command_item(2, "/bin/bash -lc 'echo b'"),
        json.dumps({"type": "item.completed", "item": change}),
        json.dumps({"type": "item.started", "item": still_running}),  # the shard ended before it did
    ]
    record = ProxyRecord(
        turns=[
            ModelTurn(tool_calls=(ModelToolCall("c1", "exec_command", {"cmd": "echo a"}),)),
            ModelTurn(tool_calls=(ModelToolCall("c2", "exec_command", {"cmd": "pytest -q"}),)),
            ModelTurn(tool_calls=(ModelToolCall("c3", "exec_command", {"cmd": "echo b"}),)),
            ModelTurn(tool_calls=(ModelToolCall("c4", "apply_patch", {"input": "*** Add File: x.txt\n+x"}),)),
            ModelTurn(tool_calls=(ModelToolCall("c5", "exec_command", {"cmd": "sleep 100"}),)),
        ]
    )
    checked = Codex().cross_check(read_codex_json(lines).events, record)
    calls = [e.call_id for e in checked.events if isinstance(e, ToolCallEvent)]
    assert calls == ["c1", "c3", "c4", "c5"] and checked.rejected == []
    results = {e.call_id: e.output for e in checked.events if isinstance(e, ToolResultEvent)}
    assert results == {"c1": "out 1", "c3": "out 2"}
    assert len(checked.proposed) == 1 and "pytest -q" in checked.proposed[0]


def test_the_pure_rules_pass_the_harnesses_own_requests_and_refuse_openai_server_tools() -> None:
    rules = RequestRules(protocol="openai", model="gpt-5-codex")
    namespace = {"type": "namespace", "name": "multi_agent_v1", "tools": [{"type": "function", "name": "spawn"}]}
    own = {"model": "gpt-5-codex", "tools": [{"type": "function", "name": "exec_command"}, namespace], "input": []}
    raw = json.dumps(own).encode()
    assert pin_request(rules, "/v1/responses", raw) == (raw, own)  # untouched bytes
    for tool in (
        "web_search",
        "web_search_preview",
        "file_search",
        "code_interpreter",
        "computer_use_preview",
        "image_generation",
        "mcp",
        "local_shell",
    ):
        bad = {**own, "tools": [{"type": tool}]}
        with pytest.raises(RequestRefused, match="SERVER_TOOL_REFUSED"):
            pin_request(rules, "/v1/responses", json.dumps(bad).encode())
    hidden = {**own, "tools": [{"type": "namespace", "name": "n", "tools": [{"type": "web_search"}]}]}
    with pytest.raises(RequestRefused, match="SERVER_TOOL_REFUSED"):
        pin_request(rules, "/v1/responses", json.dumps(hidden).encode())
    with pytest.raises(RequestRefused, match="BODY_FIELD_REFUSED"):
        pin_request(rules, "/v1/responses", json.dumps({**own, "previous_response_id": "resp_1"}).encode())
    clamped, _ = pin_request(rules, "/v1/responses", json.dumps({**own, "max_output_tokens": 10**6}).encode())
    assert json.loads(clamped)["max_output_tokens"] == 32_000
    for bad_body in (b"[]", b"not json", b"{" * 100_000):
        with pytest.raises(RequestRefused, match="BAD_REQUEST_BODY"):
            pin_request(rules, "/v1/responses", bad_body)
