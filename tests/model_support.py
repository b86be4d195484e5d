"""The offline model server and a real GatedModelClient on it, for every suite that talks to a model.

The client goes over HTTP to the server through litellm, exactly as a worker does; only the
retry delays are shortened so fault tests finish quickly.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

import pytest
import redis

from schemas.model_config import parse_model_config
from testkit.offline_server import OfflineModelServer
from worker.models.client import GatedModelClient

FAST_RETRY: Mapping[str, float] = {"max_attempts": 2, "base_delay_s": 0.0, "max_delay_s": 0.0}
"""One retry, no waiting: a fault test sees the retry and its outcome at once."""


def make_client(
    redis_client: redis.Redis,
    api_base: str,
    *,
    retry: Mapping[str, float] = FAST_RETRY,
    run_id: str | None = None,
    **tables: Any,
) -> GatedModelClient:
    """A GatedModelClient whose every model is served from ``api_base``; ``tables`` add ``[models]``-style config."""
    config = parse_model_config({"retry": dict(retry), **tables}, api_base_override=api_base)
    return GatedModelClient(config, redis_client, run_id=run_id)


Scenario = dict[str, Any] | None


def server_fixtures(
    scenario: Callable[[], Scenario] = lambda: None, *, scope: Literal["module", "function"] = "module"
) -> tuple[Any, Any, Any]:
    """The ``server``, ``scripted`` and ``client`` fixtures of a test module.

    ``server``: one offline server per module (or per test, ``scope="function"``), started with
    ``scenario()``. ``scripted``: the server reset (no recorded requests, fault counters at zero)
    and given ``scenario()`` again before each test. ``client``: a fast-retry client on it.
    Use as ``server, scripted, client = server_fixtures(...)`` at module level.
    """

    @pytest.fixture(scope=scope, name="server")
    def server() -> Iterator[OfflineModelServer]:
        with OfflineModelServer(scenario()) as running:
            yield running

    @pytest.fixture(name="scripted")
    def scripted(server: OfflineModelServer) -> Iterator[OfflineModelServer]:
        server.reset()
        initial = scenario()
        if initial is not None:
            server.set_scenario(initial)
        yield server

    @pytest.fixture(name="client")
    def client(scripted: OfflineModelServer, redis_client: redis.Redis) -> GatedModelClient:
        return make_client(redis_client, scripted.base_url)

    return server, scripted, client


class CannedServer:
    """A real HTTP server answering each POST with the next canned (status, body) and recording requests."""

    def __init__(self, replies: list[tuple[int, Any]]) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                owner.requests.append(
                    {"path": self.path, "headers": dict(self.headers), "body": json.loads(self.rfile.read(length))}
                )
                status, body = owner.replies.pop(0) if len(owner.replies) > 1 else owner.replies[0]
                raw = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *_: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> CannedServer:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
