"""Compare mode: guard the old-vs-new comparison before anything runs.

Two distinct guards decide per skill whether a baseline can be graded; a guard hit skips
only the comparison (the current version is still graded; the run ends WARN with the skipped
comparison among its reasons, :mod:`reducer.gates`), never falls through to a phantom baseline:

- ``GUARD_NO_GIT``: the repo is not a git repository;
- ``GUARD_BAD_REF``: ``<ref>:skills/<skill>/SKILL.md`` cannot be read (bad ref, or the
  skill did not exist there).

Both runs are graded against the *current* corpus and the current grader, so the delta
measures the skill text alone.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from engine.gitcmd import SAFE_CONFIG, git_env
from schemas.constants import SKILL_FILE, SKILLS_DIR
from schemas.errors import BadRef, GuardError, NoGit
from schemas.shard import RunPlan, baseline_variant


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    # The developer's repo is read, never rewritten, so its config cannot be replaced as a
    # workspace's is: git runs under the product's environment and overriding config (no
    # hooks, fsmonitor, attributes files or replace objects; no inherited variable), and only
    # plumbing that never runs a filter, textconv or external diff (rev-parse, cat-file, ls-tree).
    # Arguments go to git as argv, never through a shell; the ref can never become an option.
    config = [arg for item in SAFE_CONFIG for arg in ("-c", item)]
    return subprocess.run(
        ["git", *config, "-C", str(root), *args],
        capture_output=True,
        timeout=30,
        check=False,
        env=git_env(),
        stdin=subprocess.DEVNULL,
    )


def check_compare(root: Path, ref: str, skill: str) -> GuardError | None:
    """None when the baseline of ``skill`` at ``ref`` can be graded, else the guard that was hit."""
    if _git(root, "rev-parse", "--git-dir").returncode != 0:
        return NoGit(f"skill-eval --compare needs a git repository at {root}; grading the current version only")
    if ref.startswith("-") or _git(root, "cat-file", "-e", f"{ref}:{SKILLS_DIR}/{skill}/{SKILL_FILE}").returncode != 0:
        return BadRef(
            f"could not read {ref}:{SKILLS_DIR}/{skill}/{SKILL_FILE} via git (bad ref, or the skill did not exist "
            "there); skipping the comparison, grading the current version only"
        )
    return None


def baseline_record(root: Path, ref: str, skill: str) -> bytes:
    """The whole old skill folder at ``ref`` as text: the audit record of what was compared."""
    listing = _git(root, "ls-tree", "-r", "-z", "--name-only", "--end-of-options", ref, "--", f"{SKILLS_DIR}/{skill}")
    parts = []
    for name in listing.stdout.decode(errors="replace").split("\0"):
        if not name:
            continue
        blob = _git(root, "cat-file", "blob", f"{ref}:{name}")  # raw bytes: a link's target text, never followed
        parts.append(f"===== {ref}:{name} =====\n".encode() + blob.stdout)
    return b"\n".join(parts)


def guard_compare(plan: RunPlan, root: Path, ref: str) -> tuple[RunPlan, list[str]]:
    """The plan with the baseline arm kept only for the skills whose guards pass, and one
    ``<skill>: <guard>`` line per skill that hit one: a dry run and the run plan alike."""
    guards, allowed = [], set()
    for bundle in plan.bundles:
        guard = check_compare(root, ref, bundle.skill)
        if guard is None:
            allowed.add(bundle.skill)
        else:
            guards.append(f"{bundle.skill}: {guard}")
    return restrict_baseline(plan, ref, allowed), guards


def restrict_baseline(plan: RunPlan, ref: str, allowed: set[str]) -> RunPlan:
    """Keep baseline shards only for the skills whose guards passed."""
    variant = baseline_variant(ref)
    shards = tuple(s for s in plan.shards if s.variant != variant or s.skill in allowed)
    variants = tuple(v for v in plan.variants if v != variant or allowed)  # a no-skill arm stays
    return plan.model_copy(update={"shards": shards, "variants": variants})
