"""Corpus validation, schema v1 of the contract. Pure: takes parsed JSON, returns a Corpus.

Violations are raised as one ``BadCorpus(file, json_path, problem)``, the first in document
order leading and the others in its ``also``, printed one
``BLOCKED_BAD_CORPUS: <file>: <JSON path>: <what is wrong>`` line each. Every top-level key,
every case, and every key, file, fixture, limit and assertion of a case is checked past a bad
one; a missing or unexpected key stops only the checks of what it holds. Inside one fixture,
assertion object, mock list or history the first violation is named, and a document that is
not an object, or a case that is not one, stops there.
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
    TOP_KEYS,
    TOP_OPTIONAL_KEYS,
    all_of,
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
from schemas.words import plural

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
    found: list[BadCorpus] = []  # every key and case is checked: one pass shows all of a file's violations
    problem = key_problem(data, TOP_KEYS, TOP_OPTIONAL_KEYS)
    if problem:
        found.append(fail("$", problem + " (exactly skill_name, evals)"))
    extensions = _validate_extensions(data["extensions"], fail, found) if "extensions" in data else ()
    stem = skill_name or corpus_stem(file)
    if "skill_name" in data and data["skill_name"] != stem:
        found.append(fail("$.skill_name", f"{data['skill_name']!r} does not equal the file stem {stem!r}"))
    evals = data.get("evals", [])
    if not isinstance(evals, list):
        found.append(fail("$.evals", f"is {type(evals).__name__}; an array is required"))
        evals = []
    elif "evals" in data and len(evals) < MIN_EVALS:
        found.append(fail("$.evals", f"has {plural(len(evals), 'case')}; at least {MIN_EVALS} are required"))
    allow_objects = DETERMINISTIC_ASSERTIONS in extensions
    cases = _validate_cases(evals, fail, repo_has_file, allow_objects, found)
    if found:
        raise all_of(found)
    return Corpus(skill_name=stem, evals=tuple(cases), extensions=extensions)


def _validate_cases(
    evals: list[Any],
    fail: Callable[[str, str], BadCorpus],
    repo_has_file: Callable[[str], bool],
    allow_objects: bool,
    found: list[BadCorpus],
) -> list[EvalCase]:
    """Every case of ``evals``, each checked past a bad one (its violations added to ``found``);
    a repeated id is named whether or not either case has other violations."""
    seen_ids: dict[int, int] = {}
    cases = []
    for index, raw in enumerate(evals):
        at = f"$.evals[{index}]"
        case_id = raw.get("id") if isinstance(raw, dict) else None
        if isinstance(case_id, int) and not isinstance(case_id, bool):
            if case_id in seen_ids:
                found.append(fail(f"{at}.id", f"id {case_id} repeats $.evals[{seen_ids[case_id]}].id; ids are unique"))
            seen_ids.setdefault(case_id, index)
        try:
            cases.append(_validate_case(raw, at, fail, repo_has_file, allow_objects))
        except BadCorpus as exc:
            found += [exc, *exc.also]
    return cases


def _validate_extensions(raw: Any, fail: Callable[[str, str], BadCorpus], found: list[BadCorpus]) -> tuple[str, ...]:
    """The known extensions ``raw`` names, each once; every violation is added to ``found`` (the
    known names are still returned, so the cases are checked as their author meant them)."""
    known = ", ".join(sorted(KNOWN_EXTENSIONS))
    if not isinstance(raw, list) or not raw:
        found.append(fail("$.extensions", f"must be a non-empty array of extension names (known: {known})"))
        return ()
    names: list[str] = []
    for i, name in enumerate(raw):
        if not isinstance(name, str) or name not in KNOWN_EXTENSIONS:
            found.append(fail(f"$.extensions[{i}]", f"{name!r} is not a known extension (known: {known})"))
        elif name in names:
            found.append(fail(f"$.extensions[{i}]", f"{name!r} is listed twice"))
        else:
            names.append(name)
    return tuple(names)


def _validate_case(
    raw: Any,
    at: str,
    fail: Callable[[str, str], BadCorpus],
    repo_has_file: Callable[[str], bool],
    allow_objects: bool = False,
) -> EvalCase:
    if not isinstance(raw, dict):
        raise fail(at, f"is {type(raw).__name__}; each eval is an object")
    found: list[BadCorpus] = []  # a missing or unexpected key stops no check of the keys that are there
    problem = key_problem(raw, CASE_KEYS, CASE_OPTIONAL_KEYS)
    if problem:
        found.append(fail(at, problem))
    case_id = raw.get("id", 0)
    if isinstance(case_id, bool) or not isinstance(case_id, int):
        found.append(fail(f"{at}.id", f"{case_id!r} is not an integer"))
    for key in ("prompt", "expected_output"):
        if key in raw and blank(raw[key]):
            found.append(fail(f"{at}.{key}", "must be a non-blank string"))
    try:
        fixtures = _validate_fixtures(raw["fixtures"], f"{at}.fixtures", fail) if "fixtures" in raw else ()
        fixture_paths = {f.path for f in fixtures}
    except BadCorpus as exc:
        found += [exc, *exc.also]
        fixtures, fixture_paths = (), _claimed_paths(raw["fixtures"])
    clean_files = _validate_files(raw.get("files", []), f"{at}.files", fail, repo_has_file, fixture_paths, found)
    limits = _case_limits(raw, at, fail, found)
    http_mocks = _case_list(raw, "http_mocks", case_http_mocks, at, fail, found)
    history = _case_list(raw, "history", case_history, at, fail, found)
    checked = (  # a missing key is named above
        _validate_assertions(raw["assertions"], f"{at}.assertions", fail, allow_objects, found)
        if "assertions" in raw
        else []
    )
    if found:
        raise all_of(found)

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
    """A case's optional limits, mocks and scaffold; each bad one is added to ``found`` (the others
    are still checked)."""

    def checked(part: Callable[[], T], default: T) -> T:
        try:
            return part()
        except BadCorpus as exc:
            found.append(exc)
            return default

    no_limits: tuple[int | None, tuple[str, ...] | None] = (None, None)
    turns, tools = checked(lambda: case_limits(raw, at, fail), no_limits)
    mocks = _case_list(raw, "mocks", case_mocks, at, fail, found)
    return (
        turns,
        tools,
        mocks,
        checked(lambda: case_scaffold(raw, at, fail), None),
        checked(lambda: case_timeout(raw, at, fail), None),
    )


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


def _validate_assertions(
    assertions: Any, at: str, fail: Callable[[str, str], BadCorpus], allow_objects: bool, found: list[BadCorpus]
) -> list[Assertion]:
    """A case's assertions; each bad one is added to ``found`` (the rest are still checked)."""
    if not isinstance(assertions, list) or not assertions:
        found.append(fail(at, "must be a non-empty array of strings"))
        return []
    checked: list[Assertion] = []
    for i, text in enumerate(assertions):
        try:
            checked.append(_validate_assertion(text, f"{at}[{i}]", fail, allow_objects))
        except BadCorpus as exc:
            found.append(exc)
    return checked


