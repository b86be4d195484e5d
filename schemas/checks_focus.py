"""Judged assertions with Claude Code ``plugin eval``'s own judge semantics (extension
``deterministic-assertions``): one criterion, one chosen part of the run, PASS or FAIL by a
majority of three votes. The judging lives in worker/grading/focus.py.

* ``focused``: plugin eval's ``llm`` grader with a ``focus``: the judge reads only the final
  message (``last_message``), the rendered trace (``trace``), the files the run created or
  changed (``files``), the mocked MCP calls (``mock_calls``) or one final file (``file`` with
  ``path``);
* ``baseline``: plugin eval's ``baseline`` grader: the judge reads a reference run (carried
  here as text, read from the repo when the corpus was loaded, so a worker never reads a repo
  file by path) and the new run's trace, and says whether the new one satisfies the criterion
  at least as well.

These are never shown to the main judge (which grades the strings and ``judged`` objects in
one batch), and their judges never see any other assertion.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Callable
from typing import Any, Literal

from schemas.checks_base import Check

Focus = Literal["last_message", "trace", "files", "mock_calls", "file"]
FOCUSES: tuple[str, ...] = ("last_message", "trace", "files", "mock_calls", "file")
MAX_CRITERION_CHARS = 4_000
MAX_REFERENCE_CHARS = 256_000
"""A reference run longer than this is refused when the corpus is loaded (the judge sees it capped further)."""


class FocusedCheck(Check):
    """A criterion judged PASS/FAIL, by three votes, against one part of the run."""

    kind: Literal["focused"] = "focused"
    text: str
    """The criterion."""
    focus: Focus = "last_message"
    """What the judge reads (see the module docstring)."""
    path: str | None = None
    """Repo-relative file for ``focus: file``."""


class BaselineCheck(Check):
    """A criterion judged PASS/FAIL, by three votes, comparing the run with a reference run."""

    kind: Literal["baseline"] = "baseline"
    text: str
    """The criterion the new run must satisfy at least as well as the reference."""
    reference: str
    """The reference run: one JSON message per line (a Claude Code session or ``{role, content}``)."""
    reference_file: str
    """Where the reference came from, as reports name it."""


FOCUS_CHECK_KEYS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "focused": (frozenset({"kind", "text"}), frozenset({"focus", "path", "weight"})),
    "baseline": (frozenset({"kind", "text", "reference", "reference_file"}), frozenset({"weight"})),
}

Fail = Callable[[str, str], Exception]


def reference_problem(text: str) -> str | None:
    """Why ``text`` is not a reference run (a JSON object per non-blank line), or None."""
    if len(text) > MAX_REFERENCE_CHARS:
        return f"is {len(text)} characters; at most {MAX_REFERENCE_CHARS} are read"
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return "holds no message (a JSON object per line is expected)"
    for number, line in enumerate(lines, start=1):
        try:
            value = json.loads(line)
        except ValueError:
            return f"line {number} is not JSON (a JSON object per line is expected)"
        if not isinstance(value, dict):
            return f"line {number} is {type(value).__name__}; a JSON object is expected"
    return None


def file_path(
    raw: dict[str, Any], at: str, fail: Fail, option: str, path_ok: Callable[[str], str | None]
) -> str | None:
    """The ``path`` of a check whose ``option`` (``source``, ``focus``) says which text it reads:
    required when that is ``file`` and only then, a repo-relative path ``path_ok`` accepts (it
    says why one is bad, or None), normalised."""
    path = raw.get("path")
    if (raw.get(option) == "file") != (path is not None):
        raise fail(f"{at}.path", f"is required with {option} file, and only there")
    if path is None:
        return None
    issue = path_ok(path) if isinstance(path, str) else f"{path!r} is not a string"
    if issue:
        raise fail(f"{at}.path", issue)
    return posixpath.normpath(str(path).replace("\\", "/"))


def _criterion(raw: dict[str, Any], at: str, fail: Fail) -> str:
    text = raw["text"]
    if not isinstance(text, str) or not text.strip() or len(text) > MAX_CRITERION_CHARS:
        raise fail(f"{at}.text", f"must be a non-blank criterion of at most {MAX_CRITERION_CHARS} characters")
    return text


def validate_focus_check(
    raw: dict[str, Any], at: str, fail: Fail, weight: float, path_ok: Callable[[str], str | None]
) -> FocusedCheck | BaselineCheck:
    """A ``focused`` or ``baseline`` object (keys already checked); ``path_ok`` says why a
    repo-relative path is bad, or None."""
    text = _criterion(raw, at, fail)
    if raw["kind"] == "baseline":
        reference, origin = raw["reference"], raw["reference_file"]
        if not isinstance(origin, str) or not origin.strip():
            raise fail(f"{at}.reference_file", "must name the reference run's file")
        problem = reference_problem(reference) if isinstance(reference, str) else "is not a string"
        if problem:
            raise fail(f"{at}.reference", f"({origin}) {problem}")
        return BaselineCheck(text=text, reference=reference, reference_file=origin, weight=weight)
    focus = raw.get("focus", "last_message")
    if focus not in FOCUSES:
        raise fail(f"{at}.focus", f"{focus!r} is not one of: {', '.join(FOCUSES)}")
    path = file_path(raw, at, fail, "focus", path_ok)
    return FocusedCheck(text=text, focus=focus, path=path, weight=weight)


_FOCUS_NAMES = {
    "last_message": "last_message",
    "trace": "trace",
    "transcript": "trace",
    "files": "files",
    "mock_calls": "mock_calls",
}


def _focus(raw: Any) -> dict[str, Any] | None:
    if isinstance(raw, dict) and raw.get("source") == "file" and set(raw) == {"source", "path"}:
        return {"focus": "file", "path": raw["path"]}
    if isinstance(raw, dict) and set(raw) == {"source"}:
        raw = raw["source"]
    if isinstance(raw, str) and raw in _FOCUS_NAMES:
        return {"focus": _FOCUS_NAMES[raw]}
    return None


def plugin_focus_object(kind: str, meta: dict[str, Any], text: str, file: str, where: str) -> dict[str, Any]:
    """A plugin eval ``llm`` grader with a ``focus``, or a ``baseline`` grader -> its assertion
    object; a ``baseline`` keeps ``baseline_file`` until :func:`attach_reference` reads it."""
    from schemas.errors import BadCorpus

    if kind == "baseline":
        name = meta.get("baseline_file")
        if not isinstance(name, str) or not name.strip():
            raise BadCorpus(file, f"{where}.baseline_file", "a baseline grader names its reference run's .jsonl file")
        return {"kind": "baseline", "text": text, "baseline_file": name.strip()}
    focus = _focus(meta.get("focus"))
    if focus is None:
        expected = "last_message, trace, files, mock_calls or {source: file, path}"
        raise BadCorpus(file, f"{where}.focus", f"{meta.get('focus')!r} is not {expected}")
    return {"kind": "focused", "text": text, **focus}


def attach_reference(assertion: Any, sessions: dict[str, str], folder: str) -> Any:
    """A translated ``baseline`` object with its ``baseline_file`` (a ``.jsonl`` file of the case
    folder, already read by the suite's safe reader) replaced by the file's text; anything else as is."""
    from schemas.errors import BadCorpus

    if not isinstance(assertion, dict) or assertion.get("kind") != "baseline" or "baseline_file" not in assertion:
        return assertion
    out = dict(assertion)
    name = out.pop("baseline_file")
    bare = name[2:] if name.startswith("./") else name
    if bare not in sessions:
        raise BadCorpus(f"{folder}/graders", "baseline_file", f"{name!r} is not a .jsonl file in the case folder")
    out.update(reference=sessions[bare], reference_file=f"{folder}/{bare}")
    return out
