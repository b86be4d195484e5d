"""Names of the files reports and exports write, bounded and apart from one another. Pure."""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable


def file_slug(text: str, sep: str = "_", limit: int = 40, *, exact: bool = False) -> str:
    """``text`` (a model, executor or variant name) as a bounded piece of a file name.

    A ``cmd:`` executor's whole command is its name, and a file name over 255 bytes cannot be
    written, so a long name keeps a safe prefix plus a hash of the whole, which keeps two long
    names that share the prefix apart. ``exact``: a name changed at all (``a/b`` and ``a_b``, or
    one with a leading or trailing ``-`` or ``.``) gets the hash too, so no two names share a slug.
    """
    safe = re.sub(r"[^A-Za-z0-9.-]+", sep, text)
    unchanged = safe == text and safe.strip(sep + ".") == safe
    if len(safe) <= limit and (unchanged or not exact):
        return safe
    return f"{safe[:limit].strip(sep + '.')}{sep}{name_digest(text)}".lstrip(sep)


def distinct_slugs(names: Iterable[str]) -> dict[str, str]:
    """Each name's :func:`file_slug`, readable where it can be: names that would share one (``a/b``
    beside ``a_b``) get the ``exact`` slug, which hashes every name the slug changed."""
    names = set(names)
    plain = {name: file_slug(name) for name in names}
    shared = Counter(plain.values())
    return {name: file_slug(name, exact=True) if shared[plain[name]] > 1 else plain[name] for name in names}


def name_digest(text: str) -> str:
    """10 hex characters of a SHA-256 of ``text`` (lone surrogates from a recording included)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:10]
