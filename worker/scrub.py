"""The graded corpus leaves no trace in the workspace's git history.

An agent that runs ``git show HEAD:evals/<skill>.evals.json`` must not read its assertions.
Deleting the file from the working tree is not enough: every commit, the index, reflogs,
the stash, unreachable objects and packs can hold it. Squashing history to one commit would
break what skills rely on (log, blame, diff against earlier commits), so the history is
*rewritten* with ``git filter-repo`` to drop only the corpus path(s): commit count, authors,
dates, messages and the blame of every other file stay the same; only commit ids change.

``scrubbed_tree`` does it once per snapshot and skill on a host and caches the result next
to the unpacked snapshot (``<cache>/<sha256>-<skill>/repo``) with the old-to-new commit map,
so a baseline ref is resolved in the original snapshot first and then mapped. The rewrite
runs on the repo's ``.git`` moved aside as a bare repo, so filter-repo never resets the
working tree (which keeps the developer's uncommitted edits); the index is rebuilt after.
Every git call runs under the product's config (:mod:`engine.gitcmd`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from engine.gitcmd import run_git, run_in_git_env, write_config
from engine.repo_files import resolve_inside
from engine.snapshot import UNPACK_TEMP_PREFIX, copy_tree
from schemas.constants import CORPUS_SUFFIX, EVALS_DIR
from schemas.errors import NoIsolation

# State files and folders that name commits or hold content outside the refs; all removed.
_STATE = (
    "ORIG_HEAD",
    "FETCH_HEAD",
    "MERGE_HEAD",
    "CHERRY_PICK_HEAD",
    "REVERT_HEAD",
    "AUTO_MERGE",
    "BISECT_LOG",
    "rebase-merge",
    "rebase-apply",
    "sequencer",
    "rr-cache",
    "lost-found",
    "index",
    "filter-repo",
)
_DROPPED_REFS = ("refs/stash", "refs/original/", "refs/replace/")
FILTER_REPO_TIMEOUT_S = 1800.0

_builds: dict[Path, threading.Lock] = {}
_builds_guard = threading.Lock()


def _build_lock(target: Path) -> threading.Lock:
    """One lock per cached tree in this process: shards starting together on a node's threads
    build it once. Without it every one of N first shards ran its own filter-repo (a Python
    process and a git pipeline each) at once, seconds of CPU thrown away at every run's start."""
    with _builds_guard:
        return _builds.setdefault(target, threading.Lock())


@dataclass(frozen=True)
class ScrubbedTree:
    """A cached copy of a snapshot with one skill's corpus gone from the tree and all of history."""

    path: Path
    """The tree to copy workspaces from (read-only)."""
    commit_map: dict[str, str]
    """Old commit id (as in the snapshot) -> new commit id; empty for a non-git tree."""

    def commit(self, old: str) -> str:
        """The rewritten id of snapshot commit ``old``; raise ``NoIsolation`` when it has none."""
        new = self.commit_map.get(old)
        if new is None:
            raise NoIsolation(f"commit {old} has no rewritten counterpart")
        return new


def corpus_paths(tree: Path, skill: str) -> list[str]:
    """The repo-relative paths holding ``skill``'s corpus: the literal path and, when a link
    (``evals/`` or the file itself) points elsewhere inside the repo, where it really is.
    Raise ``BadRepo`` when a link leaves the repo."""
    rel = f"{EVALS_DIR}/{skill}{CORPUS_SUFFIX}"
    root = Path(os.path.realpath(tree))
    paths = [rel]
    real = resolve_inside(root, rel)
    if real is not None and real.relative_to(root).as_posix() != rel:
        paths.append(real.relative_to(root).as_posix())
    return paths


def _remove_working_files(root: Path, paths: list[str]) -> None:
    for rel in reversed(paths):  # the real file last, after the link to it
        literal = root / rel
        if literal.is_symlink() or literal.is_file():
            literal.unlink()
        elif literal.is_dir():  # a folder (the skill in the no-skill arm, a plugin suite's case)
            shutil.rmtree(literal)


def _filter_repo(git_dir: Path, paths: list[str]) -> dict[str, str]:
    args = ["--force", "--quiet", "--invert-paths", "--prune-empty", "never", "--prune-degenerate", "never"]
    args += ["--replace-refs", "delete-no-add"]
    for rel in paths:
        args += ["--path", rel]
    code = "import sys, git_filter_repo; sys.argv[0] = 'git-filter-repo'; git_filter_repo.main()"
    # -P: the repo's git folder is not on sys.path
    done = run_in_git_env([sys.executable, "-P", "-c", code, *args], git_dir, timeout_s=FILTER_REPO_TIMEOUT_S)
    if done.returncode != 0:
        stderr = done.stderr.decode("utf-8", errors="replace")
        raise NoIsolation(f"git filter-repo failed: {stderr.strip()[-2000:]}")
    mapping: dict[str, str] = {}
    with contextlib.suppress(FileNotFoundError):
        for line in (git_dir / "filter-repo" / "commit-map").read_text().splitlines()[1:]:
            old, _, new = line.partition(" ")
            mapping[old] = new.strip()
    return mapping


