"""The image, built and run for real (`make test-image`): a worker container on the host network
against the test Redis executes a run submitted from the host, every agent command inside
bubblewrap as a throwaway uid; without the sandbox's privileges the container refuses to start."""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from engine.fleet import Fleet
from engine.keys import run_keys
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
    executor = {
        "name": "executor",
        "tools": True,
        "replies": [
            {"tool_calls": [{"name": "shell", "arguments": {"command": PROBE}}]},
            {"text": FINAL_TEXT},
        ],
    }
    base["rules"] = [base["rules"][0], executor]  # type: ignore[index]
    return base


def test_worker_containers_execute_and_grade_a_host_submitted_run_with_the_sandbox_on(
    image: str, tmp_path: Path, broker: RedisServer, container_names: list[str], aws_env: str
) -> None:
    """As deployed: an execute container (root in the container, the sandbox's privileges) and a
    grade,reduce container (the image user, read-only root filesystem, no capabilities), both on the
    host network, sharing an S3 store (moto over HTTP) and the test Redis."""
    import boto3

    boto3.client("s3", endpoint_url=aws_env).create_bucket(Bucket="skill-eval-image")
    store = "s3://skill-eval-image/runs"
    common = [
        "--network",
        "host",
        "-e",
        f"SKILL_EVAL_BROKER_URL={broker.url}",
        "-e",
        f"SKILL_EVAL_STORE={store}",
        "-e",
        f"SKILL_EVAL_S3_ENDPOINT={aws_env}",
        "-e",
        "AWS_ACCESS_KEY_ID=testing",
        "-e",
        "AWS_SECRET_ACCESS_KEY=testing",
        "-e",
        "AWS_DEFAULT_REGION=us-east-1",
    ]
    executor, grader = (f"skill-eval-{role}-{secrets.token_hex(4)}" for role in ("execute", "grade"))
    container_names += [executor, grader]
    with OfflineModelServer(probing_scenario()) as model:
        docker(
            "run",
            "-d",
            "--name",
            executor,
            *common,
            *SANDBOX_PRIVILEGES,
            "-e",
            f"SKILL_EVAL_NODE_NAME={executor}",
            image,
            "worker",
            "--queues",
            "execute",
            "--concurrency",
            "2",
        )
        docker(
            "run",
            "-d",
            "--name",
            grader,
            *common,
            "--user",
            "10001",
            "--read-only",
            "--cap-drop",
            "ALL",
            "--security-opt",
            "no-new-privileges",
            "--tmpfs",
            "/tmp",
            "--tmpfs",
            "/var/lib/skill-eval/work:uid=10001,gid=10001",
            "-e",
            f"SKILL_EVAL_NODE_NAME={grader}",
            "-e",
            "SKILL_EVAL_RUN_LOG=/var/lib/skill-eval/work/runs.log",
            image,
            "worker",
            "--queues",
            "grade,reduce",
            "--concurrency",
            "4",
        )
        client = redis.Redis.from_url(broker.url)
        for name in (executor, grader):
            wait_until(lambda n=name: Fleet(client).record(n) is not None, 120, what=f"{name} beating")

        repo = make_corpus_repo(tmp_path / "repo", cases=2)
        done = subprocess.run(
            [
                SKILL_EVAL,
                "run",
                SKILL,
                "--repo",
                str(repo),
                "--model",
                EXECUTOR,
                "--judge",
                JUDGE,
                "--api-base",
                model.base_url,
                "--broker",
                broker.url,
                "--store",
                store,
                "--no-calibration",
                "--out",
                str(tmp_path / "reports"),
                "--shard-timeout",
                "120",
            ],
            env={**os.environ, "HOME": str(tmp_path), "SKILL_EVAL_RUN_LOG": str(tmp_path / "runs.log")},
            capture_output=True,
            text=True,
            timeout=300,
        )
        logs = {name: docker("logs", name).stdout + docker("logs", name).stderr for name in (executor, grader)}
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:] + str(logs)[-4000:]
        probes = [docker("exec", name, "skill-eval", "worker", "--health", check=False) for name in (executor, grader)]

    (key,) = list(client.scan_iter(run_keys("*").states))
    run_id = key.decode().split(":")[2]
    states = RunState(client).states(run_id)
    assert set(states.values()) == {ShardState.GRADED}
    assert logs[executor].count("skill_eval.execute[") >= len(states), "the execute container ran the shards"
    assert logs[grader].count('"shard ended"') == len(states) and '"run reduced"' in logs[grader]
    for shard_id in states:
        trajectory = json.loads(open_store(store).get(trajectory_key(run_id, shard_id)))
        seen = re.search(r"uid=(\d+) host=(\w+)", json.dumps(trajectory))
        assert seen is not None, "the probe's output is in the trajectory"
        assert seen[2] == "sandbox", "the command ran inside bubblewrap (its own UTS namespace)"
        uid = int(seen[1])
        assert uid not in (0, 10001), f"the agent ran as uid {uid}: never root, never the image user"
    for probe in probes:
        assert probe.returncode == 0 and "ok: beat" in probe.stdout, probe.stdout + probe.stderr


@pytest.mark.parametrize("user", ["0", "10001"])
def test_a_container_without_the_sandbox_privileges_refuses_to_start(
    image: str, broker: RedisServer, user: str
) -> None:
    done = docker(
        "run",
        "--rm",
        "--network",
        "host",
        "--user",
        user,
        "-e",
        f"SKILL_EVAL_BROKER_URL={broker.url}",
        image,
        "worker",
        "--queues",
        "execute",
        check=False,
        timeout=120,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "BLOCKED_NO_SANDBOX: bubblewrap cannot create a sandbox on this host" in done.stdout + done.stderr


def test_the_image_serves_the_producer_cli_as_its_non_root_user(image: str) -> None:
    done = docker("run", "--rm", "--entrypoint", "sh", image, "-c", "id -u && skill-eval --help", timeout=120)
    assert done.stdout.splitlines()[0] == "10001"
    assert "worker" in done.stdout and "run" in done.stdout


def test_an_executor_checking_its_isolation_refuses_to_run_as_the_hosts_root(image: str) -> None:
    """Compose's check in a real container: on a daemon without userns-remap the container's root
    is the host's, so it refuses with the reason; the explicit opt-out starts."""
    remapped = "name=userns" in docker("info", "--format", "{{json .SecurityOptions}}").stdout
    runs = {
        setting: docker(
            "run",
            "--rm",
            *SANDBOX_PRIVILEGES,
            "-e",
            f"SKILL_EVAL_EXECUTOR_ISOLATION={setting}",
            image,
            "--help",
            check=False,
        )
        for setting in ("required", "unchecked")
    }
    required, unchecked = runs["required"], runs["unchecked"]
    if remapped:
        assert required.returncode == 0, required.stderr
    else:
        assert required.returncode == 2, required.stdout + required.stderr
        assert "BLOCKED_NO_SANDBOX: the executor runs as the host's root" in required.stderr
        assert "Usage" not in required.stdout  # the worker never started
    assert unchecked.returncode == 0 and "isolation is not checked (a test host only)" in unchecked.stderr
