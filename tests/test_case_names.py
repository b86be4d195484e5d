"""A plugin eval case's folder name stands beside its number on every surface that names cases:
the console's plugin score line, the markdown per-model and assertion tables, and JUnit's test names."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from reducer.plugin_score import plugin_complete_lines
from reducer.render import render_markdown
from reducer.render_junit import render_junit
from schemas.report import PluginCaseScore, PluginSuiteScore, RunResult
from tests.test_reducer import bundle, outcomes_for, plan_for, reduce

NAMES = {1: "add-note", 2: "fix-note"}


def named_result() -> RunResult:
    plan = plan_for([bundle("s", [1, 1])])
    result = reduce(plan, outcomes_for(plan, {1: [True], 2: [True]}))
    [skill] = result.skills
    model = skill.models[0].model
    cases = [PluginCaseScore(case_id=i, runs=1, score=1.0) for i in (1, 2)]
    scores = [PluginSuiteScore(model=model, score=1.0, cases=cases)]
    named = skill.model_copy(update={"case_names": NAMES, "plugin_scores": scores})
    return result.model_copy(update={"skills": [named]})


def test_the_console_score_line_names_each_case() -> None:
    [line] = plugin_complete_lines(named_result().skills[0])
    assert line.endswith("suite 1.000; cases 1 (add-note)=1.000, 2 (fix-note)=1.000"), line


def test_the_markdown_tables_name_each_case() -> None:
    text = render_markdown(named_result(), "s", {})
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    for name in ("1 (add-note)", "2 (fix-note)"):
        assert any(line.startswith(f"| {name} | 0 | graded |") for line in rows), rows  # the model's runs
        assert sum(line.startswith(f"| {name} | ") for line in rows) == 2, rows  # and its assertion
    assert not any(line.startswith(("| 1 |", "| 2 |")) for line in rows), rows


def test_junit_test_names_carry_each_case_name() -> None:
    suite = ET.fromstring(render_junit(named_result())).find("testsuite")
    assert suite is not None
    names = [case.get("name", "") for case in suite.findall("testcase")]
    assert len(names) == 2 and names[0].startswith("case1 (add-note).") and names[1].startswith("case2 (fix-note)."), (
        names
    )
