"""One disposable, hardened copy of the repo per shard.

``materialize_workspace`` is a context manager: it unpacks the snapshot into the host's
cache (once per key, its ``.git`` neutralised), takes the copy of it whose git history holds
no trace of the graded corpus (:mod:`worker.scrub`, once per snapshot and skill), copies that
(current version) or clones it at the rewritten commit of a ref resolved before the rewrite
(baseline), then hardens it in the contract's order: remove only ``evals/<skill>.evals.json``;
write the workspace's ``.git/config`` itself (no remotes, credentials, includes, filters or
hooks from the repo); then write the fixtures (:mod:`worker.fixtures`). The folder is
removed on exit, also when the body raises.

Failure semantics (never conflated): a workspace that cannot be built is
``NoIsolation`` and the case runs nowhere else; an unsafe fixture is ``BadFixture``; base
fixtures without git are ``FixtureNeedsGit``. All three are case-level ``blocked``.

Workspaces live under ``parent/<pid>-<random>/`` (the executor canary's under
``parent/canary-<pid>-<random>/``, made by the command line) so :func:`reclaim_leftovers`,
called by a worker on start, can remove the ones a killed worker or command left behind.
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

import structlog

from engine.gitcmd import neutralise_git_dir, run_git
from engine.repo_files import gutted_skill, read_inside
from engine.snapshot import UNPACK_TEMP_PREFIX, copy_tree, unpack_snapshot
from engine.store import ArtifactStore
from schemas.constants import SKILL_FILE, SKILL_NAME_RE, SKILLS_DIR
from schemas.corpus import EvalCase
from schemas.errors import BadSkillName, NoIsolation, StoreError
from worker.fixtures import materialize_fixtures
from worker.scrub import corpus_paths, scrubbed_tree

log = structlog.get_logger("skill_eval.workspace")
_LEFTOVER_RE = re.compile(r"^(?:canary-)?(\d+)-[0-9a-f]{8}$")
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


def _resolve_ref(original: Path, ref: str) -> str:
    """The commit ``ref`` names in the snapshot as it was, before the history was rewritten."""
    if not (original / ".git").is_dir() or (original / ".git").is_symlink():
        raise NoIsolation(f"baseline at {ref!r} needs a git repo, the snapshot has none")
    if ref.startswith("-"):
        raise NoIsolation(f"invalid git ref {ref!r}")
    try:
        return run_git(original, ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"]).strip()
    except subprocess.CalledProcessError as exc:
        raise NoIsolation(f"git ref {ref!r} does not name a commit in the snapshot") from exc


def _clone_at(src: Path, dest: Path, commit: str) -> None:
    # --no-hardlinks: the clone gets its own object files, so nothing it writes reaches the cache.
    run_git(src.parent, ["clone", "-q", "--local", "--no-hardlinks", "--no-checkout", str(src), str(dest)])
    neutralise_git_dir(dest / ".git")  # the clone's config names the cache as its origin
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
    if dot_git.is_dir():
        neutralise_git_dir(dot_git)  # no remotes, credentials, includes, filters or hooks
        return True
    return False


def _harden(root: Path, skill: str, extra: Sequence[str] = ()) -> None:
    """Remove the graded corpus (only it: sibling corpora stay), wherever a link inside the repo
    puts it; a link out of the repo is ``BLOCKED_BAD_REPO``. ``extra`` are further files or
    folders to remove (a corpus read from another format, the skill itself in the no-skill arm)."""
    for rel in reversed(corpus_paths(root, skill)):
        path = root / rel
        if path.is_symlink() or path.is_file():
            path.unlink()
    for rel in extra:
        _remove_inside(root, rel)


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


def remove_tree(path: Path, *, attempts: int = 3) -> bool:
    """Remove ``path``; never raise. True when it is gone.

    The agent may have left folders without write or search permission, links to host files
    inside read-only folders, trees deeper than ``PATH_MAX`` or a straggler still writing. Links
    are removed, never followed (their targets' modes are never touched); read-only folders are
    made writable; what ``shutil.rmtree`` cannot remove, GNU ``chmod -R`` and ``rm -rf`` (which
    walk by file descriptor, at any depth) remove; all of it a few times over.
    """
    path = Path(path)

    def fix_and_retry(_func: object, failed: str, _exc: object) -> None:
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(failed), stat.S_IRWXU)
        with contextlib.suppress(OSError):
            if os.path.isdir(failed) and not os.path.islink(failed):
                os.chmod(failed, stat.S_IRWXU)
                shutil.rmtree(failed, ignore_errors=True)
            else:
                os.unlink(failed)

    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"}
    for _ in range(attempts):
        if not os.path.lexists(path):
            return True
        if path.is_symlink() or not path.is_dir():
            with contextlib.suppress(OSError):
                path.unlink()
            continue
        with contextlib.suppress(OSError, RecursionError):
            shutil.rmtree(path, onerror=fix_and_retry)
        if os.path.lexists(path):
            for argv in (
                ["chmod", "-R", "u+rwx", "--", str(path)],
                ["rm", "-rf", "--one-file-system", "--", str(path)],
            ):
                with contextlib.suppress(OSError, subprocess.SubprocessError):
                    subprocess.run(argv, env=env, capture_output=True, timeout=300, check=False)
    gone = not os.path.lexists(path)
    if not gone:
        log.warning("workspace left behind", path=str(path))
    return gone


def _scrubbed_paths(skill: str, strip_skill: bool, graded_paths: Sequence[str]) -> list[str]:
    """Paths removed beside the corpus: the no-skill arm's skill folder and a foreign corpus's
    files leave the tree and history like the corpus does."""
    return [*graded_paths, *([f"{SKILLS_DIR}/{skill}"] if strip_skill else [])]


def warm_cache(
    store: ArtifactStore,
    snapshot_key: str,
    *,
    skill: str,
    cache_dir: Path,
    strip_skill: bool = False,
    graded_paths: Sequence[str] = (),
) -> None:
    """Unpack the snapshot and build its scrubbed tree for ``skill`` ahead of the first shard.

    The very steps :func:`materialize_workspace` takes first, with the same checks, so a
    worker can do them while the run's preflight call is still out; the shards then find the
    cache built. Raises what those steps raise (the caller decides whether it matters).
    """
    if not isinstance(skill, str) or not SKILL_NAME_RE.match(skill):
        raise BadSkillName(f"skill name {skill!r} is not kebab-case")
    original = unpack_snapshot(store, snapshot_key, Path(cache_dir))
    scrubbed_tree(original, skill, Path(cache_dir), _scrubbed_paths(skill, strip_skill, graded_paths))


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
    gut_skill: bool = False,
) -> Iterator[Workspace]:
    """Yield a hardened workspace for ``case`` built from snapshot ``snapshot_key``; remove it on exit.

    ``ref`` None copies the tree as snapshotted (current version); a ref clones it and checks
    the ref out detached (baseline). ``strip_skill`` removes the skill itself, history
    included (the no-skill arm). ``graded_paths`` are further files or folders of the graded
    corpus to remove (a corpus read from another format). ``gut_skill`` (with ``strip_skill``)
    then puts back a ``SKILL.md`` with only its name and description (the gutted arm). Raise
    ``NoIsolation``, ``BadFixture``, ``FixtureNeedsGit`` (see module docstring), ``BadRepo`` or
    ``BadSkillName`` for a malformed ``skill``.
    """
    if not isinstance(skill, str) or not SKILL_NAME_RE.match(skill):
        raise BadSkillName(f"skill name {skill!r} is not kebab-case")
    container = Path(parent) / owned_name()
    try:
        try:
            Path(parent).mkdir(parents=True, exist_ok=True)
            container.mkdir(mode=0o755)  # first: a shard being set up already shows its workspace
            original = unpack_snapshot(store, snapshot_key, Path(cache_dir))
            commit = None if ref is None else _resolve_ref(original, ref)  # before the rewrite changes ids
            tree = scrubbed_tree(original, skill, Path(cache_dir), _scrubbed_paths(skill, strip_skill, graded_paths))
            root = container / "repo"
            if commit is None:
                copy_tree(tree.path, root)
            else:
                _clone_at(tree.path, root, tree.commit(commit))
            root = Path(os.path.realpath(root))
            is_git = _git_dir_state(root)
            _harden(root, skill, _scrubbed_paths(skill, strip_skill, graded_paths))
            if gut_skill:
                _put_gutted(original, root, skill)
        except (OSError, StoreError, subprocess.SubprocessError) as exc:
            detail = getattr(exc, "stderr", None) or exc
            raise NoIsolation(f"case {case.id}: cannot create a workspace for {skill}: {detail}") from exc
        materialize_fixtures(root, case, is_git=is_git)
        yield Workspace(path=root, is_git=is_git, ref=ref)
    finally:
        remove_tree(container)


def _put_gutted(original: Path, root: Path, skill: str) -> None:
    """Write the snapshot's ``SKILL.md`` of ``skill``, gutted, into the stripped workspace ``root``.

    Read without following a link out of the snapshot (``BLOCKED_BAD_REPO``); the folder was
    removed with its history, so the file written is the only trace of the skill left.
    """
    rel = f"{SKILLS_DIR}/{skill}/{SKILL_FILE}"
    text = read_inside(Path(os.path.realpath(original)), rel) or ""
    folder = root / SKILLS_DIR / skill
    folder.mkdir(parents=True, exist_ok=True)
    (folder / SKILL_FILE).write_text(gutted_skill(text), encoding="utf-8")


def owned_name(prefix: str = "") -> str:
    """A folder name under the workspaces folder that :func:`reclaim_leftovers` can tie to this
    process: ``<prefix><pid>-<8 hex>``; ``prefix`` is empty or ``canary-``."""
    return f"{prefix}{os.getpid()}-{secrets.token_hex(4)}"


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

    Workspaces ``parent/<pid>-<8 hex>`` (and the canary's ``parent/canary-<pid>-<8 hex>``) and,
    when ``cache_dir`` is given, half-finished
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
