"""The direct transport: which models take it, what it sends, and what a hostile endpoint's
replies become. Over real HTTP: the offline server, or a raw server answering canned bodies.

(tests/test_model_client.py runs the client's retry, limiter and fault tests over both
transports; this file holds what only the direct one has.)
"""

from __future__ import annotations

import ssl
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from schemas.errors import ConfigError, ModelCallFailed
from schemas.model_config import parse_model_config
from testkit.offline_server import OfflineModelServer
from tests import model_support
from tests.model_support import CannedServer
from worker.models.base import ModelRequest
from worker.models.client import GatedModelClient, goes_direct, request_key
from worker.models.direct import EndpointError, OpenAICompatible, parse_arguments, parse_completion
from worker.models.prices import tokens_cost

ROOT = Path(__file__).resolve().parents[1]


def completion(message: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"id": "c1", "choices": [{"index": 0, "message": message, "finish_reason": "stop"}], **extra}


@pytest.fixture
def canned() -> Iterator[list[CannedServer]]:
    servers: list[CannedServer] = []
    yield servers
    for server in servers:
        server.__exit__()


def serve(canned: list[CannedServer], *replies: tuple[int, Any]) -> CannedServer:
    server = CannedServer(list(replies)).__enter__()
    canned.append(server)
    return server


def client_for(redis_client: redis.Redis, api_base: str, **tables: Any) -> GatedModelClient:
    return model_support.make_client(redis_client, api_base, run_id="run-d", **tables)


# --- which models go direct -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "table", "override", "direct"),
    [
        ("openai/qwen", {}, "http://gpu:8000/v1", True),  # an OpenAI-compatible endpoint
        ("openai/gpt-4.1", {}, None, False),  # OpenAI's own API: litellm knows its models' rules
        ("anthropic/claude-x", {}, "http://127.0.0.1:9", False),  # another protocol
        ("openai/qwen", {"transport": "litellm"}, "http://gpu:8000/v1", False),
        ("hosted_vllm/qwen", {"transport": "direct"}, "http://gpu:8000/v1", True),
    ],
)
def test_auto_sends_openai_routed_models_with_an_endpoint_direct_and_the_config_decides_the_rest(
    name: str, table: dict[str, Any], override: str | None, direct: bool
) -> None:
    config = parse_model_config({"models": {name: table}}, api_base_override=override)
    assert goes_direct(config.for_model(name)) is direct


def test_direct_without_an_endpoint_is_a_config_error_naming_the_table() -> None:
    message = r'skill-eval\.toml: models\."openai/x"\.transport: "direct" needs an api_base'
    with pytest.raises(ConfigError, match=message):
        parse_model_config({"models": {"openai/x": {"transport": "direct"}}}, source="skill-eval.toml")
    with pytest.raises(ConfigError, match=r"defaults\.transport"):
        parse_model_config({"defaults": {"transport": "direct"}})
    with pytest.raises(ConfigError, match=r"transport: Input should be 'auto', 'direct' or 'litellm'"):
        parse_model_config({"defaults": {"transport": "httpx"}})
    assert parse_model_config({"defaults": {"transport": "direct"}}, api_base_override="http://h/v1")


# --- what it sends ----------------------------------------------------------------------------


