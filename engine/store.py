"""The content-addressed artifact store: a local directory or an S3 bucket, behind one Protocol.

Keys are slash-separated relative strings such as ``snapshots/<sha256>.tar`` or
``runs/<run_id>/trajectories/<shard_id>.json``. ``open_store(uri)`` turns the URI a
message carries (``/path``, ``file:///path``, ``s3://bucket/prefix``) back into a store,
so producer and workers on different hosts reach the same bytes.

Every failure is a :class:`schemas.errors.StoreError` whose detail names the key.
"""

from __future__ import annotations

import io
import os
import re
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, Protocol
from urllib.parse import unquote, urlparse

from schemas.errors import ArtifactMissing, StoreError


class ArtifactStore(Protocol):
    """Bytes by key. Writes are atomic (a reader never sees half an object)."""

    uri: str
    """How to reach this store from another process (``file:///...`` or ``s3://bucket/prefix``)."""

    def put(self, key: str, data: bytes) -> None: ...

    def get(self, key: str) -> bytes:
        """Raise :class:`schemas.errors.StoreError` when ``key`` is absent."""
        ...

    def put_new(self, key: str, data: bytes) -> bool:
        """Write ``key`` only if it does not exist yet; return whether this call wrote it.

        First writer wins, atomically, even across hosts: two deliveries of one attempt
        that both finish can never both commit a final record.
        """
        ...

    def exists(self, key: str) -> bool: ...

    def children(self, prefix: str) -> list[str]:
        """Names of the folders right under ``prefix`` (which ends with ``/``), sorted: one level,
        without listing every key below (the runs of a store, not their millions of records)."""
        ...

    def list(self, prefix: str) -> list[str]:
        """Keys under ``prefix``, sorted."""
        ...

    def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        """The objects of ``keys`` that exist, read in batches; absent keys are left out."""
        ...


RECORD_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
"""What a run id or a shard id looks like (one key segment, never ``..``): a name given from
outside (a URL, a label command) that does not match never names a key in the store."""


def validate_key(key: str) -> str:
    """Return ``key`` when it is a safe relative key; raise ``StoreError`` naming it otherwise.

    Safe means: non-empty, relative, slash-separated, no empty, ``.`` or ``..`` segment, no
    backslash or NUL. The same rule holds for every store so a key that works locally
    works on S3 and cannot climb out of a local root.
    """
    if not isinstance(key, str) or not key:
        raise StoreError(f"invalid key {key!r}: empty")
    if key.startswith("/") or "\\" in key or "\x00" in key:
        raise StoreError(f"invalid key {key!r}: must be a relative slash-separated path")
    if any(part in ("", ".", "..") for part in key.split("/")):
        raise StoreError(f"invalid key {key!r}: empty, '.' or '..' segment")
    return key


def _validate_prefix(prefix: str) -> str:
    # A listing prefix may be empty or end with "/", but never climb.
    if prefix == "":
        return prefix
    validate_key(prefix.rstrip("/") or "x")
    return prefix


MULTIPART_THRESHOLD = 64 * 1024 * 1024
"""Objects at least this large go to S3 in parts (and are read back the same way by boto3)."""
_PARALLEL_READS = 16


