"""Deterministic assertions over the requests the sandbox's HTTP mock proxy recorded
(``Trajectory.http_calls``, extension ``deterministic-assertions``). Pure models; the checks live in
worker/grading/http_checks.py.

* ``http_call``: the number of requests matching ``method`` / ``url`` / ``body`` is within
  ``[min, max]``: called (the default ``min: 1``), not called (``max: 0``), called with a body
  (``body``), a count range;
* ``http_order``: the first request matching ``before`` comes before the first matching ``after``.

Refused requests count like answered ones: they are what the agent asked for.
"""

from __future__ import annotations

from typing import Literal

from schemas.base import FrozenModel
from schemas.checks_base import Check, CountedCheck


class HttpMatcher(FrozenModel):
    """Recorded requests of one method (``*``: any) whose URL (and request body) match."""

    url: str
    """Python regular expression searched in the full URL."""
    method: str = "*"
    """HTTP method in capitals, or ``*``."""
    body: str | None = None
    """Python regular expression searched in the recorded request body (its first 500 characters)."""


class HttpCallCheck(CountedCheck):
    """Passes when the number of matching requests is within ``[min, max]``."""

    kind: Literal["http_call"] = "http_call"
    request: HttpMatcher
    """Which requests are counted."""


class HttpOrderCheck(Check):
    """Passes when a request matching ``before`` precedes every request matching ``after``'s first."""

    kind: Literal["http_order"] = "http_order"
    before: HttpMatcher
    after: HttpMatcher
