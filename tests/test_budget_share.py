"""A shard's fair share of the run's cap: an agent that burns tokens until the cap refuses it is
graded on what it did (``budget-share``), while the shards its overspend cut off end
``budget-exhausted``, and ``resubmit`` with a raised cap finishes those.

Against a real redis-server, real ``celery worker`` processes, the per-shard model proxy and
the offline model server (a scripted agent that loops on a shell command forever).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from engine.budget import OverShare, Reservation, RunBudget
from engine.settings import Settings
from engine.state import RunState
from engine.store import open_store
from harnesses.base import PLACEHOLDER_KEY
from harnesses.endpoints import normalise_upstream
from producer.launch.cluster import task_sender
from producer.launch.resubmit import resubmit_run
from producer.launch.submit import submit
from schemas.constants import QUEUE_EXECUTE
from schemas.manifest import AgentBudget, RunManifest, trajectory_key
from schemas.outcome import ShardOutcomeRecord
from schemas.status import ShardState
from schemas.trajectory import EndReason, Trajectory, Usage
from schemas.verdict import ShardGrade
from testkit.offline_server import OfflineModelServer
from tests.engine_support import (
    FINAL_TEXT,
    JUDGE,
    WorkerNode,
    make_corpus_repo,
    plan_manifest,
    wait_until,
)
from worker.proxy import ModelProxy, ProxyConfig
from worker.proxy.server import RESERVED_COMPLETION


def test_a_shard_past_its_share_is_refused_one_share_short_of_the_cap_and_the_run_stays_open(
    redis_client: redis.Redis,
) -> None:
    budget = RunBudget(redis_client, "share", shards=4)
    budget.set_caps(max_tokens=1_000, max_cost_usd=None)  # a share is 250 tokens
    first = budget.reserve("m", 700, None, own=Usage(prompt_tokens=0))
    assert isinstance(first, Reservation)
    budget.settle(first, 700, None)
    greedy = budget.reserve("m", 100, None, own=Usage(prompt_tokens=700))  # 800 > 1,000 - 250
    assert isinstance(greedy, OverShare)
    assert "spent or has in flight 700 tokens, past its share of the run's token cap (250 = 1000 / 4 shards)" in str(
        greedy
    )
    assert budget.spend().exhausted is None  # the shard's own refusal: the last share stays open
    within = budget.reserve("m", 100, None, own=Usage(prompt_tokens=249))  # a shard within its share
    judge = budget.reserve("judge", 150, None)  # a judge (no own spend) may fill the cap
    assert isinstance(within, Reservation) and isinstance(judge, Reservation)
    budget.settle(within, 100, None)
    budget.settle(judge, 150, None)
    innocent = budget.reserve("m", 100, None, own=Usage(prompt_tokens=100))  # 1,050 > 1,000: the run's cap
    assert isinstance(innocent, str) and "token cap is reached" in innocent
    assert budget.spend().exhausted == "tokens"
    # Once the run is exhausted the classification still follows the caller's own spend.
    assert isinstance(budget.reserve("m", 1, None, own=Usage(prompt_tokens=300)), OverShare)
    assert isinstance(budget.reserve("m", 1, None, own=Usage(prompt_tokens=10)), str)
    assert budget.spend().tokens == 950


def test_requests_one_shard_fires_at_once_count_toward_its_share_and_the_run_stays_open(
    redis_client: redis.Redis,
) -> None:
    """Six requests at once, each estimated below a share: those past the shard's share with its
    own in flight are its own refusal, never the run's, and the other shards go on."""
    budget = RunBudget(redis_client, "share-in-flight", shards=4)
    budget.set_caps(max_tokens=200_000, max_cost_usd=None)  # a share is 50,000 tokens
    barrier = threading.Barrier(6)

    def fire() -> Reservation | OverShare | str:
        barrier.wait()
        return budget.reserve("m", 44_000, None, own=Usage(), shaped="conversation", shard="greedy")

    with ThreadPoolExecutor(6) as pool:
        got = list(pool.map(lambda _: fire(), range(6)))
    held = [g for g in got if isinstance(g, Reservation)]
    refused = [g for g in got if isinstance(g, OverShare)]
    # 0, 44,000 and 88,000 in flight: the third passes its share, so the fourth would take the last.
    assert len(held) == 3 and len(refused) == 3, got
    assert "spent or has in flight 132000 tokens, past its share" in str(refused[0])
    assert budget.spend().exhausted is None
    other = budget.reserve("m", 40_000, None, own=Usage(), shaped="conversation", shard="innocent")
    assert isinstance(other, Reservation)
    for reservation in held:
        budget.settle(reservation, 1_000, None)
    fields = {k.decode(): int(v) for k, v in redis_client.hgetall(budget.key).items() if k.startswith(b"inflight")}
    assert fields == {"inflight_tokens:innocent": 40_000, "inflight_cost:innocent": 0}
    budget.settle(other, 0, None)  # a call that failed gives its whole reservation back
    raw = redis_client.hgetall(budget.key)
    assert not [k for k in raw if k.startswith(b"inflight")] and int(raw[b"reserved_tokens"]) == 0
    assert budget.spend().tokens == 3_000


