"""The rules every corpus format is validated by: key sets, limits, paths, names, assertion text.

Pure, and shared by the schema v1 validator (validation.py), its assertion objects (checks.py) and
the ``plugin eval`` semantics (validation_plugin.py), none of which imports another for them.
"""

from __future__ import annotations

import posixpath
import re
import unicodedata
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from schemas.constants import (
    CHECKABLE_VERBS,
    CORPUS_SUFFIX,
    GLOB_CHARS,
    MIN_ASSERTION_CHARS,
    SKILL_NAME_RE,
)
from schemas.errors import BadCorpus, BadSkillName
from schemas.words import noun

TOP_KEYS = frozenset({"skill_name", "evals"})
TOP_OPTIONAL_KEYS = frozenset({"extensions"})  # the opt-in to extensions of schema v1
CASE_KEYS = frozenset({"id", "prompt", "expected_output", "files", "assertions"})
CASE_OPTIONAL_KEYS = frozenset(
    {"fixtures", "max_turns", "allowed_tools", "mocks", "http_mocks", "history", "scaffold_script", "timeout_s"}
)
FIXTURE_KEYS = frozenset({"path", "content"})
FIXTURE_OPTIONAL_KEYS = frozenset({"stage"})

MAX_CORPUS_BYTES = 8 * 1024 * 1024  # a corpus is prose and prompts; more is not a corpus
MAX_REPORTED_VIOLATIONS = 50  # a screenful: enough to fix a file in one pass
MAX_CORPUS_DEPTH = 32  # schema v1 nests six levels deep; room for extensions, none for a RecursionError
MAX_CORPUS_VALUES = 500_000  # every value at any depth: thousands of cases with room; a flood is not a corpus
MAX_PATH_KEY_CHARS = 64  # a key named in an error is cut here

_VERB_RE = re.compile(r"\b(?:" + "|".join(sorted(CHECKABLE_VERBS)) + r")\b")
_VAGUE_TAIL_RE = re.compile(r"(?:^|[^\w-])(?:well|correctly|properly|appropriately|as\s+expected)\Z", re.IGNORECASE)

MAX_PATTERN_CHARS = 1000  # long patterns are where catastrophic backtracking hides
MAX_WEIGHT = 100.0


def check_skill_name(name: str, skill_dir_exists: Callable[[str], bool]) -> str:
    """Return ``name`` when it is kebab-case and ``skills/<name>/`` exists; else BadSkillName.

    The pattern is checked first, so no path is ever built from a hostile name.
    """
    if not SKILL_NAME_RE.fullmatch(name):
        raise BadSkillName(f"{name!r} is not kebab-case (^[a-z0-9][a-z0-9-]*$)")
    if not skill_dir_exists(name):
        raise BadSkillName(f"{name!r} has no skills/{name}/ folder")
    return name


def path_problem(path: str) -> str | None:
    """Why ``path`` is not a safe repo-relative literal path, or None when it is.

    Rules: a non-blank string, not absolute, no glob characters (``* ? [ ]``), no NUL,
    not escaping the repo root after normalisation, and naming something below the root.
    """
    if not path.strip():
        return "is blank"
    if "\x00" in path:
        return "contains a NUL character"
    if path.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:[\\/]", path):
        return f"{path!r} is absolute; paths are repo-relative"
    bad = sorted(GLOB_CHARS.intersection(path))
    if bad:
        return f"{path!r} contains glob {noun(len(bad), 'character')} {' '.join(bad)}; paths are literal"
    normal = posixpath.normpath(path.replace("\\", "/"))
    if normal == ".." or normal.startswith("../"):
        return f"{path!r} escapes the repo root"
    if normal == ".":
        return f"{path!r} names the repo root, not a file"
    return None


def normalise_path(path: str) -> str:
    """The canonical form of a safe repo-relative path (call after :func:`path_problem`)."""
    return posixpath.normpath(path.replace("\\", "/"))


