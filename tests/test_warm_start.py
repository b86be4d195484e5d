"""A run's start-up work done once and early: the scrubbed history cache, judge calibration.

The first N shards of a run start together on a node's N threads; each used to rewrite the
corpus's git history itself (N filter-repo processes at once). ``scrubbed_tree`` now builds
it once per process, and the execute preflight builds it ahead (``warm_cache``), with the same
checks: a tampered snapshot or a bad skill name is refused there as in a shard, and what it
leaves in the cache holds none of the corpus. Calibration started by the grade preflight runs
beside the shards; graders of the process wait for it, so the batch is still graded by a
calibrated judge.
"""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from engine.snapshot import SNAPSHOT_PREFIX, snapshot_repo
from engine.store import LocalStore
from producer.corpus.repo import Repo
from schemas.errors import BadSkillName, StoreError
from tests.security.test_corpus_history import CORPUS, SECRET, SKILL, crafted_repo
from worker import scrub
from worker.grading.calibration import calibrate_in_background, wait_for_background
from worker.workspace import materialize_workspace, warm_cache


def _objects(repo: Path) -> str:
    argv = ["git", "cat-file", "--batch-all-objects", "--batch"]
    return subprocess.run(argv, cwd=repo, capture_output=True, text=True, errors="replace").stdout