def test_the_cost_cap_has_its_share_too_and_a_budget_without_shards_never_blames_the_shard(
    redis_client: redis.Redis,
) -> None:
    budget = RunBudget(redis_client, "share-cost", shards=2)
    budget.set_caps(max_tokens=None, max_cost_usd=1.0)  # a share is $0.50
    spent = budget.reserve("m", 10, 0.6, own=Usage())
    assert isinstance(spent, Reservation)
    budget.settle(spent, 10, 0.6)
    refused = budget.reserve("m", 10, 0.1, own=Usage(cost_usd=0.6))  # $0.70 > $1.00 - $0.50
    assert isinstance(refused, OverShare) and "past its share of the run's cost cap ($0.5000" in str(refused)
    blind = RunBudget(redis_client, "share-cost")  # no shard count: the old rule, every refusal the run's
    assert isinstance(blind.reserve("m", 10, 0.5, own=Usage(cost_usd=0.6)), str)


# --- the proxy of a harness shard ------------------------------------------------------------


def test_a_harness_shard_past_its_share_ends_by_its_own_budget_not_the_runs(
    tmp_path: Path, redis_client: redis.Redis
) -> None:
    budget = RunBudget(redis_client, "share-proxy", shards=2)
    budget.set_caps(max_tokens=4 * RESERVED_COMPLETION, max_cost_usd=None)  # a share is 2 x 4,096
    with OfflineModelServer({"default": {"text": "x" * 40_000}}) as server:  # 10,000 completion tokens
        config = ProxyConfig(
            protocol="anthropic",
            upstream=normalise_upstream("anthropic", server.base_url),
            real_key="sk-real-0123456789abcdefghij",
            model="anthropic/claude-sonnet-4-5",
        )
        with (
            ModelProxy(config, tmp_path / "p.sock", run_budget=budget) as proxy,
            httpx.Client(
                transport=httpx.HTTPTransport(uds=str(proxy.socket_path)), base_url="http://proxy", timeout=30
            ) as c,
        ):
            assert _ask(c, "one").status_code == 200  # spends 10,000: past its 8,192 share
            refused = _ask(c, "two")  # 10,000 + 4,096 + the body > 16,384 - 8,192
        assert len(server.requests()) == 1
    assert refused.status_code == 400 and "budget-share" in refused.text
    assert proxy.record.budget_end == EndReason.BUDGET_SHARE.value  # behaviour: harness.py grades it
    assert proxy.record.run_budget_end is None  # not the run's cap: never budget-exhausted
    assert budget.spend().exhausted is None


def _ask(c: httpx.Client, text: str) -> httpx.Response:
    body = {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": [{"role": "user", "content": text}]}
    return c.post("/v1/messages", json=body, headers={"x-api-key": PLACEHOLDER_KEY})


# --- a whole run: one greedy agent among innocent ones ---------------------------------------

GREEDY_CASE = "Case 1:"


def _shell(command: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "shell", "arguments": {"command": command}}]}


