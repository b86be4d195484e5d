"""One Claude Code ``plugin eval`` grader -> one skill-eval assertion. Pure.

The kinds and their fields, as plugin eval reads them:

* ``llm``: the body (or ``rubric``/``prompt``/``criteria``/``text``) is judged -> a ``judged`` object
  carrying the grader's weight;
* ``regex``: the pattern is the body or ``pattern``; ``target`` is ``last_message`` (the default),
  ``transcript``, ``files`` (the files the run changed, as plugin eval reads the working tree's
  changes), ``mock_calls`` or ``{source: file, path}``; ``match: not_contains`` inverts it; ``flags`` are
  JavaScript's (``i``, ``m``, ``s``; ``g`` and ``u`` change nothing for a search) -> ``text_match``;
* ``tool_used``: ``tool``, ``input_match`` (a regex on the call's JSON input), ``min`` (default 1),
  ``max`` (default none) -> ``tool_count``;
* ``tool_order``: ``before`` and ``after``, each a tool name or ``{tool, input_match}``: the first
  call of one comes before the first call of the other -> ``tool_order``;
* ``file_exists``: ``path`` is a glob over the files the run created; ``exists: false`` inverts it
  -> ``file_glob``.

An ``llm`` grader with a ``focus`` becomes a ``focused`` object and a ``baseline`` grader a
``baseline`` object (schemas/checks_focus.py: plugin eval's own PASS/FAIL judge, three votes);
an ``arm`` other than ``both`` is refused by name. Patterns are
JavaScript regexes; the few syntaxes Python spells differently are rewritten, and one that still
does not compile stops the suite with the grader's file named.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

from producer.corpus.validation_plugin import _pattern
from schemas.checks_focus import plugin_focus_object as focus_object
from schemas.errors import BadCorpus
from schemas.words import noun

COMMON_KEYS = frozenset({"type", "weight", "name", "description", "arm", "focus"})
KIND_KEYS: dict[str, frozenset[str]] = {
    "llm": frozenset({"rubric", "prompt", "criteria", "text"}),
    "regex": frozenset({"pattern", "target", "match", "flags"}),
    "tool_used": frozenset({"tool", "input_match", "min", "max"}),
    "tool_order": frozenset({"before", "after"}),
    "file_exists": frozenset({"path", "exists"}),
    "baseline": frozenset({"baseline_file", "rubric", "prompt", "criteria", "text"}),
}
REFUSED_KINDS: dict[str, str] = {}
_JS_NAMED_GROUP = re.compile(r"\(\?<(?![=!])([A-Za-z_][A-Za-z0-9_]*)>")
_JS_BACKREF = re.compile(r"\\k<([A-Za-z_][A-Za-z0-9_]*)>")
T = TypeVar("T")


def js_pattern(pattern: str) -> str:
    """A JavaScript regex in Python's spelling: named groups, named back-references, ``[^]``."""
    pattern = _JS_NAMED_GROUP.sub(r"(?P<\1>", pattern)
    pattern = _JS_BACKREF.sub(r"(?P=\1)", pattern)
    return pattern.replace("[^]", r"[\s\S]")


def _weight(meta: dict[str, Any], file: str, where: str) -> float:
    weight = meta.get("weight", 1)
    if isinstance(weight, bool) or not isinstance(weight, int | float) or weight <= 0:
        raise BadCorpus(file, f"{where}.weight", f"{weight!r} is not a positive number")
    return float(weight)


def _matcher(raw: Any, file: str, where: str) -> dict[str, Any]:
    if isinstance(raw, str) and raw.strip():
        return {"tool": raw.strip()}
    if isinstance(raw, dict) and isinstance(raw.get("tool"), str) and set(raw) <= {"tool", "input_match"}:
        out: dict[str, Any] = {"tool": raw["tool"]}
        if raw.get("input_match") is not None:
            out["input_match"] = js_pattern(str(raw["input_match"]))
        return out
    raise BadCorpus(file, where, "must be a tool name or {tool, input_match}")


REGEX_TARGETS: dict[str, str] = {
    "last_message": "reply",
    "trace": "transcript",
    "transcript": "transcript",
    "files": "files",
    "mock_calls": "mock_calls",
}
"""A ``regex`` grader's ``target`` names -> the assertion's ``source``."""
_SOURCE_FORMS = frozenset({"last_message", "transcript", "files"})
"""The names also read as ``{source: <name>}``."""


def _target(target: Any, file: str, where: str) -> dict[str, Any]:
    if isinstance(target, dict) and target.get("source") == "file" and set(target) == {"source", "path"}:
        return {"source": "file", "path": target["path"]}
    if isinstance(target, dict) and set(target) == {"source"} and target["source"] in _SOURCE_FORMS:
        target = target["source"]
    if isinstance(target, str) and target in REGEX_TARGETS:
        return {"source": REGEX_TARGETS[target]}
    names = ", ".join(REGEX_TARGETS)
    raise BadCorpus(file, f"{where}.target", f"{target!r} is not {names} or {{source: file, path}}")


