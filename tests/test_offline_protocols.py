"""The offline server's Anthropic Messages and OpenAI Responses APIs, over real HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import redis

from schemas.model_config import parse_model_config
from testkit.offline_server import OfflineModelServer
from worker.models.client import GatedModelClient

SCENARIO: dict[str, Any] = {
    "rules": [
        {
            "contains": "list files",
            "replies": [
                {"text": "Listing.", "tool_calls": [{"name": "Bash", "arguments": {"command": "ls -la " + "x" * 60}}]},
                {"text": "done"},
            ],
        },
        {"contains": "busy", "replies": [{"status": 429, "retry_after": 3}]},
        {"contains": "run shell", "replies": [{"tool_calls": [{"name": "shell", "arguments": {"command": "ls"}}]}]},
    ],
    "default": {"text": "fallback"},
}


@pytest.fixture
def server() -> Iterator[OfflineModelServer]:
    srv = OfflineModelServer(SCENARIO)
    srv.start()
    yield srv
    srv.stop()


def root(server: OfflineModelServer) -> str:
    return f"http://127.0.0.1:{server.port}"


def sse(response: httpx.Response) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")]


def messages_request(text: str, **extra: Any) -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "system": [{"type": "text", "text": "You are a coding agent."}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": text}]}],
        "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
        **extra,
    }


def test_a_streamed_messages_reply_rebuilds_into_text_and_a_tool_use_with_usage(server: OfflineModelServer) -> None:
    response = httpx.post(
        f"{root(server)}/v1/messages?beta=true",
        json=messages_request("please list files", stream=True),
        headers={"x-api-key": "sk-test"},
    )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = sse(response)
    assert events[0]["type"] == "message_start"
    assert events[-1]["type"] == "message_stop"
    pieces = [e["delta"]["partial_json"] for e in events if e.get("delta", {}).get("type") == "input_json_delta"]
    assert len(pieces) > 1  # the arguments arrive in several input_json_delta pieces
    assert json.loads("".join(pieces)) == {"command": "ls -la " + "x" * 60}
    starts = [e["content_block"] for e in events if e["type"] == "content_block_start"]
    assert [b["type"] for b in starts] == ["text", "tool_use"] and starts[1]["name"] == "Bash"
    delta = next(e for e in events if e["type"] == "message_delta")
    assert delta["delta"]["stop_reason"] == "tool_use" and delta["usage"]["output_tokens"] > 0
    assert events[0]["message"]["usage"]["input_tokens"] > 0
    assert server.keys() == ["sk-test"]


def test_the_turn_index_counts_assistant_messages_so_the_next_request_gets_the_next_reply(
    server: OfflineModelServer,
) -> None:
    body = messages_request("please list files")
    first = httpx.post(f"{root(server)}/v1/messages", json=body).json()
    tool_use = first["content"][1]
    body["messages"] += [
        {"role": "assistant", "content": first["content"]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_use["id"], "content": "a b"}]},
    ]
    second = httpx.post(f"{root(server)}/v1/messages", json=body).json()
    assert second["content"] == [{"type": "text", "text": "done"}] and second["stop_reason"] == "end_turn"


def test_count_tokens_and_a_429_speak_the_anthropic_shapes(server: OfflineModelServer) -> None:
    counted = httpx.post(f"{root(server)}/v1/messages/count_tokens?beta=true", json=messages_request("hi")).json()
    assert counted["input_tokens"] > 0
    busy = httpx.post(f"{root(server)}/v1/messages", json=messages_request("busy now"))
    assert busy.status_code == 429 and busy.headers["retry-after"] == "3"
    assert busy.json()["type"] == "error" and busy.json()["error"]["type"] == "rate_limit_error"


def test_a_streamed_response_ends_in_response_completed_and_uses_the_requests_shell_tool(
    server: OfflineModelServer,
) -> None:
    body = {
        "model": "gpt-5-codex",
        "instructions": "be useful",
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "run shell"}]}],
        "tools": [{"type": "function", "name": "exec_command", "parameters": {"type": "object"}}],
        "stream": True,
    }
    events = sse(httpx.post(f"{root(server)}/v1/responses", json=body))
    assert events[0]["type"] == "response.created" and events[-1]["type"] == "response.completed"
    call = events[-1]["response"]["output"][0]
    assert call["type"] == "function_call" and call["name"] == "exec_command"
    assert json.loads(call["arguments"]) == {"cmd": "ls"}
    assert events[-1]["response"]["usage"]["total_tokens"] > 0


def test_the_builtin_client_reaches_the_messages_api_through_litellm_with_tool_use_usage_and_cost(
    server: OfflineModelServer, redis_client: redis.Redis
) -> None:
    # The run's one --api-base is the OpenAI-style .../v1; the Anthropic provider gets the host root.
    config = parse_model_config({"retry": {"max_attempts": 2, "base_delay_s": 0.05}}, api_base_override=server.base_url)
    client = GatedModelClient(config, redis_client, run_id="run-a")
    tools = [{"type": "function", "function": {"name": "Bash", "parameters": {"type": "object"}}}]
    reply = client.complete("anthropic/claude-sonnet-4-5", [{"role": "user", "content": "list files"}], tools=tools)
    assert [c.name for c in reply.tool_calls] == ["Bash"]
    assert reply.tool_calls[0].arguments == {"command": "ls -la " + "x" * 60}
    assert reply.usage.prompt_tokens > 0 and reply.usage.completion_tokens > 0
    assert reply.usage.cost_usd is not None and reply.usage.cost_usd > 0