def _validate_assertion(text: Any, where: str, fail: Callable[[str, str], BadCorpus], allow_objects: bool) -> Assertion:
    if allow_objects and isinstance(text, dict):
        return validate_check(text, where, fail)
    if isinstance(text, dict):  # v1's own words, then what would make it an assertion object
        hint = f'an object needs "extensions": ["{DETERMINISTIC_ASSERTIONS}"] at the top level of the corpus'
        raise fail(where, f"is dict; assertions are strings ({hint})")
    if not isinstance(text, str):
        raise fail(where, f"is {type(text).__name__}; assertions are strings")
    problem = assertion_problem(text)
    if problem:
        raise fail(where, problem)
    return text


def _validate_fixtures(raw: Any, at: str, fail: Callable[[str, str], BadCorpus]) -> tuple[Fixture, ...]:
    """A case's fixtures; every fixture is checked past a bad one (one ``BadCorpus`` names them all)."""
    if not isinstance(raw, list):
        raise fail(at, f"is {type(raw).__name__}; an array is required")
    seen: dict[tuple[str, FixtureStage], int] = {}
    fixtures = []
    found: list[BadCorpus] = []
    for index, item in enumerate(raw):
        where = f"{at}[{index}]"
        try:
            fixture = _validate_fixture(item, where, fail)
        except BadCorpus as exc:
            found.append(exc)
            continue
        key = (fixture.path, fixture.stage)
        if key in seen:
            problem = f"{item['path']!r} appears twice in stage {fixture.stage.value} (first at {at}[{seen[key]}])"
            found.append(fail(f"{where}.path", problem))
        seen.setdefault(key, index)
        fixtures.append(fixture)
    if found:
        raise all_of(found)
    return tuple(fixtures)


def _validate_fixture(item: Any, where: str, fail: Callable[[str, str], BadCorpus]) -> Fixture:
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
    content = item["content"]
    if not isinstance(content, str) or content == "":
        raise fail(f"{where}.content", "must be a non-empty string")
    return Fixture(path=normalise_path(path), content=content, stage=FixtureStage(stage_raw))
