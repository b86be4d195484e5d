"""Claude Code plugin eval suites, ``evals/<case>/``, read as a corpus. Pure: takes file texts.

A case is a folder with ``prompt.md`` (front matter such as ``max_turns``, ``allowed_tools``,
optionally ``skill``; the body is the prompt) and graders ``graders/*.md`` (front matter with the
grader's ``type`` and fields, an optional ``weight``; the body is the rubric or the pattern), or
a ``case.yaml`` with the same fields (``prompt`` or ``execution.prompt``, and a ``graders`` list).
Every grader becomes one assertion with plugin eval's semantics and weight
(:mod:`producer.corpus.interop_plugin_graders`); ``max_turns`` and ``allowed_tools`` become the case's
own limits, applied by the executor; ``context.scaffold_script`` (a ``*.sh`` file of the case
folder) runs inside the sandbox before the agent; ``context.history_file`` (a ``*.jsonl`` Claude
Code session of the case folder) becomes the case's ``history`` (:mod:`producer.corpus.interop_history`);
``context.add_dirs`` (folders of the case folder) become files of the case's workspace
(:mod:`producer.corpus.interop_add_dirs`).
A ``baseline`` grader's ``baseline_file`` (a ``*.jsonl`` file of the case folder, read with the
suite's other files) travels in the case as text (schemas/checks_focus.py). What cannot be run
faithfully (``append_system_prompt``) stops the suite with a named error
rather than being dropped. Front matter and ``case.yaml`` are parsed under the corpus limits
(:func:`producer.corpus.parse.parse_yaml`: safe loader, no aliases).

Violations are collected, not raised: every case and every file of a case is read past a bad one
(a file that cannot be parsed stops only itself, a bad value is left out of the case), and the
suite's reader adds the validator's own to them, so one pass names them all (:class:`SuiteReading`).

Case ids are the case folders in sorted order, from 1. A run's score is the weighted share of its
assertions passed; a case's score is the mean over its runs (reducer/plugin_score.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from producer.corpus.interop_plugin_graders import translate_grader
from producer.corpus.parse import parse_yaml
from schemas.checks_focus import attach_reference
from schemas.constants import EVALS_DIR
from schemas.corpus import DETERMINISTIC_ASSERTIONS
from schemas.errors import BadCorpus
from schemas.words import noun

PLUGIN_MANIFESTS = (".claude-plugin/plugin.json", "plugin.json")
MAX_FILE_CHARS = 256_000
_COMMON_KEYS = {
    "max_turns",
    "allowed_tools",
    "skill",
    "name",
    "description",
    "tags",
    "timeout",
    "timeout_seconds",
    "runs",
}
CASE_KEYS = frozenset({*_COMMON_KEYS, "prompt", "execution", "graders", "schema_version", "context"})
PROMPT_KEYS = frozenset(_COMMON_KEYS)
UNSUPPORTED_KEYS = {
    "append_system_prompt": "an appended system prompt is not supported (the executor's prompt is fixed)",
    "scaffold_script": "is read under context: only (context.scaffold_script)",
    "history_file": "is read under context: only (context.history_file)",
    "add_dirs": "is read under context: only (context.add_dirs)",
}
ADD_DIRS = "add_dirs"
"""The key under which a translated case carries its ``context.add_dirs`` until the suite's
reader turns them into files (:mod:`producer.corpus.interop_add_dirs`)."""
MAX_ADD_DIRS = 16
T = TypeVar("T")


@dataclass(frozen=True)
class PluginCase:
    """The files of one case folder, as text."""

    name: str
    prompt_md: str | None = None
    case_yaml: str | None = None
    graders: Mapping[str, str] = field(default_factory=dict)
    """``graders/<file>.md`` name -> text."""
    scripts: Mapping[str, str] = field(default_factory=dict)
    """The case folder's ``*.sh`` files, name -> text (a ``context.scaffold_script`` names one)."""
    sessions: Mapping[str, str] = field(default_factory=dict)
    """The case folder's ``*.jsonl`` files, name -> text (a ``context.history_file`` names one)."""


