"""A trigger run's figures and an adaptive run's looks on the run page: the reducer's numbers, in words.

The stored runs are real (``feature_runs``: the built-in agent against the offline model server);
a sweep's rows come from the reducer's own functions over a two-harness plan.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from engine.store import open_store
from producer.plan.planning import plan_run
from reducer.adaptive import Gate, next_round
from reducer.render_sweep import is_sweep
from reducer.trigger_compare import run_report
from reducer.triggers import TriggerRun, trigger_report
from schemas.adaptive import adaptive_plan
from schemas.errors import StoreError
from schemas.report import RunResult
from schemas.shard import CURRENT
from schemas.triggers import TriggerSettings
from tests.test_harness_e2e import CODEX_MODEL
from tests.test_reducer import bundle
from tests.test_sweep_triggers_adaptive import AGENT, CODEX, GPT, RUN, fired_by, observed, sweep_plan
from tests.viewer.conftest import HOSTILE_QUERY, LOCAL, FeatureRuns
from viewer.app import create_app
from viewer.run_figures import POOLED, adaptive_view, trigger_view
from viewer.templating import templates

HOSTILE_ROW = "openai/exec-<img src=x onerror=alert(1)>\n| forged | row |"


def client(store: str | Path) -> TestClient:
    return TestClient(create_app(open_store(str(store))), base_url=LOCAL)


def stored(runs: FeatureRuns, run_id: str, store: Path | None = None) -> dict:  # type: ignore[type-arg]
    return json.loads(((store or runs.env.store) / "runs" / run_id / "result.json").read_text())


def test_a_trigger_run_gives_each_rows_figures_with_counts_and_the_gates_verdict(feature_runs: FeatureRuns) -> None:
    c = client(feature_runs.env.store)
    run = feature_runs.trigger_run
    view = c.get(f"/api/runs/{run}/triggers").json()
    a, b = view["rows"]
    assert (a["row"], b["row"]) == ("openai/exec-a (agent)", "openai/exec-b (agent)")
    assert a["recall"] == {"count": "1 of 2 positive runs", "rate": "50.0%", "interval": "0.2% – 99.8%"}
    assert b["recall"]["count"] == "2 of 2 positive runs" and b["recall"]["rate"] == "100.0%"
    assert b["false_trigger"]["count"] == "1 of 2 negative runs"
    assert b["precision"] == {"count": "2 of 3 activations", "rate": "66.7%", "interval": "4.4% – 98.9%"}
    assert (a["f1"], b["f1"]) == ("50.0%", "80.0%")
    # The gate's verdict is the reducer's failure line, never a threshold checked again here.
    result = stored(feature_runs, run)
    assert a["gate"] == {"verdict": "FAIL", "reasons": result["triggers"]["failures"], "gates": "--min-recall 0.9"}
    assert b["gate"]["verdict"] == "PASS" and b["gate"]["reasons"] == []
    queries = {q["case_id"]: q for q in a["queries"]}
    assert queries[2] == {
        "case_id": 2,
        "query": HOSTILE_QUERY,
        "should": "yes",
        "fired": "0 of 1 epochs",
        "right": False,
        "flaky": False,
        "instead": "(none) ×1",
    }
    assert queries[4]["should"] == "no" and queries[4]["fired"] == "1 of 1 epochs" and not queries[4]["right"]
    assert view["routing_columns"] == ["pdf-tools", "(none)"] and view["routing"][0]["cells"] == [3, 1]
    assert view["routing_caption"].startswith("Routing matrix: positive runs")
    assert c.get(f"/api/runs/{run}/adaptive").status_code == 404
    # The runs list names its figures, not the 0/0 pass rate of a run without assertions.
    (listed,) = [r for r in c.get("/api/runs").json()["items"] if r["run_id"] == run]
    assert listed["rate"] == (
        "triggers pdf-tools (openai/exec-a): recall 1 of 2, false triggers 1 of 2; "
        "triggers pdf-tools (openai/exec-b): recall 2 of 2, false triggers 1 of 2"
    )
    page = c.get(f"/runs/{run}").text
    assert "Rates per corpus" not in page and "Leaderboard" not in page
    section = page[page.index('<section class="card" id="triggers">') :]
    section = section[: section.index("</section>")]
    first = section[: section.index("</article>")]
    # In each row the figures come first, the gate's verdict last, the queries after it.
    order = ["1 of 2 positive runs", "1 of 2 negative runs", "1 of 2 activations", '<tr class="f1">']
    order += ['class="gate"', 'class="queries"']
    assert [first.index(x) for x in order] == sorted(first.index(x) for x in order)
    assert '<span class="verdict FAIL">FAIL</span>' in first and "recall 1/2 (50.0%) is below 90%" in first
    assert '<span class="verdict PASS">PASS</span>' in section[section.index("</article>") :]


def test_an_adaptive_run_gives_its_look_interval_decision_and_why_cases_stopped(feature_runs: FeatureRuns) -> None:
    c = client(feature_runs.env.store)
    run = feature_runs.adaptive_run
    view = c.get(f"/api/runs/{run}/adaptive").json()
    gate = stored(feature_runs, run)["adaptive"]["gates"][0]
    (look,) = view["looks"]
    assert look["row"] == POOLED and look["figure"] == "pass-rate"
    assert look["estimate"] == f"{gate['estimate']:.3f}" and look["level"] == "97.50%"
    assert look["interval"] == f"[{gate['low']:.3f}, {gate['high']:.3f}]"
    assert look["over"] == "stratified by case over these cases' epochs"
    assert (
        look["decision"]
        == "undecided (0.75 inside its interval), so the look stopped no case; the verdict does not read it"
    )  # the threshold sits near the true rate
    assert look["stops"] == "2 stable, 2 max-epochs"
    assert [(x["case_id"], x["epochs"], x["stopped"]) for x in view["cases"]] == [
        (1, 3, "stable"),
        (2, 3, "stable"),
        (3, 5, "max-epochs"),
        (4, 5, "max-epochs"),
    ]
    assert view["cases"][0]["why"] == "its verdicts never varied"
    assert "2 of at most 2 looks" in view["rule"]
    assert c.get(f"/api/runs/{run}/triggers").status_code == 404
    page = c.get(f"/runs/{run}").text
    assert '<section class="card" id="adaptive">' in page and 'id="triggers"' not in page
    assert (
        '<td class="decision">undecided (0.75 inside its interval), so the look stopped no case; '
        "the verdict does not read it</td>" in page
    )
    assert "Rates per corpus" in page  # an adaptive run's pass rates are its figures


def test_a_sweeps_rows_each_carry_their_own_figures_gate_and_look() -> None:
    plan = sweep_plan()
    fired = fired_by(plan, {1: ("pdf",), 2: ("other",), 3: ("pdf",)}, {1: ("pdf",), 2: ("pdf",)})
    report = run_report(plan, fired, TriggerSettings(min_recall=0.75), "codex")
    result = {"skills": [], "triggers": report.model_dump(mode="json")}
    codex, agent = trigger_view(result, RUN)["rows"]  # type: ignore[index]
    assert (codex["row"], agent["row"]) == (CODEX, AGENT)
    assert codex["recall"]["count"] == "2 of 4 positive runs" and codex["gate"]["verdict"] == "FAIL"
    assert agent["recall"]["count"] == "4 of 4 positive runs" and agent["gate"]["verdict"] == "PASS"
    # A corpus whose shards mostly did not end is not gated: the reducer held it out of its gates.
    held = {**result, "skills": [{"skill": "pdf", "variant": CURRENT, "inconclusive": True}]}
    assert {r["gate"]["verdict"] for r in trigger_view(held, RUN)["rows"]} == {"not gated"}  # type: ignore[index]

    rule = adaptive_plan(5)
    sweep = plan_run(RUN, [bundle("s", (1, 1, 1))], [GPT], adaptive=rule, harnesses=plan.harnesses)
    yes, no = (True,), (False,)
    by = {(h, c): [yes, yes, yes] for h in ("codex", "agent") for c in (1, 3)}
    seen = observed(sweep, {**by, ("codex", 2): [yes, yes, yes], ("agent", 2): [no, no, no]})
    after = next_round(rule, [("s", 1), ("s", 2), ("s", 3)], {"s": Gate(0.9)}, seen, [CURRENT], rows=sweep.rows)
    looks = adaptive_view({"adaptive": after.model_dump(mode="json")}, RUN)["looks"]  # type: ignore[index]
    assert [g["row"] for g in looks] == [CODEX, AGENT]
    assert [g["decision"] for g in looks] == [
        f"decided: {g.decided} 0.9"
        if g.decided
        else "undecided (0.9 inside its interval), so the look stopped no case; the verdict does not read it"
        for g in after.gates
    ]


def test_a_rows_gate_verdict_is_its_own_whatever_another_rows_name_spells() -> None:
    """A row named so that another row's failure line begins like its own (``m): recall``) leaves
    row ``m`` passing, in a new record and in one stored before rows kept their failures."""
    sly = "m): recall 0/2 (0.0%) is below 50%"
    runs = [TriggerRun("pdf", model, 1, "q", True, ("pdf",) if model == "m" else ()) for model in ("m", sly)]
    runs += [TriggerRun("pdf", model, 2, "n", False, ()) for model in ("m", sly)]
    report = trigger_report(runs, TriggerSettings(min_recall=0.5))
    assert report.failures == [f"pdf ({sly}): recall 0/1 (0.0%) is below 50%"]
    assert report.failures[0].startswith("pdf (m): ")  # what the line's text alone would give to row m
    new = report.model_dump(mode="json")
    old = {**new, "figures": [{k: v for k, v in f.items() if k != "failed"} for f in new["figures"]]}
    for triggers in (new, old):
        honest, failing = trigger_view({"skills": [], "triggers": triggers}, RUN)["rows"]  # type: ignore[index]
        assert honest["gate"]["verdict"] == "PASS" and honest["gate"]["reasons"] == []
        assert failing["gate"] == {"verdict": "FAIL", "reasons": report.failures, "gates": "--min-recall 0.5"}


def test_a_compared_trigger_run_shows_the_baseline_arms_own_figures_ungated() -> None:
    runs = [TriggerRun("pdf", "m", 1, "q", True, ("pdf",)), TriggerRun("pdf", "m", 2, "n", False, ("pdf",))]
    old = [TriggerRun("pdf", "m", 1, "q", True, ()), TriggerRun("pdf", "m", 2, "n", False, ())]
    report = trigger_report(runs, TriggerSettings()).model_copy(
        update={"baselines": {"baseline@HEAD~1": trigger_report(old, TriggerSettings()).figures}}
    )
    (row,) = trigger_view({"skills": [], "triggers": report.model_dump(mode="json")}, RUN)["baselines"]  # type: ignore[index]
    assert (row["arm"], row["skill"], row["row"]) == ("baseline@HEAD~1", "pdf", "m (agent)")
    assert row["recall"]["count"] == "0 of 1 positive runs" and row["false_trigger"]["count"] == "0 of 1 negative runs"
    assert "gate" not in row  # a baseline arm is shown, never gated
    view = trigger_view({"skills": [], "triggers": report.model_dump(mode="json")}, RUN)
    html = templates().env.get_template("run_figures.html").render(triggers=view, adaptive=None)
    table = html.split("The earlier description's own figures (not gated)")[1]
    assert '<td data-label="arm" class="wrap">baseline@HEAD~1</td>' in table and "0 of 1 positive runs" in table
    assert (
        trigger_view({"skills": [], "triggers": trigger_report(runs, TriggerSettings()).model_dump(mode="json")}, RUN)[
            "baselines"
        ]
        == []
    )  # type: ignore[index]


def test_a_sweep_stored_before_results_named_their_harnesses_still_shows_harness_model_rows(
    feature_runs: FeatureRuns, tmp_path: Path
) -> None:
    store = Path(feature_runs.viewed().store_copy(tmp_path / "store"))
    run = feature_runs.sweep_trigger_run
    result = stored(feature_runs, run, store)
    assert result.pop("harnesses") == ["codex", "agent"]
    for f in result["triggers"]["figures"]:
        del f["failed"]
    (store / "runs" / run / "result.json").write_text(json.dumps(result))
    c = client(store)
    assert "<th>harness × model</th><th>epoch</th>" in c.get(f"/runs/{run}").text
    codex, agent = c.get(f"/api/runs/{run}/triggers").json()["rows"]
    assert (codex["gate"]["verdict"], agent["gate"]["verdict"]) == ("FAIL", "PASS")
    # The reports read it back the same way: the harnesses named from the figures kept per harness.
    old = RunResult.model_validate(result)
    assert old.harnesses == ["codex", "agent"] and is_sweep(old)
    assert [f.failure_lines for f in old.triggers.figures] == [result["triggers"]["failures"], []]  # type: ignore[union-attr]


def test_a_damaged_record_is_named_not_shown_blank() -> None:
    with pytest.raises(StoreError, match=r"result\.json field 'triggers' cannot be read as TriggerReport"):
        trigger_view({"triggers": {"figures": [{"skill": 1}]}}, RUN)
    with pytest.raises(StoreError, match="field 'adaptive' cannot be read as AdaptivePlan"):
        adaptive_view({"adaptive": {"cases": "x"}}, RUN)
    assert trigger_view(None, RUN) is None and adaptive_view({"skills": []}, RUN) is None


def test_hostile_queries_rows_and_reasons_are_text_on_the_page(feature_runs: FeatureRuns, tmp_path: Path) -> None:
    """A query, a row's name and a gate's reason forged with markup and line breaks stay inert."""
    store = Path(feature_runs.viewed().store_copy(tmp_path / "store"))
    run = feature_runs.trigger_run
    result = stored(feature_runs, run, store)
    result["triggers"]["figures"][0]["model"] = HOSTILE_ROW
    forged = {"gate": "--min-recall", "reason": "recall <script>window.pwnedReason=1</script>"}
    result["triggers"]["figures"][0]["failed"] = [forged]
    result["triggers"]["failures"] = [f"pdf-tools ({HOSTILE_ROW}): {forged['reason']}"]
    (store / "runs" / run / "result.json").write_text(json.dumps(result))
    adaptive = feature_runs.adaptive_run
    doc = stored(feature_runs, adaptive, store)
    doc["adaptive"]["gates"][0]["row"] = HOSTILE_ROW
    (store / "runs" / adaptive / "result.json").write_text(json.dumps(doc))
    c = client(store)
    for page in (c.get(f"/runs/{run}").text, c.get(f"/runs/{adaptive}").text):
        assert "<script>window.pwned" not in page and "<img src=x" not in page
        assert page.count("<script") == 1  # the viewer's own, from /static
        assert "openai/exec-&lt;img src=x onerror=alert(1)&gt;\n| forged | row |" in page
    page = c.get(f"/runs/{run}").text
    assert "&lt;script&gt;window.pwnedQuery=1&lt;/script&gt;\nverdict: PASS\n| forged | row |" in page
    assert "&lt;script&gt;window.pwnedReason=1&lt;/script&gt;" in page
    # The forged "verdict: PASS" line sits inside its query cell, never as the page's verdict.
    assert re.findall(r'id="verdict-value">(\w+)<', page) == ["FAIL"]
    cells = re.findall(r'<td class="wrap query-text">(.*?)</td>', page, re.S)
    assert sum("verdict: PASS" in cell for cell in cells) == 2 and page.count("verdict: PASS") == 2


def test_a_real_sweep_gives_each_harness_model_row_its_figures_gate_and_look(feature_runs: FeatureRuns) -> None:
    c = client(feature_runs.env.store)
    run = feature_runs.sweep_trigger_run
    codex_row, agent_row = (f"{h} × {CODEX_MODEL}" for h in ("codex", "agent"))
    codex, agent = c.get(f"/api/runs/{run}/triggers").json()["rows"]
    assert (codex["row"], agent["row"]) == (codex_row, agent_row)  # the row names its harness once
    assert codex["recall"]["count"] == "1 of 3 positive runs" and agent["recall"]["count"] == "3 of 3 positive runs"
    assert codex["gate"]["verdict"] == "FAIL" and codex["gate"]["reasons"] == [
        f"pdf-tools ({codex_row}): recall 1/3 (33.3%) is below 50%"
    ]
    assert agent["gate"]["verdict"] == "PASS"
    assert {q["instead"] for q in codex["queries"] if q["should"] == "yes" and not q["right"]} == {
        "(none) ×1",
        "csv-clean ×1",
    }
    # A trigger sweep has no assertion to pair harnesses on; its rows are still harness × model.
    assert "<th>harness × model</th><th>epoch</th>" in c.get(f"/runs/{run}").text
    single = c.get(f"/runs/{feature_runs.trigger_run}").text
    assert "<th>model</th><th>epoch</th>" in single and "harness × model" not in single
    adaptive = feature_runs.sweep_adaptive_run
    looks = c.get(f"/api/runs/{adaptive}/adaptive").json()["looks"]
    gates = stored(feature_runs, adaptive)["adaptive"]["gates"]
    assert [g["row"] for g in looks] == [codex_row, agent_row] == [g["row"] for g in gates]
    assert [g["estimate"] for g in looks] == [f"{g['estimate']:.3f}" for g in gates]
    assert {g["stops"] for g in looks} == {"1 stable, 1 max-epochs"}  # cases are shared by the rows
    page = c.get(f"/runs/{adaptive}").text
    assert page.count('<article class="look"') == 2 and f'<span class="row-name">{codex_row}</span>' in page


def test_a_paired_difference_reads_in_points_and_hides_an_interval_from_too_few_cases() -> None:
    paired = templates().env.filters["paired"]  # the run page's comparison cells
    few = {"difference": -0.5, "low": -0.667, "high": -0.333, "cases": 2}
    assert paired(few) == "-50.0 pts (interval not shown: 2 cases)"
    assert paired({**few, "cases": 8}) == "-50.0 pts (-66.7 pts – -33.3 pts)"