class LocalStore:
    """A directory of files; ``put`` writes a temp file in the target folder then ``os.replace``."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root).resolve()
        self.uri = self.root.as_uri()

    def _path(self, key: str) -> Path:
        return self.root.joinpath(*PurePosixPath(validate_key(key)).parts)

    def put(self, key: str, data: bytes) -> None:
        self._write(key, data, exclusive=False)

    def put_new(self, key: str, data: bytes) -> bool:
        return self._write(key, data, exclusive=True)

    def _write(self, key: str, data: bytes, *, exclusive: bool) -> bool:
        """Write through a temp file in the target folder, so a reader never sees half an object.

        ``exclusive`` publishes with ``link`` (fails when the name exists) instead of
        ``replace``: the first writer wins and a later one returns False.
        """
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".part")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                if not exclusive:
                    os.replace(tmp, path)
                    return True
                try:
                    os.link(tmp, path)
                except FileExistsError:
                    return False
                return True
            finally:
                Path(tmp).unlink(missing_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot write {key!r} to {self.uri}: {exc}") from exc

    def get(self, key: str) -> bytes:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError as exc:
            raise ArtifactMissing(f"no artifact {key!r} in {self.uri}") from exc
        except OSError as exc:
            raise StoreError(f"cannot read {key!r} from {self.uri}: {exc}") from exc

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        found = {}
        for key in keys:
            try:
                found[key] = self._path(key).read_bytes()
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise StoreError(f"cannot read {key!r} from {self.uri}: {exc}") from exc
        return found

    def children(self, prefix: str) -> list[str]:
        _validate_prefix(prefix)
        top = self.root.joinpath(*PurePosixPath(prefix).parts) if prefix else self.root
        try:
            return sorted(e.name for e in os.scandir(top) if e.is_dir() and not e.name.startswith("."))
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StoreError(f"cannot list {prefix!r} in {self.uri}: {exc}") from exc

    def list(self, prefix: str) -> list[str]:
        _validate_prefix(prefix)
        # Walk only the deepest folder the prefix names, not the whole store.
        folder = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        top = self.root.joinpath(*PurePosixPath(folder).parts) if folder else self.root
        if not top.is_dir():
            return []
        keys = []
        for dirpath, _dirs, files in os.walk(top):
            rel = Path(dirpath).relative_to(self.root).as_posix()
            for name in files:
                if name.startswith(".tmp-") and name.endswith(".part"):
                    continue  # an in-flight write, not an artifact
                key = name if rel == "." else f"{rel}/{name}"
                if key.startswith(prefix):
                    keys.append(key)
        return sorted(keys)


class S3Store:
    """An S3 bucket under a key prefix (boto3). S3 ``PutObject`` is atomic per object.

    The endpoint comes from ``endpoint_url``, else ``SKILL_EVAL_S3_ENDPOINT``, else
    ``AWS_ENDPOINT_URL``, else AWS itself; credentials come from boto3's usual chain.
    """

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        endpoint_url: str | None = None,
        *,
        multipart_threshold: int = MULTIPART_THRESHOLD,
        max_attempts: int = 10,
        connect_timeout_s: float = 60.0,
    ) -> None:
        import boto3  # an I/O edge: only this class needs it

        self.bucket = bucket
        self.prefix = prefix.strip("/")
        if self.prefix:
            validate_key(self.prefix)
        from boto3.s3.transfer import TransferConfig
        from botocore.config import Config

        endpoint = endpoint_url or os.environ.get("SKILL_EVAL_S3_ENDPOINT") or os.environ.get("AWS_ENDPOINT_URL")
        self.uri = f"s3://{bucket}/{self.prefix}" if self.prefix else f"s3://{bucket}"
        self._where = f"{self.uri} (endpoint {endpoint})" if endpoint else self.uri
        self._bucket_seen = False
        # Adaptive retries back off on throttling (SlowDown, 503) with a client-side rate
        # limit; the pool is sized for get_many's parallel reads.
        config = Config(
            retries={"mode": "adaptive", "max_attempts": max_attempts},
            connect_timeout=connect_timeout_s,
            max_pool_connections=_PARALLEL_READS * 2,
        )
        self._client: Any = boto3.client("s3", endpoint_url=endpoint, config=config)
        self._multipart_threshold = multipart_threshold
        self._transfer = TransferConfig(
            multipart_threshold=multipart_threshold, multipart_chunksize=multipart_threshold
        )

    def _key(self, key: str) -> str:
        validate_key(key)
        return f"{self.prefix}/{key}" if self.prefix else key

    def put(self, key: str, data: bytes) -> None:
        try:
            if len(data) >= self._multipart_threshold:  # large snapshots: parallel parts, each retried alone
                self._client.upload_fileobj(io.BytesIO(data), self.bucket, self._key(key), Config=self._transfer)
            else:
                self._client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data)
        except Exception as exc:  # botocore raises many unrelated types; all mean "not written"
            raise StoreError(f"cannot write {key!r} to {self._where}: {exc}") from exc

    def put_new(self, key: str, data: bytes) -> bool:
        """A conditional ``PutObject`` (``If-None-Match: *``): S3 answers 412 when the key exists."""
        try:
            self._client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data, IfNoneMatch="*")
            return True
        except Exception as exc:
            code = str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))
            if code in ("PreconditionFailed", "412", "ConditionalRequestConflict", "409"):
                return False
            raise StoreError(f"cannot write {key!r} to {self._where}: {exc}") from exc

    def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        """Parallel ``GetObject`` calls: S3 has no batch read, and one at a time is latency-bound."""

        def fetch(key: str) -> tuple[str, bytes | None]:
            try:
                return key, self.get(key)
            except ArtifactMissing:
                return key, None

        with ThreadPoolExecutor(max_workers=_PARALLEL_READS) as pool:
            return {k: v for k, v in pool.map(fetch, keys) if v is not None}

    def get(self, key: str) -> bytes:
        try:
            body: bytes = self._client.get_object(Bucket=self.bucket, Key=self._key(key))["Body"].read()
            return body
        except self._client.exceptions.NoSuchKey as exc:
            raise ArtifactMissing(f"no artifact {key!r} in {self.uri}") from exc
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(f"cannot read {key!r} from {self._where}: {exc}") from exc

    def open(self, key: str) -> BinaryIO:
        """The object's bytes as a stream, read as they arrive; a failed read is a ``StoreError``."""
        try:
            body = self._client.get_object(Bucket=self.bucket, Key=self._key(key))["Body"]
        except self._client.exceptions.NoSuchKey as exc:
            raise ArtifactMissing(f"no artifact {key!r} in {self.uri}") from exc
        except Exception as exc:
            raise StoreError(f"cannot read {key!r} from {self._where}: {exc}") from exc
        return io.BufferedReader(_StoreStream(body, f"cannot read {key!r} from {self._where}"), 1024 * 1024)

    def exists(self, key: str) -> bool:
        full = self._key(key)
        try:
            self._client.head_object(Bucket=self.bucket, Key=full)
            self._bucket_seen = True
            return True
        except Exception as exc:
            code = str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))
            if code in ("404", "NoSuchKey", "NotFound"):
                self._check_bucket()
                return False
            raise StoreError(f"cannot check {key!r} in {self._where}: {exc}") from exc

    def _check_bucket(self) -> None:
        """``StoreError`` naming the bucket when it does not exist: a HEAD's 404 says the same for a
        missing key and a missing bucket, and "no such run" would blame the run. Asked once per store."""
        if self._bucket_seen:
            return
        try:
            self._client.head_bucket(Bucket=self.bucket)
        except Exception as exc:
            code = str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))
            if code in ("404", "NoSuchBucket", "NotFound"):
                raise StoreError(f"no bucket {self.bucket!r} at {self._where}: create it or fix the store URI") from exc
            raise StoreError(f"cannot check the bucket of {self._where}: {exc}") from exc
        self._bucket_seen = True

    def children(self, prefix: str) -> list[str]:
        _validate_prefix(prefix)
        full = f"{self.prefix}/{prefix}" if self.prefix else prefix
        names: list[str] = []
        try:
            paginator = self._client.get_paginator("list_objects_v2")
            for page in paginator.paginate(Bucket=self.bucket, Prefix=full, Delimiter="/"):
                names.extend(p["Prefix"][len(full) :].rstrip("/") for p in page.get("CommonPrefixes", []))
        except Exception as exc:
            raise StoreError(f"cannot list {prefix!r} in {self._where}: {exc}") from exc
        return sorted(n for n in names if n)

    def list(self, prefix: str) -> list[str]:
        _validate_prefix(prefix)
        full = f"{self.prefix}/{prefix}" if self.prefix else prefix
        strip = len(self.prefix) + 1 if self.prefix else 0
        keys: list[str] = []
        try:
            paginator = self._client.get_paginator("list_objects_v2")
            for page in paginator.paginate(Bucket=self.bucket, Prefix=full):
                keys.extend(obj["Key"][strip:] for obj in page.get("Contents", []))
        except Exception as exc:
            raise StoreError(f"cannot list {prefix!r} in {self._where}: {exc}") from exc
        return sorted(keys)


