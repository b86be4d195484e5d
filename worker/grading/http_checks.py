"""Checks of ``http_call`` / ``http_order`` assertions (schemas/checks_http.py) on the requests the
product's HTTP mock proxy recorded. Pure; never reads anything the agent printed."""

from __future__ import annotations

from schemas.checks_http import HttpCallCheck, HttpMatcher, HttpOrderCheck
from schemas.http_mocks import HttpCall
from schemas.patterns import bounded
from schemas.trajectory import Trajectory
from schemas.verdict import AssertionVerdict
from schemas.words import noun
from worker.grading.check_verdict import check_verdict, cut


def matches(call: HttpCall, matcher: HttpMatcher) -> bool:
    if matcher.method not in ("*", call.method):
        return False
    if bounded(matcher.url).search(call.url) is None:
        return False
    return matcher.body is None or bounded(matcher.body).search(call.request_body) is not None


def quote(call: HttpCall) -> str:
    text = f"[http_call] {call.method} {call.url} -> {call.status}" + ("" if call.mocked else " (refused)")
    if call.request_body:
        text += f" body={call.request_body!r}"
    return cut(text)


def _described(matcher: HttpMatcher, count: int = 1) -> str:
    """``count`` requests the matcher matches, in words: ``1 GET request to /x/``, ``0 requests to /x/
    with a body matching /y/`` (any method is left unsaid)."""
    method = "" if matcher.method == "*" else f"{matcher.method} "
    body = f" with a body matching /{matcher.body}/" if matcher.body is not None else ""
    return f"{method}{noun(count, 'request')} to /{matcher.url}/{body}"


def check_http_call(check: HttpCallCheck, trajectory: Trajectory) -> AssertionVerdict:
    found = [c for c in trajectory.http_calls if matches(c, check.request)]
    said = f"{len(found)} {_described(check.request, len(found))}, allowed {check.allowed()}"
    if found:
        said += f"; first: {quote(found[0])}"
    elif not trajectory.http_calls:
        said += "; the proxy recorded no request"
    return check_verdict(check, check.admits(len(found)), said)


def check_http_order(check: HttpOrderCheck, trajectory: Trajectory) -> AssertionVerdict:
    calls = trajectory.http_calls
    first = next((i for i, c in enumerate(calls) if matches(c, check.before)), None)
    then = next((i for i, c in enumerate(calls) if matches(c, check.after)), None)
    if first is None:
        return check_verdict(check, False, f"absent: a {_described(check.before)}")
    if then is None:
        return check_verdict(check, False, f"absent: a {_described(check.after)}")
    if first < then:
        return check_verdict(check, True, f"{quote(calls[first])} ... then {quote(calls[then])}")
    return check_verdict(check, False, f"{quote(calls[then])} came before {quote(calls[first])}")
