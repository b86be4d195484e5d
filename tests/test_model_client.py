"""The model client over real HTTP (offline server) and a real Redis: replies, retries, faults, config.

Every test runs once per transport: straight over HTTP (``direct``) and through litellm; the
tests of litellm's own bookkeeping pin ``litellm``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import redis

from engine.redis_server import RedisServer
from engine.usage import usage_totals
from schemas.errors import ConfigError, ModelCallFailed
from schemas.model_config import load_model_config
from testkit.offline_server import OfflineModelServer
from tests import model_support
from tests.model_support import server_fixtures
from worker.models.client import GatedModelClient, estimate_cost, is_retryable, retry_after_s
from worker.models.via_litellm import token_cost

MODEL = "openai/scripted"
TOOLS = [{"type": "function", "function": {"name": "shell", "parameters": {"type": "object"}}}]
SCENARIO: dict[str, Any] = {
    "rules": [
        {"contains": "use a tool", "replies": [{"tool_calls": [{"name": "shell", "arguments": {"command": "ls"}}]}]},
        {"contains": "garbled args", "replies": [{"tool_calls": [{"name": "shell", "arguments_raw": "{oops"}]}]},
        {"contains": "flaky", "replies": [{"status": 503, "times": 2, "text": "recovered"}]},
        {"contains": "always down", "replies": [{"status": 500}]},
        {"contains": "bad request", "replies": [{"status": 400}]},
        {"contains": "throttled once", "replies": [{"status": 429, "retry_after": 1, "times": 1, "text": "after"}]},
        {"contains": "stuck", "replies": [{"hang": True}]},
        {"contains": "broken once", "replies": [{"malformed": True, "times": 1, "text": "whole"}]},
        {"contains": "always broken", "replies": [{"malformed": True}]},
        {"contains": "slow", "replies": [{"delay_s": 0.3, "text": "slow reply"}]},
    ],
    "default": {"text": "plain"},
}


server = server_fixtures(lambda: SCENARIO, scope="function")[0]
_transport = ["direct"]


@pytest.fixture(autouse=True, params=["direct", "litellm"])
def transport(request: pytest.FixtureRequest) -> Iterator[str]:
    """The transport :func:`make_client` configures by default for this test."""
    _transport[0] = request.param
    yield request.param
    _transport[0] = "direct"


def make_client(
    redis_client: redis.Redis, api_base: str, retry: dict[str, float] | None = None, **tables: Any
) -> GatedModelClient:
    """Four attempts with short real delays (unless ``retry`` says otherwise), usage counted under run
    ``run-1``, every model on this test's transport unless ``defaults`` names another."""
    retry = retry or {"max_attempts": 4, "base_delay_s": 0.05, "max_delay_s": 0.2}
    tables["defaults"] = {"transport": _transport[0], **tables.get("defaults", {})}
    return model_support.make_client(redis_client, api_base, retry=retry, run_id="run-1", **tables)


def ask(client: GatedModelClient, text: str, **kwargs: Any) -> Any:
    return client.complete(MODEL, [{"role": "user", "content": text}], **kwargs)


def test_a_tool_call_reply_arrives_parsed_with_usage(server: OfflineModelServer, redis_client: redis.Redis) -> None:
    client = make_client(redis_client, server.base_url)
    reply = ask(client, "please use a tool", tools=TOOLS)
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [("shell", {"command": "ls"})]
    assert reply.finish_reason == "tool_calls"
    assert reply.usage.prompt_tokens > 0 and reply.usage.completion_tokens > 0 and reply.usage.calls == 1
    assert reply.usage.cost_usd is None  # the scripted model is not in litellm's cost map
    totals = usage_totals(redis_client, "run-1")[MODEL]
    assert (totals["calls"], totals["prompt_tokens"]) == (1, reply.usage.prompt_tokens)
    assert usage_totals(redis_client)[MODEL]["calls"] == 1
    assert server.requests()[0]["tools"] == TOOLS


