"""The offline model server and a real LiteLLMClient on it, for every suite that talks to a model.

The client goes over HTTP to the server through litellm, exactly as a worker does; only the
retry delays are shortened so fault tests finish quickly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, Literal

import pytest
import redis

from schemas.model_config import parse_model_config
from testkit.offline_server import OfflineModelServer
from worker.models.client import LiteLLMClient

FAST_RETRY: Mapping[str, float] = {"max_attempts": 2, "base_delay_s": 0.0, "max_delay_s": 0.0}
"""One retry, no waiting: a fault test sees the retry and its outcome at once."""


def make_client(
    redis_client: redis.Redis,
    api_base: str,
    *,
    retry: Mapping[str, float] = FAST_RETRY,
    run_id: str | None = None,
    **tables: Any,
) -> LiteLLMClient:
    """A LiteLLMClient whose every model is served from ``api_base``; ``tables`` add ``[models]``-style config."""
    config = parse_model_config({"retry": dict(retry), **tables}, api_base_override=api_base)
    return LiteLLMClient(config, redis_client, run_id=run_id)


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
    def client(scripted: OfflineModelServer, redis_client: redis.Redis) -> LiteLLMClient:
        return make_client(redis_client, scripted.base_url)

    return server, scripted, client