def _front_matter(text: str, file: str) -> tuple[dict[str, Any], str]:
    if len(text) > MAX_FILE_CHARS:
        raise BadCorpus(file, "$", f"is {len(text)} characters; at most {MAX_FILE_CHARS} are read")
    if not text.startswith("---"):
        return {}, text.strip()
    end = text.find("\n---", 3)
    if end < 0:
        raise BadCorpus(file, "front matter", "opens with --- but never closes")
    meta = _yaml(text[3:end], file, "front matter")
    return meta, text[end + 4 :].strip()


def _yaml(text: str, file: str, where: str) -> dict[str, Any]:
    meta = parse_yaml(text, file, where) or {}
    if not isinstance(meta, dict):
        raise BadCorpus(file, where, f"is {type(meta).__name__}; a mapping is required")
    return meta


def _check_meta(meta: dict[str, Any], allowed: frozenset[str], file: str, where: str, found: list[BadCorpus]) -> None:
    """Every violation of ``meta`` added to ``found``; a value found bad is dropped from ``meta``, so
    the rest of the case is still read (and checked) as its author meant it."""
    for key, why in UNSUPPORTED_KEYS.items():
        if key in meta:
            found.append(BadCorpus(file, f"{where}.{key}", why))
    context = meta.get("context")
    if context is not None and not isinstance(context, dict):
        found.append(BadCorpus(file, f"{where}.context", "must be a mapping"))
        meta.pop("context")
    for key, value in (meta.get("context") or {}).items():
        if key in ("scaffold_script", "history_file", "add_dirs"):
            continue
        why = UNSUPPORTED_KEYS.get(str(key), f"unexpected key {key!r}")
        if value not in (None, [], ""):
            found.append(BadCorpus(file, f"{where}.context.{key}", why))
    unknown = sorted(str(k) for k in set(meta) - allowed - set(UNSUPPORTED_KEYS))
    if unknown:
        known = ", ".join(sorted(allowed))
        found.append(
            BadCorpus(file, where, f"unexpected {noun(len(unknown), 'key')} {', '.join(unknown)} (known: {known})")
        )
    turns = meta.get("max_turns")
    if turns is not None and (isinstance(turns, bool) or not isinstance(turns, int) or turns < 1):
        found.append(BadCorpus(file, f"{where}.max_turns", f"{turns!r} is not a positive integer"))
        meta.pop("max_turns")
    tools = meta.get("allowed_tools")
    if tools is not None and not (
        isinstance(tools, str) or (isinstance(tools, list) and all(isinstance(t, str) for t in tools))
    ):
        found.append(BadCorpus(file, f"{where}.allowed_tools", "must be a string or a list of tool names"))
        meta.pop("allowed_tools")


def _scaffold(case: PluginCase, meta: dict[str, Any]) -> str | None:
    """The text of the script ``context.scaffold_script`` names, from the case folder."""
    context = meta.get("context") or {}
    name = context.get("scaffold_script")
    if name is None:
        return None
    if not isinstance(name, str) or name not in case.scripts:
        file = f"{EVALS_DIR}/{case.name}/case.yaml"
        raise BadCorpus(file, "$.context.scaffold_script", f"{name!r} is not a .sh file in the case folder")
    return case.scripts[name]


def _add_dirs(meta: dict[str, Any], file: str) -> list[str]:
    """``context.add_dirs``: folders of the case folder, named relative to it (plugin eval's meaning:
    the agent may read them). A name that is absolute, climbs out with ``..``, names the case folder
    itself (its graders would be shown to the agent) or version-control metadata is refused here;
    where a name leads through links is checked when its files are read."""
    raw = (meta.get("context") or {}).get("add_dirs")
    if raw in (None, []):
        return []
    where = "$.context.add_dirs"
    if not isinstance(raw, list) or len(raw) > MAX_ADD_DIRS:
        raise BadCorpus(file, where, f"must be a list of at most {MAX_ADD_DIRS} folder names")
    dirs: list[str] = []
    for i, name in enumerate(raw):
        if not isinstance(name, str) or not name.strip():
            raise BadCorpus(file, f"{where}[{i}]", f"{name!r} is not a folder name")
        parts = [p for p in name.replace("\\", "/").split("/") if p not in ("", ".")]
        if name.startswith(("/", "~")) or re.match(r"^[A-Za-z]:", name) or ".." in parts:
            raise BadCorpus(file, f"{where}[{i}]", f"{name!r} escapes the case folder (`..` or an absolute path)")
        if not parts:
            raise BadCorpus(file, f"{where}[{i}]", f"{name!r} is the case folder itself (its graders)")
        if any(p in (".git", ".hg", ".svn") for p in parts) or parts[0] == "graders":
            raise BadCorpus(file, f"{where}[{i}]", f"{name!r} points into version-control data or the graders")
        dirs.append("/".join(parts))
    return dirs