def test_unparseable_tool_arguments_are_kept_raw(server: OfflineModelServer, redis_client: redis.Redis) -> None:
    reply = ask(make_client(redis_client, server.base_url), "garbled args")
    assert reply.tool_calls[0].arguments == {"_raw": "{oops"}


def test_5xx_then_success_is_retried_to_a_reply(server: OfflineModelServer, redis_client: redis.Redis) -> None:
    reply = ask(make_client(redis_client, server.base_url), "flaky")
    assert reply.content == "recovered" and reply.usage.calls == 3
    assert server.stats()["total"] == 3
    assert usage_totals(redis_client, "run-1")[MODEL]["errors"] == 2


def test_retries_exhausted_raise_model_call_failed_with_the_last_error(
    server: OfflineModelServer, redis_client: redis.Redis
) -> None:
    with pytest.raises(ModelCallFailed, match=r"after 4 attempts;.*(InternalServerError|EndpointError: HTTP 500)"):
        ask(make_client(redis_client, server.base_url), "always down")
    assert server.stats()["total"] == 4
    assert usage_totals(redis_client, "run-1")[MODEL]["failed"] == 1


def test_a_client_error_is_not_retried(server: OfflineModelServer, redis_client: redis.Redis) -> None:
    with pytest.raises(ModelCallFailed, match=r"BadRequestError|EndpointError: HTTP 400"):
        ask(make_client(redis_client, server.base_url), "bad request")
    assert server.stats()["total"] == 1


def test_a_hang_hits_the_timeout_and_is_retried_within_the_budget(
    server: OfflineModelServer, redis_client: redis.Redis
) -> None:
    client = make_client(redis_client, server.base_url, retry={"max_attempts": 2, "base_delay_s": 0.05})
    started = time.monotonic()
    with pytest.raises(ModelCallFailed, match="Timeout"):
        ask(client, "stuck", timeout_s=0.5)
    assert time.monotonic() - started < 5
    assert server.stats()["hangs"] == 2


def test_a_malformed_body_is_retried_and_a_persistent_one_fails(
    server: OfflineModelServer, redis_client: redis.Redis
) -> None:
    client = make_client(redis_client, server.base_url)
    assert ask(client, "broken once").content == "whole"
    with pytest.raises(ModelCallFailed):
        ask(client, "always broken")
    assert server.stats()["malformed"] == 1 + 4


def test_a_429_cools_down_every_client_for_its_retry_after(
    server: OfflineModelServer, redis_server: RedisServer, redis_client: redis.Redis
) -> None:
    first = make_client(redis_client, server.base_url)
    other_redis = redis.Redis.from_url(redis_server.url)
    second = make_client(other_redis, server.base_url)  # another worker: shares only Redis
    results: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: results.setdefault("first", ask(first, "throttled once")))
    thread.start()
    deadline = time.monotonic() + 10
    while (left := second.limiter(MODEL).cooldown_left()) == 0 and time.monotonic() < deadline:
        time.sleep(0.01)  # until the first worker's 429 has started the shared cool-down
    assert 0.5 < left <= 1.0  # Retry-After: 1
    started = time.monotonic()
    assert ask(second, "an unrelated call").content == "plain"
    assert time.monotonic() - started >= left - 0.05  # the second worker waited it out
    thread.join(10)
    assert results["first"].content == "after" and results["first"].usage.calls == 2
    assert first.limiter(MODEL).snapshot()["factor"] < 1.0
    other_redis.close()


