"""JUnit for CI: infra failures are errors, behavioural failures are failures, INCONCLUSIVE is skipped."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from reducer.render_junit import render_junit
from schemas.status import ShardState
from tests.test_reducer import bundle, outcomes_for, plan_for, reduce


def suite_of(xml: str) -> ET.Element:
    suite = ET.fromstring(xml).find("testsuite")
    assert suite is not None
    return suite


def test_a_conclusive_corpus_keeps_failures_as_failures_and_infra_as_errors() -> None:
    plan = plan_for([bundle("s", [1, 1, 1, 1, 1])])
    spec = {1: [True], 2: [False], 3: [True], 4: [True], 5: ShardState.GRADER_DISPATCH_FAILED}
    suite = suite_of(render_junit(reduce(plan, outcomes_for(plan, spec))))
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped")) == (
        "5",
        "1",
        "1",
        "0",
    )
    assert [e.get("message") for e in suite.findall("testcase/error")] == ["grader-dispatch-failed"]


def test_an_inconclusive_corpus_is_skipped_so_ci_neither_passes_nor_fails_on_it() -> None:
    plan = plan_for([bundle("s", [1, 1, 1, 1])])
    spec = {1: [False], 2: [True], 3: ShardState.EXECUTOR_FAILED, 4: ShardState.GRADER_MALFORMED}
    suite = suite_of(render_junit(reduce(plan, outcomes_for(plan, spec))))
    assert (suite.get("failures"), suite.get("errors"), suite.get("skipped")) == ("0", "2", "2")
    messages = {e.get("message", "") for e in suite.findall("testcase/skipped")}
    assert messages == {"INCONCLUSIVE: INCONCLUSIVE (2/4 shards not graded — infra)"}


def test_the_current_suite_carries_the_paired_figures_as_properties() -> None:
    from schemas.shard import CURRENT, NO_SKILL

    plan = plan_for([bundle("s", [1] * 6)], variants=(CURRENT, NO_SKILL))
    outcomes = {
        **outcomes_for(plan, {k: [True] for k in range(1, 7)}),
        **outcomes_for(plan, {k: [False] for k in range(1, 7)}, variant=NO_SKILL),
    }
    root = ET.fromstring(render_junit(reduce(plan, outcomes)))
    current = next(s for s in root.findall("testsuite") if s.get("name") == "s[current]")
    props = {p.get("name"): p.get("value") for p in current.findall("properties/property")}
    assert props["compare.no-skill.difference"] == "1.0" and props["compare.no-skill.test"] == "mcnemar-exact"
    assert float(props["compare.no-skill.p_uplift"]) == 1 / 64
    assert len(current.findall("testcase")) == 6  # properties are not counted as tests


def test_a_carried_report_is_a_suite_of_its_own_and_the_run_verdict_a_property() -> None:
    from schemas.report import CarriedReport

    plan = plan_for([bundle("s", [1, 1])])
    earlier = [
        CarriedReport(corpus_file="evals/old.evals.json", skill="old", verdict="FAIL", report="/r/old-1.json"),
        CarriedReport(corpus_file="evals/ok.evals.json", skill="ok", verdict="PASS", report="/r/ok-1.json"),
    ]
    result = reduce(plan, outcomes_for(plan, {1: [True], 2: [True]}), already_reported=earlier)
    assert result.verdict.value == "FAIL"
    root = ET.fromstring(render_junit(result))
    assert {p.get("name"): p.get("value") for p in root.findall("properties/property")} == {"verdict": "FAIL"}
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    old, ok = suites["old[carried]"], suites["ok[carried]"]
    assert (old.get("tests"), old.get("failures"), old.get("skipped")) == ("1", "1", "0")
    assert old.findall("testcase/failure")[0].get("message") == earlier[0].reason()
    assert (ok.get("failures"), ok.get("skipped")) == ("0", "1")
    assert "/r/ok-1.json" in (ok.findall("testcase/skipped")[0].get("message") or "")
