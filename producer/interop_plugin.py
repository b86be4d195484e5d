"""Claude Code plugin eval suites, ``evals/<case>/``, read as a corpus. Pure: takes file texts.

A case is a folder with ``prompt.md`` (front matter such as ``max_turns``, ``allowed_tools``,
optionally ``skill``; the body is the prompt) and graders ``graders/*.md`` (front matter
``type: llm`` and an optional ``weight``; the body is the rubric), or a ``case.yaml`` with the
same fields (``prompt`` or ``execution.prompt``, and a ``graders`` list). Each ``llm`` grader
becomes one judged assertion; other grader kinds have no faithful translation and stop the
suite with a named error rather than being dropped. Front matter is parsed with YAML's safe
loader only.

Case ids are the case folders in sorted order, from 1. ``max_turns``, ``allowed_tools`` and
grader weights are checked but not applied: skill-eval's budgets are per run, and judged
assertions count equally (see docs/design/statistics.md, "Interop").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from producer.corpus_parse import parse_yaml
from schemas.constants import EVALS_DIR
from schemas.errors import BadCorpus

PLUGIN_MANIFESTS = (".claude-plugin/plugin.json", "plugin.json")
MAX_FILE_CHARS = 256_000
CASE_KEYS = frozenset(
    {"prompt", "execution", "max_turns", "allowed_tools", "graders", "skill", "name", "description", "tags", "timeout"}
)
PROMPT_KEYS = frozenset({"max_turns", "allowed_tools", "skill", "name", "description", "tags", "timeout"})
GRADER_KEYS = frozenset({"type", "weight", "name", "description", "rubric", "prompt", "criteria", "text"})


@dataclass(frozen=True)
class PluginCase:
    """The files of one case folder, as text."""

    name: str
    prompt_md: str | None = None
    case_yaml: str | None = None
    graders: Mapping[str, str] = field(default_factory=dict)
    """``graders/<file>.md`` name -> text."""


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
    unknown = sorted(str(k) for k in set(meta) - allowed)
    if unknown:
        raise BadCorpus(
            file, where, "unexpected key(s) " + ", ".join(unknown) + " (known: " + ", ".join(sorted(allowed)) + ")"
        )
    turns = meta.get("max_turns")
    if turns is not None and (isinstance(turns, bool) or not isinstance(turns, int) or turns < 1):
        raise BadCorpus(file, f"{where}.max_turns", f"{turns!r} is not a positive integer")
    tools = meta.get("allowed_tools")
    if tools is not None and not (
        isinstance(tools, str) or (isinstance(tools, list) and all(isinstance(t, str) for t in tools))
    ):
        raise BadCorpus(file, f"{where}.allowed_tools", "must be a string or a list of tool names")


def _grader(meta: dict[str, Any], body: str, file: str, where: str) -> str:
    _check_meta_grader(meta, file, where)
    text = body or next((meta[k] for k in ("rubric", "prompt", "criteria", "text") if isinstance(meta.get(k), str)), "")
    if not text.strip():
        raise BadCorpus(file, where, "an llm grader needs its rubric text")
    return " ".join(text.split())


def _check_meta_grader(meta: dict[str, Any], file: str, where: str) -> None:
    unknown = sorted(str(k) for k in set(meta) - GRADER_KEYS)
    if unknown:
        raise BadCorpus(file, where, "unexpected key(s) " + ", ".join(unknown))
    kind = meta.get("type")
    if kind != "llm":
        raise BadCorpus(
            file, f"{where}.type", f"{kind!r} grader: only type llm is read (its rubric becomes a judged assertion)"
        )
    weight = meta.get("weight", 1)
    if isinstance(weight, bool) or not isinstance(weight, int | float) or weight <= 0:
        raise BadCorpus(file, f"{where}.weight", f"{weight!r} is not a positive number")


def _read_case(case: PluginCase, case_id: int) -> tuple[dict[str, Any], str | None]:
    """One case -> (schema-v1 case dict, the skill its front matter names or None)."""
    folder = f"{EVALS_DIR}/{case.name}"
    meta: dict[str, Any] = {}
    prompt = ""
    assertions: list[str] = []
    if case.case_yaml is not None:
        file = f"{folder}/case.yaml"
        if len(case.case_yaml) > MAX_FILE_CHARS:
            raise BadCorpus(file, "$", f"is {len(case.case_yaml)} characters; at most {MAX_FILE_CHARS} are read")
        meta = _yaml(case.case_yaml, file, "$")
        _check_meta(meta, CASE_KEYS, file, "$")
        execution = meta.get("execution") or {}
        if not isinstance(execution, dict):
            raise BadCorpus(file, "$.execution", "must be a mapping")
        prompt = str(meta.get("prompt") or execution.get("prompt") or "")
        graders = meta.get("graders") or []
        if not isinstance(graders, list):
            raise BadCorpus(file, "$.graders", "must be a list")
        for i, g in enumerate(graders):
            if not isinstance(g, dict):
                raise BadCorpus(file, f"$.graders[{i}]", "must be a mapping")
            assertions.append(_grader(g, "", file, f"$.graders[{i}]"))
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
        assertions.append(_grader(front, body, file, "front matter"))
    if not assertions:
        raise BadCorpus(folder, "graders", "a case with no grader cannot be graded")
    skill = meta.get("skill")
    return (
        {
            "id": case_id,
            "prompt": prompt,
            "expected_output": f"(Claude Code plugin eval case {case.name})",
            "files": [],
            "assertions": assertions,
        },
        skill if isinstance(skill, str) else None,
    )


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
    return {"skill_name": skill, "evals": kept}, folders
