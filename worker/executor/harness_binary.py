"""Finding an agent harness's binary on this host (``BLOCKED_NO_HARNESS`` when it is not there).

Order: the adapter's environment variable (``SKILL_EVAL_<NAME>_BIN``), then ``PATH``, then the
checkout's cache folder that ``make setup`` fills (``.harness-cache/node_modules/.bin``).
Symlinks are resolved so the sandbox binds the real file; an npm launcher (a node script) is
replaced by the native binary it would start when the adapter names where that lies
(``native_binaries``), so no node runtime is needed inside the sandbox.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from harnesses.base import Harness
from schemas.errors import NoHarness

CACHE_BIN = Path(__file__).resolve().parents[2] / ".harness-cache" / "node_modules" / ".bin"


def _native(harness: Harness, launcher: Path) -> Path:
    """The native binary an npm launcher script (``.js``) would start, found by the adapter's globs
    beside its package's folder; ``launcher`` itself when it is no script or nothing matches."""
    if launcher.suffix != ".js" or not harness.native_binaries:
        return launcher
    package = launcher.parent.parent  # node_modules/<scope>/<package>
    for pattern in harness.native_binaries:
        for candidate in sorted(package.parent.glob(pattern)):
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
    return _native(harness, Path(os.path.realpath(found)))


SEALED_DIR = Path(os.environ.get("SKILL_EVAL_SEALED_DIR", f"/var/tmp/skill-eval-sealed-{os.geteuid()}"))


def sealed_copy(binary: Path) -> Path:
    """An execute-only copy of ``binary`` (mode 0111), made once per binary version.

    Executing a file its process cannot read makes the kernel mark that process
    non-dumpable: then no other process of the same uid (the agent's own commands, inside
    the same sandbox) can ptrace it, open its ``/proc/<pid>/mem`` or reopen its file
    descriptors through ``/proc/<pid>/fd``. The harness binaries need not read themselves.
    """
    st = binary.stat()
    target = SEALED_DIR / f"{binary.name}-{st.st_size}-{int(st.st_mtime)}"
    if target.exists():
        return target
    SEALED_DIR.mkdir(mode=0o711, parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}")
    shutil.copyfile(binary, partial)
    os.chmod(partial, 0o111)
    os.replace(partial, target)
    return target
