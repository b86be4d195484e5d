"""``--baseline same``: the run measures its own noise, and later runs plan with it.

The scripted executor runs ``echo hello`` with probability 1/2 per conversation (a ``pick``
drawn from the scenario's seed), and the judge passes "runs echo hello" exactly when the
transcript shows it: each shard passes that assertion with probability 1/2, independently, so
two identical arms disagree on it with probability 2 * 1/2 * 1/2 = 1/2. A second assertion
always passes and never flips. The true discordance over assertion pairs is therefore 1/4.

With one epoch each case's prompt is asked twice at turn 0 (once per arm); the draws are a
function of the seed and the occurrence, so which arm gets which draw does not change whether
the two differ: the flip count is fixed by the seed, and the test cannot be flaky.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from engine.records import latest_noise, put_result
from engine.store import LocalStore
from producer.plan.planning import gate_test
from reducer.noise import noise_floor
from reducer.power import cases_needed, min_detectable_effect, power_note
from reducer.stream import reduce_run
from schemas.comparison import NoiseRecord
from schemas.manifest import noise_key
from schemas.shard import CURRENT, NO_SKILL, SAME
from testkit.offline_server import OfflineModelServer
from testkit.scenario import ScenarioError, parse_scenario, pick_reply
from tests.test_baseline_no_skill import make_repo, run_cli
from tests.test_reducer import bundle, graded, plan_for

CASES = 12
P_ECHO = 0.5
TRUE_DISCORDANCE = 2 * P_ECHO * (1 - P_ECHO) / 2  # one assertion of two can flip


def scenario(seed: int) -> dict[str, object]:
    echo = {"tool_calls": [{"name": "shell", "arguments": {"command": "echo hello"}}]}
    coin = [{"weight": P_ECHO, "reply": echo}, {"weight": 1 - P_ECHO, "reply": {"text": "Hello there!"}}]
    return {
        "seed": seed,
        "rules": [{"tools": True, "contains": "Say hello", "replies": [{"pick": coin}, {"text": "done"}]}],
        "judge": [
            {"assertion_contains": "runs echo hello", "transcript_regex": r"\[tool_call\] shell\(.*echo hello"},
            {"assertion_contains": "outputs an answer", "transcript_regex": r"."},
        ],
    }


def two_assertion_repo(root: Path) -> Path:
    repo = make_repo(root, cases=CASES)
    corpus = json.loads((repo / "evals" / "greeter.evals.json").read_text())
    for case in corpus["evals"]:
        case["assertions"].append("The agent outputs an answer to the user")
    (repo / "evals" / "greeter.evals.json").write_text(json.dumps(corpus))
    return repo


@pytest.mark.slow
@pytest.mark.timeout(500)
@pytest.mark.parametrize("seed", [11, 12])
def test_the_noise_floor_finds_the_scripted_models_flip_rate_and_later_runs_plan_with_it(
    tmp_path: Path, seed: int
) -> None:
    repo = two_assertion_repo(tmp_path / "repo")
    with OfflineModelServer(scenario(seed)) as server:
        result = run_cli(repo, tmp_path, server, "--baseline", "same", "--fail-under", "0")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "noise floor greeter: " in result.stdout
    doc = json.loads(next((tmp_path / "zuvo" / "reports").glob("skill-eval-greeter-*.json")).read_text())
    overall = next(c for c in doc["comparisons"] if c["model"] is None)
    assert overall["kind"] == "same" and overall["pairs"] == CASES
    noise = overall["noise"]
    assert noise["pairs"] == 2 * CASES and noise["cases"] == CASES and noise["method"] == "cluster-wilson"
    assert noise["low"] <= TRUE_DISCORDANCE <= noise["high"], noise
    # The assertion that always passes never flips; the coin-driven one carries every flip.
    steady = [f for f in noise["per_assertion"] if f["index"] == 1]
    assert len(steady) == CASES and all(f["flips"] == 0 for f in steady)
    assert sum(f["flips"] for f in noise["per_case"]) == noise["flips"] > 0
    md = next((tmp_path / "zuvo" / "reports").glob("skill-eval-greeter-*.md")).read_text()
    assert "## Noise floor: the current skill against itself: same" in md
    assert "Gate: none (the noise floor is measured, never gated)." in md
    # The next plan of the same corpus uses the observed discordance instead of the assumed 20%.
    plan = subprocess.run(
        [
            sys.executable,
            "-m",
            "producer.commands.cli",
            "run",
            "greeter",
            "--repo",
            str(repo),
            "--baseline",
            "no-skill",
            "--dry-run",
            "--json",
            "--store",
            str(tmp_path / "store"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert plan.returncode == 0, plan.stderr
    power = json.loads(plan.stdout)["power"]
    alpha, gate = gate_test((CURRENT, NO_SKILL), None)  # the uplift test's one-sided 2.5% (no gate required)
    expected = power_note(
        CASES, 1, discordance=noise["discordance"] + 0.1, observed_in=doc["run_id"], alpha=alpha, gate=gate
    ).lines()
    assert power == expected and f"the noise floor observed by run {doc['run_id']}, plus the difference" in power[0]


def test_the_scripted_coin_lands_at_its_probability_and_does_not_depend_on_request_order() -> None:
    parsed = parse_scenario(scenario(3))
    reply = parsed.rules[0].replies[0]
    draws = [pick_reply(reply, parsed.seed, (0, 0, f"conversation-{i}"), 0) for i in range(4000)]
    share = sum("tool_calls" in d for d in draws) / len(draws)
    assert abs(share - P_ECHO) < 0.03
    assert pick_reply(reply, 3, (0, 0, "c"), 1) == pick_reply(reply, 3, (0, 0, "c"), 1)
    assert {json.dumps(pick_reply(reply, s, (0, 0, "c"), 0)) for s in range(40)} == {
        json.dumps(p["reply"]) for p in reply["pick"]
    }


def _simulated_pairs(rng: random.Random, cases: int, epochs: int, steady: bool) -> list:  # type: ignore[type-arg]
    """One A/A run: each case draws its pass probability uniformly on [0, 1]; its first assertion
    passes with it in each arm, the second too (``steady`` False) or always (``steady`` True)."""
    pairs = []
    for case in range(cases):
        p = rng.random()
        for epoch in range(epochs):
            a = (rng.random() < p, steady or rng.random() < p)
            b = (rng.random() < p, steady or rng.random() < p)
            pairs.append(((case, "m", epoch), a, b))
    return pairs


def _coverage(seed: int, steady: bool, truth: float, runs: int = 2000) -> float:
    rng = random.Random(seed)
    covered = 0
    for _ in range(runs):
        noise = noise_floor(_simulated_pairs(rng, 15, 3, steady))
        assert noise is not None
        covered += noise.low <= truth <= noise.high
    return covered / runs


def test_the_noise_floors_interval_covers_the_true_flip_rate_over_repeated_seeds() -> None:
    """2,000 simulated A/A runs of 15 cases x 3 epochs whose cases differ: the discordance's
    interval, clustered by case, holds the true flip rate about 95% of the time. With p uniform,
    E[2 p (1 - p)] = 1/3."""
    assert abs(_coverage(38, steady=False, truth=1 / 3) - 0.95) <= 0.02
    # A case whose assertions differ (one never flips) is less variable than as many alike trials;
    # the design effect is held at 1 there (Korn and Graubard), so the interval errs wide, never narrow.
    assert 0.95 <= _coverage(39, steady=True, truth=1 / 6) <= 0.99


def test_the_minimum_detectable_effect_inverts_the_sample_size() -> None:
    """A difference d over a noise floor makes d pairs more discordant, one way: MDE(cases_needed(noise + d, d)) = d."""
    for noise, difference in [(0.1, 0.1), (0.15, 0.15), (0.3, 0.2), (0.0, 0.3)]:
        n = cases_needed(noise + difference, difference)
        mde = min_detectable_effect(n, noise)
        assert mde is not None and abs(mde - difference) < 0.01
        assert min_detectable_effect(n, noise, epochs=3) < mde  # type: ignore[operator]
        assert min_detectable_effect(2 * n, noise) < mde  # type: ignore[operator]
    assert min_detectable_effect(4, 0.2) is None  # four cases can never reach one-sided p < 0.05
    assert min_detectable_effect(0, 0.2) is None


def test_no_pair_of_the_same_skill_is_ever_a_regression_or_fails_the_run() -> None:
    plan = plan_for([bundle("s", (1, 1, 1, 1, 1, 1))], variants=(CURRENT, SAME))
    # Every case passes in the first arm and fails in the second: pure noise, however large.
    outcomes = {s.shard_id: graded(s, [s.variant == CURRENT]) for s in plan.shards}
    result = reduce_run(plan, outcomes, regression_alpha=0.05)
    assert result.verdict.value == "PASS", result.reasons
    overall = next(c for c in result.comparisons if c.model is None)
    assert overall.kind == "same" and overall.noise is not None and overall.noise.discordance == 1.0


def test_a_damaged_or_foreign_noise_record_in_the_store_is_ignored_and_the_assumed_figure_serves(
    tmp_path: Path,
) -> None:
    store = LocalStore(tmp_path / "store")
    b = bundle("greeter", (1, 1, 1, 1, 1, 1))
    good = NoiseRecord(
        run_id="20260101-000000-00000001",
        skill="greeter",
        corpus_file=b.corpus_file,
        bundle_key=b.bundle_key,
        discordance=0.3,
        pairs=12,
        cases=6,
    )
    for raw in [
        b"{not json",
        good.model_copy(update={"discordance": 5.0}).model_dump_json().encode(),
        good.model_copy(update={"discordance": 0.0}).model_dump_json().encode(),
        good.model_copy(update={"corpus_file": "evals/other.evals.json"}).model_dump_json().encode(),
        good.model_copy(update={"skill": "other"}).model_dump_json().encode(),
        b'{"version": 2, "run_id": "x"}',
    ]:
        store.put(noise_key("greeter"), raw)
        assert latest_noise(store, [b]) == {}
    store.put(noise_key("greeter"), good.model_dump_json().encode())
    assert latest_noise(store, [b]) == {"greeter": good}


def test_reporting_an_older_same_run_again_keeps_the_newer_noise_floor(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    plan = plan_for([bundle("s", (1, 1, 1, 1, 1, 1))], variants=(CURRENT, SAME))
    outcomes = {s.shard_id: graded(s, [s.variant == CURRENT or s.case_id > 3]) for s in plan.shards}
    newer = reduce_run(plan, outcomes).model_copy(update={"run_id": "20270101-000000-00000000"})
    older = reduce_run(plan, outcomes).model_copy(update={"run_id": "20250101-000000-00000000"})
    put_result(store, newer)
    put_result(store, older)
    record = latest_noise(store, plan.bundles)["s"]
    assert record.run_id == newer.run_id and record.discordance == 0.5 and record.cases == 6


@pytest.mark.parametrize(
    ("pick", "where"),
    [
        ([], "pick: expected a non-empty list"),
        ([{"weight": -1, "reply": {}}], "pick[0].weight"),
        ([{"weight": float("nan"), "reply": {}}], "pick[0].weight"),
        ([{"weight": True, "reply": {}}], "pick[0].weight"),
        ([{"weight": 1, "reply": "text"}], "pick[0].reply"),
        ([{"weight": 0, "reply": {}}], "pick: the weights sum to 0"),
        ("coin", "pick: expected a non-empty list"),
    ],
)
def test_a_malformed_pick_is_refused_naming_the_rule(pick: object, where: str) -> None:
    bad = {"rules": [{"contains": "x", "replies": [{"pick": pick}]}]}
    with pytest.raises(ScenarioError, match=re.escape(f"rules[0].replies[0].{where}")):
        parse_scenario(bad)


def test_a_seed_that_is_not_an_integer_is_refused() -> None:
    with pytest.raises(ScenarioError, match="seed: expected an integer"):
        parse_scenario({"seed": "7"})
