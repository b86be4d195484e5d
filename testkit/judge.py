"""The offline server's rule-based judge: decides a grading request without a model.

A grading request (``prompts/grader.md`` filled in) carries the assertions as a JSON array
of strings and the transcript inside ``<transcript-NONCE> ... </transcript-NONCE>``. Both are
found defensively: the transcript by its fence, the assertions as the first JSON array of
strings outside the fence (an array of ``{"text": ...}`` objects is accepted as well).

A vote request (``prompts/judge-focus.md`` or ``judge-baseline.md``) carries one criterion as a
JSON string and is answered with one word, PASS or FAIL, from the criterion's rule searched in
the last fence (a baseline prompt's reference run comes first).
"""

from __future__ import annotations

import json
import re
from importlib import resources
from typing import Any

from testkit.scenario import JudgeRule

_FENCE = re.compile(r"<transcript-([0-9A-Za-z_-]+)>(.*?)</transcript-\1>", re.DOTALL)
_EVIDENCE_CHARS = 300


def is_grading_request(text: str) -> bool:
    """True when the text holds a transcript fence (the grader prompt's signature)."""
    return "<transcript-" in text and _FENCE.search(text) is not None


def split_grading_request(text: str) -> tuple[list[str], str]:
    """Return (assertions, transcript) of a grading request; assertions may be empty."""
    fence = _FENCE.search(text)
    if fence is None:
        return [], ""
    transcript = fence.group(2)
    outside = text[: fence.start()] + "\n" + text[fence.end() :]
    return _first_assertion_array(outside), transcript


def _first_assertion_array(text: str) -> list[str]:
    decoder = json.JSONDecoder()
    fallback: list[str] = []
    for match in re.finditer(r"\[", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            continue
        if not isinstance(value, list) or not value:
            continue
        if all(isinstance(v, str) for v in value):
            return list(value)
        if not fallback and all(isinstance(v, dict) and isinstance(v.get("text"), str) for v in value):
            fallback = [v["text"] for v in value]
    return fallback


def _line_at(text: str, pos: int) -> str:
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    line = text[start : end if end >= 0 else len(text)].strip()
    return line[:_EVIDENCE_CHARS]


def judge_assertion(assertion: str, transcript: str, rules: tuple[JudgeRule, ...]) -> dict[str, Any]:
    """One verdict object ``{"text", "passed", "evidence"}`` from the first rule that applies."""
    lowered = assertion.lower()
    rule = next((r for r in rules if r.assertion_contains.lower() in lowered), None)
    if rule is None:
        return {
            "text": assertion,
            "passed": False,
            "evidence": "absent: the scripted judge has no rule for this assertion",
        }
    found = rule.transcript_regex.search(transcript)
    # A named group "evidence" picks the quoted line when the match spans several (ordering rules).
    at = 0
    if found:
        at = found.start("evidence") if "evidence" in found.re.groupindex and found.group("evidence") else found.start()
    if rule.expect == "present":
        if found:
            return {"text": assertion, "passed": True, "evidence": _line_at(transcript, at)}
        return {
            "text": assertion,
            "passed": False,
            "evidence": f"absent: no transcript line matches /{rule.transcript_regex.pattern}/",
        }
    if found:
        return {"text": assertion, "passed": False, "evidence": _line_at(transcript, at)}
    # A pass needs a verbatim quote (the grader checks evidence against the transcript): the
    # agent's last tool call, showing where its run ended without the forbidden action.
    calls = [line for line in transcript.splitlines() if line.startswith("[tool_call]")]
    evidence = calls[-1][:_EVIDENCE_CHARS] if calls else f"no transcript line matches /{rule.transcript_regex.pattern}/"
    return {"text": assertion, "passed": True, "evidence": evidence}


def judge_request(text: str, rules: tuple[JudgeRule, ...]) -> list[dict[str, Any]]:
    """Verdicts for every assertion of a grading request, in input order."""
    assertions, transcript = split_grading_request(text)
    return [judge_assertion(a, transcript, rules) for a in assertions]


VOTE_SIGNATURE = "Respond with exactly one word: PASS"
_CRITERION_HEAD = "Criterion, as a JSON string:"


def is_vote_request(text: str) -> bool:
    """True for a focus or baseline judge's prompt (one criterion, a PASS or FAIL answer)."""
    return VOTE_SIGNATURE in text and _CRITERION_HEAD in text and is_grading_request(text)


def judge_vote(text: str, rules: tuple[JudgeRule, ...]) -> str:
    """PASS or FAIL for a vote request: the criterion's rule searched in the last fence (the
    part of the run being graded; a baseline prompt's reference comes first)."""
    at = text.find(_CRITERION_HEAD) + len(_CRITERION_HEAD)
    try:
        criterion, _ = json.JSONDecoder().raw_decode(text[at:].lstrip())
    except json.JSONDecodeError:
        return "FAIL"
    fences = list(_FENCE.finditer(text))
    graded = fences[-1].group(2) if fences else ""
    return "PASS" if judge_assertion(str(criterion), graded, rules)["passed"] else "FAIL"


def calibration_judge_rules() -> list[dict[str, Any]]:
    """Scripted-judge rules that decide the built-in calibration assertions correctly."""
    text = resources.files("testkit").joinpath("calibration", "judge-rules.json").read_text("utf-8")
    rules: list[dict[str, Any]] = json.loads(text)
    return rules
