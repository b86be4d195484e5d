"""Corpus validation, schema v1 of the contract. Pure: takes parsed JSON, returns a Corpus.

Violations are raised as one ``BadCorpus(file, json_path, problem)``, the first in document
order leading and the others in its ``also``, printed one
``BLOCKED_BAD_CORPUS: <file>: <JSON path>: <what is wrong>`` line each. Every case, and every
file and assertion of a case, is checked past a bad one; a structural problem (a top-level
key, a case that is not an object, its keys) stops what depends on it.
Never grade against a corpus that could not be validated.
"""

from __future__ import annotations

import math
import posixpath
import re
import unicodedata
from collections.abc import Callable, Mapping
from typing import Any

from schemas.constants import (
    CHECKABLE_VERBS,
    CORPUS_SUFFIX,
    GLOB_CHARS,
    MIN_ASSERTION_CHARS,
    MIN_EVALS,
    SKILL_NAME_RE,
)
from schemas.corpus import (
    DETERMINISTIC_ASSERTIONS,
    KNOWN_EXTENSIONS,
    Assertion,
    AssertionObject,
    CallOrderCheck,
    Corpus,
    EvalCase,
    FileContainsCheck,
    Fixture,
    SkillActivatedCheck,
    ToolCallCheck,
    ToolCallMatcher,
)
from schemas.errors import BadCorpus, BadSkillName
from schemas.mocks import MockServer
from schemas.status import FixtureStage

TOP_KEYS = frozenset({"skill_name", "evals"})
TOP_OPTIONAL_KEYS = frozenset({"extensions"})  # the opt-in to extensions of schema v1
CASE_KEYS = frozenset({"id", "prompt", "expected_output", "files", "assertions"})
CASE_OPTIONAL_KEYS = frozenset({"fixtures", "max_turns", "allowed_tools", "mocks", "scaffold_script", "timeout_s"})
FIXTURE_KEYS = frozenset({"path", "content"})
FIXTURE_OPTIONAL_KEYS = frozenset({"stage"})

MAX_CORPUS_BYTES = 8 * 1024 * 1024  # a corpus is prose and prompts; more is not a corpus
MAX_REPORTED_VIOLATIONS = 50  # a screenful: enough to fix a file in one pass
MAX_CORPUS_DEPTH = 32  # schema v1 nests six levels deep; room for extensions, none for a RecursionError

_VERB_RE = re.compile(r"\b(?:" + "|".join(sorted(CHECKABLE_VERBS)) + r")\b")
_VAGUE_TAIL_RE = re.compile(r"(?:^|[^\w-])(?:well|correctly|properly|appropriately|as\s+expected)\Z", re.IGNORECASE)


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
        return f"{path!r} contains glob character(s) {' '.join(bad)}; paths are literal"
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


def _blank(value: Any) -> bool:
    return not isinstance(value, str) or not value.strip()


def _key_problem(obj: Mapping[str, Any], required: frozenset[str], optional: frozenset[str]) -> str | None:
    missing = sorted(required - obj.keys())
    extra = sorted(obj.keys() - required - optional)
    parts = []
    if missing:
        parts.append("missing key(s) " + ", ".join(missing))
    if extra:
        parts.append("unexpected key(s) " + ", ".join(extra))
    return "; ".join(parts) or None


def corpus_stem(file_name: str) -> str:
    """``evals/foo.evals.json`` -> ``foo``."""
    base = posixpath.basename(file_name.replace("\\", "/"))
    return base[: -len(CORPUS_SUFFIX)] if base.endswith(CORPUS_SUFFIX) else base


