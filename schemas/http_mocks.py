"""HTTP mocks: the answers a case declares for the agent's HTTP requests, and the record of them. Pure.

The sandbox has no network. A case with ``http_mocks`` gets a loopback HTTP proxy inside it
(``HTTP_PROXY``/``HTTPS_PROXY``) whose every request is answered outside the sandbox, by the
product: the first mock whose method and URL pattern match answers with its status and body;
any other request is refused with 403. Every request is recorded either way, by the product
(worker/http_mock.py), never from what the agent printed. See docs/design/mocks.md.
"""

from __future__ import annotations

from pydantic import Field

from schemas.base import FrozenModel
from schemas.patterns import PatternTimeout, bounded

METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "*"})
EXCERPT_CHARS = 500
"""How much of a request's or an answer's body the record keeps."""
REFUSED_STATUS = 403


class HttpMock(FrozenModel):
    """One declared answer: requests with ``method`` whose full URL matches ``url`` get it."""

    url: str
    """Python regular expression searched in the request's full URL (``https://host/path?query``)."""
    method: str = "GET"
    """HTTP method in capitals, or ``*`` for any."""
    status: int = Field(default=200, ge=100, le=599)
    """The answer's status code."""
    body: str = ""
    """The answer's body, sent as UTF-8."""
    headers: dict[str, str] = Field(default_factory=dict)
    """Extra answer headers (``Content-Type`` defaults to ``application/json`` when the body looks
    like JSON, else ``text/plain``)."""

    def matches(self, method: str, url: str) -> bool:
        """A URL the pattern gives up on is not this mock's: the request is refused, as unmatched."""
        if self.method not in ("*", method.upper()):
            return False
        try:
            return bounded(self.url).search(url) is not None
        except PatternTimeout:
            return False


class HttpCall(FrozenModel):
    """One request that reached the sandbox's HTTP proxy, as the product saw and answered it."""

    method: str
    url: str
    """The full URL; ``https://host:port`` alone for a tunnel the proxy could not open."""
    status: int
    """What the proxy answered (``REFUSED_STATUS`` for a request no mock answers)."""
    mocked: bool
    """True when a declared mock answered it."""
    request_body: str = ""
    """The first ``EXCERPT_CHARS`` characters of the request's body."""
    body: str = ""
    """The first ``EXCERPT_CHARS`` characters of the answer's body."""
    note: str = ""
    """Why the request was refused or failed, when it was."""


def excerpt(data: bytes | str) -> str:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    return text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS] + f"... [{len(text) - EXCERPT_CHARS} more]"


def find_mock(mocks: tuple[HttpMock, ...], method: str, url: str) -> HttpMock | None:
    """The first mock answering ``method url``, or None (the request is refused)."""
    return next((m for m in mocks if m.matches(method, url)), None)


def content_type(mock: HttpMock) -> str:
    if any(k.lower() == "content-type" for k in mock.headers):
        return next(v for k, v in mock.headers.items() if k.lower() == "content-type")
    return "application/json" if mock.body.lstrip()[:1] in ("{", "[") else "text/plain; charset=utf-8"


def refusal(method: str, url: str) -> str:
    return f"no HTTP mock answers {method} {url} (skill-eval: the sandbox has no network)\n"
