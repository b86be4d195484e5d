"""Run git on the worker host with nothing from the repo or the host influencing it.

Workspace setup (clone, history scrub, remote removal, fixture commits) runs git outside the
sandbox, on a repo an attacker wrote. Git's own files are configuration that runs commands:
``filter.<name>.clean``, ``diff.<name>.textconv``, ``core.fsmonitor``, hooks, credential
helpers, includes. So, before any git call on a repo, :func:`neutralise_git_dir` rewrites
its ``.git`` with plain file I/O: the config keeps only ``core.repositoryformatversion`` and
the ``extensions.*`` git needs to read the repo; hooks, ``info/attributes``, alternates,
worktree links and every symlink inside ``.git`` are removed. :func:`run_git` then runs git
with an environment built from scratch (no API keys), no system or global config, no system
attributes, ``core.attributesFile=/dev/null``, no hooks, no fsmonitor, no signing, and a
fixed identity and date so the same fixtures give the same commits.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import subprocess
from collections.abc import Sequence
from pathlib import Path

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "skill-eval",
    "GIT_AUTHOR_EMAIL": "skill-eval@localhost",
    "GIT_COMMITTER_NAME": "skill-eval",
    "GIT_COMMITTER_EMAIL": "skill-eval@localhost",
}
_FIXED_DATE = "2000-01-01T00:00:00+0000"
# Command-line config outranks every file, so these hold whatever a repo's config says.
SAFE_CONFIG = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.attributesFile=/dev/null",
    "core.sshCommand=false",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "safe.directory=*",
    "protocol.file.allow=always",
    "submodule.recurse=false",
    "diff.ignoreSubmodules=all",
    "gc.auto=0",
)
# Extensions git needs to read the repo; the two dropped ones would reach outside it
# (partialclone fetches missing objects from a remote; worktreeconfig reads config.worktree).
_DROPPED_EXTENSIONS = frozenset({"partialclone", "worktreeconfig"})
_TOKEN_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_SECTION_RE = re.compile(r'^\s*\[\s*([A-Za-z0-9.-]+)\s*(?:"[^"]*"\s*)?\]\s*(.*)$')
_ENTRY_RE = re.compile(r"^\s*([A-Za-z][A-Za-z0-9-]*)\s*(?:=\s*(.*?))?\s*$")
# Removed from every .git: each one makes git run, read or trust something outside the repo's objects.
_REMOVED = (
    "hooks",
    "info/attributes",
    "objects/info/alternates",
    "objects/info/http-alternates",
    "config.worktree",
    "commondir",
    "worktrees",
)


_DIFFING = frozenset({"diff", "log", "show", "format-patch", "whatchanged"})


NO_HOME = "/dev/null"
"""git's HOME: every ``$HOME/...`` path git might read (``.gitconfig``, ``.config/git/ignore``,
``.config/git/attributes``, credentials) fails with ENOTDIR, which git takes as a missing file, and
no one can create one there; nothing is made, so nothing is left behind by a killed process."""


def git_env() -> dict[str, str]:
    """The whole environment git runs with on the host: no inherited variable at all.

    The safe config is also passed as ``GIT_CONFIG_COUNT`` entries so every git a tool
    starts (``git filter-repo`` runs several) gets it too.
    """
    env = {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "HOME": NO_HOME,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_ATTR_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_NO_REPLACE_OBJECTS": "1",
        "GIT_AUTHOR_DATE": _FIXED_DATE,
        "GIT_COMMITTER_DATE": _FIXED_DATE,
        "GIT_CONFIG_COUNT": str(len(SAFE_CONFIG)),
        **GIT_IDENTITY,
    }
    for i, item in enumerate(SAFE_CONFIG):
        key, _, value = item.partition("=")
        env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = key, value
    return env


def run_git(cwd: Path, args: Sequence[str], *, timeout_s: float = 120.0) -> str:
    """Run ``git <args>`` in ``cwd``; return stdout. Raise ``subprocess.CalledProcessError`` on failure.

    ``cwd`` must be a repo whose ``.git`` went through :func:`neutralise_git_dir` (or a repo
    the product created itself).
    """
    return run_git_bytes(cwd, args, timeout_s=timeout_s).decode("utf-8", errors="replace")


def run_git_bytes(cwd: Path, args: Sequence[str], *, timeout_s: float = 120.0) -> bytes:
    """:func:`run_git` returning raw stdout bytes (blob contents, ``-z`` listings)."""
    config = [arg for item in SAFE_CONFIG for arg in ("-c", item)]
    args = list(args)
    if args and args[0] in _DIFFING:  # never an external diff or a textconv command
        args[1:1] = ["--no-ext-diff", "--no-textconv"]
    argv = ["git", *config, *args]
    done = run_in_git_env(argv, cwd, timeout_s=timeout_s)
    if done.returncode != 0:
        stderr = done.stderr.decode("utf-8", errors="replace")
        raise subprocess.CalledProcessError(done.returncode, argv, done.stdout, stderr)
    return done.stdout


def run_in_git_env(argv: Sequence[str], cwd: Path, *, timeout_s: float) -> subprocess.CompletedProcess[bytes]:
    """Run ``argv`` (git, or a tool that runs git) in ``cwd`` as every git of the product runs:
    with :func:`git_env`, no stdin, its output captured. Its exit status is the caller's to judge."""
    return subprocess.run(
        argv,
        cwd=cwd,
        env=git_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=timeout_s,
        check=False,
    )


