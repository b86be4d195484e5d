"""Run git on the worker host with nothing outside the repo influencing it.

Workspace setup (clone, remote removal, fixture commits) runs git outside the sandbox, so
it must not read the worker's global or system config, run hooks or fsmonitor commands,
sign commits, or see the worker's environment (API keys). Commits get a fixed identity
and date so the same fixtures give the same commits.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "skill-eval",
    "GIT_AUTHOR_EMAIL": "skill-eval@localhost",
    "GIT_COMMITTER_NAME": "skill-eval",
    "GIT_COMMITTER_EMAIL": "skill-eval@localhost",
}
_FIXED_DATE = "2000-01-01T00:00:00+0000"
# Command-line config outranks every file, so these hold whatever the repo's config says.
_SAFE_CONFIG = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "safe.directory=*",
    "protocol.file.allow=always",
)


def _empty_home() -> str:
    # One empty folder per process: HOME for git so no ~/.gitconfig is read.
    global _HOME
    if _HOME is None or not os.path.isdir(_HOME):
        _HOME = tempfile.mkdtemp(prefix="skill-eval-githome-")
    return _HOME


_HOME: str | None = None


def git_env() -> dict[str, str]:
    """The whole environment git runs with on the host: no inherited variable at all."""
    return {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "HOME": _empty_home(),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_AUTHOR_DATE": _FIXED_DATE,
        "GIT_COMMITTER_DATE": _FIXED_DATE,
        **GIT_IDENTITY,
    }


def run_git(cwd: Path, args: Sequence[str], *, timeout_s: float = 120.0) -> str:
    """Run ``git <args>`` in ``cwd``; return stdout. Raise ``subprocess.CalledProcessError`` on failure."""
    config = [arg for item in _SAFE_CONFIG for arg in ("-c", item)]
    done = subprocess.run(
        ["git", *config, *args],
        cwd=cwd,
        env=git_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=True,
    )
    return done.stdout
