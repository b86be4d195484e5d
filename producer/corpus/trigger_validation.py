"""Trigger corpus validation (``evals/<skill>.triggers.json``). Pure: parsed JSON in, a TriggerSet out.

Two shapes are read: ours, ``{"skill_name": ..., "triggers": [{"id", "query", "should_trigger"}]}``,
and skill-creator's trigger set, a bare list of ``{"query", "should_trigger"}`` (ids are then the
1-based positions). Every violation is named in one pass, as the behavioural corpus's are: one
``BadCorpus`` leads with the first in document order and carries the others in its ``also``, one
``BLOCKED_BAD_CORPUS: <file>: <JSON path>: <what is wrong>`` line each. A document nested too deep,
or one that is neither an object nor a list, stops there.
"""

from __future__ import annotations

from typing import Any

from producer.corpus.rules import MAX_CORPUS_DEPTH, all_of, depth_problem
from schemas.errors import BadCorpus
from schemas.triggers import MAX_QUERY_CHARS, MAX_TRIGGERS, TRIGGERS_SUFFIX, TriggerCase, TriggerSet

TOP_KEYS = frozenset({"skill_name", "triggers"})
CASE_KEYS = frozenset({"id", "query", "should_trigger"})
CREATOR_KEYS = frozenset({"query", "should_trigger"})


def trigger_stem(file_name: str) -> str:
    """``evals/foo.triggers.json`` -> ``foo``."""
    base = file_name.replace("\\", "/").rsplit("/", 1)[-1]
    return base[: -len(TRIGGERS_SUFFIX)] if base.endswith(TRIGGERS_SUFFIX) else base


def validate_triggers(data: Any, file: str) -> TriggerSet:
    """Validate a parsed trigger corpus of either shape; the skill is the file's stem. Raises one
    :class:`BadCorpus` naming every violation found."""
    stem = trigger_stem(file)
    deep = depth_problem(data, MAX_CORPUS_DEPTH)
    if deep:
        raise BadCorpus(file, *deep)
    found: list[BadCorpus] = []
    if isinstance(data, list):
        cases = _cases(data, file, "$", creator=True, found=found)
    elif not isinstance(data, dict):
        raise BadCorpus(
            file, "$", f"top level is {type(data).__name__}; an object (or skill-creator's list) is required"
        )
    else:
        cases = _top(data, file, stem, found)
    if found:
        raise all_of(found)
    return TriggerSet(skill_name=stem, triggers=tuple(cases))


def _keys(given: set[str], wanted: frozenset[str]) -> str | None:
    missing, extra = sorted(wanted - given), sorted(given - wanted)
    what = "; ".join(p for p in (f"missing {missing}" if missing else "", f"unknown {extra}" if extra else "") if p)
    return f"{what} (exactly {', '.join(sorted(wanted))})" if what else None


def _top(data: dict[str, Any], file: str, stem: str, found: list[BadCorpus]) -> list[TriggerCase]:
    """Our shape's keys, its skill name and its cases; a missing or unknown key stops no other check."""
    problem = _keys(set(data), TOP_KEYS)
    if problem:
        found.append(BadCorpus(file, "$", problem))
    if "skill_name" in data and data["skill_name"] != stem:
        found.append(BadCorpus(file, "$.skill_name", f"{data['skill_name']!r} does not equal the file stem {stem!r}"))
    if "triggers" not in data:
        return []
    if not isinstance(data["triggers"], list):
        found.append(BadCorpus(file, "$.triggers", f"is {type(data['triggers']).__name__}; an array is required"))
        return []
    return _cases(data["triggers"], file, "$.triggers", creator=False, found=found)


def _cases(raw: list[Any], file: str, at: str, *, creator: bool, found: list[BadCorpus]) -> list[TriggerCase]:
    """Every case, each checked past a bad one; a repeated id is named whatever else is wrong."""
    if len(raw) > MAX_TRIGGERS:
        found.append(BadCorpus(file, at, f"has {len(raw)} queries; at most {MAX_TRIGGERS}"))
    seen: dict[int, int] = {}
    cases = []
    for index, item in enumerate(raw):
        where = f"{at}[{index}]"
        case_id = index + 1 if creator else item.get("id") if isinstance(item, dict) else None
        if isinstance(case_id, int) and not isinstance(case_id, bool) and case_id >= 0:
            if case_id in seen:
                found.append(
                    BadCorpus(file, f"{where}.id", f"id {case_id} repeats {at}[{seen[case_id]}].id; ids are unique")
                )
            seen.setdefault(case_id, index)
        case = _case(item, file, where, case_id, creator, found)
        if case is not None:
            cases.append(case)
    wants = [item.get("should_trigger") for item in raw if isinstance(item, dict)]
    if True not in wants:
        found.append(BadCorpus(file, at, "has no positive (should_trigger true); at least one is required"))
    if False not in wants:
        found.append(BadCorpus(file, at, "has no negative (should_trigger false); at least one is required"))
    return cases


def _case(item: Any, file: str, at: str, case_id: Any, creator: bool, found: list[BadCorpus]) -> TriggerCase | None:
    """One case, or None when it has a violation (each added to ``found``: keys, id, query, should_trigger)."""
    if not isinstance(item, dict):
        found.append(BadCorpus(file, at, f"is {type(item).__name__}; an object is required"))
        return None
    before = len(found)
    problem = _keys(set(item), CREATOR_KEYS if creator else CASE_KEYS)
    if problem:
        found.append(BadCorpus(file, at, problem))
    if not creator and "id" in item and (isinstance(case_id, bool) or not isinstance(case_id, int) or case_id < 0):
        found.append(BadCorpus(file, f"{at}.id", f"{case_id!r} is not a non-negative integer"))
    query = item.get("query", "")
    if "query" in item and not isinstance(query, str):
        found.append(BadCorpus(file, f"{at}.query", f"is {type(query).__name__}; a query is the text a user types"))
    elif "query" in item and not query.strip():
        found.append(BadCorpus(file, f"{at}.query", "is empty; a query is the text a user types"))
    elif isinstance(query, str) and len(query) > MAX_QUERY_CHARS:
        found.append(BadCorpus(file, f"{at}.query", f"is {len(query)} characters; at most {MAX_QUERY_CHARS}"))
    wanted = item.get("should_trigger", False)
    if not isinstance(wanted, bool):
        found.append(BadCorpus(file, f"{at}.should_trigger", f"{wanted!r} is not true or false"))
    if len(found) > before:
        return None
    return TriggerCase(id=case_id, query=query, should_trigger=wanted)
