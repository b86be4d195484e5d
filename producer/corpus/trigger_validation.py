"""Trigger corpus validation (``evals/<skill>.triggers.json``). Pure: parsed JSON in, a TriggerSet out.

Two shapes are read: ours, ``{"skill_name": ..., "triggers": [{"id", "query", "should_trigger"}]}``,
and skill-creator's trigger set, a bare list of ``{"query", "should_trigger"}`` (ids are then the
1-based positions). The first violation, in document order, is raised as
``BadCorpus(file, json_path, problem)``: ``BLOCKED_BAD_CORPUS: <file>: <JSON path>: <what is wrong>``.
"""

from __future__ import annotations

from typing import Any

from producer.corpus.rules import MAX_CORPUS_DEPTH, depth_problem
from schemas.errors import BadCorpus
from schemas.triggers import TRIGGERS_SUFFIX, TriggerCase, TriggerSet

TOP_KEYS = frozenset({"skill_name", "triggers"})
CASE_KEYS = frozenset({"id", "query", "should_trigger"})
CREATOR_KEYS = frozenset({"query", "should_trigger"})
MAX_QUERY_CHARS = 20_000
"""A query is what a user types; more is not a query."""
MAX_TRIGGERS = 5_000


def trigger_stem(file_name: str) -> str:
    """``evals/foo.triggers.json`` -> ``foo``."""
    base = file_name.replace("\\", "/").rsplit("/", 1)[-1]
    return base[: -len(TRIGGERS_SUFFIX)] if base.endswith(TRIGGERS_SUFFIX) else base


def validate_triggers(data: Any, file: str) -> TriggerSet:
    """Validate a parsed trigger corpus of either shape; the skill is the file's stem."""
    stem = trigger_stem(file)
    deep = depth_problem(data, MAX_CORPUS_DEPTH)
    if deep:
        raise BadCorpus(file, deep.partition(": ")[0], deep.partition(": ")[2])
    if isinstance(data, list):
        return _cases(data, file, "$", stem, creator=True)
    if not isinstance(data, dict):
        raise BadCorpus(
            file, "$", f"top level is {type(data).__name__}; an object (or skill-creator's list) is required"
        )
    keys = set(data)
    if keys != TOP_KEYS:
        missing, extra = sorted(TOP_KEYS - keys), sorted(keys - TOP_KEYS)
        what = "; ".join(p for p in (f"missing {missing}" if missing else "", f"unknown {extra}" if extra else "") if p)
        raise BadCorpus(file, "$", f"{what} (exactly skill_name, triggers)")
    if data["skill_name"] != stem:
        raise BadCorpus(file, "$.skill_name", f"{data['skill_name']!r} does not equal the file stem {stem!r}")
    if not isinstance(data["triggers"], list):
        raise BadCorpus(file, "$.triggers", f"is {type(data['triggers']).__name__}; an array is required")
    return _cases(data["triggers"], file, "$.triggers", stem, creator=False)


def _cases(raw: list[Any], file: str, at: str, skill: str, *, creator: bool) -> TriggerSet:
    if len(raw) > MAX_TRIGGERS:
        raise BadCorpus(file, at, f"has {len(raw)} queries; at most {MAX_TRIGGERS}")
    seen: dict[int, int] = {}
    cases = []
    for index, item in enumerate(raw):
        case = _case(item, file, f"{at}[{index}]", index, creator)
        if case.id in seen:
            raise BadCorpus(file, f"{at}[{index}].id", f"id {case.id} repeats {at}[{seen[case.id]}].id; ids are unique")
        seen[case.id] = index
        cases.append(case)
    if not any(c.should_trigger for c in cases):
        raise BadCorpus(file, at, "has no positive (should_trigger true); at least one is required")
    if all(c.should_trigger for c in cases):
        raise BadCorpus(file, at, "has no negative (should_trigger false); at least one is required")
    return TriggerSet(skill_name=skill, triggers=tuple(cases))


def _case(item: Any, file: str, at: str, index: int, creator: bool) -> TriggerCase:
    if not isinstance(item, dict):
        raise BadCorpus(file, at, f"is {type(item).__name__}; an object is required")
    wanted = CREATOR_KEYS if creator else CASE_KEYS
    if set(item) != wanted:
        missing, extra = sorted(wanted - set(item)), sorted(set(item) - wanted)
        what = "; ".join(p for p in (f"missing {missing}" if missing else "", f"unknown {extra}" if extra else "") if p)
        raise BadCorpus(file, at, f"{what} (exactly {', '.join(sorted(wanted))})")
    case_id = index + 1 if creator else item["id"]
    if isinstance(case_id, bool) or not isinstance(case_id, int) or case_id < 0:
        raise BadCorpus(file, f"{at}.id", f"{case_id!r} is not a non-negative integer")
    query = item["query"]
    if not isinstance(query, str) or not query.strip():
        raise BadCorpus(file, f"{at}.query", "is empty; a query is the text a user types")
    if len(query) > MAX_QUERY_CHARS:
        raise BadCorpus(file, f"{at}.query", f"is {len(query)} characters; at most {MAX_QUERY_CHARS}")
    if not isinstance(item["should_trigger"], bool):
        raise BadCorpus(file, f"{at}.should_trigger", f"{item['should_trigger']!r} is not true or false")
    return TriggerCase(id=case_id, query=query, should_trigger=item["should_trigger"])
