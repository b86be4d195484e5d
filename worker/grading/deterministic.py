"""Deterministic assertions (extension ``deterministic-assertions``): checked without a model. Pure.

Each check reads the structured trajectory, never the rendered text, so nothing the agent
printed can imitate a tool call:

* ``tool_call``: some tool call (optionally of one tool) has arguments matching a regex —
  one named argument's value, or all arguments as sorted JSON; with ``absent``, none does;
* ``call_order``: a call matching ``first`` is followed later by a call matching ``then``;
* ``file_contains``: the file's final content (``Trajectory.final_files``) matches a regex;
* ``skill_activated``: the harness loaded the skill under test (``Trajectory.skill_activated``,
  recorded by harness executors from the proxied tool calls; an executor that records no
  activation fails the check and says so).

The corpus validator (producer/corpus/validation.py) has already compiled every pattern.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from schemas.checks_focus import BaselineCheck, FocusedCheck
from schemas.checks_plugin import JudgedCheck
from schemas.corpus import (
    Assertion,
    CallOrderCheck,
    DeterministicAssertion,
    FileContainsCheck,
    SkillActivatedCheck,
    ToolCallCheck,
    ToolCallMatcher,
)
from schemas.patterns import PatternTimeout, bounded
from schemas.trajectory import ToolCallEvent, Trajectory
from schemas.verdict import AssertionVerdict
from schemas.words import plural
from worker.grading.check_verdict import EVIDENCE_CHARS, Checker, check_verdict, cut, presence_verdict
from worker.grading.http_checks import check_http_call, check_http_order
from worker.grading.plugin_checks import PLUGIN_CHECKERS
from worker.grading.tampering import with_tampering


def _calls(trajectory: Trajectory) -> list[ToolCallEvent]:
    return [e for e in trajectory.events if isinstance(e, ToolCallEvent)]


def _subject(call: ToolCallEvent, argument: str | None) -> str | None:
    if argument is None:
        return json.dumps(call.arguments, ensure_ascii=False, sort_keys=True)
    if argument not in call.arguments:
        return None
    value = call.arguments[argument]
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


def call_matches(call: ToolCallEvent, matcher: ToolCallMatcher) -> bool:
    """True when ``call`` is of the matcher's tool (if any) and the regex is found in its subject."""
    if matcher.tool is not None and call.name != matcher.tool:
        return False
    subject = _subject(call, matcher.argument)
    return subject is not None and bounded(matcher.pattern).search(subject) is not None


def _quote(call: ToolCallEvent) -> str:
    text = f"[tool_call] {call.name}({json.dumps(call.arguments, ensure_ascii=False, sort_keys=True)})"
    return cut(text)


def _check_tool_call(check: ToolCallCheck, trajectory: Trajectory) -> AssertionVerdict:
    calls = _calls(trajectory)
    first = next((c for c in calls if call_matches(c, check.matcher)), None)
    sought = f"tool call matching /{check.pattern}/ among the run's {len(calls)}"
    return presence_verdict(check, not check.absent, sought, _quote(first) if first else None)


def _check_call_order(check: CallOrderCheck, trajectory: Trajectory) -> AssertionVerdict:
    calls = _calls(trajectory)
    first = next((i for i, c in enumerate(calls) if call_matches(c, check.first)), None)
    if first is None:
        return check_verdict(check, False, f"absent: a tool call matching /{check.first.pattern}/")
    then = next((c for c in calls[first + 1 :] if call_matches(c, check.then)), None)
    if then is None:
        return check_verdict(
            check, False, f"absent: a tool call matching /{check.then.pattern}/ after {_quote(calls[first])}"
        )
    return check_verdict(check, True, f"{_quote(calls[first])} ... then {_quote(then)}")


