"""Validation of a case's ``http_mocks`` and of the ``http_call`` / ``http_order`` assertion objects
(schemas/http_mocks.py, schemas/checks_http.py). Pure; called from producer/corpus/validation.py, so a bad
declaration is ``BLOCKED_BAD_CORPUS`` naming its place before anything runs (``validate``, ``--dry-run``).
"""

from __future__ import annotations

from typing import Any

from producer.corpus.rules import key_problem
from producer.corpus.validation_plugin import Fail, _pattern, checked_head, count_range
from schemas.checks_http import HttpCallCheck, HttpMatcher, HttpOrderCheck
from schemas.http_mocks import METHODS, HttpMock
from schemas.words import count_bound

MAX_HTTP_MOCKS = 100
MAX_BODY_CHARS = 1_000_000
HTTP_CHECK_KEYS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "http_call": (frozenset({"kind", "request"}), frozenset({"text", "min", "max", "weight"})),
    "http_order": (frozenset({"kind", "before", "after"}), frozenset({"text", "weight"})),
}
MOCK_KEYS = (frozenset({"url"}), frozenset({"method", "status", "body", "headers"}))
REQUEST_MATCHER_KEYS = (frozenset({"url"}), frozenset({"method", "body"}))


def _method(raw: Any, at: str, fail: Fail) -> str:
    if not isinstance(raw, str) or raw.upper() not in METHODS:
        raise fail(at, f"{raw!r} is not one of: {', '.join(sorted(METHODS))}")
    return raw.upper()


def _object(raw: Any, at: str, fail: Fail, what: str, keys: tuple[frozenset[str], frozenset[str]]) -> dict[str, Any]:
    """``raw`` when it is an object with the required ``keys[0]`` and no key outside both sets."""
    if not isinstance(raw, dict):
        raise fail(at, f"is {type(raw).__name__}; {what} object is required")
    problem = key_problem(raw, *keys)
    if problem:
        raise fail(at, problem)
    return raw


def _mock(raw: Any, at: str, fail: Fail) -> HttpMock:
    raw = _object(raw, at, fail, "an HTTP mock", MOCK_KEYS)
    url = _pattern(raw["url"], f"{at}.url", fail)
    method = _method(raw.get("method", "GET"), f"{at}.method", fail)
    status = raw.get("status", 200)
    if isinstance(status, bool) or not isinstance(status, int) or not 100 <= status <= 599:
        raise fail(f"{at}.status", f"{status!r} is not an HTTP status (100..599)")
    body = raw.get("body", "")
    if not isinstance(body, str) or len(body) > MAX_BODY_CHARS:
        raise fail(f"{at}.body", f"must be a string of at most {MAX_BODY_CHARS} characters")
    headers = raw.get("headers", {})
    ok = isinstance(headers, dict) and all(
        isinstance(k, str)
        and isinstance(v, str)
        and k.strip()
        and "\n" not in k + v
        and "\r" not in k + v
        and ":" not in k
        for k, v in headers.items()
    )
    if not ok:
        raise fail(f"{at}.headers", "must map header names to one-line string values")
    return HttpMock(url=url, method=method, status=status, body=body, headers=headers)


def case_http_mocks(raw: Any, at: str, fail: Fail) -> tuple[HttpMock, ...]:
    """A case's ``http_mocks``: at most 100 answers, each URL pattern compiled."""
    if not isinstance(raw, list) or len(raw) > MAX_HTTP_MOCKS:
        raise fail(at, f"must be an array of at most {MAX_HTTP_MOCKS} HTTP mocks")
    return tuple(_mock(item, f"{at}[{i}]", fail) for i, item in enumerate(raw))


def _matcher(raw: Any, at: str, fail: Fail) -> HttpMatcher:
    raw = _object(raw, at, fail, "a request matcher", REQUEST_MATCHER_KEYS)
    body = _pattern(raw["body"], f"{at}.body", fail) if "body" in raw else None
    return HttpMatcher(
        url=_pattern(raw["url"], f"{at}.url", fail),
        method=_method(raw.get("method", "*"), f"{at}.method", fail),
        body=body,
    )


def _said(m: HttpMatcher) -> str:
    return f"{'' if m.method == '*' else m.method + ' '}/{m.url}/" + (
        f" with a body matching /{m.body}/" if m.body else ""
    )


def validate_http_check(raw: dict[str, Any], at: str, fail: Fail) -> HttpCallCheck | HttpOrderCheck:
    """One ``http_call`` or ``http_order`` object; its regexes must compile, ``max`` not below ``min``."""
    kind = raw["kind"]
    weight = checked_head(raw, HTTP_CHECK_KEYS[kind], at, fail)
    if kind == "http_order":
        before, after = (_matcher(raw[k], f"{at}.{k}", fail) for k in ("before", "after"))
        text = raw.get("text") or f"The agent requests {_said(before)} before {_said(after)}"
        return HttpOrderCheck(text=text, before=before, after=after, weight=weight)
    request = _matcher(raw["request"], f"{at}.request", fail)
    low, high = count_range(raw, at, fail)
    said = f"never requests {_said(request)}" if high == 0 else f"requests {_said(request)} {count_bound(low, high)}"
    text = raw.get("text") or f"The agent {said}"
    return HttpCallCheck(text=text, request=request, min=low, max=high, weight=weight)
