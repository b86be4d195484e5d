"""Corpus validation, schema v1 of the contract. Pure: takes parsed JSON, returns a Corpus.

Violations are raised as one ``BadCorpus(file, json_path, problem)``, the first in document
order leading and the others in its ``also``, printed one
``BLOCKED_BAD_CORPUS: <file>: <JSON path>: <what is wrong>`` line each. Every case, and every
file and assertion of a case, is checked past a bad one; a structural problem (a top-level
key, a case that is not an object, its keys) stops what depends on it.
Never grade against a corpus that could not be validated.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from producer.corpus.checks import validate_check
from producer.corpus.rules import (
    CASE_KEYS,
    CASE_OPTIONAL_KEYS,
    FIXTURE_KEYS,
    FIXTURE_OPTIONAL_KEYS,
    MAX_REPORTED_VIOLATIONS,
    TOP_KEYS,
    TOP_OPTIONAL_KEYS,
    assertion_problem,
    blank,
    corpus_stem,
    key_problem,
    normalise_path,
    path_problem,
)
from producer.corpus.validation_history import case_history
from producer.corpus.validation_http import case_http_mocks
from producer.corpus.validation_plugin import case_limits, case_mocks, case_scaffold, case_timeout
from schemas.constants import (
    MIN_EVALS,
)
from schemas.corpus import (
    DETERMINISTIC_ASSERTIONS,
    KNOWN_EXTENSIONS,
    Assertion,
    Corpus,
    EvalCase,
    Fixture,
)
from schemas.errors import BadCorpus, BadRepo
from schemas.mocks import MockServer
from schemas.status import FixtureStage

T = TypeVar("T")


def validate_corpus(
    data: Any, file: str, repo_has_file: Callable[[str], bool], *, skill_name: str | None = None
) -> Corpus:
    """Validate parsed corpus JSON against schema v1 and return the model.

    ``file`` is the corpus path used in messages and for the stem check; ``repo_has_file``
    answers whether a normalised repo-relative path exists in the repo; ``skill_name``
    replaces the file stem in that check for corpora read from another format. Raises
    :class:`BadCorpus` naming every violation found (the first leads); ``BadRepo`` naming the
    ``files`` entry when ``repo_has_file`` raises it (a link out of the repo stops the corpus).
    """

    def fail(path: str, problem: str) -> BadCorpus:
        return BadCorpus(file, path, problem)

    if not isinstance(data, dict):
        raise fail("$", f"top level is {type(data).__name__}; an object is required")
    problem = key_problem(data, TOP_KEYS, TOP_OPTIONAL_KEYS)
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
    problem = key_problem(raw, CASE_KEYS, CASE_OPTIONAL_KEYS)
    if problem:
        raise fail(at, problem)
    found: list[BadCorpus] = []
    case_id = raw["id"]
    if isinstance(case_id, bool) or not isinstance(case_id, int):
        found.append(fail(f"{at}.id", f"{case_id!r} is not an integer"))
    for key in ("prompt", "expected_output"):
        if blank(raw[key]):
            found.append(fail(f"{at}.{key}", "must be a non-blank string"))
    try:
        fixtures = _validate_fixtures(raw["fixtures"], f"{at}.fixtures", fail) if "fixtures" in raw else ()
        fixture_paths = {f.path for f in fixtures}
    except BadCorpus as exc:
        found.append(exc)
        fixtures, fixture_paths = (), _claimed_paths(raw["fixtures"])
    clean_files = _validate_files(raw["files"], f"{at}.files", fail, repo_has_file, fixture_paths, found)
    limits = _case_limits(raw, at, fail, found)
    http_mocks = _case_list(raw, "http_mocks", case_http_mocks, at, fail, found)
    history = _case_list(raw, "history", case_history, at, fail, found)
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
        http_mocks=http_mocks,
        history=history,
    )


def _case_limits(
    raw: dict[str, Any], at: str, fail: Callable[[str, str], BadCorpus], found: list[BadCorpus]
) -> tuple[int | None, tuple[str, ...] | None, tuple[MockServer, ...], str | None, float | None]:

    try:
        turns, tools = case_limits(raw, at, fail)
        mocks = case_mocks(raw["mocks"], f"{at}.mocks", fail) if "mocks" in raw else ()
        return turns, tools, mocks, case_scaffold(raw, at, fail), case_timeout(raw, at, fail)
    except BadCorpus as exc:
        found.append(exc)
        return None, None, (), None, None


def _case_list(
    raw: dict[str, Any],
    key: str,
    parse: Callable[[Any, str, Callable[[str, str], BadCorpus]], tuple[T, ...]],
    at: str,
    fail: Callable[[str, str], BadCorpus],
    found: list[BadCorpus],
) -> tuple[T, ...]:
    """A case's optional list under ``key`` as ``parse`` reads it; none when it is absent or bad
    (its error added to ``found``, so the case's other errors are still reported)."""
    if key not in raw:
        return ()
    try:
        return parse(raw[key], f"{at}.{key}", fail)
    except BadCorpus as exc:
        found.append(exc)
        return ()


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
        if (
            problem is None
            and normalise_path(path) not in fixture_paths
            and not _in_repo(path, where, fail, repo_has_file)
        ):
            problem = f"{path!r} does not exist in the repo and no fixture of this eval provides it"
        if problem:
            found.append(fail(where, problem))
        else:
            clean_files.append(path)
    return clean_files


def _in_repo(
    path: str, where: str, fail: Callable[[str, str], BadCorpus], repo_has_file: Callable[[str], bool]
) -> bool:
    """Whether the repo has ``path``; its ``BLOCKED_BAD_REPO`` (a link out of the repo) names the field."""
    try:
        return repo_has_file(normalise_path(path))
    except BadRepo as exc:
        at = fail(where, exc.why)
        raise BadRepo(f"{at.file}: {at.path}: {path!r}", exc.why) from None


def _validate_assertion(text: Any, where: str, fail: Callable[[str, str], BadCorpus], allow_objects: bool) -> Assertion:
    if allow_objects and isinstance(text, dict):
        return validate_check(text, where, fail)
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
        problem = key_problem(item, FIXTURE_KEYS, FIXTURE_OPTIONAL_KEYS)
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