def _head_commit(root: Path) -> str:
    try:
        return run_git(root, ["rev-parse", "--verify", "--quiet", "HEAD^{commit}"]).strip()
    except subprocess.CalledProcessError:
        return ""  # an unborn branch


def scrub_history(root: Path, paths: list[str]) -> dict[str, str]:
    """Rewrite the repo at ``root`` (a neutralised ``.git``) so no object, ref, reflog,
    stash or pack holds any version of ``paths``; return the old-to-new commit map."""
    git_dir = root / ".git"
    for ref in run_git(root, ["for-each-ref", "--format=%(refname)", *_DROPPED_REFS]).split():
        run_git(root, ["update-ref", "-d", "--no-deref", ref])
    old_head = _head_commit(root)
    for name in _STATE:
        path = git_dir / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif os.path.lexists(path):
            path.unlink()
    shutil.rmtree(git_dir / "logs" / "refs" / "stash", ignore_errors=True)
    with contextlib.suppress(FileNotFoundError):
        (git_dir / "logs" / "refs" / "stash").unlink()
    write_config(git_dir, bare=True)  # filter-repo resets the working tree of a non-bare repo
    mapping: dict[str, str] = {}
    if run_git(git_dir, ["for-each-ref", "--count=1", "--format=%(refname)"]).strip():
        mapping = _filter_repo(git_dir, paths)
        shutil.rmtree(git_dir / "filter-repo", ignore_errors=True)
    run_git(git_dir, ["reflog", "expire", "--expire=now", "--all"])
    run_git(git_dir, ["gc", "-q", "--prune=now"])
    write_config(git_dir, bare=False)
    if old_head:
        _restore_head(root, old_head, mapping)
        run_git(root, ["reset", "-q"])  # a fresh index for the rewritten HEAD; the working tree is untouched
    return mapping


def _restore_head(root: Path, old_head: str, mapping: dict[str, str]) -> None:
    """A detached HEAD still names the old commit after the rewrite: point it at the new one."""
    head_file = root / ".git" / "HEAD"
    text = head_file.read_text().strip()
    if not text.startswith("ref:") and text in mapping:
        head_file.write_text(mapping[text] + "\n")
    elif not text.startswith("ref:") and old_head and old_head not in mapping:
        raise NoIsolation(f"HEAD {old_head} has no rewritten counterpart")


def scrubbed_tree(tree: Path, skill: str, cache_dir: Path, extra: Sequence[str] = ()) -> ScrubbedTree:
    """The cached scrubbed copy of the unpacked snapshot ``tree`` for ``skill``, built once per host.

    ``extra`` are further repo-relative files or folders to remove from the tree and history
    (validated repo-relative paths: a foreign corpus's files; the skill folder for no-skill).
    """
    suffix = "-" + hashlib.sha256("\x1f".join(sorted(extra)).encode()).hexdigest()[:12] if extra else ""
    target = Path(cache_dir) / f"{Path(tree).name}-{skill}{suffix}"
    if not (Path(tree) / ".git").is_dir() or (Path(tree) / ".git").is_symlink():
        return ScrubbedTree(path=Path(tree), commit_map={})
    if not (target / "commit-map").is_file():
        with _build_lock(target):
            if not (target / "commit-map").is_file():  # another thread built it while this one waited
                _build(Path(tree), skill, Path(cache_dir), target, list(extra))
    mapping = {}
    for line in (target / "commit-map").read_text().splitlines():
        old, _, new = line.partition(" ")
        mapping[old] = new
    return ScrubbedTree(path=target / "repo", commit_map=mapping)


def _build(tree: Path, skill: str, cache_dir: Path, target: Path, extra: list[str]) -> None:
    tmp = Path(tempfile.mkdtemp(dir=cache_dir, prefix=f"{UNPACK_TEMP_PREFIX}{os.getpid()}-"))
    try:
        repo = tmp / "repo"
        copy_tree(tree, repo)
        paths = corpus_paths(repo, skill) + [p for p in extra if ".." not in Path(p).parts]
        _remove_working_files(Path(os.path.realpath(repo)), paths)
        try:
            mapping = scrub_history(repo, paths)
        except subprocess.CalledProcessError as exc:
            raise NoIsolation(f"cannot scrub the corpus from git history: {exc.stderr or exc}") from exc
        (tmp / "commit-map").write_text("".join(f"{old} {new}\n" for old, new in sorted(mapping.items())))
        try:
            os.rename(tmp, target)  # atomic publish; fails when another worker published first
        except OSError:
            if not (target / "commit-map").is_file():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
