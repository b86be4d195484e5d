"""``--workers N`` means N calls in flight: models left at the default concurrency follow it.

The built-in cap (16 calls per model, fleet-wide) held ``--workers 64`` to 16 executor calls at
once, the other shards queued in the limiter with their wall clocks running. A model whose
``max_concurrency`` a config sets keeps it, and the run says that its shards will queue.
The end-to-end test is the real command on the embedded cluster against the offline model
server, whose timeline shows the calls in flight.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.settings import Settings
from producer.launch.drive import concurrency_notes
from schemas.manifest import AgentBudget
from schemas.model_config import DEFAULT_MAX_CONCURRENCY, parse_model_config
from testkit.offline_server import OfflineModelServer
from tests.e2e_support import Env, case, judge_rules, new_repo, write_skill
from tests.engine_support import EXECUTOR, JUDGE, make_corpus_repo, plan_manifest

CASES = 20
DELAY_S = 2.0


def test_a_model_left_at_the_default_follows_the_runs_shards_in_flight() -> None:
    config = parse_model_config({"models": {"openai/capped": {"max_concurrency": 4}}}, "skill-eval.toml")
    run = config.model_copy(update={"calls_in_flight": 64})
    assert config.for_model("openai/free").max_concurrency == DEFAULT_MAX_CONCURRENCY
    assert run.for_model("openai/free").max_concurrency == 64
    assert run.for_model("openai/capped").max_concurrency == 4  # the operator's limit stands
    few = config.model_copy(update={"calls_in_flight": 2})
    assert few.for_model("openai/free").max_concurrency == DEFAULT_MAX_CONCURRENCY  # never lowered
    defaults = parse_model_config({"defaults": {"max_concurrency": 8}}, "skill-eval.toml")
    assert defaults.model_copy(update={"calls_in_flight": 64}).for_model("openai/any").max_concurrency == 8
    assert run.narrower_than_run(["openai/free", "openai/capped", "openai/capped"]) == [
        "note: openai/capped allows 4 calls in flight (max_concurrency in skill-eval.toml); "
        "64 shards in flight will queue for it"
    ]


def test_only_models_the_product_calls_get_a_note(tmp_path: Path) -> None:
    repo = make_corpus_repo(tmp_path / "repo")
    settings = Settings(store=str(tmp_path / "store"))
    manifest = plan_manifest(repo, settings, "http://127.0.0.1:9/v1", budget=AgentBudget())
    capped = parse_model_config({"defaults": {"max_concurrency": 2}}, "skill-eval.toml")
    models = capped.model_copy(update={"calls_in_flight": 8})
    agent = manifest.model_copy(update={"settings": manifest.settings.model_copy(update={"models": models})})
    assert [n.split()[1] for n in concurrency_notes(agent)] == [EXECUTOR, JUDGE]
    external = agent.model_copy(update={"settings": agent.settings.model_copy(update={"executor": "cmd:./run.sh"})})
    assert [n.split()[1] for n in concurrency_notes(external)] == [JUDGE]  # its executor calls are not ours


def _most_in_flight(server: OfflineModelServer, model: str) -> int:
    edges = sorted(
        (t, step)
        for arrived, replied, name in server.timeline()
        if name == model
        for t, step in ((arrived, 1), (replied, -1))
    )
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


@pytest.fixture
def server() -> Iterator[OfflineModelServer]:
    answer = {"name": "answer", "tools": True, "replies": [{"text": "(scripted) done.", "delay_s": DELAY_S}]}
    scenario = {"rules": [answer], "judge": judge_rules(), "default": {"text": "OK"}}
    with OfflineModelServer(scenario) as running:
        yield running


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_workers_above_the_default_cap_keep_that_many_executor_calls_in_flight(
    server: OfflineModelServer, tmp_path: Path
) -> None:
    env = Env(tmp_path / "e2e", server.base_url)
    env.base.mkdir()
    repo = new_repo(tmp_path / "repo")
    write_skill(repo, "greet", [case(i, f"Say hello {i}.", ["The agent outputs hello"]) for i in range(1, CASES + 1)])
    models = ("--model", "openai/exec", "--judge", "openai/judge", "--api-base", env.api_base)
    args = ("run", "greet", "--repo", str(repo), *env.place_args(), *models, "--no-calibration")
    done = env.cli(*args, "--workers", str(CASES))
    assert done.code in (0, 1), done.stdout + done.stderr
    assert "not graded (infra): none" in done.stdout
    assert _most_in_flight(server, "exec") > DEFAULT_MAX_CONCURRENCY  # all twenty at once, bar stragglers
    assert "calls in flight" not in done.stderr

    server.reset()
    env.config.write_text(env.config.read_text() + '[models."openai/exec"]\nmax_concurrency = 4\n')
    done = env.cli(*args, "--workers", str(CASES))
    assert "not graded (infra): none" in done.stdout, done.stdout + done.stderr
    assert _most_in_flight(server, "exec") <= 4
    assert f"note: openai/exec allows 4 calls in flight (max_concurrency in {env.config}); 20 shards" in done.stderr
