"""The JSON Schemas ``skill-eval schema`` publishes accept what ``validate`` accepts and state the
limits it enforces: the docs' examples and the repo's example corpora pass both, checked with the
``jsonschema`` package (a dev dependency)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from producer.corpus.published import corpus_schema, input_keys, published_schemas
from producer.corpus.trigger_validation import validate_triggers
from producer.corpus.validation import validate_corpus
from schemas.errors import BadCorpus
from schemas.export import json_schemas
from schemas.triggers import MAX_QUERY_CHARS, MAX_TRIGGERS
from tests.conftest import EXAMPLE_REPO
from tests.test_cli_plan import invoke

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted((ROOT / "docs").rglob("*.md"))
SCHEMAS = published_schemas()


def accepts(name: str, document: Any) -> bool:
    return not list(jsonschema.Draft202012Validator(SCHEMAS[name]).iter_errors(document))


def fenced_json(text: str) -> list[str]:
    return [m.group(1) for m in re.finditer(r"```json\n(.*?)```", text, re.S)]


@pytest.mark.parametrize("corpus", sorted((EXAMPLE_REPO / "evals").glob("*.evals.json")), ids=lambda p: p.name)
def test_the_example_corpora_pass_the_validator_and_the_published_schema(corpus: Path) -> None:
    data = json.loads(corpus.read_text(encoding="utf-8"))
    validate_corpus(data, f"evals/{corpus.name}", lambda _p: True)
    assert accepts("corpus", data)


def test_the_docs_json_examples_pass_the_published_schemas() -> None:
    checked = 0
    for page in DOCS:
        for block in fenced_json(page.read_text(encoding="utf-8")):
            data = json.loads(block if block.lstrip().startswith(("{", "[")) else "{" + block + "}")
            if isinstance(data, dict) and "triggers" in data:
                validate_triggers(data, f"evals/{data['skill_name']}.triggers.json")
                assert accepts("trigger-set", data), page
            elif isinstance(data, dict) and "http_mocks" in data:
                mocks = SCHEMAS["corpus"]["$defs"]["EvalCase"]["properties"]["http_mocks"]
                jsonschema.validate(data["http_mocks"], {"$defs": SCHEMAS["corpus"]["$defs"], **mocks})
            else:
                continue
            checked += 1
    assert checked >= 2  # the trigger set of triggers.md and the HTTP mocks of mocks.md


def test_the_docs_inline_assertion_objects_pass_the_published_schema() -> None:
    objects = [
        json.loads(m.group(1))
        for page in DOCS
        for m in re.finditer(r"`(\{\"kind\": [^`]*\})`", page.read_text(encoding="utf-8"))
        if _is_json(m.group(1))
    ]
    assert {"kind": "skill_activated"} in objects
    items = SCHEMAS["corpus"]["$defs"]["EvalCase"]["properties"]["assertions"]["items"]
    for found in objects:
        jsonschema.validate(found, {"$defs": SCHEMAS["corpus"]["$defs"], **items})


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def test_an_http_call_check_without_text_passes_both_as_mocks_md_writes_it() -> None:
    check = {"kind": "http_call", "request": {"url": "evil\\.example\\.com"}, "min": 0, "max": 0}
    case = {"id": 1, "prompt": "p", "expected_output": "e", "files": [], "assertions": [check]}
    other = {**case, "id": 2, "assertions": ["The agent runs the tests"]}
    data = {"skill_name": "demo", "extensions": ["deterministic-assertions"], "evals": [case, other]}
    validate_corpus(data, "evals/demo.evals.json", lambda _p: True)
    assert accepts("corpus", data)
    code, printed = invoke("schema", "corpus")
    assert code == 0 and "text" not in json.loads(printed)["$defs"]["HttpCallCheck"]["required"]


def test_every_corpus_object_requires_and_allows_the_keys_the_validator_does() -> None:
    published = corpus_schema(json_schemas()["corpus"])
    nodes = {"Corpus": published, **published["$defs"]}
    compared = 0
    for name, node in nodes.items():
        keys = input_keys(node)
        if keys is None:
            continue
        required, optional = keys
        assert set(node["required"]) == required, name
        assert set(node["properties"]) == required | optional, name
        assert node.get("additionalProperties") is False, name
        compared += 1
    assert compared == 7 + 13  # the corpus's objects and every kind of assertion object


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ({"id": -1}, "id"),
        ({"query": ""}, "query"),
        ({"query": "   "}, "query"),
        ({"query": "x" * (MAX_QUERY_CHARS + 1)}, "query"),
        ({"should_trigger": "yes"}, "should_trigger"),
        ({"extra": 1}, "extra"),
    ],
)
def test_the_trigger_set_schema_refuses_what_the_validator_refuses(change: dict[str, Any], where: str) -> None:
    good = {"id": 1, "query": "extract a.pdf", "should_trigger": True}
    data = {
        "skill_name": "pdf-tools",
        "triggers": [{**good, **change}, {"id": 2, "query": "hi", "should_trigger": False}],
    }
    assert accepts("trigger-set", {**data, "triggers": [good, data["triggers"][1]]})
    with pytest.raises(BadCorpus, match=where):
        validate_triggers(data, "evals/pdf-tools.triggers.json")
    assert not accepts("trigger-set", data)


def test_the_trigger_set_schema_states_the_validators_limits() -> None:
    code, printed = invoke("schema", "trigger-set")
    schema = json.loads(printed)
    case = schema["$defs"]["TriggerCase"]["properties"]
    assert code == 0 and case["id"]["minimum"] == 0
    assert (case["query"]["minLength"], case["query"]["maxLength"]) == (1, MAX_QUERY_CHARS)
    assert schema["$defs"]["TriggerSet"]["properties"]["triggers"]["maxItems"] == MAX_TRIGGERS
    assert schema["anyOf"][1]["maxItems"] == MAX_TRIGGERS  # skill-creator's list, too
    too_many = [{"id": i, "query": "q", "should_trigger": i % 2 == 0} for i in range(MAX_TRIGGERS + 1)]
    assert not accepts("trigger-set", {"skill_name": "pdf-tools", "triggers": too_many})


def test_skill_creators_list_passes_both_and_an_id_in_it_neither() -> None:
    creator = [{"query": "a.pdf to text", "should_trigger": True}, {"query": "hello", "should_trigger": False}]
    validate_triggers(creator, "evals/pdf-tools.triggers.json")
    assert accepts("trigger-set", creator)
    numbered = [{**creator[0], "id": 3}, creator[1]]
    with pytest.raises(BadCorpus, match="unknown"):
        validate_triggers(numbered, "evals/pdf-tools.triggers.json")
    assert not accepts("trigger-set", numbered)
    assert not accepts("trigger-set", [{"query": " ", "should_trigger": True}, creator[1]])


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_every_published_schema_is_a_valid_draft_2020_12_schema(name: str) -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMAS[name])
