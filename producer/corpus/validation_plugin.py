"""Validation of the assertion objects with ``plugin eval`` semantics and of a case's
``max_turns`` / ``allowed_tools`` (schemas/checks_plugin.py). Pure; called from producer/corpus/validation.py.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from producer.corpus.rules import (
    MAX_PATTERN_CHARS,
    MAX_WEIGHT,
    assertion_problem,
    blank,
    key_problem,
    path_problem,
)
from schemas.checks_focus import FOCUS_CHECK_KEYS, BaselineCheck, FocusedCheck, file_path, validate_focus_check
from schemas.checks_plugin import (
    FileGlobCheck,
    JudgedCheck,
    TextMatchCheck,
    ToolCountCheck,
    ToolMatcher,
    ToolOrderCheck,
)
from schemas.errors import BadCorpus
from schemas.mocks import MockServer
from schemas.words import count_bound

Fail = Callable[[str, str], BadCorpus]
TOOL_MATCHER_KEYS = (frozenset({"tool"}), frozenset({"input_match"}))
PLUGIN_CHECK_KEYS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "text_match": (
        frozenset({"kind", "pattern"}),
        frozenset({"text", "flags", "source", "path", "absent", "count", "weight"}),
    ),
    "tool_count": (frozenset({"kind", "calls"}), frozenset({"text", "min", "max", "weight"})),
    "tool_order": (frozenset({"kind", "before", "after"}), frozenset({"text", "weight"})),
    "file_glob": (frozenset({"kind", "glob"}), frozenset({"text", "exists", "weight"})),
    "judged": (frozenset({"kind", "text"}), frozenset({"weight"})),
    **FOCUS_CHECK_KEYS,
}
REGEX_FLAGS = frozenset("ims")
MAX_TOOLS = 100
MAX_CASE_TURNS = 1000

PluginObject = (
    TextMatchCheck | ToolCountCheck | ToolOrderCheck | FileGlobCheck | JudgedCheck | FocusedCheck | BaselineCheck
)


def _weight(raw: dict[str, Any], at: str, fail: Fail) -> float:
    weight = raw.get("weight", 1.0)
    if isinstance(weight, bool) or not isinstance(weight, int | float) or not math.isfinite(weight):
        raise fail(f"{at}.weight", f"{weight!r} is not a number")
    if not 0 < weight <= MAX_WEIGHT:
        raise fail(f"{at}.weight", f"{weight!r} is outside (0, {MAX_WEIGHT:g}]")
    return float(weight)


def _pattern(raw: Any, at: str, fail: Fail, flags: str = "") -> str:
    if not isinstance(raw, str) or not raw:
        raise fail(at, "must be a non-empty regular expression string")
    if len(raw) > MAX_PATTERN_CHARS:
        raise fail(at, f"is {len(raw)} characters; at most {MAX_PATTERN_CHARS} are allowed")
    try:
        re.compile(raw, re.IGNORECASE if "i" in flags else 0)
    except re.error as exc:
        raise fail(at, f"is not a valid regular expression: {exc}") from None
    return raw


def _bool(raw: dict[str, Any], key: str, default: bool, at: str, fail: Fail) -> bool:
    value = raw.get(key, default)
    if not isinstance(value, bool):
        raise fail(f"{at}.{key}", f"{value!r} is not true or false")
    return value


def _count(raw: Any, at: str, fail: Fail) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
        raise fail(at, f"{raw!r} is not a whole number >= 0")
    return raw


def tool_matcher(raw: Any, at: str, fail: Fail) -> ToolMatcher:
    """``{"tool": name, "input_match": regex}`` (``input_match`` optional)."""
    if not isinstance(raw, dict):
        raise fail(at, f"is {type(raw).__name__}; a {{tool, input_match}} object is required")
    problem = key_problem(raw, *TOOL_MATCHER_KEYS)
    if problem:
        raise fail(at, problem)
    if blank(raw["tool"]):
        raise fail(f"{at}.tool", "must be a non-blank tool name")
    match = raw.get("input_match")
    if match is not None:
        match = _pattern(match, f"{at}.input_match", fail)
    return ToolMatcher(tool=raw["tool"].strip(), input_match=match)


def _describe(m: ToolMatcher) -> str:
    return m.tool + (f" whose input matches /{m.input_match}/" if m.input_match else "")


def _text_match(raw: dict[str, Any], at: str, fail: Fail, weight: float) -> TextMatchCheck:
    flags = raw.get("flags", "")
    if not isinstance(flags, str) or set(flags) - REGEX_FLAGS:
        raise fail(f"{at}.flags", f"{flags!r}: only the flags i, m and s are known")
    pattern = _pattern(raw["pattern"], f"{at}.pattern", fail, flags)
    source = raw.get("source", "reply")
    if source not in ("reply", "transcript", "file", "files", "mock_calls"):
        raise fail(f"{at}.source", f"{source!r} is not one of: file, files, mock_calls, reply, transcript")
    path = file_path(raw, at, fail, "source", path_problem)
    absent = _bool(raw, "absent", False, at, fail)
    count = _count(raw["count"], f"{at}.count", fail) if raw.get("count") is not None else None
    if count is not None and absent:
        raise fail(f"{at}.count", "counts matches; absent is the same as count 0, give one of them")
    where = {
        "reply": "the final reply",
        "transcript": "the trace",
        "file": f"the final {path}",
        "files": "the files the run changed",
        "mock_calls": "the mocked tool calls",
    }[source]
    said = f"matches /{pattern}/ {count_bound(count, count)}" if count is not None else "matches /" + pattern + "/"
    text = raw.get("text") or f"{where.capitalize()} {'never matches /' + pattern + '/' if absent else said}"
    return TextMatchCheck(
        text=text, pattern=pattern, flags=flags, source=source, path=path, absent=absent, count=count, weight=weight
    )


def count_range(raw: dict[str, Any], at: str, fail: Fail) -> tuple[int, int | None]:
    """A check's ``min`` (default 1) and ``max`` (None: no upper bound), counts, ``max`` not below ``min``."""
    low = _count(raw.get("min", 1), f"{at}.min", fail)
    high = raw.get("max")
    if high is not None:
        high = _count(high, f"{at}.max", fail)
        if high < low:
            raise fail(f"{at}.max", f"{high} is below min {low}")
    return low, high


