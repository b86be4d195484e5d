"""Refuse, before anything runs, a repo a given harness could not be run on as it should: one
holding more instruction files than the sandbox can hide from a harness that would read them
(:mod:`harnesses.repo_hiding`). Reads the working tree."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from harnesses.registry import harness_for
from schemas.errors import BadRepo


def check_repo_terms(root: Path, executors: Iterable[str]) -> None:
    """Raise BadRepo naming the repo and the harness when one of ``executors`` cannot hide the
    repo's instruction files from itself."""
    for executor in executors:
        harness = harness_for(executor)
        if harness is None or harness.hidden_files is None:
            continue
        why = harness.hidden_files.too_many(root.resolve())
        if why is not None:
            raise BadRepo(str(root), f"{why} ({executor})")
