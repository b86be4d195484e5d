"""The per-shard model proxy over its unix socket: paths, keys, budgets, scrubbing, the shared limiter."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from engine.budget import RunBudget
from harnesses.base import PLACEHOLDER_KEY
from harnesses.claude_code import ClaudeCode
from harnesses.endpoints import normalise_upstream, scrub
from schemas.model_config import ModelLimits
from testkit.offline_server import OfflineModelServer
from worker.models.limiter import Limiter
from worker.proxy import ModelProxy, ProxyConfig
from worker.proxy import replies as proxy_replies
from worker.proxy import waits as proxy_waits
from worker.proxy.server import RESERVED_COMPLETION

REAL_KEY = "sk-real-0123456789abcdefghij"
MODEL = "anthropic/claude-sonnet-4-5"
SCENARIO: dict[str, Any] = {
    "rules": [
        {"contains": "leak", "replies": [{"status": 401, "error_message": f"invalid x-api-key {REAL_KEY[3:19]}..."}]},
        {"contains": "busy", "replies": [{"status": 429, "retry_after": 2, "times": 1, "text": "after the storm"}]},
        {"contains": "overloaded", "replies": [{"status": 529, "times": 1, "text": "back up"}]},
        {"contains": "forever", "replies": [{"status": 429, "retry_after": 3600, "text": "never"}]},
        {"contains": "tool", "replies": [{"tool_calls": [{"name": "Bash", "arguments": {"command": "ls"}}]}]},
    ],
    "default": {"text": "hello"},
}


@pytest.fixture
def server() -> Iterator[OfflineModelServer]:
    with OfflineModelServer(SCENARIO) as s:
        yield s


def proxy_for(server: OfflineModelServer, tmp: Path, name: str = "p", **overrides: Any) -> ModelProxy:
    limiter = overrides.pop("limiter", None)
    run_budget = overrides.pop("run_budget", None)
    config = ProxyConfig(
        protocol="anthropic",
        upstream=normalise_upstream("anthropic", server.base_url),
        real_key=REAL_KEY,
        model=MODEL,
        **overrides,
    )
    return ModelProxy(config, tmp / f"{name}.sock", limiter=limiter, run_budget=run_budget)


def client(proxy: ModelProxy) -> httpx.Client:
    return httpx.Client(transport=httpx.HTTPTransport(uds=str(proxy.socket_path)), base_url="http://proxy", timeout=30)


def ask(c: httpx.Client, text: str, key: str = PLACEHOLDER_KEY, path: str = "/v1/messages?beta=true") -> httpx.Response:
    body = {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": [{"role": "user", "content": text}]}
    return c.post(path, json=body, headers={"x-api-key": key, "anthropic-version": "2023-06-01"})


def test_api_base_is_normalised_per_protocol() -> None:
    for base in ("http://h:1/v1", "http://h:1", "http://h:1/v1/messages", "http://h:1/"):
        assert normalise_upstream("anthropic", base) == "http://h:1"
    for base in ("http://h:1/v1", "http://h:1", "http://h:1/v1/responses"):
        assert normalise_upstream("openai", base) == "http://h:1/v1"
    assert normalise_upstream("anthropic", None) == "https://api.anthropic.com"


def test_the_placeholder_is_swapped_for_the_real_key_and_the_reply_is_recorded(
    server: OfflineModelServer, tmp_path: Path
) -> None:
    with proxy_for(server, tmp_path) as proxy, client(proxy) as c:
        reply = ask(c, "use a tool please")
    assert reply.status_code == 200
    assert server.keys() == [REAL_KEY]
    [turn] = proxy.record.turns
    assert [(t.name, t.arguments) for t in turn.tool_calls] == [("Bash", {"command": "ls"})]
    assert turn.prompt_tokens > 0 and turn.completion_tokens > 0


def test_only_model_paths_leave_and_only_with_the_placeholder_key(server: OfflineModelServer, tmp_path: Path) -> None:
    with proxy_for(server, tmp_path, answered_empty=ClaudeCode().answered_empty) as proxy, client(proxy) as c:
        assert c.get("/api/claude_cli/bootstrap").json() == {}  # its adapter names it: answered here
        assert c.post("/_control/reset", json={}).status_code == 404  # the upstream's own admin path
        assert c.get("/api/eval/anything").status_code == 404
        assert ask(c, "hello", key="sk-my-own-key").status_code == 401
        # An absolute URL naming another host still only ever reaches the configured upstream.
        assert ask(c, "hello", path="http://169.254.169.254/v1/messages").status_code == 200
        assert c.request("CONNECT", "/").status_code == 501
    assert len(server.requests()) == 1 and len(proxy.record.refused) == 3
    with proxy_for(server, tmp_path, "q") as proxy, client(proxy) as c:
        assert c.get("/api/claude_cli/bootstrap").status_code == 404  # no adapter named it


def test_upstream_error_bodies_never_carry_a_fragment_of_the_real_key(
    server: OfflineModelServer, tmp_path: Path
) -> None:
    with proxy_for(server, tmp_path) as proxy, client(proxy) as c:
        reply = ask(c, "leak it")
    assert reply.status_code == 401
    assert REAL_KEY[3:19] not in reply.text and "[redacted]" in reply.text
    assert scrub("key sk-real-0123 end", REAL_KEY) == "key [redacted] end"


def test_the_token_and_turn_budgets_are_enforced_by_refusing_further_requests(
    server: OfflineModelServer, tmp_path: Path
) -> None:
    with proxy_for(server, tmp_path, max_turns=2) as proxy, client(proxy) as c:
        assert ask(c, "one").status_code == 200
        assert ask(c, "two").status_code == 200
        refused = ask(c, "three")
    assert refused.status_code == 400 and "max-turns" in refused.text
    assert proxy.record.budget_end == "max-turns" and len(server.requests()) == 2
    with proxy_for(server, tmp_path, name="w", wall_clock_s=0.01) as proxy, client(proxy) as c:
        time.sleep(0.05)
        assert ask(c, "late").status_code == 400
    assert proxy.record.budget_end == "wall-clock"


def test_the_runs_cap_refuses_a_harness_call_and_marks_the_shard_budget_exhausted_not_behaviour(
    server: OfflineModelServer, tmp_path: Path, redis_client: redis.Redis
) -> None:
    budget = RunBudget(redis_client, "run-capped")
    budget.set_caps(max_tokens=RESERVED_COMPLETION + 1000, max_cost_usd=None)  # room for one reservation
    with proxy_for(server, tmp_path, run_budget=budget) as proxy, client(proxy) as c:
        assert ask(c, "one").status_code == 200
        other_shard = budget.reserve("another-model", 1000, None)  # the fleet spends from the same cap
        assert not isinstance(other_shard, str)
        budget.settle(other_shard, 1000, None)
        refused = ask(c, "two")
    assert refused.status_code == 400 and "token cap is reached" in refused.text
    assert proxy.record.run_budget_end is not None and proxy.record.budget_end is None  # the run's, not the shard's
    assert len(server.requests()) == 1  # the refused call never reached the upstream
    assert 1000 < budget.spend().tokens <= RESERVED_COMPLETION + 1000


def test_two_shards_share_the_fleet_limiter_so_one_429_with_retry_after_backs_both_off(
    server: OfflineModelServer, tmp_path: Path, redis_client: redis.Redis
) -> None:
    limits = ModelLimits(name=MODEL, api_base=server.base_url)
    proxies = [proxy_for(server, tmp_path, name=n, limiter=Limiter(redis_client, limits)) for n in ("a", "b")]
    for p in proxies:
        p.start()
    try:
        with client(proxies[0]) as a, client(proxies[1]) as b:
            first = ask(a, "busy now")  # upstream: 429 with Retry-After 2
            began = time.monotonic()
            other: list[tuple[httpx.Response, float]] = []

            def shard_b() -> None:
                response = ask(b, "independent work")
                other.append((response, time.monotonic() - began))

            thread = threading.Thread(target=shard_b)
            thread.start()
            retried = ask(a, "busy now")
            thread.join()
    finally:
        for p in proxies:
            p.stop()
    assert first.status_code == 429 and first.headers["retry-after"] == "2"
    assert retried.status_code == 200 and other[0][0].status_code == 200
    assert other[0][1] >= 1.5  # shard b never saw the 429 itself, yet waited out the shared cool-down
    assert proxies[1].waited_s >= 1.5  # and that wait is the fleet's, not shard b's agent's


def test_a_wait_on_the_fleet_does_not_count_against_the_shards_wall_clock(
    server: OfflineModelServer, tmp_path: Path, redis_client: redis.Redis
) -> None:
    limiter = Limiter(redis_client, ModelLimits(name=f"{MODEL}-waits", api_base=server.base_url))
    with proxy_for(server, tmp_path, limiter=limiter, wall_clock_s=1.0) as proxy, client(proxy) as c:
        limiter.report_rate_limited(1.5)  # another shard's 429: the whole fleet cools down for 1.5 s
        assert ask(c, "one").status_code == 200  # answered after the cool-down, past the 1 s wall clock
        assert ask(c, "two").status_code == 200  # the agent itself has used next to none of it
    assert proxy.waited_s >= 1.4
    assert proxy.record.budget_end is None


def test_requests_waiting_side_by_side_count_once_and_the_allowance_is_capped(
    server: OfflineModelServer, tmp_path: Path, redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A harness is adversarial: it may send its proxy many requests at once to stretch its clock.
    # Parallel waits are one stretch of time, and no more than the allowance is ever excused,
    # so its clock runs out before the task's deadline and its own timeout stays behaviour.
    monkeypatch.setattr(proxy_waits, "FLEET_WAIT_ALLOWANCE_S", 0.5)
    limiter = Limiter(redis_client, ModelLimits(name=f"{MODEL}-parallel", api_base=server.base_url))
    with proxy_for(server, tmp_path, limiter=limiter, wall_clock_s=0.9) as proxy, client(proxy) as c:
        # The cool-down starts after the proxy's clock does, so "late" below comes at least 1.5 s
        # after that clock started, however long the proxy took to come up.
        limiter.report_rate_limited(1.5)
        answers: list[int] = []
        threads = [threading.Thread(target=lambda: answers.append(ask(c, "many").status_code)) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert answers == [200] * 4
        assert 1.3 <= proxy.waited_s < 2.0  # four requests held 1.5 s together: 1.5 s, not 6
        late = ask(c, "late")  # 1.5 s in, past 0.9 s of wall clock plus the 0.5 s allowance
    assert late.status_code == 400 and proxy.record.budget_end == "wall-clock"


def test_a_harnesss_sleep_before_retrying_a_429_is_the_fleets_time_not_its_own(
    server: OfflineModelServer, tmp_path: Path
) -> None:
    # The 429 is passed back and the harness's SDK sleeps out its Retry-After (2 s) before it
    # retries: that sleep is the provider's rate limit, as a wait in the limiter would be.
    with proxy_for(server, tmp_path, wall_clock_s=1.0) as proxy, client(proxy) as c:
        first = ask(c, "busy now")
        time.sleep(1.2)  # as the SDK would, within the 2 s it was told
        retried = ask(c, "busy now")
        waited = proxy.waited_s
    assert first.status_code == 429 and retried.status_code == 200  # answered: 1.2 s of sleep excused
    assert 1.1 <= waited < 1.6  # until it came back, not the 2 s it was allowed
    assert proxy.record.budget_end is None


def test_a_sleep_after_a_failure_without_retry_after_is_excused_until_the_harness_is_back(
    server: OfflineModelServer, tmp_path: Path
) -> None:
    with proxy_for(server, tmp_path, wall_clock_s=0.5) as proxy, client(proxy) as c:
        assert ask(c, "overloaded").status_code == 529  # no Retry-After: the SDK's own backoff
        time.sleep(0.6)
        assert ask(c, "overloaded").status_code == 200  # 0.6 s in, past the 0.5 s: the sleep is excused
        excused = proxy.waited_s
        time.sleep(0.8)  # the harness's own time again, past its 0.5 s
        late = ask(c, "late")
    assert 0.5 <= excused < 1.0
    assert late.status_code == 400 and proxy.record.budget_end == "wall-clock"


def test_a_harness_that_never_retries_is_excused_no_more_than_it_was_told_to_wait(
    server: OfflineModelServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Adversarial: an agent that gets a 429 and then idles must not make its idling the fleet's.
    monkeypatch.setattr(proxy_replies, "UNHINTED_BACKOFF_S", 0.3)
    with proxy_for(server, tmp_path) as proxy, client(proxy) as c:
        assert ask(c, "overloaded").status_code == 529  # no hint: at most 0.3 s
        time.sleep(0.8)
        assert 0.25 <= proxy.waited_s < 0.45
    for module in (proxy_waits, proxy_replies):  # the allowance caps both the hint and the excuse
        monkeypatch.setattr(module, "FLEET_WAIT_ALLOWANCE_S", 0.5)
    with proxy_for(server, tmp_path, name="q") as proxy, client(proxy) as c:
        assert ask(c, "forever").status_code == 429  # told to wait an hour: the allowance is the most
        time.sleep(1.0)
        assert 0.45 <= proxy.waited_s < 0.65


def test_a_retry_after_that_is_not_a_finite_number_of_seconds_is_no_hint() -> None:
    def hint(value: str) -> float:
        return proxy_replies.backoff_hint(httpx.Response(429, headers={"retry-after": value}))

    assert hint("2") == 2.0 and hint("0.5") == 0.5
    assert hint("3600") == proxy_replies.FLEET_WAIT_ALLOWANCE_S
    for odd in ("nan", "inf", "-inf", "-3", "Wed, 21 Oct 2026 07:28:00 GMT", ""):
        assert hint(odd) == proxy_replies.UNHINTED_BACKOFF_S, odd


def test_an_agent_hanging_up_mid_exchange_writes_nothing_to_the_workers_log(
    server: OfflineModelServer, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    # The reply sits unread when the client closes, so the proxy's next read on that connection
    # is reset: socketserver printed a traceback for each such connection, which an agent could
    # repeat at will into the worker's log.
    with proxy_for(server, tmp_path) as proxy:
        for _ in range(20):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.connect(str(proxy.socket_path))
                sock.sendall(b"GET /v1/nothing HTTP/1.1\r\nHost: proxy\r\n\r\n")
                time.sleep(0.02)
        with client(proxy) as c:
            assert ask(c, "hi").status_code == 200  # and it still serves the shard
        time.sleep(0.2)
    assert "Traceback" not in capfd.readouterr().err


def test_a_request_the_proxy_fails_on_is_one_log_line_without_the_key(
    server: OfflineModelServer, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    def fails(handler: object, method: str) -> None:
        raise RuntimeError(f"upstream said no to {REAL_KEY}")

    with proxy_for(server, tmp_path) as proxy:
        proxy.handle = fails  # type: ignore[method-assign]
        with client(proxy) as c, contextlib.suppress(httpx.HTTPError):
            ask(c, "hi")
        time.sleep(0.2)
    err = capfd.readouterr()
    logged = err.out + err.err
    assert "Traceback" not in logged and "a request failed" in logged
    assert REAL_KEY[:12] not in logged and "RuntimeError: upstream said no to" in logged


def test_only_the_harness_s_own_conversation_speaks_for_the_upstream(
    server: OfflineModelServer, tmp_path: Path
) -> None:
    # The agent's own request (none of the harness's prompt in it) that the upstream fails with a
    # retryable status is no evidence of an infra failure: the record's upstream fields ignore it.
    opening = "Do the task for the shard."
    with proxy_for(server, tmp_path, opening=opening) as proxy, client(proxy) as c:
        assert ask(c, f"{opening} use a tool").status_code == 200
        assert ask(c, "forever and ever").status_code == 429
        record = proxy.record
        assert (record.forwarded, record.asked, record.upstream_failures) == (2, 1, 0)
        assert record.last_upstream_ok and record.last_error == ""
        assert ask(c, f"{opening} overloaded").status_code == 529  # the harness's own: it counts
    assert (record.asked, record.upstream_failures, record.last_upstream_ok) == (2, 1, False)
    assert "upstream status 529" in record.last_error


@pytest.mark.parametrize("length", [str(64 * 1024 * 1024), "-5", "many"])
def test_a_body_over_the_bound_or_unsized_is_refused_unread(
    server: OfflineModelServer, tmp_path: Path, length: str
) -> None:
    # The proxy read any Content-Length whole into the worker's memory before judging the request.
    with proxy_for(server, tmp_path) as proxy:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(10)
            sock.connect(str(proxy.socket_path))
            head = f"POST /v1/messages HTTP/1.1\r\nHost: proxy\r\nx-api-key: {PLACEHOLDER_KEY}\r\n"
            sock.sendall(f"{head}Content-Length: {length}\r\n\r\n{{}}".encode())
            answer = sock.recv(4096).decode()
        assert answer.startswith("HTTP/1.1 413"), answer
        assert "must be sized and at most" in answer
        assert proxy.record.agent_refusals and not proxy.record.turns
        with client(proxy) as c:
            assert ask(c, "hi").status_code == 200  # and it still serves the shard
