"""The test session's own redis-server is real, and fault tests can kill and restart it."""

from __future__ import annotations

import pytest
import redis

from engine.redis_server import RedisServer


def test_the_session_redis_is_a_real_server_on_loopback(redis_client: redis.Redis) -> None:
    redis_client.set("k", "v")
    assert redis_client.get("k") == b"v"
    assert redis_client.info("server")["tcp_port"] > 0


def test_every_test_starts_from_an_empty_database(redis_client: redis.Redis) -> None:
    assert redis_client.dbsize() == 0


def test_a_killed_server_refuses_connections_and_a_restart_serves_again() -> None:
    with RedisServer() as server:
        client = redis.Redis.from_url(server.url, socket_timeout=1)
        client.set("k", "v")
        server.kill()
        with pytest.raises(redis.ConnectionError):
            client.ping()
        server.restart()
        assert client.ping()
        assert client.get("k") is None  # nothing is persisted
        client.close()
