"""What a harness shard stages from its workspace: the skill's files, a trigger run's other skills,
the repo's plugin name, and the private HOME they are written into.

Repo content is never followed out of the workspace: links are skipped, sizes and counts capped.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import structlog

_MAX_SKILL_FILES, _MAX_SKILL_FILE_BYTES = 200, 1_000_000
MAX_DISTRACTOR_BYTES = 64 * 1024 * 1024
"""What a trigger shard stages of the other skills at most (their SKILL.md files are a few KB each)."""
_SKILL_DIR = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_PLUGIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
log = structlog.get_logger("skill_eval.harness")


def skill_files(skill_dir: Path, workspace: Path) -> dict[str, bytes]:
    """The skill folder's regular files (symlinks skipped: repo content is never followed), capped.

    A skill folder that is itself a link, or resolves outside ``workspace``, stages nothing.
    """
    files: dict[str, bytes] = {}
    real = Path(os.path.realpath(skill_dir))
    if skill_dir.is_symlink() or not real.is_relative_to(os.path.realpath(workspace)) or not real.is_dir():
        return files
    for dirpath, dirnames, filenames in os.walk(skill_dir, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not os.path.islink(os.path.join(dirpath, d)))
        for name in sorted(filenames):
            path = Path(dirpath, name)
            if path.is_symlink() or not path.is_file() or path.stat().st_size > _MAX_SKILL_FILE_BYTES:
                continue
            files[path.relative_to(skill_dir).as_posix()] = path.read_bytes()
            if len(files) >= _MAX_SKILL_FILES:
                return files
    return files


def installed(workspace: Path) -> list[str]:
    """The workspace's skill folders a harness can load (kebab-case names, real folders, not links)."""
    folder = workspace / "skills"
    if folder.is_symlink() or not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if _SKILL_DIR.match(p.name) and not p.is_symlink() and p.is_dir())


def other_skills(workspace: Path, skill: str, max_bytes: int = MAX_DISTRACTOR_BYTES) -> dict[str, dict[str, bytes]]:
    """Every installed skill but ``skill``, name -> its files (a trigger run's distractors), in name
    order until ``max_bytes`` staged in all: a repo's skills cannot fill the host's disk."""
    out: dict[str, dict[str, bytes]] = {}
    total = 0
    for name in (n for n in installed(workspace) if n != skill):
        files = skill_files(workspace / "skills" / name, workspace)
        total += sum(len(c) for c in files.values())
        if total > max_bytes:
            log.warning("trigger distractors cut", staged=len(out), cap_bytes=max_bytes)
            break
        out[name] = files
    return out


def plugin_name(workspace: Path) -> str | None:
    """The repo's plugin name (``.claude-plugin/plugin.json``), when it has a sane one."""
    manifest = workspace / ".claude-plugin" / "plugin.json"
    if manifest.is_symlink() or not manifest.is_file():
        return None
    try:
        name = json.loads(manifest.read_text(encoding="utf-8")).get("name")
    except (OSError, ValueError, AttributeError):
        return None
    return name if isinstance(name, str) and _PLUGIN_NAME.match(name) else None


def stage_home(home: Path, files: dict[str, bytes], uid: int | None) -> None:
    """Write the plan's files into a fresh private HOME, owned by the sandbox's uid when it has one."""
    home.mkdir(mode=0o700)
    for relative, content in files.items():
        target = home / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    if uid is not None:
        for dirpath, _dirnames, filenames in os.walk(home):
            os.lchown(dirpath, uid, uid)
            for name in filenames:
                os.lchown(os.path.join(dirpath, name), uid, uid)