def _history(case: PluginCase, meta: dict[str, Any]) -> list[dict[str, str]] | None:
    """The turns of the session ``context.history_file`` names, from the case folder."""
    from producer.corpus.interop_history import read_history

    name = (meta.get("context") or {}).get("history_file")
    if name is None:
        return None
    if not isinstance(name, str) or name not in case.sessions:
        file = f"{EVALS_DIR}/{case.name}/case.yaml"
        raise BadCorpus(file, "$.context.history_file", f"{name!r} is not a .jsonl file in the case folder")
    return read_history(case.sessions[name], f"{EVALS_DIR}/{case.name}/{name}")


Origin = tuple[str, str]
"""The file and field an assertion was read from, for the validator's messages."""


@dataclass
class SuiteReading:
    """What reading a suite's cases for one skill found: violations are collected, not raised, so
    one pass names every one of them (the validator's own are added to them)."""

    kept: list[dict[str, Any]] = field(default_factory=list)
    folders: list[str] = field(default_factory=list)
    origins: list[list[Origin]] = field(default_factory=list)
    """Per kept case, the file and field of each of its assertions."""
    found: list[BadCorpus] = field(default_factory=list)
    unreadable: set[str] = field(default_factory=set)
    """Files that could not be parsed at all: what the validator says of their (empty) case is not news."""


def _parse(reading: SuiteReading, file: str, parse: Callable[[], T], empty: T) -> T:
    """``parse()``, or ``empty`` with its violation recorded and ``file`` marked unreadable."""
    try:
        return parse()
    except BadCorpus as exc:
        reading.found.append(exc)
        reading.unreadable.add(file)
        return empty


def _read_case_yaml(
    text: str, file: str, reading: SuiteReading
) -> tuple[dict[str, Any], str, list[tuple[str | dict[str, Any], Origin]]]:
    """A case folder's ``case.yaml`` -> (its keys, its prompt, its graders as schema-v1 assertions)."""

    def load() -> dict[str, Any]:
        if len(text) > MAX_FILE_CHARS:
            raise BadCorpus(file, "$", f"is {len(text)} characters; at most {MAX_FILE_CHARS} are read")
        return _yaml(text, file, "$")

    nothing: dict[str, Any] = {}
    meta = _parse(reading, file, load, nothing)
    _check_meta(meta, CASE_KEYS, file, "$", reading.found)
    execution = meta.get("execution") or {}
    if not isinstance(execution, dict):
        reading.found.append(BadCorpus(file, "$.execution", "must be a mapping"))
        execution = {}
    prompt = str(meta.get("prompt") or execution.get("prompt") or "")
    graders = meta.get("graders") or []
    if not isinstance(graders, list):
        reading.found.append(BadCorpus(file, "$.graders", "must be a list"))
        graders = []
    assertions: list[tuple[str | dict[str, Any], Origin]] = []
    for i, g in enumerate(graders):
        try:
            if not isinstance(g, dict):
                raise BadCorpus(file, f"$.graders[{i}]", "must be a mapping")
            assertions.append((translate_grader(g, "", file, f"$.graders[{i}]"), (file, f"$.graders[{i}]")))
        except BadCorpus as exc:
            reading.found += [exc, *exc.also]
    return meta, prompt, assertions


