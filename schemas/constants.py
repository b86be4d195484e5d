"""Names and numbers shared by every part: queues, key prefixes, default paths, contract thresholds.

One place, so the contract's names and numbers are written here once and never re-typed
elsewhere.
"""

from __future__ import annotations

import re
from typing import Final

# --- Queues -------------------------------------------------------------------------------
QUEUE_EXECUTE: Final = "execute"
QUEUE_GRADE: Final = "grade"
QUEUE_REDUCE: Final = "reduce"
ALL_QUEUES: Final = (QUEUE_EXECUTE, QUEUE_GRADE, QUEUE_REDUCE)
CONSUME_ORDER: Final = (QUEUE_REDUCE, QUEUE_GRADE, QUEUE_EXECUTE)
"""The order a worker serving several queues takes the next message in: a shard already started
is finished (graded, the run reduced) before a new one is started. Round robin instead leaves
the last shards' grades queued behind executes, and the run's tail waits for them."""

# --- Worker start-up ------------------------------------------------------------------------
LITELLM_PRELOAD_ENV: Final = "SKILL_EVAL_PRELOAD_LITELLM"
"""``0``: a worker process does not import litellm ahead of need (its run's models all go
straight over HTTP); unset or anything else: it does, during its start-up."""

# --- Executors (the harness names are harnesses/registry.py's) ------------------------------
BUILTIN_EXECUTOR: Final = "agent"
"""``--executor`` of the built-in tool loop."""
CMD_EXECUTOR_PREFIX: Final = "cmd:"
"""``--executor cmd:<command line>``: an agent CLI speaking Claude Code's stream-json."""
RECORDED_EXECUTOR_PREFIX: Final = "recorded:"
"""The executor of ``skill-eval grade``: trajectories recorded elsewhere, nothing run."""

# --- Redis (every key is built in engine.keys) ----------------------------------------------
KEY_PREFIX: Final = "skill-eval"

# --- Repo layout (the contract's file names) ----------------------------------------------
EVALS_DIR: Final = "evals"
SKILLS_DIR: Final = "skills"
CORPUS_SUFFIX: Final = ".evals.json"
SKILL_FILE: Final = "SKILL.md"
AGENTS_DIR: Final = "agents"
DEFAULT_REPORT_DIR: Final = "zuvo/reports"
CONFIG_FILE: Final = "skill-eval.toml"

# Folders never copied into a workspace; users may add more.
HEAVY_DIRS: Final = ("node_modules", ".venv", "dist", "build", ".next")

# --- Corpus contract (schema v1) ----------------------------------------------------------
SKILL_NAME_RE: Final = re.compile(r"^[a-z0-9][a-z0-9-]*$")
MIN_EVALS: Final = 2
MIN_ASSERTION_CHARS: Final = 20
CHECKABLE_VERBS: Final = frozenset(
    {
        "contains",
        "matches",
        "exits",
        "outputs",
        "calls",
        "writes",
        "creates",
        "commits",
        "dispatches",
        "edits",
        "runs",
        "records",
        "shows",
    }
)
GLOB_CHARS: Final = frozenset("*?[]")

# --- Grading -----------------------------------------------------------------------------
BLOCK_CAP_CHARS: Final = 16_000
TRANSCRIPT_CAP_CHARS: Final = 120_000
NONCE_BYTES: Final = 8  # 16 hex characters

# --- Reporting gates ---------------------------------------------------------------------
INCONCLUSIVE_CASE_SHARE: Final = 0.25  # more than this share of shards (case x model x epoch) not graded
SMALL_CORPUS_CASES: Final = 4  # below this, any not-graded case -> INCONCLUSIVE
AGGREGATE_INCONCLUSIVE_SHARE: Final = 0.10  # more than this share of corpora INCONCLUSIVE
WARN_INSENSITIVE_SUITE: Final = "WARN_INSENSITIVE_SUITE"
"""``--baseline gutted``: the suite cannot tell the skill from its copy with the instructions removed."""
DEFAULT_THRESHOLD: Final = 1.0
"""A corpus passes when its behavioural pass rate reaches its threshold: every assertion, unless
``--fail-under`` lowers it (a failed assertion fails the run by default, as in other evaluators)."""
MIN_QUALITY_OBSERVATIONS: Final = 4
"""Graded verdicts an assertion needs, from at least two (arm, model) groups, before it is called
non-discriminating: one group cannot be told apart from another, and a few equal verdicts are
what a sound assertion shows as often as not."""
MIN_FLAKY_EPOCHS: Final = 3
"""Graded epochs one (arm, model) group needs before a change of verdict across them is called flaky."""
