"""Preflight: a run whose model has no key, or whose endpoint is down, stops before anything is sent.

Through the real command on the embedded cluster (private redis-server, Celery workers) and
the offline model server over HTTP: the check runs on the workers, where the keys are.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.redis_server import free_port
from testkit.offline_server import OfflineModelServer
from tests.e2e_support import Env, case, new_repo, scenario, write_skill

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    with OfflineModelServer(scenario([], [])) as server:
        e = Env(tmp_path / "e2e", server.base_url)
        e.base.mkdir()
        yield e


def _repo(tmp_path: Path) -> Path:
    repo = new_repo(tmp_path / "repo")
    write_skill(repo, "greet", [case(i, f"Say hello {i}.", ["The agent runs echo hello"]) for i in (1, 2)])
    return repo


def _run(env: Env, repo: Path, *args: str) -> tuple[int, str, str]:
    places = list(env.place_args())
    if "--config" in args:  # the test's own model config stands for the env's (an option is given once)
        at = places.index("--config")
        del places[at : at + 2]
    done = env.cli("run", "greet", "--repo", str(repo), *places, "--workers", "1", *args)
    return done.code, done.stdout, done.stderr


def test_a_model_without_its_key_blocks_the_run_before_any_shard_is_sent(env: Env, tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    config = env.base / "nokey.toml"
    config.write_text('[models."openai/gpt-4.1"]\napi_key_env = "SKILL_EVAL_TEST_MISSING_KEY"\n')
    started = time.monotonic()
    code, stdout, stderr = _run(
        env, repo, "--model", "openai/gpt-4.1", "--judge", "openai/gpt-4.1", "--config", str(config)
    )
    assert code == 2, stdout + stderr
    assert (
        "BLOCKED_MODEL_UNAVAILABLE: openai/gpt-4.1: environment variable SKILL_EVAL_TEST_MISSING_KEY is not set"
        in stderr
    )
    assert time.monotonic() - started < 90  # no six retries per case
    assert not env.out.exists() or not list(env.out.glob("*.md"))  # no report: nothing ran
    assert not list(env.store.glob("runs/*/trajectories/*"))


def test_a_provider_key_litellm_knows_of_is_looked_for_by_name(env: Env, tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    code, _, stderr = _run(
        env, repo, "--model", "anthropic/claude-sonnet-4-5", "--judge", "anthropic/claude-sonnet-4-5"
    )  # no --api-base: the real provider, whose key is not in the environment
    assert code == 2
    why = "BLOCKED_MODEL_UNAVAILABLE: anthropic/claude-sonnet-4-5: ANTHROPIC_API_KEY not set"
    assert why in stderr
    # The manifest the checking workers read stays, and the run reads as refused, not as running.
    (run_dir,) = env.store.glob("runs/*")
    named = stderr.index(f"run: {run_dir.name}")  # found by the id the command said, before why
    assert named < stderr.index(why)
    status = env.cli("status", run_dir.name, "--store", str(env.store), "--json")
    doc = json.loads(status.stdout)
    assert status.code == 0 and doc["end"]["how"] == "blocked"
    assert (doc["states"]["queued"], doc["not_sent"]) == (0, 2)  # never sent: not waiting in a queue
    human = env.cli("status", run_dir.name, "--store", str(env.store))
    assert human.stdout.startswith(f"run {run_dir.name}: BLOCKED") and "running" not in human.stdout
    assert "queued" not in human.stdout and "not sent (run blocked)" in human.stdout
    assert why in human.stdout.replace("\n", "")  # the named error whole, folded at the terminal's width
    report = env.cli("report", run_dir.name, "--store", str(env.store), "--out", str(tmp_path / "reports"))
    assert report.code == 2 and "refused before any shard was sent" in report.stderr and why in report.stderr


def test_an_endpoint_that_does_not_answer_blocks_the_run_naming_the_model(env: Env, tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    dead = f"http://127.0.0.1:{free_port()}/v1"
    code, _, stderr = _run(env, repo, "--model", "openai/exec-a", "--judge", "openai/judge", "--api-base", dead)
    assert code == 2
    assert "BLOCKED_MODEL_UNAVAILABLE: openai/exec-a:" in stderr
    assert "openai/judge:" in stderr  # both queues checked, both faults named


def test_no_preflight_skips_the_check(env: Env, tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    config = env.base / "nokey.toml"
    config.write_text(
        '[retry]\nmax_attempts = 1\n[models."openai/gpt-4.1"]\napi_key_env = "SKILL_EVAL_TEST_MISSING_KEY"\n'
    )
    _, stdout, stderr = _run(
        env,
        repo,
        "--model",
        "openai/gpt-4.1",
        "--judge",
        "openai/judge",
        "--api-base",
        env.api_base,
        "--config",
        str(config),
        "--no-preflight",
        "--no-calibration",
    )
    assert "BLOCKED_MODEL_UNAVAILABLE" not in stderr
    assert "executor-failed" in stdout  # the old behaviour, case by case, when the user asks for it