def _read_case(
    case: PluginCase, case_id: int, reading: SuiteReading
) -> tuple[dict[str, Any], str | None, list[Origin]]:
    """One case -> (schema-v1 case dict, the skill its front matter names or None, each assertion's
    origin); every violation is added to ``reading``."""
    folder = f"{EVALS_DIR}/{case.name}"
    meta: dict[str, Any] = {}
    prompt = ""
    assertions: list[tuple[str | dict[str, Any], Origin]] = []
    if case.case_yaml is not None:
        meta, prompt, assertions = _read_case_yaml(case.case_yaml, f"{folder}/case.yaml", reading)
    if case.prompt_md is not None:
        file = f"{folder}/prompt.md"
        nothing: tuple[dict[str, Any], str] = ({}, "")
        front, body = _parse(reading, file, lambda: _front_matter(case.prompt_md or "", file), nothing)
        _check_meta(front, PROMPT_KEYS, file, "front matter", reading.found)
        meta = {**meta, **front}
        prompt = body or prompt
    if case.case_yaml is None and case.prompt_md is None:
        reading.found.append(BadCorpus(folder, "$", "a case folder needs prompt.md or case.yaml"))
    for name, text in sorted(case.graders.items()):
        file = f"{folder}/graders/{name}"
        try:
            front, body = _front_matter(text, file)
            assertions.append((translate_grader(front, body, file, "front matter"), (file, "front matter")))
        except BadCorpus as exc:
            reading.found += [exc, *exc.also]
    if not assertions and not case.graders and not (meta.get("graders") or []):
        reading.found.append(BadCorpus(folder, "graders", "a case with no grader cannot be graded"))
    data: dict[str, Any] = {
        "id": case_id,
        "prompt": prompt,
        "expected_output": f"(Claude Code plugin eval case {case.name})",
        "files": [],
        "assertions": [],
    }
    for a, _ in assertions:
        try:
            data["assertions"].append(attach_reference(a, dict(case.sessions), folder))
        except BadCorpus as exc:
            reading.found.append(exc)
            data["assertions"].append(a)
    try:
        _case_terms(case, meta, data, folder)
    except BadCorpus as exc:
        reading.found.append(exc)
    skill = meta.get("skill")
    return data, skill if isinstance(skill, str) else None, [o for _, o in assertions]


def _case_terms(case: PluginCase, meta: dict[str, Any], data: dict[str, Any], folder: str) -> None:
    """The case's limits, scaffold, history and extra folders, from its front matter or case.yaml."""
    if meta.get("max_turns") is not None:
        data["max_turns"] = meta["max_turns"]
    timeout = next((meta[k] for k in ("timeout_seconds", "timeout") if meta.get(k) is not None), None)
    if timeout is not None:
        data["timeout_s"] = timeout
    scaffold = _scaffold(case, meta)
    if scaffold is not None:
        data["scaffold_script"] = scaffold
    history = _history(case, meta)
    if history is not None:
        data["history"] = history
    dirs = _add_dirs(meta, f"{folder}/case.yaml" if case.case_yaml is not None else f"{folder}/prompt.md")
    if dirs:
        data[ADD_DIRS] = dirs
    tools = meta.get("allowed_tools")
    if tools is not None:
        data["allowed_tools"] = [t for t in re.split(r"[,\s]+", tools) if t] if isinstance(tools, str) else tools


def translate_plugin_suite(cases: list[PluginCase], skill: str, plugin_skills: list[str]) -> SuiteReading:
    """The suite's cases for ``skill``, as schema-v1 case dicts, with every violation of any case.

    A case belongs to ``skill`` when its front matter names it, or names no skill and the
    plugin has this one skill only; a case whose skill could not be read because of a violation
    is kept too (its violations are named whichever skill is asked for).
    """
    reading = SuiteReading()
    for case_id, case in enumerate(sorted(cases, key=lambda c: c.name), start=1):
        before = len(reading.found)
        data, named, origins = _read_case(case, case_id, reading)
        broken = len(reading.found) > before
        if named == skill or (named is None and (plugin_skills == [skill] or broken)):
            reading.kept.append(data)
            reading.folders.append(f"{EVALS_DIR}/{case.name}")
            reading.origins.append(origins)
    return reading


def suite_corpus(reading: SuiteReading, skill: str) -> dict[str, Any]:
    """The schema-v1 corpus dict of a suite's kept cases."""
    return {"skill_name": skill, "extensions": [DETERMINISTIC_ASSERTIONS], "evals": reading.kept}
