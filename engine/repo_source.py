"""Where a repo under test comes from: a local checkout, a tree of S3 objects, or a tar on S3.

``--repo`` takes a local path, ``s3://bucket/prefix/`` (every object under the prefix is a
file of the tree, its key relative to the prefix its path) or ``s3://bucket/key.tar.gz``
(``.tar``, ``.tgz`` and ``.tar.gz``). Remote repos are fetched into a local folder once,
then go through the very same loading, validation and snapshot code as a checkout.

The remote bytes are the repo's, so they are untrusted: object keys and tar member names
are checked like snapshot members (no absolute names, no ``..``, nothing through a link).
An archive is read as a stream and bounded by what it unpacks to (:mod:`engine.archive`):
hard links, sparse members and a running total past ``MAX_REPO_BYTES`` are refused before a
byte is written, each ``BLOCKED_BAD_REPO: <uri>: <member>: <why>``.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from urllib.parse import urlparse

from engine.archive import extract_archive
from engine.store import S3Store, validate_key
from schemas.errors import BadRepo, StoreError

MAX_REPO_BYTES = 4 * 1024**3
"""The most a remote repo may unpack to; a bigger one is refused with a StoreError naming it."""
_ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar")


def is_remote(spec: str) -> bool:
    """Whether ``--repo`` names an S3 location rather than a local path."""
    return spec.startswith("s3://")


@contextlib.contextmanager
def local_repo(spec: str) -> Iterator[Path]:
    """Yield a local folder holding the repo ``spec`` names; a fetched copy is removed afterwards."""
    if not is_remote(spec):
        yield Path(spec)
        return
    with tempfile.TemporaryDirectory(prefix="skill-eval-repo-") as tmp:
        yield fetch_repo(spec, Path(tmp))


def fetch_repo(uri: str, dest: Path, *, max_bytes: int = MAX_REPO_BYTES) -> Path:
    """Fetch the S3 repo ``uri`` into the empty folder ``dest``; return the repo's root folder.

    Raise ``StoreError`` naming the URI (or the object) when it is absent, empty, cannot be
    read, or a tree larger than ``max_bytes`` or with an unsafe key; ``BadRepo``
    (``<uri>: <member>: <why>``) for an archive member refused by :mod:`engine.archive`.
    """
    parsed = urlparse(uri)
    bucket, key = parsed.netloc, parsed.path.lstrip("/")
    if parsed.scheme != "s3" or not bucket:
        raise StoreError(f"invalid repo URI {uri!r}: expected s3://bucket/prefix/ or s3://bucket/key.tar.gz")
    dest.mkdir(parents=True, exist_ok=True)
    if key.endswith(_ARCHIVE_SUFFIXES):
        return _fetch_archive(uri, bucket, key, dest, max_bytes)
    return _fetch_tree(uri, bucket, key.strip("/"), dest, max_bytes)


def _fetch_tree(uri: str, bucket: str, prefix: str, dest: Path, max_bytes: int) -> Path:
    store = S3Store(bucket, prefix)
    keys = [k for k in store.list("") if not k.endswith("/")]  # "folder" marker objects hold nothing
    if not keys:
        raise StoreError(f"repo {uri!r}: no objects under this prefix")
    total = 0
    for batch_start in range(0, len(keys), 256):
        batch = keys[batch_start : batch_start + 256]
        for key, data in store.get_many(batch).items():
            total += len(data)
            if total > max_bytes:
                raise StoreError(f"repo {uri!r}: larger than {max_bytes} bytes")
            _write_member(dest, key, data, uri)
    return dest


def _write_member(dest: Path, key: str, data: bytes, uri: str) -> None:
    try:
        rel = PurePosixPath(validate_key(key))
    except StoreError as exc:
        raise StoreError(f"repo {uri!r}: unsafe object key {key!r}") from exc
    host = dest
    for part in rel.parent.parts:  # every parent is a folder made here, never a link
        host = host / part
        if host.is_symlink():
            raise StoreError(f"repo {uri!r}: object {key!r} goes through a link")
        if os.path.lexists(host) and not host.is_dir():
            raise StoreError(f"repo {uri!r}: {rel.parent.as_posix()!r} is both an object and a folder of objects")
        host.mkdir(exist_ok=True)
    if (dest / rel).is_dir():
        raise StoreError(f"repo {uri!r}: {key!r} is both an object and a folder of objects")
    try:
        fd = os.open(dest / rel, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        raise StoreError(f"repo {uri!r}: cannot write object {key!r}: {exc}") from exc
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _fetch_archive(uri: str, bucket: str, key: str, dest: Path, max_bytes: int) -> Path:
    def fail(member: str, why: str) -> Exception:
        return BadRepo(f"{uri}: {member}", why)

    with contextlib.closing(S3Store(bucket, "").open(key)) as body:
        extract_archive(body, dest, fail, max_bytes=max_bytes, gzip=not key.endswith(".tar"))
    entries = list(dest.iterdir())
    # `tar czf repo.tar.gz myrepo/` wraps the tree in one folder: that folder is the repo.
    if len(entries) == 1 and entries[0].is_dir() and not entries[0].is_symlink():
        return entries[0]
    return dest
