"""A repo under test can come from S3: a tree of objects or one archive, fetched over real HTTP (moto)."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import boto3
import pytest

from engine.repo_source import fetch_repo, local_repo
from engine.snapshot import build_snapshot_tar
from schemas.errors import BadRepo, StoreError

FILES = {
    "skills/demo/SKILL.md": b"---\nname: demo\n---\nDo the thing.\n",
    "evals/demo.evals.json": b'{"skill_name": "demo", "evals": []}\n',
    "src/app.py": b"print('hi')\n",
}


def _bucket(endpoint: str, name: str) -> object:
    s3 = boto3.client("s3", endpoint_url=endpoint)
    s3.create_bucket(Bucket=name)
    return s3


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _targz(members: dict[str, bytes], *, top: str = "") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(f"{top}{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_a_tree_of_objects_under_a_prefix_is_fetched_file_for_file(aws_env: str, tmp_path: Path) -> None:
    s3 = _bucket(aws_env, "repos-tree")
    for key, data in FILES.items():
        s3.put_object(Bucket="repos-tree", Key=f"team/zuvo/{key}", Body=data)  # type: ignore[attr-defined]
    s3.put_object(Bucket="repos-tree", Key="team/other/skills/x/SKILL.md", Body=b"not ours")  # type: ignore[attr-defined]
    root = fetch_repo("s3://repos-tree/team/zuvo/", tmp_path / "r")
    assert _tree(root) == FILES


@pytest.mark.parametrize("top", ["", "./", "zuvo/"])
def test_an_archive_is_fetched_and_unwrapped_to_the_repo_root(aws_env: str, tmp_path: Path, top: str) -> None:
    s3 = _bucket(aws_env, f"repos-tar-{len(top)}")
    s3.put_object(Bucket=f"repos-tar-{len(top)}", Key="zuvo.tar.gz", Body=_targz(FILES, top=top))  # type: ignore[attr-defined]
    (tmp_path / "r").mkdir()
    root = fetch_repo(f"s3://repos-tar-{len(top)}/zuvo.tar.gz", tmp_path / "r")
    assert _tree(root) == FILES


def test_a_fetched_repo_snapshots_to_the_same_bytes_as_the_checkout_it_came_from(aws_env: str, tmp_path: Path) -> None:
    local = tmp_path / "checkout"
    for key, data in FILES.items():
        (local / key).parent.mkdir(parents=True, exist_ok=True)
        (local / key).write_bytes(data)
    s3 = _bucket(aws_env, "repos-same")
    for key, data in FILES.items():
        s3.put_object(Bucket="repos-same", Key=f"zuvo/{key}", Body=data)  # type: ignore[attr-defined]
    with local_repo("s3://repos-same/zuvo") as fetched:
        assert build_snapshot_tar(fetched) == build_snapshot_tar(local)
        kept = fetched
    assert not kept.exists()  # the fetched copy is removed with the command


def test_an_archive_member_that_climbs_out_is_refused_and_writes_nothing_outside(aws_env: str, tmp_path: Path) -> None:
    s3 = _bucket(aws_env, "repos-evil")
    s3.put_object(Bucket="repos-evil", Key="evil.tgz", Body=_targz({"../escaped.txt": b"x"}))  # type: ignore[attr-defined]
    (tmp_path / "r").mkdir()
    with pytest.raises(BadRepo, match=r"BLOCKED_BAD_REPO: s3://repos-evil/evil.tgz: \.\./escaped.txt: unsafe member"):
        fetch_repo("s3://repos-evil/evil.tgz", tmp_path / "r")
    assert not (tmp_path / "escaped.txt").exists()


def test_an_archive_that_inflates_past_the_cap_is_refused(aws_env: str, tmp_path: Path) -> None:
    s3 = _bucket(aws_env, "repos-bomb")
    s3.put_object(Bucket="repos-bomb", Key="bomb.tar.gz", Body=_targz({"zeros": bytes(8 * 1024 * 1024)}))  # type: ignore[attr-defined]
    (tmp_path / "r").mkdir()
    with pytest.raises(BadRepo, match="zeros: larger than the 1048576-byte cap"):
        fetch_repo("s3://repos-bomb/bomb.tar.gz", tmp_path / "r", max_bytes=1024 * 1024)


def test_an_empty_prefix_or_a_missing_archive_is_a_store_error_naming_the_uri(aws_env: str, tmp_path: Path) -> None:
    _bucket(aws_env, "repos-empty")
    with pytest.raises(StoreError, match="s3://repos-empty/nothing/"):
        fetch_repo("s3://repos-empty/nothing/", tmp_path / "a")
    (tmp_path / "b").mkdir()
    with pytest.raises(StoreError, match=r"missing\.tar\.gz"):
        fetch_repo("s3://repos-empty/missing.tar.gz", tmp_path / "b")


def test_a_local_path_is_used_as_it_is() -> None:
    with local_repo("examples/demo-repo") as root:
        assert root == Path("examples/demo-repo")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_run_evaluates_a_repo_stored_on_s3_end_to_end(
    aws_env: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from testkit.offline_server import OfflineModelServer
    from tests.e2e_support import Env, case, git_init, new_repo, scenario, write_skill

    repo = new_repo(tmp_path / "zuvo")
    write_skill(repo, "greet", [case(i, f"Say hello {i}.", ["The agent runs echo hello"]) for i in (1, 2)])
    git_init(repo)
    archive = tmp_path / "zuvo.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(repo, arcname="zuvo")  # history included: the workspace's git log works as in a checkout
    s3 = _bucket(aws_env, "team-skills")
    s3.put_object(Bucket="team-skills", Key="zuvo.tar.gz", Body=archive.read_bytes())  # type: ignore[attr-defined]
    monkeypatch.setenv("AWS_ENDPOINT_URL", aws_env)  # the command's own environment reaches moto
    with OfflineModelServer(scenario([], [])) as server:
        env = Env(tmp_path / "e2e", server.base_url)
        env.base.mkdir()
        done = env.cli(*env.run_args("s3://team-skills/zuvo.tar.gz", "greet"))  # type: ignore[arg-type]
    assert "SKILL-EVAL COMPLETE" in done.stdout, done.stdout + done.stderr
    assert done.code in (0, 1, 3)
    assert "skill: greet [current]  cases: 2" in done.stdout
    assert list(env.out.glob("skill-eval-greet-*.md"))
