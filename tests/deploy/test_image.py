"""The image, built and run for real (`make test-image`): a worker container on the host network
against the test Redis executes a run submitted from the host, every agent command inside
bubblewrap as a throwaway uid; without the sandbox's privileges the container refuses to start."""

from __future__ import annotations

import json
import re
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from engine.fleet import Fleet
from engine.redis_server import RedisServer
from engine.state import RunState
from engine.store import open_store
from schemas.manifest import trajectory_key
from schemas.status import ShardState
from testkit.offline_server import OfflineModelServer
from tests.deploy.image_support import IMAGE, SANDBOX_PRIVILEGES, build_image, docker
from tests.deploy.support import SKILL_EVAL
from tests.engine_support import EXECUTOR, FINAL_TEXT, JUDGE, SKILL, make_corpus_repo, scenario, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

PROBE = "echo uid=$(id -u) host=$(hostname)"


@pytest.fixture(scope="module")
def image() -> str:
    took = build_image()
    print(f"image build: {took:.0f}s")
    return IMAGE


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[RedisServer]:
    with RedisServer(workdir=tmp_path / "redis", appendonly=True) as server:
        yield server


@pytest.fixture
def container_names() -> Iterator[list[str]]:
    names: list[str] = []
    yield names
    for name in names:
        docker("rm", "-f", name, check=False)


def probing_scenario() -> dict[str, object]:
    """The executor runs PROBE in its sandbox, then answers FINAL_TEXT; the judge passes both assertions."""
    base = scenario()
    executor = {"name": "executor", "tools": True, "replies": [
        {"tool_calls": [{"name": "shell", "arguments": {"command": PROBE}}]},
        {"text": FINAL_TEXT},
    ]}  # fmt: skip
    base["rules"] = [base["rules"][0], executor]  # type: ignore[index]
    return base


def test_a_worker_container_executes_a_host_submitted_run_with_the_sandbox_on(
    image: str, tmp_path: Path, broker: RedisServer, container_names: list[str]
) -> None:
    store = tmp_path / "store"
    store.mkdir()
    name = f"skill-eval-worker-{secrets.token_hex(4)}"
    container_names.append(name)
    with OfflineModelServer(probing_scenario()) as model:
        docker(
            "run", "-d", "--name", name, "--network", "host", *SANDBOX_PRIVILEGES,
            "-v", f"{store}:{store}",
            "-e", f"SKILL_EVAL_BROKER_URL={broker.url}", "-e", f"SKILL_EVAL_STORE={store}",
            "-e", f"SKILL_EVAL_NODE_NAME={name}",
            image, "worker", "--queues", "execute,grade,reduce", "--concurrency", "2",
        )  # fmt: skip
        client = redis.Redis.from_url(broker.url)
        wait_until(lambda: Fleet(client).record(name) is not None, 120, what="the container's worker beating")

        repo = make_corpus_repo(tmp_path / "repo", cases=2)
        done = subprocess.run(
            [
                SKILL_EVAL, "run", SKILL, "--repo", str(repo), "--model", EXECUTOR, "--judge", JUDGE,
                "--api-base", model.base_url, "--broker", broker.url, "--store", str(store),
                "--no-calibration", "--out", str(tmp_path / "reports"), "--shard-timeout", "120",
            ],
            env={"PATH": str(Path(SKILL_EVAL).parent) + ":/usr/bin:/bin", "HOME": str(tmp_path),
                 "SKILL_EVAL_RUN_LOG": str(tmp_path / "runs.log")},
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        logs = docker("logs", name).stderr
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:] + logs[-3000:]
        probe = docker("exec", name, "skill-eval", "worker", "--health")

    (key,) = list(client.scan_iter("skill-eval:run:*:states"))
    run_id = key.decode().split(":")[2]
    states = RunState(client).states(run_id)
    assert set(states.values()) == {ShardState.GRADED}
    assert logs.count('"shard finished"') == len(states), "every shard ended inside the container"
    for shard_id in states:
        trajectory = json.loads(open_store(str(store)).get(trajectory_key(run_id, shard_id)))
        seen = re.search(r"uid=(\d+) host=(\w+)", json.dumps(trajectory))
        assert seen is not None, "the probe's output is in the trajectory"
        assert seen[2] == "sandbox", "the command ran inside bubblewrap (its own UTS namespace)"
        uid = int(seen[1])
        assert uid not in (0, 10001), f"the agent ran as uid {uid}: never root, never the image user"
    assert probe.returncode == 0 and "ok: beat" in probe.stdout


@pytest.mark.parametrize("user", ["0", "10001"])
def test_a_container_without_the_sandbox_privileges_refuses_to_start(
    image: str, broker: RedisServer, user: str
) -> None:
    done = docker(
        "run", "--rm", "--network", "host", "--user", user, "-e", f"SKILL_EVAL_BROKER_URL={broker.url}",
        image, "worker", "--queues", "execute",
        check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "BLOCKED_NO_SANDBOX: bubblewrap cannot create a sandbox on this host" in done.stdout + done.stderr


def test_the_image_serves_the_producer_cli_as_its_non_root_user(image: str) -> None:
    done = docker("run", "--rm", "--entrypoint", "sh", image, "-c", "id -u && skill-eval --help", timeout=120)
    assert done.stdout.splitlines()[0] == "10001"
    assert "worker" in done.stdout and "run" in done.stdout