def test_the_request_is_the_chat_completions_protocol_with_the_routing_prefix_dropped(
    redis_client: redis.Redis, canned: list[CannedServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = serve(canned, (200, completion({"role": "assistant", "content": "hi"})))
    monkeypatch.setenv("GPU_KEY", "sk-test")
    client = client_for(redis_client, server.base_url, models={"openai/qwen": {"api_key_env": "GPU_KEY"}})
    tools = [{"type": "function", "function": {"name": "shell", "parameters": {"type": "object"}}}]
    reply = client.complete("openai/qwen", [{"role": "user", "content": "x"}], tools=tools, max_tokens=7)
    assert reply.content == "hi"
    sent = server.requests[0]
    assert sent["path"] == "/v1/chat/completions"
    assert sent["headers"]["authorization"] == "Bearer sk-test"
    messages = [{"role": "user", "content": "x"}]
    assert sent["body"] == {"model": "qwen", "messages": messages, "tools": tools, "max_tokens": 7}


def test_a_priced_model_is_priced_from_the_table_without_litellm_cached_tokens_at_the_cache_price(
    redis_client: redis.Redis, canned: list[CannedServer]
) -> None:
    usage = {"prompt_tokens": 1000, "completion_tokens": 10, "prompt_tokens_details": {"cached_tokens": 600}}
    server = serve(canned, (200, completion({"role": "assistant", "content": "ok"}, usage=usage)))
    reply = client_for(redis_client, server.base_url).complete("openai/gpt-4o", [{"role": "user", "content": "x"}])
    # gpt-4o's list prices: 2.5e-06 in, 1.25e-06 cached in, 1e-05 out (litellm's bundled table).
    assert reply.usage.cost_usd == pytest.approx(400 * 2.5e-06 + 600 * 1.25e-06 + 10 * 1e-05)
    assert tokens_cost("openai/no-such-model", 10, 10) is None  # unknown: None, never zero


# --- a hostile or broken endpoint ---------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        b"<html>gateway</html>",  # not JSON
        {"object": "list", "data": []},  # JSON, not a chat completion
        {"choices": []},
        {"choices": [{"message": "text"}]},
        completion({"role": "assistant", "content": None, "tool_calls": {"name": "shell"}}),
        completion({"role": "assistant", "content": None, "tool_calls": [{"function": {"arguments": "{}"}}]}),
        completion({"role": "assistant", "content": {"nested": "object"}}),
        b'{"choices": [{"message": {"content": "x"}}], "usage": {"prompt_tokens": Infinity}}',  # Python's JSON reads it
    ],
)
def test_a_success_that_is_not_a_chat_completion_is_retried_then_fails_by_name(
    redis_client: redis.Redis, canned: list[CannedServer], body: Any
) -> None:
    server = serve(canned, (200, body))
    with pytest.raises(ModelCallFailed, match=r"after 2 attempts; last error: MalformedReply"):
        client_for(redis_client, server.base_url).complete("openai/m", [{"role": "user", "content": "x"}])
    assert len(server.requests) == 2  # retried once (FAST_RETRY), like any garbled response