@pytest.fixture
def snap(tmp_path: Path) -> dict[str, Any]:
    repo = crafted_repo(tmp_path / "repo")
    store = LocalStore(tmp_path / "store")
    return {"repo": repo, "store": store, "key": snapshot_repo(repo, store), "cache": tmp_path / "cache"}


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The history rewrites this process runs (the real build, counted)."""
    seen: list[str] = []
    real = scrub._build

    def counted(*args: Any) -> None:
        seen.append(str(args[3]))
        real(*args)

    monkeypatch.setattr(scrub, "_build", counted)
    return seen


def test_shards_starting_together_rewrite_the_history_once(
    snap: dict[str, Any], builds: list[str], tmp_path: Path
) -> None:
    case = Repo(snap["repo"]).load(CORPUS).corpus.case(1)
    errors: list[BaseException] = []
    leaks: list[str] = []
    start = threading.Barrier(6)

    def shard() -> None:
        try:
            start.wait()
            with materialize_workspace(
                snap["store"], snap["key"], skill=SKILL, case=case, parent=tmp_path / "ws", cache_dir=snap["cache"]
            ) as ws:
                if SECRET in _objects(ws.path) or (ws.path / CORPUS).exists():
                    leaks.append(str(ws.path))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=shard) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == [] and leaks == []
    assert len(builds) == 1


def test_the_warmed_cache_is_what_the_first_shard_uses_and_holds_no_corpus(
    snap: dict[str, Any], builds: list[str], tmp_path: Path
) -> None:
    warm_cache(snap["store"], snap["key"], skill=SKILL, cache_dir=snap["cache"])
    assert len(builds) == 1
    for cached in Path(snap["cache"]).glob(f"*-{SKILL}/repo"):
        assert SECRET not in _objects(cached)
        assert not (cached / CORPUS).exists()
    case = Repo(snap["repo"]).load(CORPUS).corpus.case(1)
    with materialize_workspace(
        snap["store"], snap["key"], skill=SKILL, case=case, parent=tmp_path / "ws", cache_dir=snap["cache"]
    ) as ws:
        assert SECRET not in _objects(ws.path)
    assert len(builds) == 1  # the shard found it built


def test_warming_refuses_a_tampered_snapshot_and_a_bad_skill_name(snap: dict[str, Any], tmp_path: Path) -> None:
    with pytest.raises(BadSkillName):
        warm_cache(snap["store"], snap["key"], skill="../../etc", cache_dir=snap["cache"])
    forged = f"{SNAPSHOT_PREFIX}{'0' * 64}.tar"
    snap["store"].put(forged, snap["store"].get(snap["key"]))  # bytes that do not hash to their key
    with pytest.raises(StoreError):
        warm_cache(snap["store"], forged, skill=SKILL, cache_dir=tmp_path / "other-cache")
    assert not any((tmp_path / "other-cache").glob("0*"))  # nothing published from it


def test_graders_wait_for_the_background_calibration_of_their_run() -> None:
    release = threading.Event()
    calibrated: list[str] = []

    def calibrate_one(judge: str) -> None:
        release.wait(10)
        calibrated.append(judge)

    calibrate_in_background("run-a", ["judge-1", "judge-2"], calibrate_one)
    waited: list[float] = []

    def grader() -> None:
        t0 = time.monotonic()
        wait_for_background("run-a", "judge-2", poll_s=0.01)
        waited.append(time.monotonic() - t0)

    t = threading.Thread(target=grader)
    t.start()
    time.sleep(0.3)
    assert waited == []  # still calibrating: the grader holds
    release.set()
    t.join(10)
    assert calibrated == ["judge-1", "judge-2"] and waited and waited[0] >= 0.3
    t0 = time.monotonic()
    wait_for_background("run-a", "judge-1")  # done: returns at once
    wait_for_background("run-b", "judge-1")  # never calibrated here: returns at once
    assert time.monotonic() - t0 < 0.1


def test_a_failing_background_calibration_still_releases_the_graders() -> None:
    def calibrate_one(judge: str) -> None:
        raise ConnectionError("redis went away")

    calibrate_in_background("run-c", ["judge"], calibrate_one)
    done = threading.Event()
    threading.Thread(target=lambda: (wait_for_background("run-c", "judge", poll_s=0.01), done.set())).start()
    assert done.wait(5)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_run_blocked_after_its_cluster_started_sends_nothing_and_leaves_nothing_running(tmp_path: Path) -> None:
    """The embedded cluster now starts before the snapshot and the executor's canary: a canary
    that fails (BLOCKED_NO_TRANSCRIPT_CAPTURE) must still stop the run with nothing enqueued,
    no model called, and the worker and redis-server it started gone."""
    from testkit.offline_server import OfflineModelServer
    from tests.e2e_support import Env, new_repo, processes_using, scenario, write_skill
    from tests.e2e_support import case as e2e_case
    from tests.executor_support import fake_cli_command

    repo = new_repo(tmp_path / "repo")
    write_skill(repo, "greet", [e2e_case(i, f"Say hello {i}.", ["The agent runs echo hello"]) for i in (1, 2)])
    with OfflineModelServer(scenario([], [])) as server:
        env = Env(tmp_path / "e2e", server.base_url)
        env.base.mkdir()
        done = env.run(repo, "greet", "--executor", "cmd:" + fake_cli_command("--truncate", "1000"))
        assert "BLOCKED_NO_TRANSCRIPT_CAPTURE" in done.stdout + done.stderr, done.stderr[-2000:]
        assert done.code != 0
        assert server.requests() == []
    deadline = time.monotonic() + 10
    while processes_using(env.tmp) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_using(env.tmp) == {}
    assert not list(env.tmp.glob("skill-eval-cluster-*"))  # the cluster's folder went with it


@pytest.mark.parametrize(
    ("args", "environ", "expected"),
    [
        (["run", "greet", "--repo", "."], {}, True),
        (["run", "--all-evals", "--workers=8"], {}, True),
        (["run", "greet", "--broker", "redis://h:6379/0"], {}, False),
        (["run", "greet", "--broker=redis://h:6379/0"], {}, False),
        (["run", "greet"], {"SKILL_EVAL_BROKER_URL": "redis://h:6379/0"}, False),
        (["run", "greet", "--dry-run"], {}, False),
        (["run", "--help"], {}, False),
        (["status", "run-1"], {}, False),
        (["worker"], {}, False),
        ([], {}, False),
    ],
)
def test_the_worker_is_started_ahead_only_for_a_run_on_an_embedded_cluster(
    args: list[str], environ: dict[str, str], expected: bool
) -> None:
    from producer.launch.prestart import opens_embedded_cluster

    assert opens_embedded_cluster(args, environ) is expected


def _run_seeing_workers(env: Any, *args: str) -> tuple[Any, set[str]]:
    """Run ``skill-eval ARGS`` to its end; its result and the worker command lines seen under it."""
    from tests.e2e_support import descendants

    proc = env.start(*args)
    workers: set[str] = set()
    while proc.poll() is None:
        workers |= {c for c in descendants(proc.pid).values() if "-m worker.prestart" in c or "-m worker.boot" in c}
        time.sleep(0.1)
    return env.finish(proc), workers


def _left_after(find: Any, timeout_s: float = 10.0) -> dict[int, str]:
    """What ``find()`` still returns once it is empty or ``timeout_s`` has passed."""
    deadline = time.monotonic() + timeout_s
    while find() and time.monotonic() < deadline:
        time.sleep(0.1)
    return dict(find())


def _prestarted(tmp: Path) -> dict[int, str]:
    from tests.e2e_support import processes_using

    return {pid: cmd for pid, cmd in processes_using(tmp).items() if "worker.prestart" in cmd}


def test_a_run_becomes_the_worker_started_ahead_and_a_run_that_never_opens_a_cluster_leaves_none(
    tmp_path: Path,
) -> None:
    """The command's worker is the process its entry point started before the CLI's imports
    (no second worker process appears); a run stopped before its cluster opened (a skill
    the repo does not have: BLOCKED) leaves that process to read end-of-file and exit."""
    from testkit.offline_server import OfflineModelServer
    from tests.e2e_support import Env, new_repo, scenario, write_skill
    from tests.e2e_support import case as e2e_case

    repo = new_repo(tmp_path / "repo")
    write_skill(repo, "greet", [e2e_case(i, f"Say hello {i}.", ["The agent runs echo hello"]) for i in (1, 2)])
    slow = [{"name": "slow", "tools": True, "replies": [{"text": "hello", "delay_s": 2.0}]}]
    with OfflineModelServer(scenario(slow, [])) as server:
        env = Env(tmp_path / "e2e", server.base_url)
        env.base.mkdir()
        done, workers = _run_seeing_workers(env, *env.run_args(repo, "greet"))
        assert done.code in (0, 1), done.stderr[-2000:]
        assert server.stats()["ok"] > 0
        assert workers and all("-m worker.prestart" in cmd for cmd in workers), workers

        blocked = env.cli(*env.run_args(repo, "no-such-skill"))
        assert blocked.code == 2 and "BLOCKED" in blocked.stdout + blocked.stderr
    assert _left_after(lambda: _prestarted(env.tmp)) == {}


@pytest.mark.parametrize(
    ("workers", "processes", "cores", "threads"),
    [
        (8, None, 2, [8]),
        (16, None, 2, [16]),
        (17, None, 2, [9, 8]),
        (32, None, 2, [16, 16]),
        (64, None, 2, [32, 32]),  # never more processes than cores unless asked
        (32, None, 1, [32]),
        (8, 2, 2, [4, 4]),
        (5, 3, 1, [2, 2, 1]),  # asked for: more than the cores
        (1, 4, 8, [1]),  # never a process without a shard to run
    ],
)
def test_an_embedded_cluster_spreads_its_shards_over_worker_processes(
    workers: int, processes: int | None, cores: int, threads: list[int]
) -> None:
    from producer.launch.embedded import plan_processes

    assert plan_processes(workers, processes, cores) == threads


def test_a_run_on_two_worker_processes_grades_every_shard_and_leaves_none(tmp_path: Path) -> None:
    """The first process is the one started with the command, the second joins once the checks
    passed, the four shards in flight are split two and two, and the command's exit stops both."""
    from testkit.offline_server import OfflineModelServer
    from tests.e2e_support import Env, new_repo, processes_using, scenario, write_skill
    from tests.e2e_support import case as e2e_case

    repo = new_repo(tmp_path / "repo")
    write_skill(repo, "greet", [e2e_case(i, f"Say hello {i}.", ["The agent runs echo hello"]) for i in range(1, 7)])
    slow = [{"name": "slow", "tools": True, "replies": [{"text": "hello", "delay_s": 1.0}]}]
    with OfflineModelServer(scenario(slow, [])) as server:
        env = Env(tmp_path / "e2e", server.base_url)
        env.base.mkdir()
        args = (*env.run_args(repo, "greet", "--worker-processes", "2", workers=4),)
        done, workers = _run_seeing_workers(env, *args)
        assert done.code in (0, 1), done.stderr[-2000:]
        assert "not graded (infra): none" in done.stdout, done.stdout[-2000:]
    assert len(workers) == 2, workers
    assert any("-m worker.prestart" in c for c in workers)
    assert any(f'"concurrency": 2, "name": "embedded-{done.pid}.1@' in c for c in workers), workers
    assert _left_after(lambda: processes_using(env.tmp)) == {}


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["run", "g", "--model", "openai/a", "--judge", "openai/j", "--api-base", "http://127.0.0.1:9/v1"], False),
        (["run", "g", "--model=openai/a", "--model", "openai/b", "--judge=openai/j", "--api-base=http://h/v1"], False),
        (["run", "g", "--model", "openai/a", "--judge", "anthropic/j", "--api-base", "http://h/v1"], True),
        (["run", "g", "--model", "openai/a", "--judge", "openai/j"], True),  # OpenAI's own API: litellm
        (["run", "g", "--judge", "openai/j", "--api-base", "http://h/v1"], True),  # the default executor model
        (["run", "g", "--model", "openai/a", "--api-base", "http://h/v1"], True),  # the default judge
        (["run", "g", "--model", "openai/a", "--judge", "openai/j", "--api-base", "h", "--executor", "codex"], True),
        # A sweep whose last executor is the agent still runs a harness: litellm may be called.
        (
            [
                "run",
                "g",
                "--model",
                "openai/a",
                "--judge",
                "openai/j",
                "--api-base",
                "h",
                "--executor",
                "codex",
                "--executor",
                "agent",
            ],
            True,
        ),
    ],
)
def test_a_run_whose_models_all_go_direct_starts_its_worker_without_litellm(args: list[str], expected: bool) -> None:
    """A guess from the command line: a miss costs only time (the worker imports litellm on first need)."""
    from producer.launch.prestart import needs_litellm

    assert needs_litellm(args) is expected