def kept_config(text: str) -> tuple[int, dict[str, str]]:
    """``(core.repositoryformatversion, {extension: value})`` read from a repo's config text. Pure.

    Everything else (remotes, credentials, ``http.*.extraheader``, includes, filters, hooks,
    fsmonitor, aliases) is dropped; values that are not plain tokens are dropped too.
    """
    version, extensions, section = 0, {}, ""
    for line in text.splitlines():
        header = _SECTION_RE.match(line)
        if header:
            section = header.group(1).lower()
            line = header.group(2)
        entry = _ENTRY_RE.match(line.split("#")[0].split(";")[0])
        if not entry or entry.group(2) is None:
            continue
        key, value = entry.group(1).lower(), entry.group(2).strip().strip('"')
        if not _TOKEN_RE.match(value):
            continue
        if section == "core" and key == "repositoryformatversion" and value in ("0", "1"):
            version = int(value)
        elif section == "extensions" and key not in _DROPPED_EXTENSIONS:
            extensions[key] = value.lower()
    return version, extensions


def config_text(version: int, extensions: dict[str, str], *, bare: bool = False) -> str:
    """The whole ``.git/config`` the product writes. Pure."""
    lines = ["[core]", f"\trepositoryformatversion = {version}", f"\tbare = {'true' if bare else 'false'}"]
    if extensions:
        lines.append("[extensions]")
        lines += [f"\t{key} = {value}" for key, value in sorted(extensions.items())]
    return "\n".join(lines) + "\n"


def _read_no_follow(path: Path) -> str:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""  # missing, a symlink, or unreadable: nothing of it is kept
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return ""  # a fifo or device: never read
        return f.read(1 << 20).decode("utf-8", errors="replace")


def _remove(path: Path) -> None:
    if path.is_symlink() or not path.is_dir():
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    else:
        shutil.rmtree(path)


def write_config(git_dir: Path, *, bare: bool = False) -> None:
    """Replace ``git_dir/config`` with the product's own (see :func:`kept_config`), by plain file I/O."""
    config = git_dir / "config"
    version, extensions = kept_config(_read_no_follow(config))
    _remove(config)
    fd = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(config_text(version, extensions, bare=bare))


def neutralise_git_dir(git_dir: Path) -> None:
    """Make a repo-controlled ``.git`` folder safe for host-side git (see module docstring).

    Never runs git and never follows a link: symlinks anywhere inside ``git_dir`` are
    deleted (a ``.git/index`` or ``.git/config`` linking out of the repo would otherwise be
    written through), and so are kept packs' ``.keep`` markers, so a repack can drop them.
    Raise ``OSError`` when the folder cannot be rewritten.
    """
    if git_dir.is_symlink() or not git_dir.is_dir():
        return
    for rel in _REMOVED:
        _remove(git_dir / rel)
    for dirpath, dirnames, filenames in os.walk(git_dir):
        for name in [*dirnames, *filenames]:
            path = Path(dirpath) / name
            if path.is_symlink() or (name.endswith(".keep") and Path(dirpath).name == "pack"):
                path.unlink()
    write_config(git_dir)
