"""A plugin eval case's ``context.add_dirs``: folders of its case folder the agent may read.

plugin eval (Claude Code 2.1.328) resolves each name against the case folder, refuses one that
escapes it, that leads (through a link) outside the case folder and the plugin under test, or into
version-control data or another case's folder, and grants the agent reads inside it. A case folder
never reaches a workspace (its graders are graded inputs), so here the folder travels with the
case: its files are read now, the one safe way every corpus file is read
(:func:`producer.corpus.files.read_corpus_text`: a link out of the repo is ``BLOCKED_BAD_REPO``,
regular UTF-8 files only, counted toward the suite's one size cap), and written into the
workspace at the same place, ``evals/<case>/<folder>/...``, as the case's fixtures; the case's
``files`` name them, so the agent is told where they are. Bounded: at most
:data:`MAX_ADD_DIR_FILES` files and :data:`MAX_WALKED` entries per case; an empty file is left
out (a fixture has content).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.repo_files import resolve_inside
from schemas.constants import EVALS_DIR
from schemas.errors import BadCorpus

MAX_ADD_DIR_FILES = 100
MAX_WALKED = 2_000


def _real_folder(root: Path, folder: str, name: str, file: str, where: str) -> Path:
    """The real folder ``folder/name`` leads to: inside the repo (else ``BLOCKED_BAD_REPO``), a
    folder, and not the suite's folder, the case folder itself or another case's."""
    real = resolve_inside(root, f"{folder}/{name}")
    if real is None or not real.is_dir():
        raise BadCorpus(file, where, f"{name!r} is not a folder of the case folder")
    case = Path(os.path.realpath(root / folder))
    beside = case in real.parents and real.relative_to(case).parts[0] != "graders"
    if _fenced(root, real, allowed=(real,) if beside else ()):
        raise BadCorpus(file, where, f"{name!r} leads to the suite's cases or graders, not to files beside them")
    return real


def _fenced(root: Path, real: Path, *, allowed: tuple[Path, ...]) -> bool:
    """True when ``real`` is in the suite's folder (cases, their graders, the mocks) but inside
    none of ``allowed``."""
    evals = Path(os.path.realpath(root / EVALS_DIR))
    if real != evals and evals not in real.parents:
        return False
    return not any(real == a or a in real.parents for a in allowed)


def _walk(real: Path, file: str, where: str) -> list[Path]:
    """The files under ``real``, links not followed (a linked file is read through its name, which
    the corpus reader resolves), bounded."""
    found: list[Path] = []
    walked = 0
    for top, dirs, names in os.walk(real, followlinks=False):
        walked += len(dirs) + len(names)
        if walked > MAX_WALKED or len(found) + len(names) > MAX_ADD_DIR_FILES:
            raise BadCorpus(file, where, f"holds more than {MAX_ADD_DIR_FILES} files (or {MAX_WALKED} entries)")
        dirs.sort()
        found += [Path(top, n) for n in sorted(names)]
    return found


def add_dir_fixtures(
    root: Path, folder: str, dirs: list[str], read: Callable[[str], str | None], file: str
) -> list[dict[str, Any]]:
    """The files of the case ``folder``'s ``add_dirs`` as schema-v1 fixtures at their own paths."""
    fixtures: list[dict[str, Any]] = []
    for i, name in enumerate(dirs):
        where = f"$.context.add_dirs[{i}]"
        real = _real_folder(root, folder, name, file, where)
        for path in _walk(real, file, where):
            rel = f"{folder}/{name}/{path.relative_to(real).as_posix()}"
            if path.is_symlink() and _fenced(root, Path(os.path.realpath(path)), allowed=(real,)):
                raise BadCorpus(file, where, f"{rel} is a link into the suite's cases (a grader is not the agent's)")
            text = read(rel)
            if text:
                fixtures.append({"path": rel, "content": text})
        if len(fixtures) > MAX_ADD_DIR_FILES:
            raise BadCorpus(file, "$.context.add_dirs", f"name more than {MAX_ADD_DIR_FILES} files in all")
    return fixtures
