"""Benchmark support: the project's modules byte-compiled before anything is timed.

The checkout is an editable install, so pip compiled only the dependencies. Where
``PYTHONDONTWRITEBYTECODE`` is set (this workplace's machines set it) nothing would ever write
the project's ``.pyc`` files, and every command and worker process under measurement would
compile the sources again: a few tenths of a second before each run's first model call that
no installed copy pays (pip compiles what it installs; ``make setup`` compiles the checkout).
"""

from __future__ import annotations

import compileall
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("schemas", "engine", "harnesses", "producer", "worker", "reducer", "prompts", "testkit")


def compile_sources() -> None:
    """Write any missing or stale ``.pyc`` of the project's packages (quick when none is)."""
    for name in PACKAGES:
        if not compileall.compile_dir(ROOT / name, quiet=1):
            raise SystemExit(f"bench: {name} does not compile")
