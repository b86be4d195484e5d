"""Write an eval case's fixtures into a hardened workspace (fail closed).

Every path is checked before anything is written: a relative literal (no glob character,
no NUL), resolved against the workspace root following the symlinks that exist in the
copied repo, must land strictly inside the root and outside ``.git``. Otherwise the case is
``BLOCKED_BAD_FIXTURE``. Base fixtures need git (``BLOCKED_FIXTURE_NEEDS_GIT``); when any
exists, the whole tree is committed first, then the base fixtures are written and
committed, then the head fixtures are written on top and left uncommitted, so ``git diff``
shows exactly the eval's change.
"""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

from engine.gitcmd import run_git
from schemas.constants import GLOB_CHARS
from schemas.corpus import EvalCase, Fixture
from schemas.errors import BadFixture, FixtureNeedsGit, NoIsolation
from schemas.status import FixtureStage

MAX_FIXTURE_PATH_BYTES = 1024  # well below PATH_MAX, so the workspace root always fits in front
MAX_NAME_BYTES = 255  # NAME_MAX of every Linux filesystem
SNAPSHOT_COMMIT_MESSAGE = "eval-fixture: sandbox snapshot (pre-existing WIP)"
BASE_COMMIT_MESSAGE = "eval-fixture: base state"


def resolve_fixture_path(root: Path, case_id: int, index: int, path: object) -> Path:
    """Return the host path fixture ``index`` of case ``case_id`` writes; raise ``BadFixture`` if unsafe.

    ``root`` must already be a resolved (symlink-free) path.
    """
    where = f"case {case_id}: fixtures[{index}].path {path!r}"
    if not isinstance(path, str) or not path or "\x00" in path:
        raise BadFixture(f"{where} is not a non-empty string")
    if os.path.isabs(path) or path.startswith("~"):
        raise BadFixture(f"{where} is absolute; fixture paths are relative to the repo root")
    if any(c in path for c in GLOB_CHARS):
        raise BadFixture(f"{where} contains a glob character; fixture paths are literal")
    if len(path.encode()) > MAX_FIXTURE_PATH_BYTES:
        raise BadFixture(f"case {case_id}: fixtures[{index}].path is longer than {MAX_FIXTURE_PATH_BYTES} bytes")
    if any(len(part.encode()) > MAX_NAME_BYTES for part in path.split("/")):
        raise BadFixture(f"{where[:300]}: a path component is longer than {MAX_NAME_BYTES} bytes")
    dest = Path(os.path.realpath(root / path))
    if dest == root or root not in dest.parents:
        raise BadFixture(f"{where} escapes the workspace (resolves to {dest})")
    if dest.relative_to(root).parts[0] == ".git":
        # Writing git's own files (config, hooks) would let a corpus run commands on the host.
        raise BadFixture(f"{where} points into .git")
    if dest.is_dir():
        raise BadFixture(f"{where} is an existing folder")
    return dest


def _write(dest: Path, content: str, case_id: int, fixture: Fixture) -> None:
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        with open(dest, "w", encoding="utf-8", newline="") as f:  # verbatim: no newline translation
            f.write(content)
    except (NotADirectoryError, FileExistsError, IsADirectoryError) as exc:
        raise BadFixture(f"case {case_id}: fixtures path {fixture.path!r} cannot be written: {exc}") from exc
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            raise BadFixture(f"case {case_id}: fixtures path {fixture.path[:300]!r} is too long") from exc
        raise NoIsolation(f"case {case_id}: cannot write fixture {fixture.path!r}: {exc}") from exc


def _commit(root: Path, message: str, case_id: int) -> None:
    try:
        run_git(root, ["add", "-A"])
        run_git(root, ["commit", "-q", "--no-verify", "--allow-empty", "-m", message])
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
        detail = getattr(exc, "stderr", "") or exc
        raise NoIsolation(f"case {case_id}: fixture commit {message!r} failed: {detail}") from exc


def materialize_fixtures(root: Path, case: EvalCase, *, is_git: bool) -> None:
    """Write ``case.fixtures`` into the workspace at ``root`` (see module docstring).

    Raise ``BadFixture`` or ``FixtureNeedsGit`` before writing anything; ``NoIsolation`` when
    a write or commit fails for another reason.
    """
    root = Path(os.path.realpath(root))
    planned = [(resolve_fixture_path(root, case.id, k, fx.path), fx) for k, fx in enumerate(case.fixtures)]
    base = [(dest, fx) for dest, fx in planned if fx.stage is FixtureStage.BASE]
    head = [(dest, fx) for dest, fx in planned if fx.stage is FixtureStage.HEAD]
    if base:
        if not is_git:
            paths = ", ".join(repr(fx.path) for _, fx in base)
            raise FixtureNeedsGit(f"case {case.id}: base-stage fixtures {paths} need a git workspace")
        _commit(root, SNAPSHOT_COMMIT_MESSAGE, case.id)
        for dest, fx in base:
            _write(dest, fx.content, case.id, fx)
        _commit(root, BASE_COMMIT_MESSAGE, case.id)
    for dest, fx in head:
        _write(dest, fx.content, case.id, fx)