def depth_problem(data: Any, limit: int = MAX_CORPUS_DEPTH) -> str | None:
    """Why ``data`` nests too deep (with the JSON path where it does), or None. Iterative, so
    a hostile document cannot exhaust the stack here."""
    stack: list[tuple[Any, str, int]] = [(data, "$", 1)]
    while stack:
        value, path, depth = stack.pop()
        if depth > limit:
            return f"{path}: nested deeper than {limit} levels"
        if isinstance(value, dict):
            stack.extend((v, f"{path}.{k}", depth + 1) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((v, f"{path}[{i}]", depth + 1) for i, v in enumerate(value))
    return None


def validate_corpus(
    data: Any, file: str, repo_has_file: Callable[[str], bool], *, skill_name: str | None = None
) -> Corpus:
    """Validate parsed corpus JSON against schema v1 and return the model.

    ``file`` is the corpus path used in messages and for the stem check; ``repo_has_file``
    answers whether a normalised repo-relative path exists in the repo; ``skill_name``
    replaces the file stem in that check for corpora read from another format. Raises
    :class:`BadCorpus` naming every violation found (the first leads).
    """

    def fail(path: str, problem: str) -> BadCorpus:
        return BadCorpus(file, path, problem)

    if not isinstance(data, dict):
        raise fail("$", f"top level is {type(data).__name__}; an object is required")
    problem = _key_problem(data, TOP_KEYS, TOP_OPTIONAL_KEYS)
    if problem:
        raise fail("$", problem + " (exactly skill_name, evals)")
    extensions = _validate_extensions(data["extensions"], fail) if "extensions" in data else ()
    stem = skill_name or corpus_stem(file)
    if data["skill_name"] != stem:
        raise fail("$.skill_name", f"{data['skill_name']!r} does not equal the file stem {stem!r}")
    evals = data["evals"]
    if not isinstance(evals, list):
        raise fail("$.evals", f"is {type(evals).__name__}; an array is required")
    if len(evals) < MIN_EVALS:
        raise fail("$.evals", f"has {len(evals)} case(s); at least {MIN_EVALS} are required")

    seen_ids: dict[int, int] = {}
    cases = []
    found: list[BadCorpus] = []  # every case is checked: one pass shows all of a file's violations
    for index, raw in enumerate(evals):
        at = f"$.evals[{index}]"
        try:
            case = _validate_case(raw, at, fail, repo_has_file, DETERMINISTIC_ASSERTIONS in extensions)
        except BadCorpus as exc:
            found += [exc, *exc.also]
            continue
        if case.id in seen_ids:
            found.append(fail(f"{at}.id", f"id {case.id} repeats $.evals[{seen_ids[case.id]}].id; ids are unique"))
        seen_ids.setdefault(case.id, index)
        cases.append(case)
    if found:
        raise _all_of(found)
    return Corpus(skill_name=stem, evals=tuple(cases), extensions=extensions)


def _all_of(found: list[BadCorpus]) -> BadCorpus:
    """One error carrying every violation found, the first in document order leading; past
    :data:`MAX_REPORTED_VIOLATIONS` the rest are counted, so a hostile corpus cannot flood the terminal."""
    first, listed = found[0], found[1:MAX_REPORTED_VIOLATIONS]
    rest = len(found) - len(listed) - 1
    if rest:
        listed.append(BadCorpus(first.file, "$", f"and {rest} more violation(s) not listed"))
    return BadCorpus(first.file, first.path, first.problem, also=tuple(listed))


def _validate_extensions(raw: Any, fail: Callable[[str, str], BadCorpus]) -> tuple[str, ...]:
    known = ", ".join(sorted(KNOWN_EXTENSIONS))
    if not isinstance(raw, list) or not raw:
        raise fail("$.extensions", f"must be a non-empty array of extension names (known: {known})")
    for i, name in enumerate(raw):
        if not isinstance(name, str) or name not in KNOWN_EXTENSIONS:
            raise fail(f"$.extensions[{i}]", f"{name!r} is not a known extension (known: {known})")
        if name in raw[:i]:
            raise fail(f"$.extensions[{i}]", f"{name!r} is listed twice")
    return tuple(raw)


def _validate_case(
    raw: Any,
    at: str,
    fail: Callable[[str, str], BadCorpus],
    repo_has_file: Callable[[str], bool],
    allow_objects: bool = False,
) -> EvalCase:
    if not isinstance(raw, dict):
        raise fail(at, f"is {type(raw).__name__}; each eval is an object")
    problem = _key_problem(raw, CASE_KEYS, CASE_OPTIONAL_KEYS)
    if problem:
        raise fail(at, problem)
    found: list[BadCorpus] = []
    case_id = raw["id"]
    if isinstance(case_id, bool) or not isinstance(case_id, int):
        found.append(fail(f"{at}.id", f"{case_id!r} is not an integer"))
    for key in ("prompt", "expected_output"):
        if _blank(raw[key]):
            found.append(fail(f"{at}.{key}", "must be a non-blank string"))
    try:
        fixtures = _validate_fixtures(raw["fixtures"], f"{at}.fixtures", fail) if "fixtures" in raw else ()
        fixture_paths = {f.path for f in fixtures}
    except BadCorpus as exc:
        found.append(exc)
        fixtures, fixture_paths = (), _claimed_paths(raw["fixtures"])
    clean_files = _validate_files(raw["files"], f"{at}.files", fail, repo_has_file, fixture_paths, found)
    limits = _case_limits(raw, at, fail, found)
    assertions = raw["assertions"]
    if not isinstance(assertions, list) or not assertions:
        found.append(fail(f"{at}.assertions", "must be a non-empty array of strings"))
        assertions = []
    checked: list[Assertion] = []
    for i, text in enumerate(assertions):
        try:
            checked.append(_validate_assertion(text, f"{at}.assertions[{i}]", fail, allow_objects))
        except BadCorpus as exc:
            found.append(exc)
    if found:
        raise _all_of(found)

    return EvalCase(
        id=case_id,
        prompt=raw["prompt"],
        expected_output=raw["expected_output"],
        files=tuple(clean_files),
        assertions=tuple(checked),
        fixtures=fixtures,
        max_turns=limits[0],
        allowed_tools=limits[1],
        mocks=limits[2],
        scaffold_script=limits[3],
        timeout_s=limits[4],
    )


def _case_limits(
    raw: dict[str, Any], at: str, fail: Callable[[str, str], BadCorpus], found: list[BadCorpus]
) -> tuple[int | None, tuple[str, ...] | None, tuple[MockServer, ...], str | None, float | None]:
    from producer.validation_plugin import case_limits, case_mocks, case_scaffold, case_timeout

    try:
        turns, tools = case_limits(raw, at, fail)
        mocks = case_mocks(raw["mocks"], f"{at}.mocks", fail) if "mocks" in raw else ()
        return turns, tools, mocks, case_scaffold(raw, at, fail), case_timeout(raw, at, fail)
    except BadCorpus as exc:
        found.append(exc)
        return None, None, (), None, None


def _claimed_paths(raw: Any) -> set[str]:
    """The paths a fixtures array that failed validation still names, so that its case's
    ``files`` are not also reported missing because of it."""
    items = raw if isinstance(raw, list) else []
    paths = [item.get("path") for item in items if isinstance(item, dict)]
    return {normalise_path(p) for p in paths if isinstance(p, str) and path_problem(p) is None}


def _validate_files(
    files: Any,
    at: str,
    fail: Callable[[str, str], BadCorpus],
    repo_has_file: Callable[[str], bool],
    fixture_paths: set[str],
    found: list[BadCorpus],
) -> list[str]:
    """The case's ``files``; each bad entry is added to ``found`` (the rest are still checked)."""
    if not isinstance(files, list):
        found.append(fail(at, f"is {type(files).__name__}; an array is required"))
        return []
    clean_files = []
    for i, path in enumerate(files):
        where = f"{at}[{i}]"
        problem = path_problem(path) if isinstance(path, str) else f"{path!r} is not a string"
        if problem is None and normalise_path(path) not in fixture_paths and not repo_has_file(normalise_path(path)):
            problem = f"{path!r} does not exist in the repo and no fixture of this eval provides it"
        if problem:
            found.append(fail(where, problem))
        else:
            clean_files.append(path)
    return clean_files


def _validate_assertion(text: Any, where: str, fail: Callable[[str, str], BadCorpus], allow_objects: bool) -> Assertion:
    if allow_objects and isinstance(text, dict):
        return _validate_check(text, where, fail)
    if not isinstance(text, str):
        raise fail(where, f"is {type(text).__name__}; assertions are strings")
    problem = assertion_problem(text)
    if problem:
        raise fail(where, problem)
    return text


def _validate_fixtures(raw: Any, at: str, fail: Callable[[str, str], BadCorpus]) -> tuple[Fixture, ...]:
    if not isinstance(raw, list):
        raise fail(at, f"is {type(raw).__name__}; an array is required")
    seen: dict[tuple[str, FixtureStage], int] = {}
    fixtures = []
    for index, item in enumerate(raw):
        where = f"{at}[{index}]"
        if not isinstance(item, dict):
            raise fail(where, f"is {type(item).__name__}; each fixture is an object")
        problem = _key_problem(item, FIXTURE_KEYS, FIXTURE_OPTIONAL_KEYS)
        if problem:
            raise fail(where, problem)
        path = item["path"]
        if not isinstance(path, str):
            raise fail(f"{where}.path", f"{path!r} is not a string")
        problem = path_problem(path)
        if problem:
            raise fail(f"{where}.path", problem)
        stage_raw = item.get("stage", FixtureStage.HEAD.value)
        if stage_raw not in {s.value for s in FixtureStage}:
            raise fail(f"{where}.stage", f"{stage_raw!r} is not 'base' or 'head'")
        stage = FixtureStage(stage_raw)
        content = item["content"]
        if not isinstance(content, str) or content == "":
            raise fail(f"{where}.content", "must be a non-empty string")
        key = (normalise_path(path), stage)
        if key in seen:
            raise fail(
                f"{where}.path",
                f"{path!r} appears twice in stage {stage.value} (first at {at}[{seen[key]}])",
            )
        seen[key] = index
        fixtures.append(Fixture(path=key[0], content=content, stage=stage))
    return tuple(fixtures)


# --- Deterministic assertions (extension "deterministic-assertions") ----------------------------
MAX_PATTERN_CHARS = 1000  # long patterns are where catastrophic backtracking hides
MAX_WEIGHT = 100.0
_CHECK_KEYS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "tool_call": (frozenset({"kind", "pattern"}), frozenset({"text", "tool", "argument", "absent", "weight"})),
    "call_order": (frozenset({"kind", "first", "then"}), frozenset({"text", "weight"})),
    "file_contains": (frozenset({"kind", "path", "pattern"}), frozenset({"text", "weight"})),
    "skill_activated": (frozenset({"kind"}), frozenset({"text", "weight"})),
}
_MATCHER_KEYS = (frozenset({"pattern"}), frozenset({"tool", "argument"}))


def _validate_check(raw: dict[str, Any], at: str, fail: Callable[[str, str], BadCorpus]) -> AssertionObject:
    """An assertion object: ``kind`` is tool_call | call_order | file_contains | skill_activated; regexes must
    compile; ``text`` (optional) is a non-blank string; ``weight`` (optional) is in (0, 100]."""
    from producer.validation_plugin import PLUGIN_CHECK_KEYS, validate_plugin_check

    kind = raw.get("kind")
    if kind in PLUGIN_CHECK_KEYS:
        return validate_plugin_check(raw, at, fail)
    if kind not in _CHECK_KEYS:
        kinds = ", ".join(sorted({*_CHECK_KEYS, *PLUGIN_CHECK_KEYS}))
        raise fail(f"{at}.kind", f"{kind!r} is not one of: {kinds}")
    problem = _key_problem(raw, *_CHECK_KEYS[kind])
    if problem:
        raise fail(at, problem)
    if "text" in raw and _blank(raw["text"]):
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
    problem = _key_problem(raw, *_MATCHER_KEYS)
    if problem:
        raise fail(at, problem)
    for key in ("tool", "argument"):
        if key in raw and _blank(raw[key]):
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
