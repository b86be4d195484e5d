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

Case ids are the case folders in sorted order, from 1. A run's score is the weighted share of its
assertions passed; a case's score is the mean over its runs (reducer/plugin_score.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

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


def _check_meta(meta: dict[str, Any], allowed: frozenset[str], file: str, where: str) -> None:
    for key, why in UNSUPPORTED_KEYS.items():
        if key in meta:
            raise BadCorpus(file, f"{where}.{key}", why)
    context = meta.get("context")
    if context is not None:
        if not isinstance(context, dict):
            raise BadCorpus(file, f"{where}.context", "must be a mapping")
        for key, value in context.items():
            if key in ("scaffold_script", "history_file", "add_dirs"):
                continue
            why = UNSUPPORTED_KEYS.get(str(key), f"unexpected key {key!r}")
            if value not in (None, [], ""):
                raise BadCorpus(file, f"{where}.context.{key}", why)
    unknown = sorted(str(k) for k in set(meta) - allowed)
    if unknown:
        raise BadCorpus(
            file,
            where,
            f"unexpected {noun(len(unknown), 'key')} {', '.join(unknown)} (known: {', '.join(sorted(allowed))})",
        )
    turns = meta.get("max_turns")
    if turns is not None and (isinstance(turns, bool) or not isinstance(turns, int) or turns < 1):
        raise BadCorpus(file, f"{where}.max_turns", f"{turns!r} is not a positive integer")
    tools = meta.get("allowed_tools")
    if tools is not None and not (
        isinstance(tools, str) or (isinstance(tools, list) and all(isinstance(t, str) for t in tools))
    ):
        raise BadCorpus(file, f"{where}.allowed_tools", "must be a string or a list of tool names")


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


def _read_case_yaml(text: str, file: str) -> tuple[dict[str, Any], str, list[str | dict[str, Any]]]:
    """A case folder's ``case.yaml`` -> (its keys, its prompt, its graders as schema-v1 assertions)."""
    if len(text) > MAX_FILE_CHARS:
        raise BadCorpus(file, "$", f"is {len(text)} characters; at most {MAX_FILE_CHARS} are read")
    meta = _yaml(text, file, "$")
    _check_meta(meta, CASE_KEYS, file, "$")
    execution = meta.get("execution") or {}
    if not isinstance(execution, dict):
        raise BadCorpus(file, "$.execution", "must be a mapping")
    prompt = str(meta.get("prompt") or execution.get("prompt") or "")
    graders = meta.get("graders") or []
    if not isinstance(graders, list):
        raise BadCorpus(file, "$.graders", "must be a list")
    assertions: list[str | dict[str, Any]] = []
    for i, g in enumerate(graders):
        if not isinstance(g, dict):
            raise BadCorpus(file, f"$.graders[{i}]", "must be a mapping")
        assertions.append(translate_grader(g, "", file, f"$.graders[{i}]"))
    return meta, prompt, assertions


def _read_case(case: PluginCase, case_id: int) -> tuple[dict[str, Any], str | None]:
    """One case -> (schema-v1 case dict, the skill its front matter names or None)."""
    folder = f"{EVALS_DIR}/{case.name}"
    meta: dict[str, Any] = {}
    prompt = ""
    assertions: list[str | dict[str, Any]] = []
    if case.case_yaml is not None:
        meta, prompt, assertions = _read_case_yaml(case.case_yaml, f"{folder}/case.yaml")
    if case.prompt_md is not None:
        file = f"{folder}/prompt.md"
        front, body = _front_matter(case.prompt_md, file)
        _check_meta(front, PROMPT_KEYS, file, "front matter")
        meta = {**meta, **front}
        prompt = body or prompt
    if case.case_yaml is None and case.prompt_md is None:
        raise BadCorpus(folder, "$", "a case folder needs prompt.md or case.yaml")
    for name, text in sorted(case.graders.items()):
        file = f"{folder}/graders/{name}"
        front, body = _front_matter(text, file)
        assertions.append(translate_grader(front, body, file, "front matter"))
    if not assertions:
        raise BadCorpus(folder, "graders", "a case with no grader cannot be graded")
    assertions = [attach_reference(a, dict(case.sessions), folder) for a in assertions]
    skill = meta.get("skill")
    data: dict[str, Any] = {
        "id": case_id,
        "prompt": prompt,
        "expected_output": f"(Claude Code plugin eval case {case.name})",
        "files": [],
        "assertions": assertions,
    }
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
    return data, skill if isinstance(skill, str) else None


def translate_plugin_suite(
    cases: list[PluginCase], skill: str, plugin_skills: list[str]
) -> tuple[dict[str, Any], list[str]]:
    """The suite's cases for ``skill`` -> (schema-v1 corpus dict, the case folders it used).

    A case belongs to ``skill`` when its front matter names it, or names no skill and the
    plugin has this one skill only. Raises BadCorpus naming the file at fault.
    """
    kept, folders = [], []
    for case_id, case in enumerate(sorted(cases, key=lambda c: c.name), start=1):
        data, named = _read_case(case, case_id)
        if named == skill or (named is None and plugin_skills == [skill]):
            kept.append(data)
            folders.append(f"{EVALS_DIR}/{case.name}")
    return {"skill_name": skill, "extensions": [DETERMINISTIC_ASSERTIONS], "evals": kept}, folders
