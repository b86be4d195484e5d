"""Names and numbers shared by every part: queues, key prefixes, default paths, contract thresholds.

One place so the spec and the code can be read side by side (the contract's numbers are
quoted here once, never re-typed elsewhere).
"""

from __future__ import annotations

import re
from typing import Final

# --- Queues (DESIGN.md §3) -------------------------------------------------------------
QUEUE_EXECUTE: Final = "execute"
QUEUE_GRADE: Final = "grade"
QUEUE_REDUCE: Final = "reduce"
ALL_QUEUES: Final = (QUEUE_EXECUTE, QUEUE_GRADE, QUEUE_REDUCE)

# --- Redis key prefixes ------------------------------------------------------------------
KEY_PREFIX: Final = "skill-eval"
RUN_KEY: Final = KEY_PREFIX + ":run:{run_id}"  # hash: run manifest key, counters
SHARD_STATE_KEY: Final = KEY_PREFIX + ":run:{run_id}:states"  # hash: shard id -> state
LIMITER_KEY: Final = KEY_PREFIX + ":limit:{model}"
# A list per queue with one entry per leased (executing or grading) shard: what autoscalers add to
# the waiting messages, since Celery's queue list holds only messages not yet taken.
INFLIGHT_KEY: Final = KEY_PREFIX + ":inflight:{queue}"
NODE_KEY: Final = KEY_PREFIX + ":node:{node}"  # hash: a worker node's liveness record

# --- Repo layout (the contract's file names) ----------------------------------------------
EVALS_DIR: Final = "evals"
SKILLS_DIR: Final = "skills"
CORPUS_SUFFIX: Final = ".evals.json"
SKILL_FILE: Final = "SKILL.md"
AGENTS_DIR: Final = "agents"
DEFAULT_REPORT_DIR: Final = "zuvo/reports"
CONFIG_FILE: Final = "skill-eval.toml"

# Folders never copied into a workspace (contract Phase 2); users may add more.
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
# Trailing words that make an assertion unfalsifiable; "well-formed" is not one of them.
VAGUE_QUALIFIERS_RE: Final = re.compile(
    r"(?:(?<![\w-])(?:well|correctly|properly|appropriately)|(?<![\w-])as\s+expected)[\s.!?,;:]*\Z",
    re.IGNORECASE,
)
GLOB_CHARS: Final = frozenset("*?[]")

# --- Grading (contract Phase 3) -------------------------------------------------------------
BLOCK_CAP_CHARS: Final = 16_000
TRANSCRIPT_CAP_CHARS: Final = 120_000
NONCE_BYTES: Final = 8  # 16 hex characters

# --- Reporting gates (contract Phase 5) -----------------------------------------------------
INCONCLUSIVE_CASE_SHARE: Final = 0.25  # more than this share of cases not graded -> INCONCLUSIVE
SMALL_CORPUS_CASES: Final = 4  # below this, any not-graded case -> INCONCLUSIVE
AGGREGATE_INCONCLUSIVE_SHARE: Final = 0.10  # more than this share of corpora INCONCLUSIVE
