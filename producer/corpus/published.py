"""The JSON Schemas ``skill-eval schema`` publishes: the models' own (schemas/export.py), with the
corpus's required keys taken from the validator's key tables, and the trigger set's two shapes.

The corpus models describe a corpus after validation, when every default is filled in (an
assertion object's ``text`` is then always there); a file may leave those keys out. So the
published corpus schema requires, of each object, exactly what the validator requires of it, read
from the same tables the validator reads: a key made optional there is optional here, and a key
the validator accepts that no model holds is caught by the test that compares the two.
"""

from __future__ import annotations

import copy
from typing import Any

from producer.corpus import rules
from producer.corpus.checks import CHECK_KEYS, MATCHER_KEYS
from producer.corpus.trigger_validation import CREATOR_KEYS
from producer.corpus.validation_http import HTTP_CHECK_KEYS, MOCK_KEYS, REQUEST_MATCHER_KEYS
from producer.corpus.validation_plugin import PLUGIN_CHECK_KEYS, TOOL_MATCHER_KEYS
from schemas.export import json_schemas

Keys = tuple[frozenset[str], frozenset[str]]
"""An object's required keys and its optional ones, as the validator checks them."""

OBJECT_KEYS: dict[str, Keys] = {
    "Corpus": (rules.TOP_KEYS, rules.TOP_OPTIONAL_KEYS),
    "EvalCase": (rules.CASE_KEYS, rules.CASE_OPTIONAL_KEYS),
    "Fixture": (rules.FIXTURE_KEYS, rules.FIXTURE_OPTIONAL_KEYS),
    "ToolCallMatcher": MATCHER_KEYS,
    "ToolMatcher": TOOL_MATCHER_KEYS,
    "HttpMatcher": REQUEST_MATCHER_KEYS,
    "HttpMock": MOCK_KEYS,
}
"""A corpus object's model (by its schema title) -> the keys the validator wants of it."""
READER_SET: dict[str, frozenset[str]] = {"EvalCase": frozenset({"name"})}
"""A corpus object's fields that a reader of another format sets (a plugin eval case's folder
name), never a key of an ``evals.json``: left out of the published schema."""
CHECK_KIND_KEYS: dict[str, Keys] = {**CHECK_KEYS, **PLUGIN_CHECK_KEYS, **HTTP_CHECK_KEYS}
"""An assertion object's ``kind`` -> the keys the validator wants of it."""


def input_keys(node: dict[str, Any]) -> Keys | None:
    """The keys the validator wants of the corpus object a schema ``node`` describes (None: one it
    takes as the model does, such as a mocked server)."""
    kind = node.get("properties", {}).get("kind", {}).get("const")
    if kind in CHECK_KIND_KEYS:
        return CHECK_KIND_KEYS[kind]
    return OBJECT_KEYS.get(node.get("title", ""))


def corpus_schema(model_schema: dict[str, Any]) -> dict[str, Any]:
    """The corpus's model schema with each object's ``required`` the validator's."""
    out = copy.deepcopy(model_schema)
    for node in (out, *out.get("$defs", {}).values()):
        keys = input_keys(node)
        if keys is not None:
            node["required"] = sorted(keys[0])
        for key in READER_SET.get(node.get("title", ""), ()):
            node.get("properties", {}).pop(key, None)
    return out


def trigger_set_schema(model_schema: dict[str, Any]) -> dict[str, Any]:
    """The trigger set's model schema, or skill-creator's bare list of ``{query, should_trigger}``
    (ids are then the positions): the two shapes the validator reads, with the same limits."""
    ours = copy.deepcopy(model_schema)
    defs = ours.pop("$defs")
    case = defs["TriggerCase"]
    creator = {
        **case,
        "title": "CreatorTrigger",
        "description": "skill-creator's trigger: a query and whether the skill should fire (its id is its position).",
        "properties": {k: v for k, v in case["properties"].items() if k in CREATOR_KEYS},
        "required": sorted(CREATOR_KEYS),
    }
    bounds = {k: v for k, v in ours["properties"]["triggers"].items() if k in ("minItems", "maxItems")}
    creators = {"type": "array", "items": {"$ref": "#/$defs/CreatorTrigger"}, **bounds}
    return {
        "$defs": {**defs, "TriggerSet": ours, "CreatorTrigger": creator},
        "title": "TriggerSet",
        "description": f"{ours.get('description', '')} Our object, or skill-creator's bare list.",
        "anyOf": [{"$ref": "#/$defs/TriggerSet"}, creators],
    }


def published_schemas() -> dict[str, dict[str, Any]]:
    """Name -> the JSON Schema ``skill-eval schema`` prints (draft 2020-12)."""
    schemas = json_schemas()
    schemas["corpus"] = corpus_schema(schemas["corpus"])
    schemas["trigger-set"] = trigger_set_schema(schemas["trigger-set"])
    return schemas
