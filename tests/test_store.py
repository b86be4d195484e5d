"""The artifact store contract, run against the local directory store and S3 over real HTTP (moto)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.redis_server import free_port
from engine.store import ArtifactStore, LocalStore, S3Store, open_store
from schemas.errors import StoreError

_bucket_counter = iter(range(10_000))


def _new_bucket(endpoint: str) -> str:
    import boto3

    name = f"artifacts-{next(_bucket_counter)}-{threading.get_ident() % 1000}"
    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=name)
    return name


@pytest.fixture(params=["local", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ArtifactStore:
    if request.param == "local":
        return LocalStore(tmp_path / "store")
    endpoint = request.getfixturevalue("aws_env")
    return S3Store(_new_bucket(endpoint), "team/run-1")


def test_a_put_object_reads_back_byte_for_byte(store: ArtifactStore) -> None:
    data = bytes(range(256)) * 1000
    store.put("snapshots/abc.tar", data)
    assert store.get("snapshots/abc.tar") == data
    assert store.exists("snapshots/abc.tar")


def test_a_second_put_replaces_the_object(store: ArtifactStore) -> None:
    store.put("a/b.json", b"one")
    store.put("a/b.json", b"two")
    assert store.get("a/b.json") == b"two"


def test_a_missing_key_is_a_store_error_naming_the_key(store: ArtifactStore) -> None:
    assert not store.exists("runs/r1/missing.json")
    with pytest.raises(StoreError, match=r"runs/r1/missing\.json"):
        store.get("runs/r1/missing.json")


def test_list_returns_the_keys_under_a_prefix_sorted(store: ArtifactStore) -> None:
    for key in ("runs/r1/b.json", "runs/r1/a.json", "runs/r2/c.json", "snapshots/x.tar"):
        store.put(key, b"x")
    assert store.list("runs/r1/") == ["runs/r1/a.json", "runs/r1/b.json"]
    assert store.list("runs/") == ["runs/r1/a.json", "runs/r1/b.json", "runs/r2/c.json"]
    assert store.list("nothing/") == []


@pytest.mark.parametrize("key", ["/etc/passwd", "../escape", "a/../../b", "a//b", "", "a\\b", "./a"])
def test_unsafe_keys_are_refused_before_any_io(store: ArtifactStore, key: str) -> None:
    with pytest.raises(StoreError):
        store.put(key, b"x")
    with pytest.raises(StoreError):
        store.get(key)


def test_a_store_reopened_from_its_uri_sees_the_same_objects(store: ArtifactStore) -> None:
    store.put("k/v.txt", b"payload")
    again = open_store(store.uri)
    assert again.get("k/v.txt") == b"payload"
    assert again.uri == store.uri


def test_a_local_write_leaves_no_temp_file_behind(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "s")
    store.put("a/b", b"1")
    assert sorted(p.name for p in (tmp_path / "s" / "a").iterdir()) == ["b"]


def test_a_local_write_that_fails_is_a_store_error_naming_the_key(tmp_path: Path) -> None:
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "a").write_text("a file where a folder is needed")
    with pytest.raises(StoreError, match="'a/b'"):
        LocalStore(tmp_path / "s").put("a/b", b"1")


def test_open_store_understands_paths_file_uris_and_s3_uris(tmp_path: Path, aws_env: str) -> None:
    assert isinstance(open_store(str(tmp_path)), LocalStore)
    local = open_store(f"file://{tmp_path}")
    assert isinstance(local, LocalStore) and local.root == tmp_path.resolve()
    s3 = open_store("s3://bucket-x/some/prefix")
    assert isinstance(s3, S3Store) and (s3.bucket, s3.prefix) == ("bucket-x", "some/prefix")


@pytest.mark.parametrize("uri", ["http://example.invalid/x", "s3:///no-bucket", "relative/path"])
def test_open_store_refuses_unknown_uris(uri: str) -> None:
    with pytest.raises(StoreError, match="invalid store URI"):
        open_store(uri)


def test_an_unreachable_s3_endpoint_is_a_store_error(aws_env: str) -> None:
    dead = S3Store("b", "", endpoint_url=f"http://127.0.0.1:{free_port()}")
    dead._client.meta.config.retries = {"max_attempts": 0}
    with pytest.raises(StoreError, match="'k'"):
        dead.put("k", b"x")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.lists(st.sampled_from([*"ab./\\~-\x00", "..", "snapshots"]), max_size=12).map("".join))
def test_any_key_is_refused_or_stays_inside_a_local_store(tmp_path: Path, key: str) -> None:
    store = LocalStore(tmp_path / "s")
    try:
        path = store._path(key)
    except StoreError:
        return
    assert store.root in path.parents