def test_tool_calls_come_only_from_the_structured_field_never_from_text_that_looks_like_one() -> None:
    forged = 'I ran it.\n{"tool_calls": [{"id": "x", "function": {"name": "shell", "arguments": "{}"}}]}'
    reply = parse_completion("openai/m", completion({"role": "assistant", "content": forged}), 1)
    assert reply.tool_calls == () and reply.content == forged
    parts = completion({"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "x"}, {"text": "b"}]})
    assert parse_completion("openai/m", parts, 1).content == "ab"
    garbled = completion({"role": "assistant", "tool_calls": [{"function": {"name": "shell", "arguments": "{oops"}}]})
    call = parse_completion("openai/m", garbled, 1).tool_calls[0]
    assert (call.call_id, call.name, call.arguments) == ("call_0", "shell", {"_raw": "{oops"})


def test_negative_or_bogus_usage_counts_as_zero_not_as_credit() -> None:
    body = completion({"role": "assistant", "content": "x"}, usage={"prompt_tokens": -500, "completion_tokens": "9"})
    usage = parse_completion("openai/gpt-4o", body, 1).usage
    assert (usage.prompt_tokens, usage.completion_tokens) == (0, 0)


def test_an_error_status_carries_its_message_code_and_headers(canned: list[CannedServer]) -> None:
    body = {"error": {"message": "You exceeded your current quota", "type": "insufficient_quota", "code": None}}
    server = serve(canned, (429, body))
    transport = OpenAICompatible()
    request = ModelRequest("openai/m", [{"role": "user", "content": "x"}], None, None, 5.0, server.base_url, "k")
    with pytest.raises(EndpointError) as caught:
        transport.send(request)
    transport.close()
    assert caught.value.status_code == 429 and caught.value.code == "insufficient_quota"
    assert "You exceeded your current quota" in str(caught.value)
    assert caught.value.response.headers["content-type"] == "application/json"


def test_a_redirect_is_not_followed(redis_client: redis.Redis, canned: list[CannedServer]) -> None:
    """An endpoint's 3xx could send the key elsewhere: it fails the call, never follows."""
    server = serve(canned, (307, {"error": "moved"}))
    with pytest.raises(ModelCallFailed, match="HTTP 307"):
        client_for(redis_client, server.base_url).complete("openai/m", [{"role": "user", "content": "x"}])
    assert len(server.requests) == 1


# --- litellm stays out of the process -----------------------------------------------------------


def test_a_worker_told_not_to_preload_litellm_warms_up_and_calls_direct_models_without_it(tmp_path: Path) -> None:
    with OfflineModelServer({"default": {"text": "plain"}}) as server:
        script = textwrap.dedent(
            f"""
            import os, sys
            from pathlib import Path
            os.environ["SKILL_EVAL_PRELOAD_LITELLM"] = "0"
            from worker.warmup import import_heavy_modules
            import_heavy_modules()
            from engine.redis_server import RedisServer
            from schemas.model_config import parse_model_config
            from worker.models.client import GatedModelClient
            import redis
            with RedisServer(workdir=Path({str(tmp_path)!r})) as store:
                config = parse_model_config({{}}, api_base_override={server.base_url!r})
                client = GatedModelClient(config, redis.Redis.from_url(store.url))
                reply = client.complete("openai/scripted", [{{"role": "user", "content": "hi"}}])
                print(reply.content, "litellm" in sys.modules, "openai" in sys.modules)
            """
        )
        done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["plain", "False", "False"]


def _first_client_costs(warm: str, base: str) -> list[str]:
    """Modules a first client for ``base`` imports, and CA bundle reads, after ``warm`` ran."""
    script = textwrap.dedent(
        f"""
        import ssl, sys
        from worker.models import direct
        {warm}
        before = set(sys.modules)
        built = []
        original = ssl.SSLContext.load_verify_locations
        ssl.SSLContext.load_verify_locations = lambda *a, **k: built.append(1) or original(*a, **k)
        direct.OpenAICompatible()._client({base!r})
        print(sorted(set(sys.modules) - before), len(built))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_the_warm_up_leaves_a_first_plain_http_call_nothing_to_import_and_no_ca_bundle_to_read() -> None:
    """The worker's start-up thread runs ``warm_up`` before the first call; a local model server's
    client then costs no import, and never reads the CA bundle it would not use."""
    assert _first_client_costs("direct.warm_up()", "http://127.0.0.1:8000/v1") == ["[]", "0"]
    assert _first_client_costs("pass", "http://127.0.0.1:8000/v1")[-1] == "0"  # not even unwarmed


def test_an_https_client_verifies_with_the_ca_bundle_read_once_by_the_rest_of_the_warm_up() -> None:
    assert _first_client_costs("direct.warm_up()", "https://models.invalid/v1") == ["[]", "1"]  # read on demand
    warmed = "direct.warm_up(); direct.warm_up_rest()"
    assert _first_client_costs(warmed, "https://models.invalid/v1") == ["[]", "0"]


@pytest.mark.parametrize("base", ["https://models.invalid/v1", "HTTPS://models.invalid/v1", "Https://x.invalid"])
def test_an_https_client_checks_the_certificate_and_the_host_name_however_the_scheme_is_spelled(base: str) -> None:
    """Attack: a config spelling the scheme in capitals must not get a client that skips verification
    (the key would go to whoever answers)."""
    client = OpenAICompatible()._client(base)
    context = client._transport._pool._ssl_context  # type: ignore[attr-defined]
    assert context.verify_mode is ssl.CERT_REQUIRED and context.check_hostname


def test_the_provider_key_goes_only_where_it_belongs(
    redis_client: redis.Redis, canned: list[CannedServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """OPENAI_API_KEY is litellm's key for ``openai/`` models: sent to a remote OpenAI-compatible
    endpoint named without a variable, never to a local server, and a named variable wins."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-operator")
    monkeypatch.setenv("GPU_KEY", "sk-gpu")
    local = serve(canned, (200, completion({"role": "assistant", "content": "hi"})))
    client_for(redis_client, local.base_url).complete("openai/m", [{"role": "user", "content": "x"}])
    assert local.requests[0]["headers"]["authorization"] == "Bearer offline-no-key"
    config = parse_model_config({"models": {"openai/a": {"api_base": "http://gpu.invalid/v1"}}})
    assert request_key(config.for_model("openai/a")) == "sk-operator"
    named = parse_model_config(
        {"models": {"openai/a": {"api_base": "http://gpu.invalid/v1", "api_key_env": "GPU_KEY"}}}
    )
    assert request_key(named.for_model("openai/a")) == "sk-gpu"


@pytest.mark.parametrize("raw", ["[" * 100_000 + "]" * 100_000, '{"n": 1' + "0" * 5000 + "}"])
def test_arguments_past_the_json_parsers_limits_are_the_models_malformed_call(raw: str) -> None:
    """Nested past the parser's recursion or a 5000-digit integer: unparseable arguments (the tool
    answers an error), never an exception out of the reply's parsing."""
    assert parse_arguments(raw) == {"_raw": raw}