def _tool_count(raw: dict[str, Any], at: str, fail: Fail, weight: float) -> ToolCountCheck:
    calls = tool_matcher(raw["calls"], f"{at}.calls", fail)
    low, high = count_range(raw, at, fail)
    text = raw.get("text") or f"The agent calls {_describe(calls)} {count_bound(low, high)}"
    return ToolCountCheck(text=text, calls=calls, min=low, max=high, weight=weight)


def checked_head(raw: dict[str, Any], keys: tuple[frozenset[str], frozenset[str]], at: str, fail: Fail) -> float:
    """What every check object of these kinds is checked for first: its keys, a non-blank ``text``
    when it has one, and its ``weight`` (returned)."""
    problem = key_problem(raw, *keys)
    if problem:
        raise fail(at, problem)
    if "text" in raw and blank(raw["text"]):
        raise fail(f"{at}.text", "must be a non-blank string")
    return _weight(raw, at, fail)


def validate_plugin_check(raw: dict[str, Any], at: str, fail: Fail) -> PluginObject:
    """One object of a kind in :data:`PLUGIN_CHECK_KEYS`; its regexes must compile."""
    kind = raw["kind"]
    weight = checked_head(raw, PLUGIN_CHECK_KEYS[kind], at, fail)
    if kind in FOCUS_CHECK_KEYS:
        return validate_focus_check(raw, at, fail, weight, path_problem)
    if kind == "judged":
        issue = assertion_problem(raw["text"])
        if issue:
            raise fail(f"{at}.text", issue)
        return JudgedCheck(text=raw["text"], weight=weight)
    if kind == "text_match":
        return _text_match(raw, at, fail, weight)
    if kind == "tool_count":
        return _tool_count(raw, at, fail, weight)
    if kind == "tool_order":
        before, after = (tool_matcher(raw[k], f"{at}.{k}", fail) for k in ("before", "after"))
        text = raw.get("text") or f"The agent first calls {_describe(before)} before it first calls {_describe(after)}"
        return ToolOrderCheck(text=text, before=before, after=after, weight=weight)
    glob = raw["glob"]
    if blank(glob) or "\x00" in glob or glob.startswith("/") or ".." in glob.split("/"):
        raise fail(f"{at}.glob", f"{glob!r} is not a repo-relative glob")
    exists = _bool(raw, "exists", True, at, fail)
    text = raw.get("text") or f"A file matching {glob} {'exists' if exists else 'does not exist'} after the run"
    return FileGlobCheck(text=text, glob=glob, exists=exists, weight=weight)


