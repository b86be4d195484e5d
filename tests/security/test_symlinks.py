"""Attack 2: host operations follow repo-controlled symlinks.

A ``.git/config`` and ``.git/index`` linking out of the repo must not be written through; a
``SKILL.md`` or ``agents/*.md`` linking to a host file must not be read and sent to a model;
an ``evals/`` folder linking to a host folder must not make corpus stripping delete there; a
case's ``files`` entry leading out of the repo is refused as the documented promise says.
Each stops with ``BLOCKED_BAD_REPO: <path>: <why>`` (or the link is dropped) and the host
files are unchanged.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import redis

from engine.redis_server import RedisServer
from engine.repo_files import read_skill
from producer.corpus.repo import Repo
from schemas.errors import BadCorpus, BadRepo
from testkit.offline_server import OfflineModelServer
from tests.security.harness import case, git, make_repo, run_pipeline, shell_agent

SKILL = "link-walker"
SECRET = "HOST-SECRET-91c2"


def _outside(tmp_path: Path) -> Path:
    outside = tmp_path / "host"
    (outside / "evals").mkdir(parents=True)
    (outside / "secret.txt").write_text(f"{SECRET}\n")
    (outside / "evals" / f"{SKILL}.evals.json").write_text("host file: must survive\n")
    return outside


def _cases() -> list[dict[str, object]]:
    return [
        case(1, "CASE-ONE commit a change", ["runs git status before committing"]),
        case(2, "CASE-TWO read the readme", ["runs cat to read the README"]),
    ]


def _link_skill_files(repo: Path, outside: Path) -> None:
    skill_dir = repo / "skills" / SKILL
    (skill_dir / "SKILL.md").unlink()
    (skill_dir / "SKILL.md").symlink_to(outside / "secret.txt")
    (skill_dir / "agents").mkdir()
    (skill_dir / "agents" / "env.md").symlink_to("/proc/self/environ")


def test_the_producer_refuses_skill_files_and_corpus_folders_linking_out(tmp_path: Path) -> None:
    outside = _outside(tmp_path)
    repo = make_repo(tmp_path / "a", SKILL, _cases(), commit=False)
    _link_skill_files(repo, outside)
    with pytest.raises(BadRepo, match=r"BLOCKED_BAD_REPO: skills/link-walker/SKILL.md: is a link out of the repo"):
        Repo(repo).load(f"evals/{SKILL}.evals.json")
    other = make_repo(tmp_path / "b", SKILL, _cases(), commit=False)
    os.rename(other / "evals", other / "evals-real")
    (other / "evals").symlink_to(outside / "evals")
    with pytest.raises(BadRepo, match=r"BLOCKED_BAD_REPO: evals: is a link out of the repo"):
        Repo(other).targets([SKILL], all_evals=False)
    assert (outside / "evals" / f"{SKILL}.evals.json").read_text() == "host file: must survive\n"


def _link_absolute(repo: Path, outside: Path) -> None:
    (repo / "CHANGELOG.md").symlink_to(outside / "secret.txt")


def _link_relative(repo: Path, outside: Path) -> None:
    (repo / "CHANGELOG.md").symlink_to(os.path.relpath(outside / "secret.txt", repo))  # ../host/secret.txt


def _link_chain(repo: Path, outside: Path) -> None:
    (repo / "hop.md").symlink_to(outside / "secret.txt")  # the corpus names only the first, in-repo link
    (repo / "CHANGELOG.md").symlink_to("hop.md")


def _link_folder(repo: Path, outside: Path) -> None:
    (repo / "docs").symlink_to(outside)  # the entry docs/secret.txt: its folder leads out


@pytest.mark.parametrize(
    ("plant", "entry"),
    [
        (_link_absolute, "CHANGELOG.md"),
        (_link_relative, "CHANGELOG.md"),
        (_link_chain, "CHANGELOG.md"),
        (_link_folder, "docs/secret.txt"),
    ],
    ids=["absolute", "relative", "chain", "folder"],
)
def test_a_files_entry_linking_out_of_the_repo_is_refused_naming_the_entry(
    tmp_path: Path, plant: object, entry: str
) -> None:
    outside = _outside(tmp_path)
    repo = make_repo(tmp_path / "repo", SKILL, _cases(), commit=False)
    plant(repo, outside)  # type: ignore[operator]
    corpus = repo / "evals" / f"{SKILL}.evals.json"
    corpus.write_text(corpus.read_text().replace('"README.md"', f'"{entry}"', 1))
    pattern = (
        rf"BLOCKED_BAD_REPO: evals/{SKILL}.evals.json: \$.evals\[0\].files\[0\]: '{entry}': is a link out of the repo"
    )
    with pytest.raises(BadRepo, match=pattern) as raised:
        Repo(repo).load(f"evals/{SKILL}.evals.json")
    assert SECRET not in str(raised.value)  # the host file is never read


def test_a_files_entry_that_is_a_link_loop_names_nothing_in_the_repo(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", SKILL, _cases(), commit=False)
    (repo / "a.md").symlink_to("b.md")
    (repo / "b.md").symlink_to("a.md")
    corpus = repo / "evals" / f"{SKILL}.evals.json"
    corpus.write_text(corpus.read_text().replace('"README.md"', '"a.md"', 1))
    with pytest.raises(BadCorpus, match=r"\$.evals\[0\].files\[0\]: 'a.md' does not exist in the repo"):
        Repo(repo).load(f"evals/{SKILL}.evals.json")


def test_a_files_entry_in_or_linking_into_git_is_refused_as_such(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", SKILL, _cases())
    (repo / "HEAD.md").symlink_to(".git/HEAD")
    corpus = repo / "evals" / f"{SKILL}.evals.json"
    original = corpus.read_text()
    for entry, why in ((".git/HEAD", "is inside .git"), ("HEAD.md", "is a link into .git")):
        corpus.write_text(original.replace('"README.md"', f'"{entry}"', 1))
        with pytest.raises(BadRepo, match=rf"\$.evals\[0\].files\[0\]: '{re.escape(entry)}': {why}"):
            Repo(repo).load(f"evals/{SKILL}.evals.json")


def test_a_files_entry_linking_inside_the_repo_is_kept(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", SKILL, _cases(), commit=False)
    (repo / "CHANGELOG.md").symlink_to("README.md")
    corpus = repo / "evals" / f"{SKILL}.evals.json"
    corpus.write_text(corpus.read_text().replace('"README.md"', '"CHANGELOG.md"', 1))
    assert Repo(repo).load(f"evals/{SKILL}.evals.json").corpus.evals[0].files == ("CHANGELOG.md",)


def test_the_worker_reads_skill_files_only_inside_the_workspace(tmp_path: Path) -> None:
    outside = _outside(tmp_path)
    ws = make_repo(tmp_path / "ws", SKILL, _cases(), commit=False)
    (ws / "shared.md").write_text("# shared skill text\n")
    (ws / "skills" / SKILL / "SKILL.md").unlink()
    (ws / "skills" / SKILL / "SKILL.md").symlink_to("../../shared.md")  # inside: allowed
    assert read_skill(ws, SKILL) == ("# shared skill text\n", {})
    _link_skill_files(ws, outside)
    with pytest.raises(BadRepo, match=r"SKILL\.md: is a link out of the repo"):
        read_skill(ws, SKILL)
    (ws / "skills" / SKILL / "SKILL.md").unlink()
    (ws / "skills" / SKILL / "SKILL.md").write_text("fine")
    with pytest.raises(BadRepo, match=r"agents/env\.md: is a link out of the repo"):
        read_skill(ws, SKILL)


@pytest.mark.slow
def test_links_in_the_repo_and_in_an_old_commit_never_reach_the_host(
    tmp_path: Path, server: OfflineModelServer, redis_client: redis.Redis, redis_server: RedisServer
) -> None:
    outside = _outside(tmp_path)
    repo = make_repo(tmp_path / "repo", SKILL, _cases())
    # An old commit where the skill files and evals/ link to host files (reachable with --compare).
    corpus = (repo / "evals" / f"{SKILL}.evals.json").read_bytes()
    skill_text = (repo / "skills" / SKILL / "SKILL.md").read_bytes()
    _link_skill_files(repo, outside)
    os.rename(repo / "evals", tmp_path / "evals-aside")
    (repo / "evals").symlink_to(outside / "evals")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "links")
    git(repo, "tag", "linked")
    for path in ("evals", "skills/link-walker/SKILL.md", "skills/link-walker/agents/env.md"):
        (repo / path).unlink()
    (repo / "evals").mkdir()
    (repo / "evals" / f"{SKILL}.evals.json").write_bytes(corpus)
    (repo / "skills" / SKILL / "SKILL.md").write_bytes(skill_text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "real files")
    # The current tree's .git/config and .git/index link out of the repo.
    (outside / "config").write_bytes((repo / ".git" / "config").read_bytes())
    (repo / ".git" / "config").unlink()
    (repo / ".git" / "config").symlink_to(outside / "config")
    (repo / ".git" / "index").unlink()
    (repo / ".git" / "index").symlink_to(outside / "index")
    config_before = (outside / "config").read_bytes()
    server.set_scenario(
        {
            "rules": [
                shell_agent("CASE-ONE", ["git status --short", "git add -A", "git commit -qm x || true"]),
                shell_agent("CASE-TWO", ["cat README.md"]),
            ],
            "judge": [
                {"assertion_contains": "git status", "transcript_regex": r"\[tool_call\] shell\(.*git status"},
                {"assertion_contains": "cat", "transcript_regex": r"\[tool_call\] shell\(.*cat README"},
            ],
        }
    )
    run = run_pipeline(repo, SKILL, server=server, redis_url=redis_server.url, work=tmp_path / "w", compare="linked")

    states = sorted((o["state"], o["detail"].split(":")[0]) for o in run.outcomes.values())
    assert states == [("blocked", "BLOCKED_BAD_REPO")] * 2 + [("graded", "")] * 2, run.outcomes
    assert all(
        f"evals/{SKILL}.evals.json: is a link out of the repo" in o["detail"]
        for o in run.outcomes.values()
        if o["detail"]
    )
    assert (outside / "evals" / f"{SKILL}.evals.json").read_text() == "host file: must survive\n"
    assert (outside / "config").read_bytes() == config_before
    assert not (outside / "index").exists()
    assert SECRET not in "\n".join(str(r) for r in run.requests) + run.report