@pytest.mark.slow
def test_a_storm_against_the_server_ceiling_ends_in_replies_not_failures(redis_client: redis.Redis) -> None:
    # The config claims far more than the server allows (2 requests per 2 s): the 429s with
    # Retry-After, the shared cool-down and the shrinking pace carry every call through.
    with OfflineModelServer({"default": {"text": "ok"}}, rpm=60, window_s=2.0) as srv:
        client = make_client(
            redis_client, srv.base_url, retry={"max_attempts": 8, "base_delay_s": 0.05}, defaults={"rpm": 6000}
        )
        replies: list[str] = []
        threads = [threading.Thread(target=lambda: replies.append(ask(client, "go").content)) for _ in range(5)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert replies == ["ok"] * 5
        assert srv.stats()["rate_limited"] >= 1
        assert client.limiter(MODEL).snapshot()["factor"] < 1.0


def test_calls_pass_the_concurrency_cap(server: OfflineModelServer, redis_client: redis.Redis) -> None:
    client = make_client(redis_client, server.base_url, models={MODEL: {"max_concurrency": 1}})
    ask(client, "warm up")  # litellm's first call pays one-off set-up costs
    started = time.monotonic()
    threads = [threading.Thread(target=ask, args=(client, "slow")) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert time.monotonic() - started >= 0.6  # one at a time: 2 x 0.3 s


def test_a_missing_api_key_variable_is_named(server: OfflineModelServer, redis_client: redis.Redis) -> None:
    client = make_client(redis_client, server.base_url, models={MODEL: {"api_key_env": "SKILL_EVAL_NO_SUCH_KEY"}})
    with pytest.raises(ModelCallFailed, match="SKILL_EVAL_NO_SUCH_KEY"):
        ask(client, "hi")


# --- settings ------------------------------------------------------------------------------


def test_the_config_file_sets_per_model_limits_over_defaults(tmp_path: Path) -> None:
    path = tmp_path / "skill-eval.toml"
    path.write_text(
        '[defaults]\nmax_concurrency = 4\n\n[models."openai/gpt-4.1"]\nrpm = 500\ntpm = 200000\n'
        'api_key_env = "OPENAI_API_KEY"\ntimeout_s = 60\n\n[retry]\nmax_attempts = 3\n'
    )
    config = load_model_config(path)
    gpt = config.for_model("openai/gpt-4.1")
    assert (gpt.rpm, gpt.tpm, gpt.max_concurrency, gpt.timeout_s) == (500, 200000, 4, 60)
    other = config.for_model("openai/unlisted")
    assert (other.rpm, other.max_concurrency, other.timeout_s) == (None, 4, 120)
    assert config.retry.max_attempts == 3
    overridden = load_model_config(path, api_base_override="http://127.0.0.1:9/v1")
    assert overridden.for_model("openai/gpt-4.1").api_base == "http://127.0.0.1:9/v1"


def test_the_default_config_file_is_read_from_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert load_model_config().models == {}
    (tmp_path / "skill-eval.toml").write_text('[models."m"]\nrpm = 7\n')
    assert load_model_config().for_model("m").rpm == 7


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[models."openai/x"\nrpm = 1', r"skill-eval\.toml: not valid TOML"),
        ('[models."openai/x"]\nrpm = -1', r'skill-eval\.toml: models\."openai/x"\.rpm: Input should be greater than 0'),
        ('[models."openai/x"]\nrmp = 5', r'models\."openai/x"\.rmp: Extra inputs are not permitted'),
        ("[retry]\nmax_attempts = 0", r"retry\.max_attempts"),
    ],
)
def test_a_bad_config_file_is_a_config_error_naming_file_and_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "skill-eval.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_model_config(path)


def test_a_config_path_that_does_not_exist_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_model_config(tmp_path / "missing.toml")


# --- pure helpers ----------------------------------------------------------------------------


def _with_headers(**headers: str) -> Exception:
    err = Exception("429")
    err.response = SimpleNamespace(headers=headers)  # type: ignore[attr-defined]
    return err


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "7"}, 7.0),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, None),  # HTTP-date: default cool-down
        ({}, None),
    ],
)
def test_retry_after_is_read_from_the_response_headers(headers: dict[str, str], seconds: float | None) -> None:
    assert retry_after_s(_with_headers(**headers)) == seconds


def test_only_transient_errors_are_retryable() -> None:
    transient = SimpleNamespace(status_code=503)
    refused = SimpleNamespace(status_code=401)
    assert is_retryable(_as_error(transient)) and not is_retryable(_as_error(refused))
    assert is_retryable(json.JSONDecodeError("x", "", 0))
    assert not is_retryable(ValueError("a bug, not the provider"))