def greedy_scenario() -> dict[str, Any]:
    """Case 1's agent runs a shell command forever (its conversation, and so its spend, grows
    each turn); every other case sleeps through two slow commands, then answers."""
    innocent = _shell("sleep 6; printf '%01200d' 0")
    return {
        "rules": [
            {"name": "judge", "judge": True, "tools": False, "contains": "<transcript-", "replies": [{}]},
            {"name": "greedy", "tools": True, "contains": GREEDY_CASE, "replies": [_shell("printf '%0400d' 0")]},
            {"name": "innocent", "tools": True, "replies": [innocent, innocent, {"text": FINAL_TEXT}]},
        ],
        "judge": [
            {"assertion_contains": "BENCH-DONE", "transcript_regex": "BENCH-DONE"},
            {"assertion_contains": "the word answered", "transcript_regex": "answered"},
        ],
    }


def _manifest(repo: Path, settings: Settings, api_base: str, max_tokens: int) -> RunManifest:
    budget = AgentBudget(max_turns=60, wall_clock_s=90, command_timeout_s=30, max_output_tokens=256)
    return plan_manifest(repo, settings, api_base, budget=budget, max_tokens=max_tokens)


@pytest.mark.slow
def test_a_greedy_agent_is_graded_by_its_own_budget_while_the_shards_it_cut_off_are_budget_exhausted(
    tmp_path: Path, settings: Settings
) -> None:
    repo = make_corpus_repo(tmp_path / "repo", cases=4)
    client = redis.Redis.from_url(settings.broker_url or "")
    state = RunState(client)
    store = open_store(settings.store)
    cap = 36_000  # four shards: a share is 9,000 tokens; the greedy agent stops at 27,000
    with OfflineModelServer(greedy_scenario()) as model:
        manifest = _manifest(repo, settings, model.base_url, cap)
        run_id = manifest.plan.run_id
        shards = {s.shard_id: s for s in manifest.plan.shards}
        assert len(shards) == 4
        greedy = next(sid for sid, s in shards.items() if s.case_id == 1)
        budget = RunBudget(client, run_id, shards=len(shards))
        budget.set_caps(max_tokens=cap, max_cost_usd=None)
        publisher = task_sender(settings, manifest)
        submit(manifest, store, state, lambda r, s: publisher.send(QUEUE_EXECUTE, r, s), publisher.batch)
        node = WorkerNode(settings, "w", tmp_path / "w.log", concurrency=4)
        try:
            wait_until(lambda: state.reduced(run_id), 180, what="capped run reduced")
            states = state.states(run_id)
            spent = budget.spend()
            stored = store.get(trajectory_key(run_id, greedy)) if store.exists(trajectory_key(run_id, greedy)) else b""
            cut = sorted(s for s, st in states.items() if st is ShardState.BUDGET_EXHAUSTED)
            innocents = sorted(s for s in states if s != greedy)

            done = resubmit_run(run_id, settings, max_tokens=10_000_000)
            resubmitted = sorted(done.execute + done.grade)
            wait_until(lambda: state.reduced(run_id), 180, what="resubmitted run reduced")
            final = state.states(run_id)
            greedy_after = store.get(trajectory_key(run_id, greedy))
            first = {
                s: ShardOutcomeRecord.model_validate_json(store.get(f"runs/{run_id}/attempts/0/outcomes/{s}.json"))
                for s in states
            }
        finally:
            node.stop()
    # The greedy shard: graded as it stands, its end reason recorded, counted in behaviour.
    assert states[greedy] is ShardState.GRADED and stored, states  # not cut off with the innocent ones
    greedy_trajectory = Trajectory.model_validate_json(stored)
    assert greedy_trajectory.end_reason is EndReason.BUDGET_SHARE
    assert greedy_trajectory.usage.total_tokens >= cap // 4  # it really took more than its share
    assert "past its share of the run's token cap (9000 = 36000 / 4 shards)" in greedy_trajectory.events[-1].text  # type: ignore[union-attr]
    grade = ShardGrade.model_validate_json(store.get(f"runs/{run_id}/grades/{greedy}.json"))
    assert [a.judge for a in grade.judges] == [JUDGE]  # its judge spent from the share it left open
    # The innocent shards its overspend cut off: budget-exhausted, outside the pass rate.
    assert cut and set(cut) <= set(innocents), states
    assert all(states[s] in (ShardState.GRADED, ShardState.BUDGET_EXHAUSTED) for s in innocents), states
    assert spent.exhausted == "tokens" and spent.tokens <= cap
    assert first[greedy].state is ShardState.GRADED
    assert all(first[s].state is ShardState.BUDGET_EXHAUSTED and "token cap is reached" in first[s].detail for s in cut)
    # Resubmit with a raised cap: the cut shards run again, the greedy one is never re-rolled.
    assert resubmitted == cut and greedy not in resubmitted
    assert set(final.values()) == {ShardState.GRADED}
    assert greedy_after == stored


