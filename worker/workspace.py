"""One disposable, hardened copy of the repo per shard.

``materialize_workspace`` is a context manager: it unpacks the snapshot into the host's
cache (once per key), copies it (current version) or clones it at a ref (baseline), then
hardens it in the contract's order: remove only ``evals/<skill>.evals.json``; when it is a
git repo remove every remote; then write the fixtures (:mod:`worker.fixtures`). The folder
is removed on exit, also when the body raises.

Failure semantics (never conflated): a workspace that cannot be built is
``NoIsolation`` and the case runs nowhere else; an unsafe fixture is ``BadFixture``; base
fixtures without git are ``FixtureNeedsGit``. All three are case-level ``blocked``.

Workspaces live under ``parent/<pid>-<random>/`` so :func:`reclaim_leftovers`, called by a
worker on start, can remove the ones a killed worker left behind.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import stat
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from engine.gitcmd import run_git
from engine.snapshot import UNPACK_TEMP_PREFIX, unpack_snapshot
from engine.store import ArtifactStore
from schemas.constants import CORPUS_SUFFIX, EVALS_DIR, SKILL_NAME_RE, SKILLS_DIR
from schemas.corpus import EvalCase
from schemas.errors import BadSkillName, NoIsolation, StoreError
from worker.fixtures import materialize_fixtures

_LEFTOVER_RE = re.compile(r"^(\d+)-[0-9a-f]{8}$")
_UNPACK_RE = re.compile("^" + re.escape(UNPACK_TEMP_PREFIX) + r"(\d+)-")


@dataclass(frozen=True)
class Workspace:
    """A materialized, hardened workspace (valid only inside its ``with`` block)."""

    path: Path
    """Host path of the repo copy; the only host path a sandbox may write."""
    is_git: bool
    """True when the copy is a git repo with its own ``.git`` folder."""
    ref: str | None
    """The git ref checked out (baseline), or None for the working tree as on disk (current)."""


def _copy_tree(src: Path, dest: Path) -> None:
    # cp -a keeps modes and symlinks as they are, and reflinks where the filesystem can.
    # Hardlinks would be faster but are wrong: the agent edits files in place, which would
    # change the shared cache and so every later workspace.
    subprocess.run(
        ["cp", "-a", "--reflink=auto", "--no-target-directory", str(src), str(dest)],
        check=True,
        capture_output=True,
        text=True,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"},
    )


def _clone_at_ref(src: Path, dest: Path, ref: str) -> None:
    if not (src / ".git").is_dir() or (src / ".git").is_symlink():
        raise NoIsolation(f"baseline at {ref!r} needs a git repo, the snapshot has none")
    if ref.startswith("-"):
        raise NoIsolation(f"invalid git ref {ref!r}")
    try:
        commit = run_git(src, ["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"]).strip()
    except subprocess.CalledProcessError as exc:
        raise NoIsolation(f"git ref {ref!r} does not name a commit in the snapshot") from exc
    # --no-hardlinks: the clone gets its own object files, so nothing it writes reaches the cache.
    run_git(src.parent, ["clone", "-q", "--local", "--no-hardlinks", "--no-checkout", str(src), str(dest)])
    run_git(dest, ["checkout", "-q", "--detach", commit])


def _git_dir_state(root: Path) -> bool:
    """True when ``root/.git`` is a real folder; a ``.git`` file or link (worktree, submodule) is removed.

    A ``.git`` file points at a git dir outside the copy: using it would let hardening (and
    the agent) change the developer's real repo, so such a workspace is treated as non-git.
    """
    dot_git = root / ".git"
    if dot_git.is_symlink() or dot_git.is_file():
        dot_git.unlink()
        return False
    return dot_git.is_dir()


def _harden(root: Path, skill: str, is_git: bool, graded_paths: Sequence[str] = ()) -> None:
    corpus = root / EVALS_DIR / f"{skill}{CORPUS_SUFFIX}"
    if corpus.is_symlink() or corpus.exists():
        corpus.unlink()  # only the graded corpus: sibling corpora stay
    for rel in graded_paths:  # a corpus read from another format: its file or case folders
        _remove_inside(root, rel)
    if is_git:
        for remote in run_git(root, ["remote"]).split():
            run_git(root, ["remote", "remove", remote])


def _remove_inside(root: Path, rel: str) -> None:
    """Remove ``root/rel`` (file, link or folder) when ``rel`` stays inside the root; else refuse."""
    parts = Path(rel).parts
    if not parts or Path(rel).is_absolute() or ".." in parts or parts[0] == ".git":
        raise NoIsolation(f"graded corpus path {rel!r} is not inside the workspace")
    target = root.joinpath(*parts)
    parent = Path(os.path.realpath(target.parent))
    if parent != root and root not in parent.parents:
        raise NoIsolation(f"graded corpus path {rel!r} resolves outside the workspace")
    if target.is_symlink() or target.is_file():
        target.unlink()
    elif target.is_dir():
        remove_tree(target)


def _strip_skill(root: Path, skill: str, is_git: bool, graded_paths: Sequence[str] = ()) -> None:
    """The no-skill arm: remove ``skills/<skill>/`` and leave git no trace of it (or of the corpus).

    The history is collapsed to one commit holding HEAD's tree without those paths; every
    other ref, the reflogs, the stash and the old objects go, so ``git log``, ``git show`` or
    the object store cannot bring the skill back. The working tree and index keep their
    uncommitted state otherwise.
    """
    folder = root / SKILLS_DIR / skill
    if folder.is_symlink() or folder.is_file():
        folder.unlink()
    elif folder.exists():
        remove_tree(folder)
    if is_git:
        _forget_paths(root, [f"{SKILLS_DIR}/{skill}", f"{EVALS_DIR}/{skill}{CORPUS_SUFFIX}", *graded_paths])


def _forget_paths(root: Path, paths: list[str]) -> None:
    git_dir = root / ".git"
    for name in ("index", "packed-refs", "shallow"):
        if (git_dir / name).is_symlink():
            (git_dir / name).unlink()  # never read a host file through the repo's links
    index = git_dir / "index"
    forget = ["rm", "-r", "-q", "--cached", "--ignore-unmatch", "--", *paths]
    try:
        run_git(root, ["rev-parse", "--verify", "--quiet", "HEAD^{commit}"])
        has_head = True
    except subprocess.CalledProcessError:
        has_head = False
    if has_head:
        saved = index.read_bytes() if index.is_file() else None
        run_git(root, ["read-tree", "HEAD"])
        run_git(root, forget)
        tree = run_git(root, ["write-tree"]).strip()
        if saved is None:
            index.unlink(missing_ok=True)
        else:
            index.write_bytes(saved)
        commit = run_git(root, ["commit-tree", tree, "-m", "workspace snapshot"]).strip()
        try:
            branch = run_git(root, ["symbolic-ref", "-q", "HEAD"]).strip()
        except subprocess.CalledProcessError:
            branch = ""
        for ref in run_git(root, ["for-each-ref", "--format=%(refname)"]).split():
            run_git(root, ["update-ref", "-d", ref])
        run_git(root, ["update-ref", *([branch] if branch else ["--no-deref", "HEAD"]), commit])
    if index.exists():
        run_git(root, forget)
    for leftover in ("logs", "worktrees", "ORIG_HEAD", "FETCH_HEAD", "MERGE_HEAD", "objects/info/alternates"):
        target = git_dir / leftover
        if target.is_dir() and not target.is_symlink():
            remove_tree(target)
        elif target.is_symlink() or target.exists():
            target.unlink()
    run_git(root, ["repack", "-a", "-d", "-q"])
    run_git(root, ["prune", "--expire=now"])


def remove_tree(path: Path) -> None:
    """Remove ``path`` even when the agent left folders without write or search permission."""

    def fix_and_retry(func: object, failed: str, _exc: object) -> None:
        parent = os.path.dirname(failed)
        with contextlib.suppress(OSError):
            os.chmod(parent, stat.S_IRWXU)
            os.chmod(failed, stat.S_IRWXU, follow_symlinks=False)
        with contextlib.suppress(FileNotFoundError):
            if os.path.isdir(failed) and not os.path.islink(failed):
                shutil.rmtree(failed, ignore_errors=True)
            else:
                os.unlink(failed)

    if path.is_symlink() or path.exists():
        shutil.rmtree(path, onerror=fix_and_retry)


@contextlib.contextmanager
def materialize_workspace(
    store: ArtifactStore,
    snapshot_key: str,
    *,
    skill: str,
    case: EvalCase,
    parent: Path,
    cache_dir: Path,
    ref: str | None = None,
    strip_skill: bool = False,
    graded_paths: Sequence[str] = (),
) -> Iterator[Workspace]:
    """Yield a hardened workspace for ``case`` built from snapshot ``snapshot_key``; remove it on exit.

    ``ref`` None copies the tree as snapshotted (current version); a ref clones it and checks
    the ref out detached (baseline). ``strip_skill`` removes the skill itself, history
    included (the no-skill arm). ``graded_paths`` are further files or folders of the graded
    corpus to remove (a corpus read from another format). Raise ``NoIsolation``, ``BadFixture``,
    ``FixtureNeedsGit`` (see module docstring) or ``BadSkillName`` for a malformed ``skill``.
    """
    if not isinstance(skill, str) or not SKILL_NAME_RE.match(skill):
        raise BadSkillName(f"skill name {skill!r} is not kebab-case")
    container = Path(parent) / f"{os.getpid()}-{secrets.token_hex(4)}"
    try:
        try:
            tree = unpack_snapshot(store, snapshot_key, Path(cache_dir))
            Path(parent).mkdir(parents=True, exist_ok=True)
            container.mkdir(mode=0o755)
            root = container / "repo"
            if ref is None:
                _copy_tree(tree, root)
            else:
                _clone_at_ref(tree, root, ref)
            root = Path(os.path.realpath(root))
            is_git = _git_dir_state(root)
            _harden(root, skill, is_git, graded_paths)
            if strip_skill:
                _strip_skill(root, skill, is_git, graded_paths)
        except (OSError, StoreError, subprocess.SubprocessError) as exc:
            detail = getattr(exc, "stderr", None) or exc
            raise NoIsolation(f"case {case.id}: cannot create a workspace for {skill}: {detail}") from exc
        materialize_fixtures(root, case, is_git=is_git)
        yield Workspace(path=root, is_git=is_git, ref=ref)
    finally:
        remove_tree(container)


def _pid_alive(pid: int) -> bool:
    """True for a running process; a zombie (killed, not yet reaped) is dead for our purpose."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    try:
        # /proc/<pid>/stat: "pid (comm) state ..."; comm may hold spaces or parentheses.
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat[stat.rindex(")") + 2] != "Z"
    except (OSError, ValueError, IndexError):
        return True


def reclaim_leftovers(parent: Path, cache_dir: Path | None = None) -> int:
    """Remove what killed processes left behind; return how many folders were removed.

    Workspaces ``parent/<pid>-<8 hex>`` and, when ``cache_dir`` is given, half-finished
    snapshot unpacks ``cache_dir/.unpack-<pid>-*`` whose pid is gone. Call it when a worker
    process starts, before it creates workspaces: folders carrying this process's own pid
    are leftovers of an earlier process with the same pid (a restarted container) and are
    removed too. Anything else is left alone.
    """
    removed = 0
    candidates: list[tuple[Path, re.Pattern[str]]] = [(Path(parent), _LEFTOVER_RE)]
    if cache_dir is not None:
        candidates.append((Path(cache_dir), _UNPACK_RE))
    for folder, pattern in candidates:
        if not folder.is_dir():
            continue
        for entry in folder.iterdir():
            match = pattern.match(entry.name)
            if not match or entry.is_symlink():
                continue
            pid = int(match.group(1))
            if pid == os.getpid() or not _pid_alive(pid):
                remove_tree(entry)
                removed += 1
    return removed