def _check_file(check: FileContainsCheck, trajectory: Trajectory) -> AssertionVerdict:
    content = trajectory.final_files.get(check.path)
    if content is None:
        return check_verdict(check, False, f"absent: {check.path} among the files the run touched")
    match = bounded(check.pattern).search(content)
    if match is None:
        return check_verdict(check, False, f"absent: a match for /{check.pattern}/ in the final {check.path}")
    return check_verdict(check, True, f"{check.path}: {match.group(0)[:EVIDENCE_CHARS]}")


def _check_activated(check: SkillActivatedCheck, trajectory: Trajectory) -> AssertionVerdict:
    if trajectory.skill_activated is None:
        return check_verdict(check, False, f"absent: executor {trajectory.executor} records no skill activation")
    if not trajectory.skill_activated:
        return check_verdict(check, False, f"absent: no tool call of the run loaded the skill {trajectory.skill}")
    skill = trajectory.skill
    loading = next(
        (c for c in _calls(trajectory) if skill in json.dumps(c.arguments, ensure_ascii=False)),
        None,
    )
    return check_verdict(check, True, _quote(loading) if loading else f"the harness loaded the skill {skill}")


def check_assertion(check: DeterministicAssertion, trajectory: Trajectory) -> AssertionVerdict:
    """The verdict of one deterministic assertion on ``trajectory``; a pattern of the check that
    gives up on the agent's text fails it (decided against the agent: an absence check it would
    otherwise pass included)."""
    try:
        return _CHECKERS[check.kind](check, trajectory)
    except PatternTimeout as exc:
        return check_verdict(check, False, f"not decided: {exc}; counted as failed")


_CHECKERS: dict[str, Checker] = {
    **PLUGIN_CHECKERS,
    "http_call": check_http_call,
    "http_order": check_http_order,
    "skill_activated": _check_activated,
    "tool_call": _check_tool_call,
    "call_order": _check_call_order,
    "file_contains": _check_file,
}
"""A deterministic assertion's ``kind`` -> the function that gives its verdict on a trajectory."""


def split_assertions(assertions: Sequence[Assertion]) -> tuple[list[str], list[int]]:
    """The judged texts in order, and the positions (in ``assertions``) they came from."""
    positions = [i for i, a in enumerate(assertions) if isinstance(a, str | JudgedCheck)]
    return [a if isinstance(a, str) else a.text for a in assertions if isinstance(a, str | JudgedCheck)], positions


def _judged(verdict: AssertionVerdict, assertion: str | JudgedCheck) -> AssertionVerdict:
    """A judged verdict carrying its assertion's weight (1 for a plain string)."""
    if isinstance(assertion, str) or verdict.weight == assertion.weight:
        return verdict
    return verdict.model_copy(update={"weight": assertion.weight})


def merge_by_position(
    assertions: Sequence[Assertion],
    judged: Sequence[AssertionVerdict],
    trajectory: Trajectory,
    focused: Mapping[int, AssertionVerdict] | None = None,
) -> list[AssertionVerdict]:
    """One verdict per assertion in corpus order: judged verdicts fill the string positions (in
    order), ``focused`` the positions of the focus assertions (their own judge's votes),
    deterministic checks the others; a run whose agent forged a tool result gets them all failed
    and one more, failing (:mod:`worker.grading.tampering`). Raises ValueError on a count mismatch."""
    texts, _positions = split_assertions(assertions)
    if len(judged) != len(texts):
        raise ValueError(f"{plural(len(judged), 'judged verdict')} for {plural(len(texts), 'judged assertion')}")
    queue = iter(judged)
    out = []
    for i, a in enumerate(assertions):
        if isinstance(a, str | JudgedCheck):
            out.append(_judged(next(queue), a))
        elif isinstance(a, FocusedCheck | BaselineCheck):
            if focused is None or i not in focused:
                raise ValueError(f"no verdict for the {a.kind} assertion {i + 1}")
            out.append(focused[i])
        else:
            out.append(check_assertion(a, trajectory))
    return with_tampering(out, trajectory)
