"""Checks before a run: what the run would refuse, found with no model call, no key and no binary.

``validate`` and ``run --dry-run`` call these so that they say by name everything the real run
would stop on or block, and the real run calls the flag checks first so that a mistyped flag
is refused before a cluster starts. Two kinds:

- flag checks raise: a missing ``--repo``, an ``--api-base`` that is not a URL, an unknown
  ``--invoke``, ``--detach`` without a broker, a skill or model named twice, ``--threshold``
  for a run without a plugin eval suite (exit 2, the contract's bad input);
- case guards are returned as lines: a case whose base-stage fixtures need git in a repo
  without it (``BLOCKED_FIXTURE_NEEDS_GIT``). The run reports these per case and goes on with
  the rest, so printing them does not change a dry run's exit code. (A ``--compare`` ref a
  skill cannot be read at is guarded where the plan is made: producer/plan/compare.py.)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

from engine.repo_source import is_remote
from reducer.plugin_score import is_plugin_suite
from schemas.errors import BadRepo, ConfigError, FixtureNeedsGit
from schemas.shard import SkillBundle
from schemas.status import FixtureStage

INVOKE_MODES = ("explicit", "implicit")


def check_repo_path(spec: str) -> None:
    """A local ``--repo`` must be an existing folder (an S3 repo is checked when it is fetched)."""
    if is_remote(spec):
        return
    path = Path(spec)
    if not path.exists():
        raise BadRepo(spec, "no such folder (--repo names a skill repo checkout)")
    if not path.is_dir():
        raise BadRepo(spec, "is not a folder (--repo names a skill repo checkout)")


def url_problem(value: str) -> str | None:
    """Why ``value`` is not an http(s) endpoint URL, or None when it is one."""
    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https"):
        return f"{value!r} is not an http:// or https:// URL (e.g. http://127.0.0.1:8080/v1)"
    if not parts.hostname:
        return f"{value!r} has no host"
    try:
        parts.port  # noqa: B018  # raises on a port that is not a number
    except ValueError:
        return f"{value!r} has a port that is not a number"
    return None


def check_api_base(value: str | None) -> None:
    """``--api-base`` is an endpoint: refuse what is not a URL before any key is looked at."""
    if value is None:
        return
    problem = url_problem(value)
    if problem:
        raise ConfigError(f"--api-base: {problem}")


def check_repeats(flag: str, values: Sequence[str]) -> None:
    """Refuse a value given more than once, naming the flag (or ``skill``) and the value.

    A repeated skill, model or executor would plan the same shards twice under one id, and a run
    would wait for results that never come; a user typing a name twice most likely erred."""
    seen: set[str] = set()
    for value in values:
        if value in seen:
            raise ConfigError(f"{flag} {value} given more than once")
        seen.add(value)


def check_plugin_threshold(
    threshold: float | None, corpus_files: Sequence[str], fail_under: float | None = None
) -> None:
    """``--threshold`` is what each case of a Claude Code plugin eval suite must score: refuse it
    for a run whose corpora (``corpus_files``, bad ones included) hold no plugin suite, where it
    would gate nothing while the report still named it. With it, ``--fail-under`` gates only the
    corpora that are not plugin suites: refused when there is none (alone, it is the case threshold)."""
    if threshold is not None and not any(is_plugin_suite(f) for f in corpus_files):
        raise ConfigError(
            f"--threshold {threshold:g}: this run has no Claude Code plugin eval suite (evals/<case>/ folders), "
            "the only corpora it applies to; a corpus's pass rate is gated by --fail-under"
        )
    if threshold is not None and fail_under is not None and all(is_plugin_suite(f) for f in corpus_files):
        raise ConfigError(
            f"--fail-under {fail_under:g}: every corpus of this run is a Claude Code plugin eval suite, judged "
            f"by its case scores against --threshold {threshold:g}; a suite's pass rate decides nothing, so "
            "--fail-under would gate nothing (without --threshold it is what every case must score)"
        )


def check_invoke(value: str) -> None:
    if value not in INVOKE_MODES:
        raise ConfigError(f"--invoke: unknown mode {value!r}; known: {', '.join(INVOKE_MODES)}")


def check_detach(detach: bool, broker_url: str | None) -> None:
    """``--detach`` leaves the run to a cluster; an embedded cluster would die with this command."""
    if detach and not broker_url:
        raise ConfigError(
            "--detach needs a cluster: pass --broker or set SKILL_EVAL_BROKER_URL "
            "(without one the run's private cluster ends with this command)"
        )


def repo_is_git(root: Path) -> bool:
    """Whether a workspace made from ``root`` has git: its ``.git`` must be a real folder (a
    ``.git`` file or link, as in a worktree or submodule, is dropped from every workspace)."""
    dot_git = root / ".git"
    return dot_git.is_dir() and not dot_git.is_symlink()


def fixture_guards(root: Path, bundles: Sequence[SkillBundle]) -> list[str]:
    """``BLOCKED_FIXTURE_NEEDS_GIT`` for each case whose base-stage fixtures need git the repo lacks."""
    if repo_is_git(root):
        return []
    lines = []
    for bundle in bundles:
        for case in bundle.corpus.evals:
            base = [f.path for f in case.fixtures if f.stage is FixtureStage.BASE]
            if base:
                paths = ", ".join(repr(p) for p in base)
                guard = FixtureNeedsGit(
                    f"{bundle.corpus_file}: case {case.id}: base-stage fixtures {paths} need a git repo "
                    f"({root} has no .git folder); the run blocks this case"
                )
                lines.append(str(guard))
    return lines