def _as_error(attrs: SimpleNamespace) -> Exception:
    err = Exception("status")
    err.status_code = attrs.status_code  # type: ignore[attr-defined]
    return err


def test_a_priced_model_reports_the_cost_litellm_computes_for_its_tokens(
    server: OfflineModelServer, redis_client: redis.Redis
) -> None:
    import litellm

    client = make_client(redis_client, server.base_url)
    reply = client.complete("openai/gpt-4o-mini", [{"role": "user", "content": "hello"}])
    prompt, completion = litellm.cost_per_token(
        model="gpt-4o-mini", prompt_tokens=reply.usage.prompt_tokens, completion_tokens=reply.usage.completion_tokens
    )
    assert reply.usage.cost_usd == pytest.approx(prompt + completion)
    assert reply.usage.cost_usd > 0
    assert ask(client, "again").usage.cost_usd is None  # an unpriced model stays unpriced, call after call


def test_an_unpriced_model_is_registered_with_litellm_at_zero_yet_its_cost_stays_unknown(
    server: OfflineModelServer, redis_client: redis.Redis, transport: str
) -> None:
    """Registered so that litellm stops searching its table on every call; never reported as free.
    (The direct transport looks the price up once per call and never asks litellm.)"""
    import litellm

    model = f"openai/scripted-never-priced-{transport}"
    client = make_client(redis_client, server.base_url)
    assert model not in litellm.model_cost
    assert client.complete(model, [{"role": "user", "content": "hello"}]).usage.cost_usd is None
    assert (model in litellm.model_cost) == (transport == "litellm")  # litellm now finds it at once ...
    again = client.complete(model, [{"role": "user", "content": "again"}])
    assert again.usage.cost_usd is None  # ... and its zero is not taken for a price
    assert estimate_cost(model, 1000) is None
    assert token_cost(model, 100, 100) is None  # the harness path's pricing
    assert usage_totals(redis_client, "run-1")[model]["cost_usd"] is None  # no call of it had a known cost


def test_a_litellm_callback_someone_configured_still_sees_every_call(
    server: OfflineModelServer, redis_client: redis.Redis, transport: str
) -> None:
    """Without callbacks the client skips litellm's per-call success logging (nothing reads it);
    with one configured, every call through litellm, priced or not, reaches it as before, and
    costs stay. A direct call never passes litellm, so its callbacks never see it."""
    import litellm
    from litellm.integrations.custom_logger import CustomLogger

    from worker.models.via_litellm import litellm_logging_wanted

    seen: list[str] = []

    class Recorder(CustomLogger):  # type: ignore[misc]
        def log_success_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
            seen.append(str(kwargs.get("model")))

    client = make_client(redis_client, server.base_url)
    assert not litellm_logging_wanted()  # the product sets none
    assert client.complete("openai/gpt-4o-mini", [{"role": "user", "content": "before"}]).usage.cost_usd
    # litellm copies a configured callback into its per-event lists on the next call: all are
    # restored, or every later test of this process would run with the recorder attached.
    lists = ("callbacks", "success_callback", "_async_success_callback", "failure_callback", "_async_failure_callback")
    saved = {name: list(getattr(litellm, name)) for name in lists}
    litellm.callbacks = [Recorder()]
    try:
        assert litellm_logging_wanted()
        priced = client.complete("openai/gpt-4o-mini", [{"role": "user", "content": "hello"}])
        ask(client, "and you")
        deadline = time.monotonic() + 10
        while transport == "litellm" and len(seen) < 2 and time.monotonic() < deadline:  # its own thread
            time.sleep(0.05)
    finally:
        for name, value in saved.items():
            setattr(litellm, name, value)
    assert not litellm_logging_wanted()
    assert sorted(seen) == (["gpt-4o-mini", "scripted"] if transport == "litellm" else [])
    assert priced.usage.cost_usd is not None and priced.usage.cost_usd > 0
