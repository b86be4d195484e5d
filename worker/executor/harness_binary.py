"""Finding an agent harness's binary on this host (``BLOCKED_NO_HARNESS`` when it is not there).

Order: the adapter's environment variable (``SKILL_EVAL_CLAUDE_CODE_BIN``,
``SKILL_EVAL_CODEX_BIN``), then ``PATH``, then the checkout's cache folder that ``make setup``
fills (``.harness-cache/node_modules/.bin``). Symlinks are resolved so the sandbox binds the
real file; for Codex the npm launcher (a node script) is replaced by the native binary it
would start, so no node runtime is needed inside the sandbox.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from harnesses.base import Harness
from schemas.errors import NoHarness

CACHE_BIN = Path(__file__).resolve().parents[2] / ".harness-cache" / "node_modules" / ".bin"


def _native_codex(launcher: Path) -> Path:
    if launcher.suffix != ".js":
        return launcher
    package = launcher.parent.parent  # node_modules/@openai/codex
    for candidate in sorted(package.parent.glob("codex-linux-*/vendor/*/codex/codex")):
        if os.access(candidate, os.X_OK):
            return candidate
    for candidate in sorted(package.glob("vendor/*/codex/codex")):
        if os.access(candidate, os.X_OK):
            return candidate
    return launcher


def find_binary(harness: Harness) -> Path:
    """The real path of ``harness``'s executable; raise :class:`NoHarness` naming how to install it."""
    named = os.environ.get(harness.binary_env)
    found = named or shutil.which(harness.binary_name) or shutil.which(harness.binary_name, path=str(CACHE_BIN))
    if not found or not os.access(found, os.X_OK):
        where = f"{harness.binary_env}={named} is not an executable" if named else "not found"
        raise NoHarness(f"{harness.name}: {where}; {harness.install_hint}")
    real = Path(os.path.realpath(found))
    return _native_codex(real) if harness.name == "codex" else real