def case_limits(raw: dict[str, Any], at: str, fail: Fail) -> tuple[int | None, tuple[str, ...] | None]:
    """A case's optional ``max_turns`` (1..1000) and ``allowed_tools`` (non-blank names)."""
    turns = raw.get("max_turns")
    if turns is not None and (isinstance(turns, bool) or not isinstance(turns, int) or not 0 < turns <= MAX_CASE_TURNS):
        raise fail(f"{at}.max_turns", f"{turns!r} is not a whole number in 1..{MAX_CASE_TURNS}")
    tools = raw.get("allowed_tools")
    if tools is None:
        return turns, None
    if not isinstance(tools, list) or len(tools) > MAX_TOOLS or any(blank(t) for t in tools):
        raise fail(f"{at}.allowed_tools", f"must be an array of at most {MAX_TOOLS} non-blank tool names")
    return turns, tuple(t.strip() for t in tools)


MAX_MOCK_SERVERS = 20
MOCK_NAME = re.compile(r"[A-Za-z0-9_-]{1,48}")
"""Server and tool names: they become ``mcp__<server>__<tool>`` function names, which model APIs restrict."""


def case_mocks(raw: Any, at: str, fail: Fail) -> tuple[MockServer, ...]:
    """A case's ``mocks``: servers with their tools; every ``expect`` pattern must compile."""
    if not isinstance(raw, list) or len(raw) > MAX_MOCK_SERVERS:
        raise fail(at, f"must be an array of at most {MAX_MOCK_SERVERS} mocked servers")
    servers = []
    for i, server in enumerate(raw):
        try:
            parsed = MockServer.model_validate(server)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise fail(f"{at}[{i}]" + (f".{where}" if where else ""), first["msg"]) from None
        for name in (parsed.name, *(t.name for t in parsed.tools)):
            if not MOCK_NAME.fullmatch(name):
                raise fail(f"{at}[{i}]", f"{name[:60]!r} is not a server or tool name (letters, digits, _ and -)")
        for tool in parsed.tools:
            if tool.instructions is not None and (tool.answer is not None or not tool.instructions.strip()):
                where = f"{at}[{i}].tools.{tool.name}.instructions"
                raise fail(where, "an agent mock has non-blank instructions and no fixed answer")
            for field, pattern in tool.expect.items():
                _pattern(pattern, f"{at}[{i}].tools.{tool.name}.expect.{field}", fail)
        servers.append(parsed)
    return tuple(servers)


MAX_SCAFFOLD_CHARS = 100_000


def case_scaffold(raw: dict[str, Any], at: str, fail: Fail) -> str | None:
    """A case's optional ``scaffold_script``: a non-blank script of at most 100,000 characters."""
    script = raw.get("scaffold_script")
    if script is None:
        return None
    if blank(script) or "\x00" in script or len(script) > MAX_SCAFFOLD_CHARS:
        raise fail(f"{at}.scaffold_script", f"must be a non-blank script of at most {MAX_SCAFFOLD_CHARS} characters")
    return str(script)


def case_timeout(raw: dict[str, Any], at: str, fail: Fail) -> float | None:
    """A case's optional ``timeout_s``: a positive number of seconds."""
    value = raw.get("timeout_s")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
        raise fail(f"{at}.timeout_s", f"{value!r} is not a positive number of seconds")
    return float(value)
