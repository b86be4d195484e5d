"""Shared fixtures: a real redis-server per test session, the example repo as a git checkout."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from worker.redis_server import RedisServer

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_REPO = ROOT / "examples" / "demo-repo"


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
        cwd=cwd, check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip


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