def test_one_request_too_large_for_the_shards_share_is_refused_as_its_own_and_the_run_stays_open(
    redis_client: redis.Redis,
) -> None:
    budget = RunBudget(redis_client, "share-oversized", shards=4)
    budget.set_caps(max_tokens=200_000, max_cost_usd=None)  # a share is 50,000 tokens
    spent = budget.reserve("m", 10_000, None, own=Usage(prompt_tokens=0))
    assert isinstance(spent, Reservation)
    budget.settle(spent, 10_000, None)
    # One request of a harness's conversation (a body the agent shapes) estimated above a whole
    # share and above what the cap has left, from a shard within its share: its own doing.
    oversized = budget.reserve("m", 500_000, None, own=Usage(prompt_tokens=10_000), shaped="conversation")
    assert isinstance(oversized, OverShare), oversized
    assert "request alone is estimated at 500000 tokens" in str(oversized)
    assert budget.spend().exhausted is None
    # The run goes on for everyone else, until spent tokens fill the cap.
    assert isinstance(budget.reserve("m", 40_000, None, own=Usage(prompt_tokens=0)), Reservation)
    assert isinstance(budget.reserve("judge", 140_000, None), Reservation)
    # The agent's own side request: any refusal is its doing, whatever its size.
    side = budget.reserve("m", 20_000, None, own=Usage(prompt_tokens=0), shaped="side")  # 210,000 > 200,000
    assert isinstance(side, OverShare) and "of the agent's own" in str(side), side
    assert budget.spend().exhausted is None
    # Within a share, the conversation's request the cap refuses ends the run as before (infra).
    late = budget.reserve("m", 20_000, None, own=Usage(prompt_tokens=0), shaped="conversation")  # 210,000 > 200,000
    assert isinstance(late, str) and "token cap is reached" in late
    assert budget.spend().exhausted == "tokens"


def test_an_agents_oversized_side_request_is_refused_named_to_it_and_its_shard_goes_on(
    tmp_path: Path, redis_client: redis.Redis
) -> None:
    budget = RunBudget(redis_client, "share-side", shards=4)
    budget.set_caps(max_tokens=200_000, max_cost_usd=None)
    with OfflineModelServer({"default": {"text": "ok"}}) as server:
        config = ProxyConfig(
            protocol="anthropic",
            upstream=normalise_upstream("anthropic", server.base_url),
            real_key="sk-real-0123456789abcdefghij",
            model="anthropic/claude-sonnet-4-5",
            opening="Say hello to the world.",
        )
        with (
            ModelProxy(config, tmp_path / "p.sock", run_budget=budget) as proxy,
            httpx.Client(
                transport=httpx.HTTPTransport(uds=str(proxy.socket_path)), base_url="http://proxy", timeout=30
            ) as c,
        ):
            refused = _ask(c, "x" * 2_000_000)  # the agent's own conversation, ~500,000 tokens estimated
            own = _ask(c, "Say hello to the world.")  # the harness's conversation goes on
        assert len(server.requests()) == 1
    assert refused.status_code == 400 and "budget-share" in refused.text
    assert own.status_code == 200
    assert [r.split(":")[0] for r in proxy.record.agent_refusals] == ["BUDGET_SHARE"]
    assert proxy.record.budget_end is None and proxy.record.run_budget_end is None
    assert budget.spend().exhausted is None
