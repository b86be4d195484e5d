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
from typing import Any

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


def _regex(meta: dict[str, Any], body: str, file: str, where: str) -> dict[str, Any]:
    pattern = meta.get("pattern") if isinstance(meta.get("pattern"), str) else body.strip()
    if not pattern:
        raise BadCorpus(file, where, "a regex grader needs its pattern (the body or pattern:)")
    out: dict[str, Any] = {"kind": "text_match", "pattern": js_pattern(pattern)}
    flags = meta.get("flags") or ""
    if not isinstance(flags, str) or set(flags) - set("imsgu"):
        raise BadCorpus(file, f"{where}.flags", f"{flags!r}: only the flags i, m, s, g and u are read")
    if set(flags) & set("ims"):
        out["flags"] = "".join(sorted(set(flags) & set("ims")))
    match = str(meta.get("match", "contains"))
    if match == "not_contains":
        out["absent"] = True
    elif re.fullmatch(r"count:\d{1,6}", match):
        out["count"] = int(match[6:])
    elif match != "contains":
        raise BadCorpus(file, f"{where}.match", f"{match!r} is not contains, not_contains or count:N")
    target = meta.get("target", "last_message")
    if isinstance(target, dict) and target.get("source") == "file" and set(target) == {"source", "path"}:
        out.update(source="file", path=target["path"])
    elif target in ("last_message", {"source": "last_message"}):
        out["source"] = "reply"
    elif target in ("trace", "transcript", {"source": "transcript"}):
        out["source"] = "transcript"
    elif target == "mock_calls":
        out["source"] = "mock_calls"
    elif target in ("files", {"source": "files"}):
        out["source"] = "files"
    else:
        raise BadCorpus(
            file,
            f"{where}.target",
            f"{target!r} is not last_message, trace, files, mock_calls or {{source: file, path}}",
        )
    return out


def _llm(meta: dict[str, Any], body: str, file: str, where: str) -> dict[str, Any]:
    text = body or next((meta[k] for k in ("rubric", "prompt", "criteria", "text") if isinstance(meta.get(k), str)), "")
    if not text.strip():
        raise BadCorpus(file, where, "an llm grader needs its rubric text")
    return {"kind": "judged", "text": " ".join(text.split())}


def translate_grader(meta: dict[str, Any], body: str, file: str, where: str) -> str | dict[str, Any]:
    """The grader's front matter (or case.yaml entry) and body -> an assertion object."""
    kind = meta.get("type")
    if kind in REFUSED_KINDS:
        raise BadCorpus(file, f"{where}.type", f"{kind!r} grader: {REFUSED_KINDS[kind]}")
    if kind not in KIND_KEYS:
        known = ", ".join(sorted(KIND_KEYS))
        raise BadCorpus(file, f"{where}.type", f"{kind!r} is not a grader kind (known: {known})")
    unknown = sorted(str(k) for k in set(meta) - COMMON_KEYS - KIND_KEYS[kind])
    if unknown:
        raise BadCorpus(file, where, f"unexpected {noun(len(unknown), 'key')} {', '.join(unknown)} for a {kind} grader")
    weight = _weight(meta, file, where)
    if meta.get("arm", "both") != "both":
        why = "only graders of both arms are read (leaving one out of the no-plugin arm's score is not applied)"
        raise BadCorpus(file, f"{where}.arm", f"{meta['arm']!r}: {why}")
    if kind in ("llm", "baseline"):
        out = _llm(meta, body, file, where)
        if kind == "baseline" or meta.get("focus") is not None:
            out = focus_object(kind, meta, out["text"], file, where)
    elif kind == "regex":
        out = _regex(meta, body, file, where)
    elif kind == "tool_used":
        calls = _matcher({k: meta[k] for k in ("tool", "input_match") if k in meta}, file, where)
        out = {"kind": "tool_count", "calls": calls, "min": meta.get("min", 1)}
        if meta.get("max") is not None:
            out["max"] = meta["max"]
    elif kind == "tool_order":
        out = {
            "kind": "tool_order",
            "before": _matcher(meta.get("before"), file, f"{where}.before"),
            "after": _matcher(meta.get("after"), file, f"{where}.after"),
        }
    else:
        exists = meta.get("exists", True)
        out = {"kind": "file_glob", "glob": meta.get("path"), "exists": exists}
    label = body if kind not in ("llm", "regex", "baseline") else ""
    label = label.strip() or next((str(meta[k]) for k in ("description", "name") if meta.get(k)), "")
    if kind not in ("llm", "baseline") and label.strip():
        out["text"] = " ".join(label.split())
    if weight != 1.0:
        out["weight"] = weight
    elif out["kind"] == "judged":
        return str(out["text"])  # an unweighted rubric is a plain judged assertion
    return out
