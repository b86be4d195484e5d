"""Anthropic skill-creator's eval file, ``skills/<skill>/evals/evals.json``, read as a corpus. Pure.

The format: ``{"skill_name", "evals": [{"id", "prompt", "expected_output", "files",
"expectations" | "assertions"}]}``; ids are integers, ``files`` are relative to the skill
folder, and each expectation is a string or a ``{"text", "passed", "evidence"}`` object (a
graded copy; only the text is read: an earlier verdict never decides this run).

The result is handed to the same schema-v1 validator as our own corpora, so every rule and
every named error holds; only the shape differs, and shape errors name this file's own keys.
"""

from __future__ import annotations

import posixpath
from typing import Any

from schemas.constants import SKILLS_DIR
from schemas.errors import BadCorpus
from schemas.words import noun

SKILL_CREATOR_FILE = "evals/evals.json"
"""Where skill-creator keeps the file, relative to the skill folder."""
CASE_KEYS = frozenset({"id", "prompt", "expected_output", "files", "expectations", "assertions"})


def skill_creator_path(skill: str) -> str:
    """Repo-relative path of a skill's skill-creator eval file."""
    return f"{SKILLS_DIR}/{skill}/{SKILL_CREATOR_FILE}"


def translate_skill_creator(data: Any, file: str, skill: str) -> dict[str, Any]:
    """skill-creator JSON -> a schema-v1 corpus dict (validate it next); BadCorpus on a shape error."""

    def fail(path: str, problem: str) -> BadCorpus:
        return BadCorpus(file, path, problem)

    if not isinstance(data, dict):
        raise fail("$", f"top level is {type(data).__name__}; an object is required")
    unknown = sorted(set(data) - {"skill_name", "evals"})
    if unknown:
        raise fail(
            "$", f"unexpected {noun(len(unknown), 'key')} " + ", ".join(unknown) + " (skill-creator: skill_name, evals)"
        )
    name = data.get("skill_name", skill)
    if name != skill:
        raise fail("$.skill_name", f"{name!r} does not name the skill folder {skill!r} that holds this file")
    evals = data.get("evals")
    if not isinstance(evals, list):
        raise fail("$.evals", "must be an array of evals")
    return {"skill_name": skill, "evals": [_case(raw, f"$.evals[{i}]", skill, fail) for i, raw in enumerate(evals)]}


def _case(raw: Any, at: str, skill: str, fail: Any) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise fail(at, f"is {type(raw).__name__}; each eval is an object")
    unknown = sorted(set(raw) - CASE_KEYS)
    if unknown:
        raise fail(at, f"unexpected {noun(len(unknown), 'key')} " + ", ".join(unknown))
    if "expectations" in raw and "assertions" in raw:
        raise fail(at, "has both expectations and assertions; give one")
    key = "expectations" if "expectations" in raw else "assertions"
    if key not in raw:
        raise fail(at, "missing key expectations (or assertions)")
    items = raw[key]
    if not isinstance(items, list):
        raise fail(f"{at}.{key}", "must be an array")
    texts = []
    for j, item in enumerate(items):
        if isinstance(item, dict):
            if not isinstance(item.get("text"), str):
                raise fail(f"{at}.{key}[{j}].text", "an expectation object needs a string text")
            texts.append(item["text"])
        else:
            texts.append(item)  # the validator names a non-string
    files = raw.get("files", [])
    if not isinstance(files, list):
        raise fail(f"{at}.files", "must be an array of paths relative to the skill folder")
    return {
        "id": raw.get("id"),
        "prompt": raw.get("prompt"),
        # skill-creator makes it optional; schema v1 needs text, so an absent one says so plainly.
        "expected_output": raw.get("expected_output") or "(not given in the skill-creator eval)",
        "files": [_skill_relative(p, skill, f"{at}.files[{k}]", fail) for k, p in enumerate(files)],
        "assertions": texts,
    }


def _skill_relative(path: Any, skill: str, at: str, fail: Any) -> Any:
    if not isinstance(path, str) or path.startswith(("/", "\\")):
        return path  # the validator gives the precise error (not a string, absolute)
    joined = posixpath.normpath(f"{SKILLS_DIR}/{skill}/{path}")
    if not joined.startswith(f"{SKILLS_DIR}/{skill}/"):
        raise fail(at, f"{path!r} leaves the skill folder; skill-creator paths are relative to it")
    return joined
