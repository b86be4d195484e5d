"""Shared fixtures: a real redis-server per test session, the example repo as a git checkout."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from engine.redis_server import RedisServer, free_port
from engine.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_REPO = ROOT / "examples" / "demo-repo"


@pytest.fixture(scope="session", autouse=True)
def _no_user_data(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The session's runs land in its own store and run log, never in the developer's
    (``~/.local/share/skill-eval``), where they would crowd the viewer's list of real runs; a test
    that names its own (SKILL_EVAL_STORE, SKILL_EVAL_RUN_LOG in a child's environment) still wins."""
    data = tmp_path_factory.mktemp("user-data")
    saved = {k: os.environ.get(k) for k in ("SKILL_EVAL_STORE", "SKILL_EVAL_RUN_LOG")}
    os.environ["SKILL_EVAL_STORE"] = str(data / "store")
    os.environ["SKILL_EVAL_RUN_LOG"] = str(data / "runs.log")
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """A real redis-server started for this test session on a free port; stopped at the end."""
    with RedisServer() as server:
        yield server


@pytest.fixture
def redis_client(redis_server: RedisServer) -> Iterator[redis.Redis]:
    """A client on a flushed database: every test starts from an empty Redis."""
    if not redis_server.ping():  # a fault test may have killed it
        redis_server.start()
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    yield client
    client.close()


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


@pytest.fixture
def example_repo(tmp_path: Path) -> Path:
    """A private copy of examples/demo-repo as a git checkout with one commit and a remote."""
    repo = tmp_path / "demo-repo"
    shutil.copytree(EXAMPLE_REPO, repo)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "initial")
    git(repo, "remote", "add", "origin", str(tmp_path / "nowhere.git"))
    return repo


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """A moto S3 server on a free 127.0.0.1 port, reached by boto3 over real HTTP.

    S3 applies a conditional ``PutObject`` (``If-None-Match: *``) atomically: of writers racing
    for one key, exactly one succeeds. moto's threaded server looks the key up and then stores
    it as two steps, so two racing writers could both succeed there (the race test of the store
    failed so in one CI run). Its PUTs are serialised here, which gives S3's semantics back.
    """
    from moto.s3.responses import S3Response
    from moto.server import ThreadedMotoServer

    put_object = S3Response.put_object
    one_put = threading.Lock()

    def atomic_put_object(self: S3Response) -> object:
        with one_put:
            return put_object(self)

    S3Response.put_object = atomic_put_object  # type: ignore[method-assign,assignment]
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()
    S3Response.put_object = put_object  # type: ignore[method-assign]


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, s3_endpoint: str) -> str:
    """Dummy credentials and the moto endpoint in the environment; returns the endpoint."""
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("SKILL_EVAL_S3_ENDPOINT", s3_endpoint)
    return s3_endpoint


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[RedisServer]:
    """A private redis-server for one test that starts worker nodes against it (killed at its end)."""
    with RedisServer(workdir=tmp_path / "redis") as server:
        yield server


@pytest.fixture
def settings(tmp_path: Path, broker: RedisServer) -> Settings:
    """Cluster settings on ``broker`` with short leases and reaper periods, so recoveries take seconds."""
    return Settings(
        broker_url=broker.url,
        store=str(tmp_path / "store"),
        workdir=tmp_path / "work",
        lease_ttl_s=3.0,
        reaper_period_s=0.5,
        unsent_grace_s=2.0,
    )
