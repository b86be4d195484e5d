"""The content-addressed artifact store (interface; implementations: issue 3 local, S3 later).

Keys are slash-separated relative strings such as ``snapshots/<sha256>.tar`` or
``runs/<run_id>/trajectories/<shard_id>.json``.
"""

from __future__ import annotations

from typing import Protocol


class ArtifactStore(Protocol):
    """Bytes by key. Writes are atomic (a reader never sees half an object)."""

    uri: str
    """How to reach this store from another process (``file:///...`` or ``s3://bucket/prefix``)."""

    def put(self, key: str, data: bytes) -> None: ...

    def get(self, key: str) -> bytes:
        """Raise :class:`schemas.errors.StoreError` when ``key`` is absent."""
        ...

    def exists(self, key: str) -> bool: ...

    def list(self, prefix: str) -> list[str]:
        """Keys under ``prefix``, sorted."""
        ...
