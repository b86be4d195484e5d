"""`skill-eval worker` as an orchestrator sees it, with real processes: SIGTERM is a bounded warm
shutdown (a short shard finishes, a long one is handed back and runs again elsewhere, once), the
liveness probe, and an execute worker that cannot sandbox refuses to start."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from engine.fleet import Fleet, queue_list
from engine.redis_server import RedisServer
from engine.settings import Settings
from engine.state import RunState
from engine.store import open_store
from schemas.manifest import grade_key, result_key, trajectory_key
from schemas.status import ShardState
from testkit.offline_server import OfflineModelServer
from tests.deploy.support import SKILL_EVAL, CliWorker, health
from tests.engine_support import make_corpus_repo, scenario, submit_run, wait_until
from worker.app import TASK_EXECUTE, make_app

pytestmark = pytest.mark.slow
ALL = "execute,grade,reduce"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[RedisServer]:
    with RedisServer(workdir=tmp_path / "redis", appendonly=True) as server:
        yield server


@pytest.fixture
def settings(tmp_path: Path, broker: RedisServer) -> Settings:
    return Settings(
        broker_url=broker.url,
        store=str(tmp_path / "store"),
        workdir=tmp_path / "work",
        lease_ttl_s=3,
        reaper_period_s=1,
    )


@pytest.fixture
def nodes() -> Iterator[list[CliWorker]]:
    started: list[CliWorker] = []
    yield started
    for node in started:
        node.stop()


def start(nodes: list[CliWorker], settings: Settings, tmp_path: Path, name: str, **kw: str) -> CliWorker:
    queues = kw.pop("queues", ALL)
    env = {"SKILL_EVAL_WORKDIR": str(tmp_path / f"work-{name}"), **kw}
    node = CliWorker(settings, name, tmp_path / f"{name}.log", queues=queues, **env)
    nodes.append(node)
    return node.wait_ready()


def judge_calls(model: OfflineModelServer) -> int:
    return sum("<transcript-" in str(r.get("messages")) for r in model.requests())


def test_sigterm_hands_a_long_shard_back_within_the_grace_and_it_runs_again_once(
    tmp_path: Path, settings: Settings, nodes: list[CliWorker]
) -> None:
    repo = make_corpus_repo(tmp_path / "repo", cases=2)
    state = RunState(redis.Redis.from_url(settings.broker_url or ""))
    with OfflineModelServer(scenario(executor_delay_s=60)) as model:
        leaving = start(nodes, settings, tmp_path, "leaving", SKILL_EVAL_SHUTDOWN_GRACE_S="8")
        manifest = submit_run(repo, settings, model.base_url)
        run_id = manifest.plan.run_id
        wait_until(lambda: ShardState.EXECUTING in state.states(run_id).values(), 30, what="a shard executing")
        shard_id = next(k for k, v in state.states(run_id).items() if v is ShardState.EXECUTING)
        # The claim comes before the workspace (snapshot, history scrub): wait for the slow call itself.
        wait_until(lambda: len(model.requests()) > judge_calls(model), 60, what="the executor's model call")
        staying = start(nodes, settings, tmp_path, "staying")
        model.set_scenario(scenario(executor_delay_s=0.5))  # the next attempt answers at once

        sigterm = time.monotonic()
        leaving.terminate()
        fleet = Fleet(redis.Redis.from_url(settings.broker_url or ""))
        wait_until(lambda: getattr(fleet.record("leaving"), "draining", False), 5, what="the node marked draining")
        leaving.proc.wait(20)
        gone_after = time.monotonic() - sigterm
        wait_until(lambda: state.reduced(run_id), 60, what="run reduced on the staying node")

    assert gone_after < 8 + 2, f"the leaving node took {gone_after:.1f}s, past its 8 s grace"
    assert "shard handed back at shutdown" in leaving.text()
    assert state.get(run_id, shard_id) is ShardState.GRADED
    assert state.claims(run_id, shard_id, ShardState.EXECUTING) == 1  # the hand-back was not counted
    store = open_store(settings.store)
    assert store.exists(trajectory_key(run_id, shard_id)) and store.exists(grade_key(run_id, shard_id))
    assert store.exists(result_key(run_id))
    assert judge_calls(model) == 2, "one grading per shard: the handed-back attempt wrote nothing"
    assert '"shard ended"' in staying.text() and '"shard ended"' not in leaving.text()


def test_sigterm_lets_a_shard_that_fits_the_grace_finish_on_the_leaving_node(
    tmp_path: Path, settings: Settings, nodes: list[CliWorker]
) -> None:
    repo = make_corpus_repo(tmp_path / "repo", cases=2)
    state = RunState(redis.Redis.from_url(settings.broker_url or ""))
    with OfflineModelServer(scenario(executor_delay_s=3)) as model:
        leaving = start(nodes, settings, tmp_path, "leaving", queues="execute", SKILL_EVAL_SHUTDOWN_GRACE_S="30")
        manifest = submit_run(repo, settings, model.base_url)
        run_id = manifest.plan.run_id
        wait_until(lambda: ShardState.EXECUTING in state.states(run_id).values(), 30, what="a shard executing")
        shard_id = next(k for k, v in state.states(run_id).items() if v is ShardState.EXECUTING)
        leaving.terminate()
        leaving.proc.wait(30)
        assert state.get(run_id, shard_id) is ShardState.EXECUTED  # finished here, waits for a grader
        assert set(state.states(run_id).values()) == {ShardState.EXECUTED, ShardState.QUEUED}  # took no more
        start(nodes, settings, tmp_path, "executor", queues="execute")
        start(nodes, settings, tmp_path, "grader", queues="grade,reduce")
        wait_until(lambda: state.reduced(run_id), 60, what="run reduced")
    assert "handed back" not in leaving.text()
    assert set(state.states(run_id).values()) == {ShardState.GRADED}


def test_health_passes_a_beating_node_and_fails_a_frozen_one(
    tmp_path: Path, settings: Settings, nodes: list[CliWorker]
) -> None:
    node = start(nodes, settings, tmp_path, "probed", queues="grade,reduce")
    wait_until(lambda: health(settings, "probed").returncode == 0, 20, what="healthy")
    ok = health(settings, "probed")
    assert "ok: beat" in ok.stdout
    os.kill(node.proc.pid, signal.SIGSTOP)  # the process lives, nothing runs: the heartbeat goes stale
    try:
        time.sleep(3)
        frozen = health(settings, "probed", SKILL_EVAL_HEALTH_STALE_S="2")
    finally:
        os.kill(node.proc.pid, signal.SIGCONT)
    assert frozen.returncode == 1 and "heartbeat stale" in frozen.stderr
    missing = health(settings, "nobody-here")
    assert missing.returncode == 1 and "no liveness record" in missing.stderr


def test_health_fails_an_idle_consumer_with_work_waiting_but_not_a_fully_busy_one(
    tmp_path: Path, settings: Settings, nodes: list[CliWorker]
) -> None:
    repo = make_corpus_repo(tmp_path / "repo", cases=2)
    state = RunState(redis.Redis.from_url(settings.broker_url or ""))
    with OfflineModelServer(scenario(executor_delay_s=30)) as model:
        start(nodes, settings, tmp_path, "busy", queues="execute")  # one slot
        manifest = submit_run(repo, settings, model.base_url)
        run_id = manifest.plan.run_id
        wait_until(lambda: ShardState.EXECUTING in state.states(run_id).values(), 30, what="one shard executing")
        time.sleep(2)
        busy = health(settings, "busy", SKILL_EVAL_HEALTH_IDLE_S="1")
        assert busy.returncode == 0 and "1/1 busy, 1 waiting" in busy.stdout, busy.stdout + busy.stderr

    # A consumer that stopped taking messages (as after a broker reconnect) while its heartbeat goes on:
    # its record says a free slot, and a message has waited longer than the idle limit.
    for node in nodes:  # the first half is over: its node and the grade messages its shards sent go
        node.stop()
    client = redis.Redis.from_url(settings.broker_url or "")
    client.delete(queue_list("grade"))
    fleet = Fleet(client)
    fleet.beat("stuck", slots=2, busy=0, queues=["grade"], consumed_ago_s=300, max_shard_timeout_s=3600)
    app = make_app(settings)
    app.send_task(TASK_EXECUTE, args=["r", "s"], queue="grade")
    app.close()
    stuck = health(settings, "stuck")
    assert stuck.returncode == 1 and "not consuming: 2 free slots, 1 message waiting" in stuck.stderr


def test_an_execute_worker_that_cannot_sandbox_refuses_to_start(tmp_path: Path, settings: Settings) -> None:
    import shutil
    import subprocess

    bin_dir = tmp_path / "bin"  # util-linux's helpers, git and python, but no bubblewrap
    bin_dir.mkdir()
    for tool in ("prlimit", "setpriv", "git"):
        (bin_dir / tool).symlink_to(shutil.which(tool) or tool)
    done = subprocess.run(
        [SKILL_EVAL, "worker", "--queues", "execute", "--broker", settings.broker_url or ""],
        env={"PATH": str(bin_dir), "HOME": str(tmp_path), "SKILL_EVAL_WORKDIR": str(tmp_path / "w")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "BLOCKED_NO_SANDBOX: bubblewrap (bwrap) is not installed" in done.stderr
