"""Fixtures of the attack tests: an offline model server per test, scripted by the test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from testkit.offline_server import OfflineModelServer


@pytest.fixture
def server() -> Iterator[OfflineModelServer]:
    with OfflineModelServer({"rules": []}) as running:
        yield running