def assertion_problem(text: str) -> str | None:
    """Why an assertion fails the quality floor, or None when it passes."""
    stripped = text.strip()
    if len(stripped) < MIN_ASSERTION_CHARS:
        return f"is {len(stripped)} characters; at least {MIN_ASSERTION_CHARS} are needed"
    if not _VERB_RE.search(stripped):
        verbs = ", ".join(sorted(CHECKABLE_VERBS))
        return f"has no checkable verb (one of: {verbs})"
    tail = stripped
    while tail and (unicodedata.category(tail[-1]).startswith("P") or tail[-1].isspace()) and tail[-1] != "-":
        tail = tail[:-1]
    match = _VAGUE_TAIL_RE.search(tail)
    if match:
        return f"ends with the vague qualifier {match.group(0).strip()!r}; state what is observable"
    return None


def blank(value: Any) -> bool:
    return not isinstance(value, str) or not value.strip()


def key_problem(obj: Mapping[str, Any], required: frozenset[str], optional: frozenset[str]) -> str | None:
    missing = sorted(required - obj.keys())
    extra = sorted(obj.keys() - required - optional)
    parts = []
    if missing:
        parts.append(f"missing {noun(len(missing), 'key')} " + ", ".join(missing))
    if extra:
        parts.append(f"unexpected {noun(len(extra), 'key')} " + ", ".join(extra))
    return "; ".join(parts) or None


def corpus_stem(file_name: str) -> str:
    """``evals/foo.evals.json`` -> ``foo``."""
    base = posixpath.basename(file_name.replace("\\", "/"))
    return base[: -len(CORPUS_SUFFIX)] if base.endswith(CORPUS_SUFFIX) else base


def depth_problem(data: Any, limit: int = MAX_CORPUS_DEPTH, most: int | None = None) -> tuple[str, str] | None:
    """Where and why ``data`` nests too deep or holds too many values (a JSON path, a problem), or None.

    Iterative, so a hostile document cannot exhaust the stack here; it holds one iterator per
    level and builds a path only for the value at fault, so neither a long key over a long list
    nor a huge flat list costs more than a few frames; past ``most`` values it stops.
    """
    most = MAX_CORPUS_VALUES if most is None else most
    frames = [_children(data)]
    keys: list[str | int] = []  # the path to the container whose children frames[-1] walks
    seen = 1
    while frames:
        step = next(frames[-1], None)
        if step is None:
            frames.pop()
            if keys:
                keys.pop()
            continue
        key, value = step
        seen += 1
        if len(frames) + 1 > limit:
            return json_path([*keys, key]), f"nested deeper than {limit} levels"
        if seen > most:
            return json_path([*keys, key]), f"more than {most} values; a corpus is not bulk data"
        if isinstance(value, (dict, list)):
            frames.append(_children(value))
            keys.append(key)
    return None


def _children(value: Any) -> Iterator[tuple[str | int, Any]]:
    if isinstance(value, dict):
        return iter(value.items())
    if isinstance(value, list):
        return enumerate(value)
    return iter(())


def json_path(keys: list[str | int]) -> str:
    """``$.a[0].b`` for the keys ``a, 0, b``; a key past :data:`MAX_PATH_KEY_CHARS` is cut, so a
    hostile key cannot make the error the size of the file."""
    out = ["$"]
    for key in keys:
        if isinstance(key, int):
            out.append(f"[{key}]")
        else:
            out.append("." + (key if len(key) <= MAX_PATH_KEY_CHARS else key[:MAX_PATH_KEY_CHARS] + "…"))
    return "".join(out)


def all_of(found: list[BadCorpus]) -> BadCorpus:
    """One error carrying every violation found, the first in document order leading; past
    :data:`MAX_REPORTED_VIOLATIONS` the rest are counted, so a hostile corpus cannot flood the terminal."""
    first, listed = found[0], found[1:MAX_REPORTED_VIOLATIONS]
    rest = len(found) - len(listed) - 1
    if rest:
        listed.append(BadCorpus(first.file, "$", f"and {rest} more {noun(rest, 'violation')} not listed"))
    return BadCorpus(first.file, first.path, first.problem, also=tuple(listed))
