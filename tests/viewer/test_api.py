"""The viewer's JSON API over a store a real run wrote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis
from starlette.testclient import TestClient

from engine.records import put_run_end
from engine.redis_server import RedisServer
from engine.settings import shown_url
from engine.store import open_store
from schemas.manifest import RunManifest
from schemas.run_end import RunEnd
from schemas.shard import RunPlan
from tests.viewer.conftest import LOCAL, MODELS, ViewedRun
from viewer.app import LABEL_BODY_BYTES, create_app, pager_links
from viewer.data import ViewerData
from viewer.live import counts_of_result, live_figures
from viewer.rows import MAX_PAGE, Query


def client(store: str | Path, review: bool = False) -> TestClient:
    return TestClient(create_app(open_store(str(store)), review=review), base_url=LOCAL)


def test_the_runs_list_names_the_run_with_its_verdict_and_plan(viewed_run: ViewedRun) -> None:
    doc = client(viewed_run.env.store).get("/api/runs").json()
    (run,) = doc["items"]
    assert run["run_id"] == viewed_run.run_id
    assert run["verdict"] == "FAIL" and run["running"] is False
    assert run["skills"] == ["hostile"] and run["models"] == list(MODELS) and run["arms"] == ["current"]
    assert "6/10" in run["rate"]


def test_a_run_gives_verdict_rates_and_shard_counts(viewed_run: ViewedRun) -> None:
    doc = client(viewed_run.env.store).get(f"/api/runs/{viewed_run.run_id}").json()
    assert doc["verdict"] == "FAIL"
    assert doc["live"]["groups"]["graded"] == 4 and doc["live"]["total"] == 4
    assert doc["live"]["groups"]["blocked"] == 0 and doc["live"]["groups"]["failed"] == 0
    (skill,) = doc["result"]["skills"]
    assert skill["behavioural"]["passed"] == 6 and skill["behavioural"]["total"] == 10
    assert [m["behavioural"]["passed"] for m in skill["models"]] == [3, 3]
    assert 0 < skill["behavioural"]["low"] < 0.6 < skill["behavioural"]["high"] < 1
    assert "runs" not in skill  # the shard list pages them instead


def test_shards_filter_and_page(viewed_run: ViewedRun) -> None:
    c = client(viewed_run.env.store)
    base = f"/api/runs/{viewed_run.run_id}/shards"
    every = c.get(base).json()
    assert every["total"] == 4 and {r["state"] for r in every["items"]} == {"graded"}
    assert c.get(base, params={"failing": "1"}).json()["total"] == 4
    hits = c.get(base, params={"q": "VIEWER-TWO-C"}).json()["items"]
    assert [r["case_id"] for r in hits] == [2, 2]
    assert c.get(base, params={"q": "viewer-two", "model": "openai/exec-a"}).json()["total"] == 1
    assert (
        c.get(base, params={"assertion": "The agent runs echo viewer-one-a in the shell", "failing": "1"}).json()[
            "total"
        ]
        == 0
    )
    assert c.get(base, params={"model": "nobody"}).status_code == 400  # a typo is named, not an empty list
    page = c.get(base, params={"limit": 1, "offset": 1}).json()
    assert len(page["items"]) == 1 and page["total"] == 4
    assert c.get(base, params={"limit": "x"}).status_code == 400
    # An out-of-range page is served clamped, and the answer says what was served, not what was asked.
    served = c.get(base, params={"limit": 10_000, "offset": -5}).json()
    assert (served["offset"], served["limit"], len(served["items"])) == (0, MAX_PAGE, 4)


def test_the_pager_steps_by_the_page_served_so_a_large_limit_skips_no_row() -> None:
    links = pager_links({"limit": "10000", "q": "x"}, Query(limit=10_000))
    assert links["next"] == f"limit=10000&q=x&offset={MAX_PAGE}"  # the served page held MAX_PAGE rows
    assert pager_links({}, Query(offset=700, limit=10_000))["prev"] == f"offset={700 - MAX_PAGE}"


def test_a_shard_gives_its_trajectory_verdicts_and_marked_evidence(viewed_run: ViewedRun) -> None:
    c = client(viewed_run.env.store)
    rows = c.get(f"/api/runs/{viewed_run.run_id}/shards", params={"q": "viewer-two"}).json()["items"]
    doc = c.get(f"/api/runs/{viewed_run.run_id}/shards/{rows[0]['shard_id']}").json()
    assert [a["verdict"]["passed"] for a in doc["assertions"]] == [True, True, False]
    calls = [e for e in doc["trajectory"]["events"] if e["kind"] == "tool_call"]
    assert len(calls) == 2
    marked = {n for e in doc["trajectory"]["events"] for p in e["parts"] for n in p["marks"]}
    assert marked == {1, 2}  # the two passes' evidence is found; the fail has none
    assert c.get(f"/api/runs/{viewed_run.run_id}/shards/nope").status_code == 404
    assert c.get("/api/runs/20990101-000000-deadbeef").status_code == 404


def test_labels_are_refused_read_only_and_counted_with_review(viewed_run: ViewedRun, tmp_path: Path) -> None:
    store = viewed_run.store_copy(tmp_path / "store")
    run = viewed_run.run_id
    rows = client(store).get(f"/api/runs/{run}/shards", params={"q": "viewer-two"}).json()["items"]
    body = {"shard_id": rows[0]["shard_id"], "assertion": 1, "agree": True}
    assert client(store).post(f"/api/runs/{run}/labels", json=body).status_code == 403
    c = client(store, review=True)
    first = c.post(f"/api/runs/{run}/labels", json=body).json()
    (overall,) = [a for a in first["agreement"]["items"] if a["scope"] == "all"]
    assert (overall["n"], overall["kappa"]) == (1, None) and "one same verdict" in overall["kappa_note"]
    c.post(f"/api/runs/{run}/labels", json={**body, "assertion": 2, "agree": False, "note": "no quote"})
    last = c.post(f"/api/runs/{run}/labels", json={**body, "assertion": 3, "agree": True}).json()
    (overall,) = [a for a in last["agreement"]["items"] if a["scope"] == "all"]
    # judge: pass, pass, fail; people: pass, fail, fail -> po 2/3, pe 4/9, kappa 0.4
    assert (overall["n"], overall["agreed"]) == (3, 2) and abs(overall["kappa"] - 0.4) < 1e-9
    assert c.post(f"/api/runs/{run}/labels", json={**body, "assertion": 9}).status_code == 400
    assert (
        c.post(f"/api/runs/{run}/labels", content=b"agree=1", headers={"content-type": "text/plain"}).status_code == 403
    )
    cross = c.post(f"/api/runs/{run}/labels", json=body, headers={"origin": "http://evil.example"})
    assert cross.status_code == 403
    assert len(list((store / "runs" / run / "labels").rglob("*.json"))) == 3
    listed = client(store).get(f"/api/runs/{run}/labels").json()["items"]  # readable without --review
    assert [(x["assertion"], x["agree"], x["note"]) for x in listed] == [
        (0, True, ""),
        (1, False, "no quote"),
        (2, True, ""),
    ]


def test_a_label_is_refused_for_a_test_host_name_a_huge_body_or_a_non_web_origin(
    viewed_run: ViewedRun, tmp_path: Path
) -> None:
    """A page that rebinds its own name to 127.0.0.1 sends its own Host and Origin: none is taken."""
    store = viewed_run.store_copy(tmp_path / "store")
    run = viewed_run.run_id
    rows = client(store).get(f"/api/runs/{run}/shards", params={"q": "viewer-two"}).json()["items"]
    body = {"shard_id": rows[0]["shard_id"], "assertion": 1, "agree": True}
    for name in ("testserver", "testserver:8765"):  # Starlette's test client's name is no host of ours
        other = TestClient(create_app(open_store(str(store)), review=True), base_url=f"http://{name}")
        assert other.get("/api/runs").status_code == 400
        posted = other.post(f"/api/runs/{run}/labels", json=body, headers={"origin": f"http://{name}"})
        assert posted.status_code == 400
    c = client(store, review=True)
    for scheme in ("ftp", "file", "ws"):  # the right host under a scheme no web page of ours has
        origin = LOCAL.replace("http", scheme, 1)
        assert c.post(f"/api/runs/{run}/labels", json=body, headers={"origin": origin}).status_code == 403
    huge = json.dumps({**body, "note": "x" * (LABEL_BODY_BYTES + 1)}).encode()
    for chunked in (False, True):  # a declared length, and a body streamed without one
        content = iter([huge[i : i + 4096] for i in range(0, len(huge), 4096)]) if chunked else huge
        refused = c.post(f"/api/runs/{run}/labels", content=content, headers={"content-type": "application/json"})
        assert refused.status_code == 413, refused.text
    assert c.post(f"/api/runs/{run}/labels", json=body, headers={"origin": LOCAL}).status_code == 200
    assert len(list((store / "runs" / run / "labels").rglob("*.json"))) == 1


def test_the_run_page_shows_gates_rates_and_the_corpus_by_model_map(viewed_run: ViewedRun) -> None:
    html = client(viewed_run.env.store).get(f"/runs/{viewed_run.run_id}").text
    assert html.index("verdict:") < html.index("Rates per corpus")  # the verdict and its gates come first
    assert "behavioural pass rate 6/10 (60.0%) is below the threshold 0.8 (--fail-under)" in html
    heat = html[html.index('id="heatmap"') :]
    assert heat.count('class="heat-3"') == 2  # 3/5 for each model: 60%
    # Each rate shows the by-case interval (the one to read) and the Wilson one, each named by what it is over.
    assert "<th>95% CI (by case)</th><th>95% CI (Wilson)</th>" in html and "<th>95% interval</th>" not in html
    rate = json.loads((viewed_run.env.store / "runs" / viewed_run.run_id / "result.json").read_text())
    by_case = rate["skills"][0]["behavioural"]["clustered"]
    cell = f'<td data-label="95% CI (by case)" class="by-case">{by_case["low"]:.1%} – {by_case["high"]:.1%}</td>'
    assert cell in html


def test_a_cost_litellm_cannot_price_reads_unknown_as_status_and_the_report_say(viewed_run: ViewedRun) -> None:
    # The scripted models have no price: "-" read as nothing spent; "unknown" is what status prints.
    viewer = client(viewed_run.env.store)
    usage = viewer.get(f"/runs/{viewed_run.run_id}").text.split("Tokens and cost")[1].split("</table>")[0]
    runs = viewer.get("/").text
    assert usage.count("<td>unknown</td>") == len(MODELS) + 1  # the executor models and the judge
    assert '<td data-label="cost">unknown</td>' in runs


def test_a_run_not_reduced_yet_shows_what_is_stored_so_far(viewed_run: ViewedRun, tmp_path: Path) -> None:
    store = viewed_run.store_copy(tmp_path / "store")
    run = viewed_run.run_id
    (store / "runs" / run / "result.json").unlink()
    ended = sorted((store / "runs" / run / "outcomes").glob("*.json"))
    ended[0].unlink()  # one shard has not ended
    c = client(store)
    (item,) = c.get("/api/runs").json()["items"]
    # No broker knows the run: it may be going on a fleet, or its command was killed.
    assert item["running"] is False and item["verdict"] is None and item["ended"] is None
    doc = c.get(f"/api/runs/{run}").json()
    assert doc["live"]["source"] == "store" and doc["result"] is None
    # Only how many ended is known from a listing, not how: they are not called done or graded.
    assert doc["live"]["groups"] == {"not ended": 1, "ended": 3}
    rows = c.get(f"/api/runs/{run}/shards").json()["items"]
    # Nor is the shard without an outcome called queued: it may be waiting, running or lost.
    assert sorted(r["state"] for r in rows) == ["graded", "graded", "graded", "not ended"]
    (waiting,) = c.get(f"/api/runs/{run}/shards", params={"state": "not ended"}).json()["items"]
    assert waiting["shard_id"] == ended[0].stem
    shard_page = client(store, review=True).get(f"/runs/{run}/shards/{waiting['shard_id']}").text
    assert "Nothing to label: this shard has not ended." in shard_page
    assert c.get(f"/api/runs/{run}/result").status_code == 404
    page = c.get(f"/runs/{run}").text
    assert ">not done<" in page and "whether it is still going is not known here" in page


def test_a_run_the_viewers_broker_does_not_know_reads_as_not_going_on(
    viewed_run: ViewedRun, tmp_path: Path, broker: RedisServer
) -> None:
    """Started with ``--broker``, the viewer asks that broker; one that answers it has no such run
    (lost with its data, or expired) means nothing runs it: the page says so and names the broker
    (its password hidden), as ``status`` does, never that a broker should be given."""
    store = viewed_run.store_copy(tmp_path / "store")
    run = viewed_run.run_id
    (store / "runs" / run / "result.json").unlink()
    sorted((store / "runs" / run / "outcomes").glob("*.json"))[0].unlink()  # one shard never ended
    redis.Redis.from_url(broker.url).config_set("requirepass", "secret")  # shown hidden, never in the page
    url = broker.url.replace("redis://", "redis://:secret@", 1)
    c = TestClient(create_app(open_store(str(store)), url), base_url=LOCAL)
    shown = shown_url(url)
    (item,) = c.get("/api/runs").json()["items"]
    assert item["lost_by"] == shown and item["running"] is False and item["verdict"] is None
    assert ">not going on<" in c.get("/").text
    doc = c.get(f"/api/runs/{run}").json()
    assert doc["lost_by"] == shown and doc["live"]["groups"] == {"not ended": 1, "ended": 3}
    assert "never end" in doc["live"]["source_words"] and "no broker" not in doc["live"]["source_words"]
    (left,) = c.get(f"/api/runs/{run}/shards", params={"state": "not ended"}).json()["items"]
    assert left["state"] == "not ended"
    page = " ".join(c.get(f"/runs/{run}").text.split())
    assert 'id="verdict-value">not going on<' in page
    assert f"The broker at {shown} does not know this run (lost with its data, or expired): it is not going on" in page
    assert "secret" not in page and "skill-eval view --broker" not in page and "not known here" not in page


def test_a_run_its_checks_refused_reads_as_blocked_with_the_named_error(viewed_run: ViewedRun, tmp_path: Path) -> None:
    store = viewed_run.store_copy(tmp_path / "store")
    run = viewed_run.run_id
    (store / "runs" / run / "result.json").unlink()
    for outcome in (store / "runs" / run / "outcomes").glob("*.json"):
        outcome.unlink()  # refused before dispatch: nothing ended
    why = "BLOCKED_MODEL_UNAVAILABLE: anthropic/m: ANTHROPIC_API_KEY not set"
    put_run_end(open_store(str(store)), RunEnd(run_id=run, how="blocked", reason=why))
    c = client(store)
    (item,) = c.get("/api/runs").json()["items"]
    assert item["verdict"] == "BLOCKED" and item["reasons"] == [why]
    assert item["running"] is False and item["ended"] == "blocked"
    listed = c.get("/").text
    assert ">BLOCKED<" in listed and "ANTHROPIC_API_KEY not set" in listed and ">running<" not in listed
    page = c.get(f"/runs/{run}").text
    assert 'id="verdict-value">BLOCKED<' in page and "ANTHROPIC_API_KEY not set" in page


def test_an_embedded_run_stopped_before_it_finished_reads_as_interrupted(viewed_run: ViewedRun, tmp_path: Path) -> None:
    store = viewed_run.store_copy(tmp_path / "store")
    run = viewed_run.run_id
    (store / "runs" / run / "result.json").unlink()
    put_run_end(open_store(str(store)), RunEnd(run_id=run, how="interrupted", reason="Ctrl-C before the run finished"))
    c = client(store)
    (item,) = c.get("/api/runs").json()["items"]
    assert item["verdict"] is None and item["ended"] == "interrupted" and item["running"] is False
    page = c.get(f"/runs/{run}").text
    assert 'id="verdict-value">interrupted<' in page and "Ctrl-C before the run finished" in page


def test_a_run_the_broker_holds_but_nothing_moves_reads_as_stalled_as_status_says(
    viewed_run: ViewedRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = viewed_run.store_copy(tmp_path / "store")
    run = viewed_run.run_id
    (store / "runs" / run / "result.json").unlink()
    # The broker's stall test itself, against a real ledger, is in tests/test_delivery.py.
    monkeypatch.setattr(ViewerData, "_progress", lambda self, run_id: "stalled")
    c = client(store)
    (item,) = c.get("/api/runs").json()["items"]
    assert item["stalled"] is True and item["running"] is False
    assert ">STALLED<" in c.get("/").text
    page = c.get(f"/runs/{run}").text
    assert 'id="verdict-value">STALLED<' in page and "check that workers serve the run's queues" in page


def test_a_blocked_shard_is_counted_as_blocked_not_done() -> None:
    """The page's tally is the reports': graded, blocked and the infra failures apart."""
    plan = RunPlan(run_id="r", bundles=(), models=("openai/m",), judges=("openai/j",), epochs=1, shards=())
    manifest = RunManifest(plan=plan, snapshots={})
    counts_from_result = counts_of_result(
        {"skills": [{"models": [{"graded": 1}], "infra": {"executor-failed": 0}, "not_graded": 1}]}
    )
    for counts in (counts_from_result, {"graded": 1, "blocked": 1}):
        groups = live_figures(manifest, 2, counts, "result", {})["groups"]
        assert (groups["graded"], groups["blocked"], groups["failed"]) == (1, 1, 0)
        assert "done" not in groups


def test_a_search_over_trajectories_finds_the_shards_whose_agent_printed_it(viewed_run: ViewedRun) -> None:
    c = client(viewed_run.env.store)
    base = f"/api/runs/{viewed_run.run_id}/shards"
    hits = c.get(base, params={"text": "WINDOW.PWNEDRESULT"}).json()
    assert hits["total"] == 2 and {r["case_id"] for r in hits["items"]} == {1}
    assert c.get(base, params={"text": "printed by nobody"}).json()["total"] == 0
    html = c.get(f"/runs/{viewed_run.run_id}", params={"text": "echo viewer-two-b"})
    assert html.status_code == 200 and html.text.count('<tr class="shard') == 2
    assert c.get(f"/runs/{viewed_run.run_id}/shards/nope").status_code == 404


def test_the_assertion_filter_offers_each_assertion_and_keeps_the_failures_of_the_one_chosen(
    viewed_run: ViewedRun,
) -> None:
    c = client(viewed_run.env.store)
    chosen = "The agent runs echo viewer-two-c in the shell"
    html = c.get(f"/runs/{viewed_run.run_id}", params={"assertion": chosen, "failing": "1"}).text
    assert f'<option value="{chosen}" selected>' in html
    assert html.count('<tr class="shard failing"') == 2  # both models failed it
    passed = c.get(
        f"/runs/{viewed_run.run_id}",
        params={"assertion": "The agent runs echo viewer-two-a in the shell", "failing": "1"},
    )
    assert passed.text.count('<tr class="shard') == 0


def test_a_run_this_version_cannot_read_is_listed_by_name_and_the_others_still_show(
    viewed_run: ViewedRun, tmp_path: Path
) -> None:
    """A store shared with another version (or a damaged manifest) must not take the list down."""
    import json

    store = viewed_run.store_copy(tmp_path / "store")
    other = "20200101-000000-deadbeef"
    src = store / "runs" / viewed_run.run_id
    dest = store / "runs" / other
    dest.mkdir(parents=True)
    for name in ("manifest.json", "outline.json"):
        if (src / name).exists():
            doc = json.loads((src / name).read_text())
            doc["a_field_from_another_version"] = 1
            if "manifest" in doc:
                doc["manifest"]["a_field_from_another_version"] = 1
            (dest / name).write_text(json.dumps(doc))
    c = client(store)
    listed = c.get("/api/runs")
    assert listed.status_code == 200
    items = {r["run_id"]: r for r in listed.json()["items"]}
    assert items[viewed_run.run_id]["verdict"] == "FAIL"
    assert "a_field_from_another_version" in items[other]["unreadable"]
    page = c.get("/")
    assert page.status_code == 200 and f"run {other}: its manifest cannot be read here" in page.text
    opened = c.get(f"/api/runs/{other}")
    assert opened.status_code == 422 and opened.json()["error"].startswith("STORE_ERROR: run ")


def test_the_favicon_is_served_and_every_page_names_it(viewed_run: ViewedRun) -> None:
    c = client(viewed_run.env.store)
    icon = c.get("/favicon.ico")
    assert icon.status_code == 200 and icon.headers["content-type"].startswith("image/svg+xml")
    assert icon.text.startswith("<svg")
    assert c.get("/static/favicon.svg").status_code == 200
    assert '<link rel="icon" href="/static/favicon.svg"' in c.get("/").text


def test_the_shard_counts_heading_is_shards_and_says_where_its_counts_come_from(viewed_run: ViewedRun) -> None:
    page = client(viewed_run.env.store).get(f"/runs/{viewed_run.run_id}").text
    assert "Shards (" not in page and "Shards <small>" not in page
    assert '<p class="meta" id="counts-source">counts <span data-live="source">from the run&#39;s result</span>' in page
    live = client(viewed_run.env.store).get(f"/api/runs/{viewed_run.run_id}").json()["live"]
    assert live["source"] == "result" and live["source_words"] == "from the run's result"


def test_a_model_name_on_a_page_breaks_only_after_its_separators(viewed_run: ViewedRun) -> None:
    page = client(viewed_run.env.store).get(f"/runs/{viewed_run.run_id}").text
    assert '<td class="name">openai/<wbr>exec-<wbr>a</td>' in page  # the tokens table
    # Escaped first: a separator never lands inside an escape sequence.
    assert "openai/<wbr>exec-<wbr>&lt;script&gt;window.<wbr>pwnedModel=1&lt;/<wbr>script&gt;" in page
    assert "overflow-wrap: anywhere" not in name_rule()


def name_rule() -> str:
    css = (Path(__file__).resolve().parents[2] / "viewer" / "static" / "viewer.css").read_text(encoding="utf-8")
    return next(line for line in css.splitlines() if line.startswith(".name "))


def test_a_plugin_suites_shards_name_their_case_folder(plugin_run: ViewedRun) -> None:
    c = client(plugin_run.env.store)
    items = c.get(f"/api/runs/{plugin_run.run_id}/shards").json()["items"]
    assert {(r["case_id"], r["case_name"]) for r in items} == {(1, "oslo-rain"), (2, "sunny-day")}
    shard = next(r for r in items if r["case_id"] == 2)["shard_id"]
    page = c.get(f"/runs/{plugin_run.run_id}/shards/{shard}").text
    assert "· case 2 (sunny-day) ·" in page
    run_page = c.get(f"/runs/{plugin_run.run_id}").text
    assert '<td data-label="scored" class="words">case 1 (oslo-rain)</td>' in run_page


def test_a_run_failed_by_a_carried_report_says_so_on_its_line(viewed_run: ViewedRun, tmp_path: Path) -> None:
    """The corpora that ran may all pass while a corpus left out for its earlier FAIL fails the run:
    the runs list's line names that corpus beside the rate, from the record or, for a result stored
    before it listed them apart, from its reasons."""
    store = viewed_run.store_copy(tmp_path / "store")
    path = store / "runs" / viewed_run.run_id / "result.json"
    doc = json.loads(path.read_text())
    earlier = {"corpus_file": "evals/release.evals.json", "skill": "release", "verdict": "FAIL"}
    earlier["report"] = "/out/skill-eval-release-20260101.json"
    said = "release: FAIL carried from an earlier report (skill-eval-release-20260101.json)"
    reason = "release: FAIL in its earlier report /out/skill-eval-release-20260101.json (--force re-runs it)"
    doc["comparisons"] = [
        {"skill": "hostile", "baseline": "no-skill", "model": None, "current_rate": 0.6, "baseline_rate": 0.5}
        | {"difference": 0.1, "low": -0.2, "high": 0.4, "cases": 8, "pairs": 8, "p_two_sided": 0.5}
    ]
    for stored in ({**doc, "carried": [earlier]}, {**doc, "reasons": [*doc["reasons"], reason]}):
        path.write_text(json.dumps(stored))
        c = client(store)
        (item,) = c.get("/api/runs").json()["items"]
        assert item["rate"].endswith(f"; {said}")
        assert said in c.get("/").text
    page = c.get(f"/runs/{viewed_run.run_id}").text
    assert "<th>p (two-sided; a gate is one-sided)</th>" in page
