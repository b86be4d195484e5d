"""Assertion objects of schema v1 (extension ``deterministic-assertions``), and the way to the
``plugin eval`` kinds (validation_plugin.py). Pure: parsed JSON in, a check model out."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from producer.corpus.rules import MAX_PATTERN_CHARS, MAX_WEIGHT, blank, key_problem, normalise_path, path_problem
from producer.corpus.validation_http import HTTP_CHECK_KEYS, validate_http_check
from producer.corpus.validation_plugin import PLUGIN_CHECK_KEYS, validate_plugin_check
from schemas.corpus import (
    AssertionObject,
    CallOrderCheck,
    FileContainsCheck,
    SkillActivatedCheck,
    ToolCallCheck,
    ToolCallMatcher,
)
from schemas.errors import BadCorpus

CHECK_KEYS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "tool_call": (frozenset({"kind", "pattern"}), frozenset({"text", "tool", "argument", "absent", "weight"})),
    "call_order": (frozenset({"kind", "first", "then"}), frozenset({"text", "weight"})),
    "file_contains": (frozenset({"kind", "path", "pattern"}), frozenset({"text", "weight"})),
    "skill_activated": (frozenset({"kind"}), frozenset({"text", "weight"})),
}
MATCHER_KEYS = (frozenset({"pattern"}), frozenset({"tool", "argument"}))


def validate_check(raw: dict[str, Any], at: str, fail: Callable[[str, str], BadCorpus]) -> AssertionObject:
    """An assertion object: ``kind`` is tool_call | call_order | file_contains | skill_activated; regexes must
    compile; ``text`` (optional) is a non-blank string; ``weight`` (optional) is in (0, 100]."""
    kind = raw.get("kind")
    if kind in PLUGIN_CHECK_KEYS:
        return validate_plugin_check(raw, at, fail)
    if kind in HTTP_CHECK_KEYS:
        return validate_http_check(raw, at, fail)
    if kind not in CHECK_KEYS:
        kinds = ", ".join(sorted({*CHECK_KEYS, *PLUGIN_CHECK_KEYS, *HTTP_CHECK_KEYS}))
        raise fail(f"{at}.kind", f"{kind!r} is not one of: {kinds}")
    problem = key_problem(raw, *CHECK_KEYS[kind])
    if problem:
        raise fail(at, problem)
    if "text" in raw and blank(raw["text"]):
        raise fail(f"{at}.text", "must be a non-blank string")
    weight = raw.get("weight", 1.0)
    if isinstance(weight, bool) or not isinstance(weight, int | float) or not math.isfinite(weight):
        raise fail(f"{at}.weight", f"{weight!r} is not a number")
    if not 0 < weight <= MAX_WEIGHT:
        raise fail(f"{at}.weight", f"{weight!r} is outside (0, {MAX_WEIGHT:g}]")
    if kind == "tool_call":
        m = _validate_matcher({k: raw[k] for k in ("pattern", "tool", "argument") if k in raw}, at, fail)
        absent = raw.get("absent", False)
        if not isinstance(absent, bool):
            raise fail(f"{at}.absent", f"{absent!r} is not true or false")
        verb = "never makes" if absent else "makes"
        text = raw.get("text") or f"The agent {verb} a tool call {_describe(m)}"
        return ToolCallCheck(
            text=text, pattern=m.pattern, tool=m.tool, argument=m.argument, absent=absent, weight=float(weight)
        )
    if kind == "call_order":
        first, then = (_validate_matcher(raw[k], f"{at}.{k}", fail) for k in ("first", "then"))
        text = raw.get("text") or f"The agent makes a tool call {_describe(first)} before one {_describe(then)}"
        return CallOrderCheck(text=text, first=first, then=then, weight=float(weight))
    if kind == "skill_activated":
        return SkillActivatedCheck(text=raw.get("text") or "The agent activates the skill", weight=float(weight))
    path = raw["path"]
    path_issue = path_problem(path) if isinstance(path, str) else f"{path!r} is not a string"
    if path_issue:
        raise fail(f"{at}.path", path_issue)
    pattern = _validate_pattern(raw["pattern"], f"{at}.pattern", fail)
    text = raw.get("text") or f"The final {normalise_path(path)} contains a match for /{pattern}/"
    return FileContainsCheck(text=text, path=normalise_path(path), pattern=pattern, weight=float(weight))


def _validate_matcher(raw: Any, at: str, fail: Callable[[str, str], BadCorpus]) -> ToolCallMatcher:
    if not isinstance(raw, dict):
        raise fail(at, f"is {type(raw).__name__}; a tool-call matcher object is required")
    problem = key_problem(raw, *MATCHER_KEYS)
    if problem:
        raise fail(at, problem)
    for key in ("tool", "argument"):
        if key in raw and blank(raw[key]):
            raise fail(f"{at}.{key}", "must be a non-blank string")
    pattern = _validate_pattern(raw["pattern"], f"{at}.pattern", fail)
    return ToolCallMatcher(pattern=pattern, tool=raw.get("tool"), argument=raw.get("argument"))


def _validate_pattern(raw: Any, at: str, fail: Callable[[str, str], BadCorpus]) -> str:
    if not isinstance(raw, str) or not raw:
        raise fail(at, "must be a non-empty regular expression string")
    if len(raw) > MAX_PATTERN_CHARS:
        raise fail(at, f"is {len(raw)} characters; at most {MAX_PATTERN_CHARS} are allowed")
    try:
        re.compile(raw)
    except re.error as exc:
        raise fail(at, f"is not a valid regular expression: {exc}") from None
    return raw


def _describe(m: ToolCallMatcher) -> str:
    tool = f"to {m.tool} " if m.tool else ""
    where = f"argument {m.argument}" if m.argument else "arguments"
    return f"{tool}whose {where} match /{m.pattern}/"
