"""The compose topology as processes on this machine: Redis with an append-only file, two worker
nodes on `execute` and two on `grade,reduce` (started as deploy/compose.yaml starts them), and a run
submitted from the producer CLI with --broker completes with every shard graded."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import yaml

from engine.fleet import Fleet
from engine.keys import inflight_key, run_keys
from engine.redis_server import RedisServer
from engine.settings import Settings
from engine.state import RunState
from schemas.status import ShardState
from testkit.offline_server import OfflineModelServer
from tests.deploy.support import COMPOSE, SKILL_EVAL, CliWorker, flag
from tests.engine_support import EXECUTOR, JUDGE, SKILL, make_corpus_repo, scenario, worker_env

pytestmark = pytest.mark.slow


@pytest.fixture
def nodes() -> Iterator[list[CliWorker]]:
    started: list[CliWorker] = []
    yield started
    for node in started:
        node.stop()


def test_a_run_completes_on_two_workers_per_queue_over_an_append_only_redis(
    tmp_path: Path, nodes: list[CliWorker]
) -> None:
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    with (
        RedisServer(workdir=tmp_path / "redis", appendonly=True) as broker,
        OfflineModelServer(scenario(executor_delay_s=0.3)) as model,
    ):
        settings = Settings(broker_url=broker.url, store=str(tmp_path / "store"), workdir=tmp_path / "work")
        for service in ("worker-execute", "worker-grade"):
            command = services[service]["command"]
            queues, concurrency = flag(command, "--queues"), int(flag(command, "--concurrency"))
            for i in range(2):
                name = f"{service}-{i}"
                env = {"SKILL_EVAL_WORKDIR": str(tmp_path / f"work-{name}")}
                nodes.append(
                    CliWorker(
                        settings, name, tmp_path / f"{name}.log", queues=queues, concurrency=min(concurrency, 2), **env
                    )
                )
        for node in nodes:
            node.wait_ready()
        repo = make_corpus_repo(tmp_path / "repo", cases=6)
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
                settings.store,
                "--no-calibration",
                "--out",
                str(tmp_path / "reports"),
                "--shard-timeout",
                "120",
            ],
            env={**worker_env(settings), "SKILL_EVAL_RUN_LOG": str(tmp_path / "runs.log")},
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        assert "verdict: PASS" in done.stdout
        client = redis.Redis.from_url(broker.url)
        state = RunState(client)
        (run_id,) = [r for r in client.scan_iter(run_keys("*").states)]
        states = state.states(run_id.decode().split(":")[2])
        assert len(states) == 6 and set(states.values()) == {ShardState.GRADED}
        records = {r.name: r for r in Fleet(client).records()}
        assert set(records) == {n.name for n in nodes}
        assert records["worker-grade-0"].queues == ("grade", "reduce")
        assert client.llen(inflight_key("execute")) == 0 == client.llen(inflight_key("grade"))
    assert (tmp_path / "redis" / "appendonlydir").is_dir() or list((tmp_path / "redis").glob("*.aof*"))
    took = [n.name for n in nodes if n.name.startswith("worker-execute") and "skill_eval.execute" in n.text()]
    assert took, "the execute nodes consumed the run's shards"
