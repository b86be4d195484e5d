"""Reading repo files on the host without following a link out of the repo.

The repo is an adversary: ``skills/<skill>/SKILL.md`` may be a symlink to ``/proc/self/environ``
and ``evals/`` a symlink to a host folder the worker can write. Every path the worker reads
or deletes on the host goes through :func:`resolve_inside`, which follows the repo's links
only while they stay inside the repo and otherwise stops with ``BLOCKED_BAD_REPO``.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from schemas.constants import AGENTS_DIR, SKILL_FILE, SKILLS_DIR
from schemas.errors import BadRepo

MAX_SKILL_FILE_BYTES = 1_000_000  # a SKILL.md or agent file larger than this is not prose


def resolve_inside(root: Path, rel: str) -> Path | None:
    """The real host path ``root/rel`` names, or None when it does not exist.

    ``root`` must be resolved. Raise ``BadRepo`` when the path, through any link, leaves
    ``root`` or lands inside ``root/.git``.
    """
    real = Path(os.path.realpath(root / rel))
    if real != root and root not in real.parents:
        raise BadRepo(rel, f"is a link out of the repo (to {real})")
    if real != root and real.relative_to(root).parts[0] == ".git":
        raise BadRepo(rel, "is inside .git" if Path(rel).parts[:1] == (".git",) else "is a link into .git")
    if not os.path.lexists(real):
        return None
    return real


class UnreadableFile(ValueError):
    """Why :func:`read_regular` refused a file; callers name it with their own status."""


def read_regular(real: Path, max_bytes: int) -> bytes:
    """The bytes of the regular file at ``real`` (opened without following a link, never
    blocking on a FIFO), at most ``max_bytes``; ``UnreadableFile`` says why otherwise."""
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise UnreadableFile(f"cannot be read: {exc.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # before fdopen, which refuses a folder with its own error
        os.close(fd)
        raise UnreadableFile("is not a regular file")
    with os.fdopen(fd, "rb") as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise UnreadableFile(f"is larger than {max_bytes} bytes")
    return data


def bytes_inside(root: Path, rel: str, max_bytes: int) -> bytes | None:
    """The bytes of the regular file ``root/rel`` (see :func:`resolve_inside` and
    :func:`read_regular`), or None when absent; ``UnreadableFile`` says why it cannot be read."""
    real = resolve_inside(root, rel)
    return None if real is None else read_regular(real, max_bytes)


def read_inside(root: Path, rel: str, *, max_bytes: int = MAX_SKILL_FILE_BYTES) -> str | None:
    """The text of the regular file ``root/rel`` (see :func:`resolve_inside`), or None when absent."""
    try:
        data = bytes_inside(root, rel, max_bytes)
    except UnreadableFile as exc:
        raise BadRepo(rel, str(exc)) from None
    return None if data is None else data.decode("utf-8", errors="replace")


def read_skill(root: Path, skill: str) -> tuple[str, dict[str, str]]:
    """``(SKILL.md text, {agent file name: text})`` of ``skill`` in the workspace at ``root``.

    Raise ``BadRepo`` naming ``skills/<skill>/SKILL.md`` when it does not exist: an arm that
    gives the agent the skill must have one (the no-skill arm does not call this), or the bare
    model would be graded as the skill.
    """
    root = Path(os.path.realpath(root))
    skill_rel = f"{SKILLS_DIR}/{skill}"
    skill_text = read_inside(root, f"{skill_rel}/{SKILL_FILE}")
    if skill_text is None:
        raise BadRepo(f"{skill_rel}/{SKILL_FILE}", "does not exist; an arm given the skill needs its SKILL.md")
    agents: dict[str, str] = {}
    agents_dir = resolve_inside(root, f"{skill_rel}/{AGENTS_DIR}")
    if agents_dir is not None and agents_dir.is_dir():
        for name in sorted(p.name for p in agents_dir.iterdir() if p.name.endswith(".md")):
            text = read_inside(root, f"{agents_dir.relative_to(root).as_posix()}/{name}")
            if text is not None:
                agents[name] = text
    return skill_text, agents


KEPT_FRONT_MATTER = ("name", "description")
"""What a gutted skill keeps of its front matter: enough for a harness to list and trigger it."""


def gutted_skill(text: str) -> str:
    """``SKILL.md`` with its instructions removed: the front matter's ``name`` and ``description``
    (with their indented continuation lines) and nothing else. Without a closed front matter
    nothing is kept: there is no name or description to keep, only instructions.
    """
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        return ""
    end = next((i for i, line in enumerate(lines[1:], start=1) if line.strip() == "---"), None)
    if end is None:
        return ""
    kept, keeping = [], False
    for line in lines[1:end]:
        if line[:1] not in (" ", "\t") and line.strip():  # a top-level key starts a new entry
            keeping = line.split(":", 1)[0].strip() in KEPT_FRONT_MATTER
        if keeping:
            kept.append(line)
    return "\n".join(["---", *kept, "---", ""])