def _regex(meta: dict[str, Any], body: str, file: str, where: str, found: list[BadCorpus]) -> dict[str, Any]:
    """The ``text_match`` object; every problem of the grader is added to ``found``, not only the first."""
    in_meta = isinstance(meta.get("pattern"), str)
    pattern = meta["pattern"] if in_meta else body.strip()
    at = f"{where}.pattern" if in_meta else "body"
    out: dict[str, Any] = {"kind": "text_match", "pattern": js_pattern(pattern)}
    flags = meta.get("flags") or ""
    if not isinstance(flags, str) or set(flags) - set("imsgu"):
        found.append(BadCorpus(file, f"{where}.flags", f"{flags!r}: only the flags i, m, s, g and u are read"))
        flags = ""
    if set(flags) & set("ims"):
        out["flags"] = "".join(sorted(set(flags) & set("ims")))
    if not pattern:
        found.append(BadCorpus(file, where, "a regex grader needs its pattern (the body or pattern:)"))
    else:
        try:
            _pattern(out["pattern"], at, lambda path, problem: BadCorpus(file, path, problem), flags)
        except BadCorpus as exc:
            found.append(exc)
    match = str(meta.get("match", "contains"))
    if match == "not_contains":
        out["absent"] = True
    elif re.fullmatch(r"count:\d{1,6}", match):
        out["count"] = int(match[6:])
    elif match != "contains":
        found.append(BadCorpus(file, f"{where}.match", f"{match!r} is not contains, not_contains or count:N"))
    try:
        out.update(_target(meta.get("target", "last_message"), file, where))
    except BadCorpus as exc:
        found.append(exc)
    return out


def _llm(meta: dict[str, Any], body: str, file: str, where: str) -> dict[str, Any]:
    text = body or next((meta[k] for k in ("rubric", "prompt", "criteria", "text") if isinstance(meta.get(k), str)), "")
    if not text.strip():
        raise BadCorpus(file, where, "an llm grader needs its rubric text")
    return {"kind": "judged", "text": " ".join(text.split())}


def translate_grader(meta: dict[str, Any], body: str, file: str, where: str) -> str | dict[str, Any]:
    """The grader's front matter (or case.yaml entry) and body -> an assertion object.

    Raises :class:`BadCorpus` naming every problem of the grader (the rest in ``also``), so one
    pass shows them all.
    """
    kind = meta.get("type")
    if kind in REFUSED_KINDS:
        raise BadCorpus(file, f"{where}.type", f"{kind!r} grader: {REFUSED_KINDS[kind]}")
    if kind not in KIND_KEYS:
        known = ", ".join(sorted(KIND_KEYS))
        raise BadCorpus(file, f"{where}.type", f"{kind!r} is not a grader kind (known: {known})")
    found: list[BadCorpus] = []
    unknown = sorted(str(k) for k in set(meta) - COMMON_KEYS - KIND_KEYS[kind])
    if unknown:
        found.append(
            BadCorpus(file, where, f"unexpected {noun(len(unknown), 'key')} {', '.join(unknown)} for a {kind} grader")
        )
    weight = _collect(found, lambda: _weight(meta, file, where), 1.0)
    if meta.get("arm", "both") != "both":
        why = "only graders of both arms are read (leaving one out of the no-plugin arm's score is not applied)"
        found.append(BadCorpus(file, f"{where}.arm", f"{meta['arm']!r}: {why}"))
    if kind == "regex":
        out = _regex(meta, body, file, where, found)
    else:
        out = _collect(found, lambda: _translate_kind(kind, meta, body, file, where), {})
    if found:
        raise BadCorpus(found[0].file, found[0].path, found[0].problem, also=tuple(found[1:]))
    label = body if kind not in ("llm", "regex", "baseline") else ""
    label = label.strip() or next((str(meta[k]) for k in ("description", "name") if meta.get(k)), "")
    if kind not in ("llm", "baseline") and label.strip():
        out["text"] = " ".join(label.split())
    if weight != 1.0:
        out["weight"] = weight
    elif out["kind"] == "judged":
        return str(out["text"])  # an unweighted rubric is a plain judged assertion
    return out


def _collect(found: list[BadCorpus], make: Callable[[], T], instead: T) -> T:
    """``make()``, or ``instead`` with its violation added to ``found``."""
    try:
        return make()
    except BadCorpus as exc:
        found += [exc, *exc.also]
        return instead


def _translate_kind(kind: str, meta: dict[str, Any], body: str, file: str, where: str) -> dict[str, Any]:
    """The assertion object of a grader of any kind but ``regex``."""
    if kind in ("llm", "baseline"):
        out = _llm(meta, body, file, where)
        if kind == "baseline" or meta.get("focus") is not None:
            out = focus_object(kind, meta, out["text"], file, where)
        return out
    if kind == "tool_used":
        calls = _matcher({k: meta[k] for k in ("tool", "input_match") if k in meta}, file, where)
        out = {"kind": "tool_count", "calls": calls, "min": meta.get("min", 1)}
        if meta.get("max") is not None:
            out["max"] = meta["max"]
        return out
    if kind == "tool_order":
        return {
            "kind": "tool_order",
            "before": _matcher(meta.get("before"), file, f"{where}.before"),
            "after": _matcher(meta.get("after"), file, f"{where}.after"),
        }
    return {"kind": "file_glob", "glob": meta.get("path"), "exists": meta.get("exists", True)}
