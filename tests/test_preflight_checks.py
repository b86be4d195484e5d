"""A queue's models are checked at the same time: the preflight waits for its slowest model, not their sum.

A real client over HTTP to the offline model server, the limiter on the tests' Redis.
"""

from __future__ import annotations

import redis

from schemas.model_config import parse_model_config
from schemas.preflight import PreflightReport
from testkit.offline_server import OfflineModelServer
from worker.models.client import GatedModelClient
from worker.preflight import check_models

DELAY_S = 0.5
MODELS = [f"openai/model-{i}" for i in range(4)]


def test_a_sweeps_models_are_checked_at_once_and_reported_in_order(redis_client: redis.Redis) -> None:
    scenario = {"rules": [], "default": {"text": "OK", "delay_s": DELAY_S}}
    with OfflineModelServer(scenario) as server:
        config = parse_model_config(
            {"models": {"openai/model-2": {"api_key_env": "SKILL_EVAL_TEST_NO_SUCH_KEY"}}},
            api_base_override=server.base_url,
        )
        checks = check_models(GatedModelClient(config, redis_client, run_id="preflight-parallel"), MODELS)
        timeline = server.timeline()
    assert [c.model for c in checks] == MODELS
    assert [c.ok for c in checks] == [True, True, False, True]
    assert "SKILL_EVAL_TEST_NO_SUCH_KEY" in (checks[2].why or "")
    assert len(timeline) == 3  # the model without its key was never called
    # every call arrived before the first one was answered: none waited for another
    first_reply = min(replied for _, replied, _ in timeline)
    assert all(arrived < first_reply for arrived, _, _ in timeline), timeline


def test_a_model_that_fails_its_check_is_named_once_in_the_report(redis_client: redis.Redis) -> None:
    scenario = {"rules": [], "default": {"status": 400, "error_message": "no such model"}}
    with OfflineModelServer(scenario) as server:
        config = parse_model_config({}, api_base_override=server.base_url)
        [check] = check_models(GatedModelClient(config, redis_client, run_id="preflight-named"), ["openai/nope"])
    [line] = PreflightReport(queue="execute", worker="w", checks=[check]).failures()
    assert line.startswith("openai/nope: ") and line.count("openai/nope") == 1, line
    assert "no such model" in line
