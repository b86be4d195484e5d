"""Corpus schema v1: every rule accepts what it should and rejects what it should, with a named error."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from producer.corpus.rules import assertion_problem, check_skill_name, path_problem
from producer.corpus.validation import validate_corpus
from schemas.errors import BadCorpus, BadSkillName
from schemas.status import FixtureStage

FILE = "evals/demo.evals.json"
REPO_FILES = {"src/app.py", "README.md"}


def has(path: str) -> bool:
    return path in REPO_FILES


def good() -> dict[str, Any]:
    return {
        "skill_name": "demo",
        "evals": [
            {
                "id": 1,
                "prompt": "Fix the bug in src/app.py",
                "expected_output": "A fix, committed.",
                "files": ["src/app.py"],
                "assertions": ["The agent runs the tests before committing"],
            },
            {
                "id": 2,
                "prompt": "Review the change",
                "expected_output": "A review.",
                "files": ["src/new.py"],
                "fixtures": [
                    {"path": "src/new.py", "content": "x = 1\n", "stage": "base"},
                    {"path": "src/new.py", "content": "x = 2\n", "stage": "head"},
                ],
                "assertions": ["The agent runs git diff to see the change"],
            },
        ],
    }


def error_of(data: Any) -> BadCorpus:
    with pytest.raises(BadCorpus) as info:
        validate_corpus(data, FILE, has)
    return info.value


def test_a_valid_corpus_loads_with_its_cases_and_fixtures() -> None:
    corpus = validate_corpus(good(), FILE, has)
    assert corpus.skill_name == "demo"
    assert [c.id for c in corpus.evals] == [1, 2]
    assert corpus.assertion_count == 2
    assert corpus.evals[1].has_base_fixtures
    assert [f.stage for f in corpus.evals[1].fixtures] == [FixtureStage.BASE, FixtureStage.HEAD]


def test_the_error_names_status_file_and_json_path() -> None:
    data = good()
    data["evals"][1]["id"] = "2"
    exc = error_of(data)
    assert str(exc).startswith("BLOCKED_BAD_CORPUS: evals/demo.evals.json: $.evals[1].id: ")


class Replace:
    def __init__(self, document: Any) -> None:
        self.document = document


MUTATIONS: list[tuple[str, Any, str]] = [
    # (description, mutation function, expected JSON path)
    ("top level is a list", lambda d: Replace([d]), "$"),
    ("extra top-level key", lambda d: d.update(version=1), "$"),
    ("missing evals", lambda d: d.pop("evals"), "$"),
    ("skill_name differs from the stem", lambda d: d.update(skill_name="other"), "$.skill_name"),
    ("evals is an object", lambda d: d.update(evals={}), "$.evals"),
    ("only one eval", lambda d: d["evals"].pop(), "$.evals"),
    ("an eval is a string", lambda d: d["evals"].__setitem__(0, "x"), "$.evals[0]"),
    ("eval with an extra key", lambda d: d["evals"][0].update(notes="x"), "$.evals[0]"),
    ("eval missing assertions", lambda d: d["evals"][0].pop("assertions"), "$.evals[0]"),
    ("id is a boolean", lambda d: d["evals"][0].update(id=True), "$.evals[0].id"),
    ("id is a float", lambda d: d["evals"][0].update(id=1.0), "$.evals[0].id"),
    ("duplicate id", lambda d: d["evals"][1].update(id=1), "$.evals[1].id"),
    ("blank prompt", lambda d: d["evals"][0].update(prompt="  \n"), "$.evals[0].prompt"),
    (
        "non-string expected_output",
        lambda d: d["evals"][0].update(expected_output=3),
        "$.evals[0].expected_output",
    ),
    ("files not an array", lambda d: d["evals"][0].update(files="src/app.py"), "$.evals[0].files"),
    ("blank file", lambda d: d["evals"][0].update(files=[" "]), "$.evals[0].files[0]"),
    ("absolute file", lambda d: d["evals"][0].update(files=["/etc/passwd"]), "$.evals[0].files[0]"),
    ("glob in file", lambda d: d["evals"][0].update(files=["src/*.py"]), "$.evals[0].files[0]"),
    ("bracket in file", lambda d: d["evals"][0].update(files=["src/[a].py"]), "$.evals[0].files[0]"),
    ("escaping file", lambda d: d["evals"][0].update(files=["src/../../x"]), "$.evals[0].files[0]"),
    ("missing file", lambda d: d["evals"][0].update(files=["src/nope.py"]), "$.evals[0].files[0]"),
    ("assertions empty", lambda d: d["evals"][0].update(assertions=[]), "$.evals[0].assertions"),
    (
        "assertion not a string",
        lambda d: d["evals"][0].update(assertions=[{"x": 1}]),
        "$.evals[0].assertions[0]",
    ),
    (
        "assertion too short",
        lambda d: d["evals"][0].update(assertions=["runs tests"]),
        "$.evals[0].assertions[0]",
    ),
    (
        "assertion without a verb",
        lambda d: d["evals"][0].update(assertions=["The agent is very careful with the tests"]),
        "$.evals[0].assertions[0]",
    ),
    (
        "assertion ending vague",
        lambda d: d["evals"][0].update(assertions=["The agent runs the tests correctly."]),
        "$.evals[0].assertions[0]",
    ),
    ("fixtures not an array", lambda d: d["evals"][1].update(fixtures={}), "$.evals[1].fixtures"),
    ("fixture extra key", lambda d: d["evals"][1]["fixtures"][0].update(mode="x"), "$.evals[1].fixtures[0]"),
    (
        "fixture bad stage",
        lambda d: d["evals"][1]["fixtures"][0].update(stage="tail"),
        "$.evals[1].fixtures[0].stage",
    ),
    (
        "fixture empty content",
        lambda d: d["evals"][1]["fixtures"][0].update(content=""),
        "$.evals[1].fixtures[0].content",
    ),
    (
        "fixture unsafe path",
        lambda d: d["evals"][1]["fixtures"][0].update(path="../x"),
        "$.evals[1].fixtures[0].path",
    ),
    (
        "fixture path twice in one stage",
        lambda d: d["evals"][1]["fixtures"][1].update(stage="base"),
        "$.evals[1].fixtures[1].path",
    ),
]


@pytest.mark.parametrize(("what", "mutate", "json_path"), MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_each_rule_rejects_its_violation_at_the_right_path(what: str, mutate: Any, json_path: str) -> None:
    data = copy.deepcopy(good())
    result = mutate(data)
    if isinstance(result, Replace):  # the mutation replaced the whole document
        data = result.document
    exc = error_of(data)
    assert exc.path == json_path, str(exc)
    assert exc.file == FILE


def test_a_files_violations_are_reported_together_past_keys_that_are_wrong() -> None:
    """An extra key neither hides a wrong skill_name nor a case's violations, and a case's own
    extra key, bad fixtures and bad limits hide none of its other fields."""
    data = good() | {"version": 1, "skill_name": "other", "extensions": ["nope"]}
    first, second = data["evals"]
    first.update(id="1", notes="x", prompt=" ", max_turns=0, scaffold_script=3)
    first["assertions"].append({"kind": "tool_call", "pattern": "git"})
    second["fixtures"][0].update(stage="tail")
    second["fixtures"][1].update(content="")
    second.pop("expected_output")
    exc = error_of(data)
    paths = [e.path for e in (exc, *exc.also)]
    assert paths == [
        "$",  # unexpected key version
        "$.extensions[0]",
        "$.skill_name",
        "$.evals[0]",  # unexpected key notes
        "$.evals[0].id",
        "$.evals[0].prompt",
        "$.evals[0].max_turns",
        "$.evals[0].scaffold_script",
        "$.evals[0].assertions[1]",
        "$.evals[1]",  # missing key expected_output
        "$.evals[1].fixtures[0].stage",
        "$.evals[1].fixtures[1].content",
    ], str(exc)


def test_a_repeated_id_is_named_even_when_either_case_has_other_violations() -> None:
    data = good()
    data["evals"][1].update(id=1, prompt="")
    exc = error_of(data)
    assert [e.path for e in (exc, *exc.also)] == ["$.evals[1].id", "$.evals[1].prompt"]


def test_the_validator_is_neither_always_accept_nor_always_reject() -> None:
    outcomes = set()
    for mutate in (lambda d: None, lambda d: d["evals"][0].update(id=False)):
        data = good()
        mutate(data)
        try:
            validate_corpus(data, FILE, has)
            outcomes.add("valid")
        except BadCorpus:
            outcomes.add("invalid")
    assert outcomes == {"valid", "invalid"}


def test_a_file_provided_only_by_a_fixture_of_the_same_eval_is_accepted() -> None:
    data = good()
    data["evals"][1]["fixtures"] = [{"path": "./src//new.py", "content": "x"}]
    assert validate_corpus(data, FILE, has).evals[1].fixtures[0].path == "src/new.py"


def test_a_fixture_of_another_eval_does_not_provide_a_file() -> None:
    data = good()
    data["evals"][0]["files"] = ["src/new.py"]
    assert error_of(data).path == "$.evals[0].files[0]"


def test_one_base_and_one_head_fixture_of_a_path_is_the_normal_modified_file() -> None:
    case = validate_corpus(good(), FILE, has).evals[1]
    assert {(f.path, f.stage) for f in case.fixtures} == {
        ("src/new.py", FixtureStage.BASE),
        ("src/new.py", FixtureStage.HEAD),
    }


@pytest.mark.parametrize(
    "text",
    [
        "The agent runs pytest before it commits",
        "Output contains the string 'ok' at the end",
        "The commit message matches ^fix: and nothing more",
        "The agent writes a well-formed JSON report file",
        "The agent dispatches exactly one reviewer agent",
        "The agent shows the diff; farewell is not vague",
    ],
)
def test_assertions_with_a_checkable_verb_and_a_concrete_ending_pass(text: str) -> None:
    assert assertion_problem(text) is None


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("runs the tests", "characters"),
        ("   The agent runs it   ", "characters"),
        ("The agent Runs the test suite first", "verb"),
        ("The agent reran the whole test suite", "verb"),
        ("The agent runs the test suite well", "vague"),
        ("The agent edits the changelog properly!", "vague"),
        ("The agent records the decision appropriately.)", "vague"),
        ("The agent commits the change as   expected", "vague"),
        ("The agent commits the change AS\nEXPECTED...", "vague"),
        ("The agent creates the file Correctly", "vague"),
    ],
)
def test_weak_assertions_are_rejected_with_the_reason(text: str, reason: str) -> None:
    problem = assertion_problem(text)
    assert problem is not None
    assert reason in problem


def test_skill_names_must_be_kebab_case_and_have_a_folder() -> None:
    assert check_skill_name("commit-message", lambda n: True) == "commit-message"
    for bad in ("Commit", "-x", "a/b", "..", "a b", "a;rm", "", "a_b"):
        with pytest.raises(BadSkillName):
            check_skill_name(bad, lambda n: True)
    with pytest.raises(BadSkillName, match="no skills/ghost/ folder"):
        check_skill_name("ghost", lambda n: False)


def test_a_hostile_name_is_rejected_before_any_path_is_built_from_it() -> None:
    asked: list[str] = []
    with pytest.raises(BadSkillName):
        check_skill_name("../../etc", lambda n: asked.append(n) or True)  # type: ignore[func-returns-value]
    assert asked == []


# --- property tests for the path rules ---------------------------------------------------

segment = st.text(alphabet=st.characters(blacklist_characters="/\\*?[]\x00", blacklist_categories=("Cs",)), min_size=1)


@given(st.lists(segment, min_size=1, max_size=5))
def test_any_path_that_normalises_inside_the_root_without_globs_is_accepted(parts: list[str]) -> None:
    import posixpath

    path = "/".join(parts)
    normal = posixpath.normpath(path)
    problem = path_problem(path)
    inside = not (normal == ".." or normal.startswith("../") or normal == ".") and path.strip() != ""
    drive = len(path) > 2 and path[0].isascii() and path[0].isalpha() and path[1] == ":" and path[2] in "/\\"
    absolute = path.startswith("/") or drive  # a drive letter is A-Z: "é:/x" is a relative name
    assert (problem is None) == (inside and not absolute)


@given(st.text(min_size=1), st.sampled_from(sorted("*?[]")))
def test_a_glob_character_anywhere_is_rejected(text: str, glob: str) -> None:
    mid = len(text) // 2
    assert path_problem(text[:mid] + glob + text[mid:]) is not None


@given(
    st.integers(min_value=1, max_value=6),
    st.lists(segment.filter(lambda p: p not in {".", ".."}), max_size=3),
)
def test_climbing_above_the_root_is_always_rejected(ups: int, parts: list[str]) -> None:
    # Descend into `parts`, then climb one step more than we descended (and then some).
    path = "/".join([*parts, *[".."] * (len(parts) + ups)])
    assert path_problem(path) is not None


def test_json_round_trip_of_the_example_corpora_validates(tmp_path: Any) -> None:
    from tests.conftest import EXAMPLE_REPO

    for file in sorted((EXAMPLE_REPO / "evals").glob("*.evals.json")):
        data = json.loads(file.read_text())
        corpus = validate_corpus(data, f"evals/{file.name}", lambda p: (EXAMPLE_REPO / p).exists())
        assert len(corpus.evals) >= 2
