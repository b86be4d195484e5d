"""Parsing corpus text of every format under the same limits. Pure: takes text, returns data.

Our JSON, skill-creator's JSON and a plugin suite's YAML are parsed here, so the one depth
limit (:data:`producer.corpus.rules.MAX_CORPUS_DEPTH`), the one value-count limit
(:data:`producer.corpus.rules.MAX_CORPUS_VALUES`) and the one integer limit
(:data:`MAX_INT_DIGITS`) hold for all of them; a document past any is ``BadCorpus``
naming the file, never a RecursionError or ValueError from the parser. The size cap is the
reader's (:mod:`producer.corpus.files`). Errors name where the problem is, never the text.
"""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

from producer.corpus.rules import MAX_CORPUS_DEPTH, MAX_CORPUS_VALUES, MAX_PATH_KEY_CHARS, depth_problem
from schemas.errors import BadCorpus

MAX_INT_DIGITS = 64
"""An integer in a corpus is an id or a count; Python refuses to parse more than 4,300 digits."""
_YAML_INT = re.compile(r"[-+]?[0-9][0-9_]*")


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _TooManyDigits(len(text.lstrip("-")))
    return int(text)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object whose keys repeat is refused: a parser keeps the last, a reader may see the first."""
    data = dict(pairs)
    if len(data) < len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _RepeatedKey(key)
            seen.add(key)
    return data


class _RepeatedKey(Exception):
    def __init__(self, key: str, line: int | None = None) -> None:
        shown = key if len(key) <= MAX_PATH_KEY_CHARS else key[:MAX_PATH_KEY_CHARS] + "…"
        at = f" (line {line})" if line else ""
        super().__init__(f"an object repeats the key {shown!r}{at}; keys are unique")


class _UniqueKeyLoader(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML ships no types
    """The safe loader, refusing a mapping whose keys repeat (it would keep the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        data: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        if len(data) < len(node.value):
            seen: set[Any] = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                if key in seen:
                    raise _RepeatedKey(str(key), key_node.start_mark.line + 1)
                seen.add(key)
        return data


class _TooManyDigits(Exception):
    def __init__(self, digits: int) -> None:
        super().__init__(f"an integer of {digits} digits; at most {MAX_INT_DIGITS} are read")


def parse_json(text: str, file: str) -> Any:
    """``text`` as JSON; ``BadCorpus`` when it is not JSON, nests too deep, holds too many values,
    a huge integer or an object with a repeated key."""
    try:
        data = json.loads(text, parse_int=_bounded_int, object_pairs_hook=_unique_keys)
    except RecursionError as exc:
        raise BadCorpus(file, "$", f"nested deeper than {MAX_CORPUS_DEPTH} levels") from exc
    except (_TooManyDigits, _RepeatedKey) as exc:
        raise BadCorpus(file, "$", str(exc)) from None
    except json.JSONDecodeError as exc:
        raise BadCorpus(file, "$", f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    deep = depth_problem(data)
    if deep:
        raise BadCorpus(file, *deep)
    return data


def parse_yaml(text: str, file: str, where: str) -> Any:
    """``text`` as YAML (the safe loader); ``BadCorpus`` at ``where`` past the same limits as JSON.

    The event stream is checked first, iteratively: the composer that builds the data is
    recursive, and an alias could make a small document a large graph, so aliases are refused.
    """
    try:
        depth = values = 0
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, (yaml.ScalarEvent, yaml.CollectionStartEvent)):
                values += 1
                if values > MAX_CORPUS_VALUES:
                    raise BadCorpus(file, where, f"more than {MAX_CORPUS_VALUES} values; a corpus is not bulk data")
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_CORPUS_DEPTH:
                    raise BadCorpus(file, where, f"nested deeper than {MAX_CORPUS_DEPTH} levels")
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
            elif isinstance(event, yaml.AliasEvent):
                raise BadCorpus(file, where, "uses a YAML alias; corpus YAML is read without aliases")
            elif isinstance(event, yaml.ScalarEvent) and event.style is None and _YAML_INT.fullmatch(event.value):
                digits = len(event.value.lstrip("-+").replace("_", ""))
                if digits > MAX_INT_DIGITS:
                    raise BadCorpus(file, where, str(_TooManyDigits(digits)))
        return yaml.load(text, Loader=_UniqueKeyLoader)  # the safe loader, with unique keys
    except _RepeatedKey as exc:
        raise BadCorpus(file, where, str(exc)) from None
    except yaml.YAMLError as exc:
        raise BadCorpus(file, where, f"not YAML: {str(exc).splitlines()[0]}") from None
    except (RecursionError, ValueError) as exc:  # a limit the checks above did not foresee
        raise BadCorpus(file, where, f"cannot be read: {type(exc).__name__}") from None