class _StoreStream(io.RawIOBase):
    """An S3 body whose network failures are ``StoreError``, not whatever botocore raised."""

    def __init__(self, body: Any, what: str) -> None:
        self._body, self._what = body, what

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        try:
            data: bytes = self._body.read(len(buffer))
        except Exception as exc:
            raise StoreError(f"{self._what}: {exc}") from exc
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._body.close()
        super().close()


def open_store(uri: str, *, waited_on: bool = False) -> ArtifactStore:
    """Open the store a URI names: ``/path`` or ``file:///path`` -> local, ``s3://bucket/prefix`` -> S3.

    ``waited_on``: a command a user waits on (``status``, ``report``, ``export``): an S3 endpoint
    that does not answer fails in seconds instead of after a worker's patient retries.
    Raise ``StoreError`` for any other scheme or a bucket-less S3 URI.
    """
    if uri.startswith("/"):
        return LocalStore(Path(uri))
    parsed = urlparse(uri)
    if parsed.scheme == "file" and parsed.netloc in ("", "localhost"):
        return LocalStore(Path(unquote(parsed.path)))
    if parsed.scheme == "s3":
        if not parsed.netloc:
            raise StoreError(f"invalid store URI {uri!r}: no bucket")
        if waited_on:
            return S3Store(parsed.netloc, parsed.path.strip("/"), max_attempts=2, connect_timeout_s=3.0)
        return S3Store(parsed.netloc, parsed.path.strip("/"))
    raise StoreError(f"invalid store URI {uri!r}: expected /path, file:///path or s3://bucket/prefix")
