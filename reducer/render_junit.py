"""JUnit XML of a run: one testsuite per corpus and variant, one testcase per shard and assertion. Pure."""

from __future__ import annotations

import re
from xml.sax.saxutils import escape, quoteattr

from reducer.render_triggers import junit_suites
from reducer.threshold import suite_threshold, verdict_basis
from schemas.report import CarriedReport, RunResult, SkillResult
from schemas.shard import CURRENT
from schemas.status import ShardState

# Characters XML 1.0 cannot carry at all (a transcript may quote a terminal's control codes).
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml_text(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)


def render_junit(result: RunResult) -> str:
    """JUnit XML: one testsuite per corpus and variant, one testcase per shard and assertion.

    Infra failures (and blocked cases) are ``<error>``: the evaluator could not judge them.
    An INCONCLUSIVE corpus reports its graded assertions as ``<skipped>``: its numbers
    measured the infra, not the skill, so they neither pass nor fail a CI job. The current
    arm's suite carries the paired comparisons as ``<properties>`` (difference, interval, p).
    A corpus left out for its earlier report is a suite of its own whose one testcase fails when
    that report FAILed (its FAIL still fails the run) and is skipped otherwise, and the run's own
    verdict is a property of ``<testsuites>``: a CI job reading the file alone sees what the run
    concluded, not only the corpora that ran.
    """
    # A trigger run's shards hold no assertions: an arm's suite lists only the shards that did not
    # end (an empty one would read 0 tests), its figures and gates are the trigger suites.
    arms = [
        s for s in result.skills if result.triggers is None or any(r.state is not ShardState.GRADED for r in s.runs)
    ]
    suites = "".join(_junit_suite(s, _junit_properties(result, s)) for s in arms)
    suites += junit_suites(result.triggers) if result.triggers is not None else ""
    suites += "".join(_carried_suite(c) for c in result.carried)
    run = f'<property name="verdict" value={quoteattr(result.verdict.value)}/>'
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<testsuites name={quoteattr(f'skill-eval {result.run_id}')}>"
        f"<properties>{run}</properties>" + suites + "</testsuites>\n"
    )


def _carried_suite(c: CarriedReport) -> str:
    """A corpus this run left out for its earlier report: one testcase, failing when that report FAILed."""
    tag = "failure" if c.verdict == "FAIL" else "skipped"
    case = _testcase(c.skill, "earlier report", tag, c.reason())
    props = "".join(
        f"<property name={quoteattr(k)} value={quoteattr(_xml_text(v))}/>"
        for k, v in (("verdict", c.verdict), ("carried_from", c.report))
    )
    return (
        f'<testsuite name={quoteattr(f"{c.skill}[carried]")} tests="1" failures="{int(tag == "failure")}" '
        f'errors="0" skipped="{int(tag == "skipped")}"><properties>{props}</properties>{case}</testsuite>'
    )


def _junit_properties(result: RunResult, s: SkillResult) -> str:
    if s.variant != CURRENT or result.triggers is not None:  # a trigger run's gates are its own suites
        return ""
    props = [
        f"<property name={quoteattr(key)} value={quoteattr(value)}/>"
        for key, value in (("verdict", s.verdict), ("threshold", suite_threshold(s, result)))
    ]
    if s.verdict in ("PASS", "FAIL"):
        props.append(f'<property name="verdict_basis" value={quoteattr(_xml_text(verdict_basis(s, result)))}/>')
    for m in s.plugin_scores:  # what decided a plugin eval suite: its scores, per executor model
        for key, score in (("suite", m.score), *((f"case{c.case_id}", c.score) for c in m.cases)):
            if score is not None:
                name = quoteattr(_xml_text(f"plugin_eval.{m.model}.{key}"))
                props.append(f"<property name={name} value={quoteattr(f'{score:.6g}')}/>")
    for c in result.comparisons:
        if c.skill != s.skill or c.model is not None:
            continue
        for key in ("difference", "low", "high", "p_two_sided", "p_drop", "p_uplift", "test", "dropped"):
            value = getattr(c, key)
            if value is not None:
                name = quoteattr(f"compare.{c.baseline}.{key}")
                props.append(f"<property name={name} value={quoteattr(str(value))}/>")
    return f"<properties>{''.join(props)}</properties>" if props else ""


def _junit_suite(s: SkillResult, properties: str = "") -> str:
    cases: list[str] = []
    counts = {"failure": 0, "error": 0, "skipped": 0}
    for r in s.runs:
        named = s.case_names.get(r.case_id)
        name = f"case{r.case_id}{f' ({named})' if named else ''}.{r.model}.e{r.epoch}"
        if r.state is not ShardState.GRADED:
            # A shard that never finished is <skipped>, not an <error>.
            cases.append(_testcase(s.skill, name, "error" if r.state.terminal else "skipped", r.state.value, r.detail))
            continue
        for i, v in enumerate(r.verdicts):
            test = f"{name}.a{i} {v.text}"
            if s.inconclusive:
                cases.append(_testcase(s.skill, test, "skipped", f"INCONCLUSIVE: {s.headline}"))
            elif not v.passed:
                cases.append(_testcase(s.skill, test, "failure", v.evidence[:200]))
            else:
                cases.append(_testcase(s.skill, test))
    for case in cases:
        for tag in counts:
            counts[tag] += f"<{tag} " in case
    return (
        f'<testsuite name={quoteattr(f"{s.skill}[{s.variant}]")} tests="{len(cases)}" '
        f'failures="{counts["failure"]}" errors="{counts["error"]}" skipped="{counts["skipped"]}">'
        + properties
        + "".join(cases)
        + "</testsuite>"
    )


def _testcase(classname: str, name: str, tag: str = "", message: str = "", body: str = "") -> str:
    inner = f"<{tag} message={quoteattr(_xml_text(message))}>{escape(_xml_text(body))}</{tag}>" if tag else ""
    return f"<testcase classname={quoteattr(classname)} name={quoteattr(_xml_text(name))}>{inner}</testcase>"
