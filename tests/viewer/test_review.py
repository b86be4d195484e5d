"""Reviewing the judge's verdicts: what a shard page shows a reviewer (the task, a trigger shard's
outcome, the labels in force) and which labels are refused, by name, over real stored runs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import redis
from starlette.testclient import TestClient

from engine.records import put_outcome
from engine.redis_server import RedisServer
from engine.state import RunState
from engine.store import open_store
from engine.usage import record_usage
from schemas.errors import StoreError
from schemas.manifest import RunManifest
from schemas.outcome import ShardOutcomeRecord
from schemas.shard import RunPlan
from schemas.status import ShardState
from tests.viewer.conftest import (
    HOSTILE_EXPECTED,
    HOSTILE_PROMPT,
    LOCAL,
    LONG_EXPECTED,
    TRIGGER_QUERIES,
    FeatureRuns,
    ViewedRun,
)
from viewer.app import _error, create_app
from viewer.data import RunNotFound
from viewer.live import live_figures


def client(store: str | Path, review: bool = False) -> TestClient:
    return TestClient(create_app(open_store(str(store)), review=review), base_url=LOCAL)


def shard_of(c: TestClient, run: str, **params: str) -> str:
    return str(c.get(f"/api/runs/{run}/shards", params=params).json()["items"][0]["shard_id"])


def labels_in(store: Path, run: str) -> list[Path]:
    return list((store / "runs" / run / "labels").rglob("*.json"))


def test_the_shard_page_shows_the_cases_prompt_and_expected_output_as_text(viewed_run: ViewedRun) -> None:
    c = client(viewed_run.env.store, review=True)
    run = viewed_run.run_id
    one = shard_of(c, run, q="viewer-one")
    doc = c.get(f"/api/runs/{run}/shards/{one}").json()
    assert doc["case"]["prompt"]["text"] == HOSTILE_PROMPT and doc["case"]["expected"]["text"] == HOSTILE_EXPECTED
    html = c.get(f"/runs/{run}/shards/{one}").text
    # Above the verdicts and the trajectory: the reviewer reads the task first.
    assert html.index('id="task"') < html.index('id="assertions"') < html.index('id="trajectory"')
    assert "&lt;script&gt;window.pwnedPrompt=1&lt;/script&gt;" in html and "<script>window.pwnedPrompt" not in html
    assert "&lt;img src=x onerror=window.pwnedExpected=1&gt;" in html and "<img src=x" not in html
    assert '<details class="task-text prompt" open>' in html
    two = c.get(f"/runs/{run}/shards/{shard_of(c, run, q='viewer-two')}").text
    # A long expected output is folded, its first line in view; a short prompt is open.
    assert '<details class="task-text expected" >' in two
    assert f"({len(LONG_EXPECTED)} characters)" in two and "Line 0 of what a good run prints." in two


def test_a_deterministic_checks_verdict_offers_no_label_and_a_label_on_it_is_refused_by_name(
    checked_run: ViewedRun, tmp_path: Path
) -> None:
    store = checked_run.store_copy(tmp_path / "store")
    run = checked_run.run_id
    c = client(store, review=True)
    shard = shard_of(c, run)
    html = c.get(f"/runs/{run}/shards/{shard}").text
    judged, checked = html.split('id="a2"')
    assert "deterministic check" in checked and 'class="label-controls"' not in checked
    assert "a deterministic check, not a judge's verdict: nothing to label" in checked
    assert judged.count('class="label-controls"') == 1
    refused = c.post(f"/api/runs/{run}/labels", json={"shard_id": shard, "assertion": 2, "agree": False})
    assert refused.status_code == 400
    assert refused.json()["error"] == (
        f"CONFIG_ERROR: run {run}: shard {shard}: assertion 2 was decided by a deterministic check, "
        "not a judge: only a judge's verdicts are labelled"
    )
    cli = checked_run.env.cli("label", run, "--shard", shard, "--assertion", "2", "--disagree", "--store", str(store))
    assert cli.code == 2 and "decided by a deterministic check" in cli.stderr
    assert labels_in(store, run) == []
    kept = c.post(f"/api/runs/{run}/labels", json={"shard_id": shard, "assertion": 1, "agree": True})
    assert kept.status_code == 200 and kept.json()["agreement"]["items"]


def test_a_trigger_shard_says_what_fired_and_a_label_on_it_says_what_is_true(
    feature_runs: FeatureRuns, tmp_path: Path
) -> None:
    store = feature_runs.viewed().store_copy(tmp_path / "store")
    run = feature_runs.trigger_run
    c = client(store, review=True)
    rows = c.get(f"/api/runs/{run}/shards").json()["items"]
    # exec-a misses query 2 and fires on query 4; exec-b fires on query 4: three went the wrong way.
    wrong = {(r["model"], r["case_id"]) for r in rows if r["failing"]}
    assert wrong == {("openai/exec-a", 2), ("openai/exec-a", 4), ("openai/exec-b", 4)}
    failing = c.get(f"/api/runs/{run}/shards", params={"failing": "1"}).json()
    assert failing["total"] == 3
    listed = c.get(f"/runs/{run}", params={"failing": "1"}).text
    assert listed.count('<tr class="shard failing"') == 3
    assert "3 shards match" in listed and "(s)" not in listed
    assert (
        listed.count("should fire: yes · fired: nothing") == 1
        and listed.count("should fire: no · fired: pdf-tools") == 2
    )
    (missed,) = [r for r in rows if (r["model"], r["case_id"]) == ("openai/exec-a", 2)]
    (fired,) = [r for r in rows if (r["model"], r["case_id"]) == ("openai/exec-a", 4)]
    doc = c.get(f"/api/runs/{run}/shards/{fired['shard_id']}").json()
    assert doc["trajectory"]["skill_activated"] is True and doc["trajectory"]["skills_fired"] == ["pdf-tools"]
    assert doc["trigger"]["should_fire"] is False and doc["trigger"]["right"] is False
    html = c.get(f"/runs/{run}/shards/{missed['shard_id']}").text
    assert ">Assertions<" not in html and 'id="trigger"' in html
    should = {i: s for i, _, s, _ in TRIGGER_QUERIES}
    assert should[2] is True and '<b class="should">yes</b>' in html
    assert '<b class="fired wrap">nothing</b>' in html and 'id="trigger-outcome">wrong<' in html
    assert re.search(r" · (1 call|\d+ calls), ", html) and "(s)" not in html
    figures = c.get(f"/runs/{run}").text
    assert re.search(r"at most (1 turn|\d+ turns)\.", figures) and "(s)" not in figures
    assert "&lt;script&gt;window.pwnedQuery=1&lt;/script&gt;" in html and "<script>window.pwnedQuery" not in html
    assert 'class="label-controls"' not in html and "Nothing to label: a trigger shard" in html
    cli = feature_runs.env.cli(
        "label", run, "--shard", missed["shard_id"], "--assertion", "1", "--agree", "--store", str(store)
    )
    assert cli.code == 2 and "a trigger run's shard has no judge verdicts to label" in cli.stderr
    assert "has no grade" not in cli.stderr


def test_a_blocked_shards_label_says_it_was_never_graded(viewed_run: ViewedRun, tmp_path: Path) -> None:
    store = viewed_run.store_copy(tmp_path / "store")
    run = viewed_run.run_id
    c = client(store, review=True)
    shard = shard_of(c, run, q="viewer-two")
    (store / "runs" / run / "grades" / f"{shard}.json").unlink()
    why = "BLOCKED_BAD_FIXTURE: fixture data.txt: a folder stands there"
    blocked = ShardOutcomeRecord(state=ShardState.BLOCKED, detail=why, status="BLOCKED_BAD_FIXTURE")
    put_outcome(open_store(str(store)), run, shard, blocked)
    cli = viewed_run.env.cli("label", run, "--shard", shard, "--assertion", "1", "--agree", "--store", str(store))
    assert cli.code == 2
    assert f"shard {shard} ended blocked ({why}) and was never graded: no verdict to label" in cli.stderr


def test_contradictory_agree_and_disagree_flags_are_refused(viewed_run: ViewedRun, tmp_path: Path) -> None:
    store = viewed_run.store_copy(tmp_path / "store")
    run = viewed_run.run_id
    shard = shard_of(client(store), run)
    both = viewed_run.env.cli(
        "label", run, "--shard", shard, "--assertion", "2", "--disagree", "--agree", "--store", str(store)
    )
    assert both.code == 2 and "CONFIG_ERROR: --agree and --disagree contradict: say one" in both.stderr
    neither = viewed_run.env.cli("label", run, "--shard", shard, "--assertion", "2", "--store", str(store))
    assert neither.code == 2 and "say --agree or --disagree" in neither.stderr
    assert labels_in(store, run) == []


def test_a_shards_labels_are_listed_newest_first_with_the_one_in_force_marked(
    viewed_run: ViewedRun, tmp_path: Path
) -> None:
    store = viewed_run.store_copy(tmp_path / "store")
    run = viewed_run.run_id
    c = client(store, review=True)
    shard = shard_of(c, run, q="viewer-two")
    for agree, note in ((True, "first thought"), (False, "second thought")):
        assert c.post(f"/api/runs/{run}/labels", json={"shard_id": shard, "assertion": 1, "agree": agree, "note": note})
    c.post(f"/api/runs/{run}/labels", json={"shard_id": shard, "assertion": 2, "agree": True})
    labels = c.get(f"/api/runs/{run}/shards/{shard}").json()["labels"]
    assert [(x["assertion"], x["note"], x["in_force"]) for x in labels] == [
        (1, "", True),
        (0, "second thought", True),
        (0, "first thought", False),
    ]
    first = c.get(f"/runs/{run}/shards/{shard}").text.split('id="a1"')[1].split("</article>")[0]
    newer, older = first.split('class="human-label')[1:]
    assert "in force" in newer and "second thought" in newer
    assert "in force" not in older and "first thought" in older


def test_a_label_for_a_shard_the_run_does_not_hold_is_a_named_404_with_its_status_once(
    viewed_run: ViewedRun, tmp_path: Path
) -> None:
    store = viewed_run.store_copy(tmp_path / "store")
    run = viewed_run.run_id
    c = client(store, review=True)
    for shard in ("../../etc/passwd", "x/y", "nope"):
        res = c.post(f"/api/runs/{run}/labels", json={"shard_id": shard, "assertion": 1, "agree": True})
        assert res.status_code == 404, res.text
        assert res.json()["error"] == f"STORE_ERROR: no shard {shard!r} in run {run}"
    assert _error(StoreError("invalid key 'a b'")).body == b'{"error":"STORE_ERROR: invalid key \'a b\'"}'
    assert _error(RunNotFound("no run x")).status_code == 404
    cli = viewed_run.env.cli("label", run, "--shard", "x/../y", "--assertion", "1", "--agree", "--store", str(store))
    assert cli.code == 2 and "CONFIG_ERROR: run" in cli.stderr and "not a shard id" in cli.stderr
    assert "STORE_ERROR: STORE_ERROR" not in cli.stderr


def test_shard_filters_refuse_values_the_run_cannot_hold_naming_the_allowed_ones(viewed_run: ViewedRun) -> None:
    c = client(viewed_run.env.store)
    base = f"/api/runs/{viewed_run.run_id}/shards"
    state = c.get(base, params={"state": "bogus"})
    assert state.status_code == 400
    assert state.json()["error"].startswith("CONFIG_ERROR: state='bogus' matches nothing in this run: state is one of")
    assert "'graded'" in state.json()["error"] and "'blocked'" in state.json()["error"]
    model = c.get(base, params={"model": "nobody"})
    assert model.status_code == 400 and "model is one of 'openai/exec-a'" in model.json()["error"]
    arm = c.get(base, params={"arm": "elsewhere"})
    assert arm.status_code == 400 and "arm is one of 'current'" in arm.json()["error"]
    assertion = c.get(base, params={"assertion": "The agent runs echo viewer-nine in the shell"})
    assert assertion.status_code == 400 and "assertion is one of" in assertion.json()["error"]
    assert "and 1 more" not in assertion.json()["error"]  # five texts: all named
    page = c.get(f"/runs/{viewed_run.run_id}", params={"state": "bogus"})
    assert page.status_code == 400 and "state=&#39;bogus&#39; matches nothing in this run" in page.text
    assert c.get(base, params={"state": "graded", "model": "openai/exec-a"}).json()["total"] == 2


def test_view_refuses_a_port_out_of_range_before_binding(viewed_run: ViewedRun) -> None:
    for port in ("99999", "0", "-1"):
        res = viewed_run.env.cli("view", "--store", str(viewed_run.env.store), "--port", port)
        assert res.code == 2, res.stdout + res.stderr
        assert f"CONFIG_ERROR: --port {port}: a port is 1 to 65535" in res.stderr and "INFRA_ERROR" not in res.stderr


def test_live_spend_of_unpriced_models_reads_unknown_not_zero(viewed_run: ViewedRun, tmp_path: Path) -> None:
    run = viewed_run.run_id
    with RedisServer(workdir=tmp_path / "redis") as server:
        broker = redis.Redis.from_url(server.url)
        shards = [r["shard_id"] for r in client(viewed_run.env.store).get(f"/api/runs/{run}/shards").json()["items"]]
        RunState(broker).register(run, shards, f"runs/{run}/manifest.json", "2026-01-01T00:00:00Z")
        record_usage(broker, "openai/exec-a", run, calls=1, prompt_tokens=10)  # litellm knows no price
        c = TestClient(create_app(open_store(str(viewed_run.env.store)), server.url), base_url=LOCAL)
        live = c.get(f"/api/runs/{run}").json()["live"]
        assert (live["spend_usd"], live["spend_unknown"]) == (None, True)
        assert '<span data-live="spend">unknown</span>' in c.get(f"/runs/{run}").text
        record_usage(broker, "openai/judge", run, calls=1, cost_usd=0.0125)
        live = c.get(f"/api/runs/{run}").json()["live"]
        assert (live["spend_usd"], live["spend_unknown"]) == (0.0125, True)
        assert '<span data-live="spend">$0.0125 + unknown</span>' in c.get(f"/runs/{run}").text
        broker.close()


def test_live_spend_is_a_dash_before_any_call_and_the_sum_when_every_cost_is_known() -> None:
    plan = RunPlan(run_id="r", bundles=(), models=("openai/m",), judges=("openai/j",), epochs=1, shards=())
    manifest = RunManifest(plan=plan, snapshots={})
    nothing = live_figures(manifest, 1, {}, "broker", {})
    assert (nothing["spend_usd"], nothing["spend_unknown"]) == (None, False)
    priced = live_figures(manifest, 1, {}, "broker", {"a": {"cost_usd": 0.5}, "b": {"cost_usd": 0.25}})
    assert (priced["spend_usd"], priced["spend_unknown"]) == (0.75, False)
    assert json.dumps(priced)  # the API serves it as it is
