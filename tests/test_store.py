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
    dead = S3Store("b", "", endpoint_url=f"http://127.0.0.1:{free_port()}", max_attempts=1)
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


def test_put_new_lets_only_the_first_writer_commit(store: ArtifactStore) -> None:
    assert store.put_new("runs/r1/outcomes/s1.attempt-1.json", b"first") is True
    assert store.put_new("runs/r1/outcomes/s1.attempt-1.json", b"second") is False
    assert store.get("runs/r1/outcomes/s1.attempt-1.json") == b"first"


def test_put_new_under_a_race_commits_exactly_one_of_many_writers(store: ArtifactStore) -> None:
    key = "runs/r1/outcomes/race.attempt-1.json"
    barrier = threading.Barrier(8)
    won: list[bytes] = []

    def writer(i: int) -> None:
        data = f"writer-{i}".encode()
        barrier.wait()
        if store.put_new(key, data):
            won.append(data)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1
    assert store.get(key) == won[0]


def test_get_many_reads_the_present_keys_and_leaves_out_the_absent(store: ArtifactStore) -> None:
    keys = [f"runs/r1/outcomes/{i:03}.json" for i in range(40)]
    for key in keys[::2]:
        store.put(key, key.encode())
    found = store.get_many(keys)
    assert found == {k: k.encode() for k in keys[::2]}


def test_a_large_object_goes_to_s3_in_parts_and_reads_back_whole(aws_env: str) -> None:
    import boto3

    bucket = _new_bucket(aws_env)
    store = S3Store(bucket, "big", multipart_threshold=5 * 1024 * 1024)  # S3's minimum part size
    data = bytes(range(256)) * (12 * 1024 * 1024 // 256)
    store.put("snapshots/big.tar", data)
    head = boto3.client("s3", endpoint_url=aws_env).head_object(Bucket=bucket, Key="big/snapshots/big.tar")
    assert "-" in head["ETag"]  # a multipart upload's ETag is "<md5 of parts>-<count>"
    assert store.get("snapshots/big.tar") == data


def test_two_deliveries_of_one_attempt_commit_one_outcome_and_every_attempt_is_kept(store: ArtifactStore) -> None:
    from engine.records import commit_outcome, load_outcome
    from schemas.manifest import attempt_key
    from schemas.outcome import ShardOutcomeRecord
    from schemas.status import ShardState

    first = ShardOutcomeRecord(state=ShardState.GRADED)
    late = ShardOutcomeRecord(state=ShardState.EXECUTOR_FAILED, detail="executor-failed: a late duplicate")
    assert commit_outcome(store, "r1", "s1", 0, first) == first
    assert commit_outcome(store, "r1", "s1", 0, late) == first  # the duplicate adopts the committed record
    assert load_outcome(store, "r1", "s1") == first
    retry = ShardOutcomeRecord(state=ShardState.GRADER_MALFORMED)
    assert commit_outcome(store, "r1", "s1", 1, retry) == retry  # a resubmit is its own attempt
    assert load_outcome(store, "r1", "s1") == retry
    kept = [ShardOutcomeRecord.model_validate_json(store.get(attempt_key("r1", n, "outcomes", "s1"))) for n in (0, 1)]
    assert kept == [first, retry]


def test_children_names_the_folders_one_level_under_a_prefix(store: ArtifactStore) -> None:
    for key in ("runs/r1/manifest.json", "runs/r1/grades/a.json", "runs/r2/outline.json", "runs/top.json", "x/y"):
        store.put(key, b"{}")
    assert store.children("runs/") == ["r1", "r2"]
    assert store.children("runs/r1/") == ["grades"]
    assert store.children("nothing/") == []
    assert store.list("runs/r1/") == ["runs/r1/grades/a.json", "runs/r1/manifest.json"]
    assert store.list("runs/r") == ["runs/r1/grades/a.json", "runs/r1/manifest.json", "runs/r2/outline.json"]
