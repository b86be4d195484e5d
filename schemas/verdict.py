"""Judge verdicts and per-shard grades."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from schemas.status import ShardState
from schemas.trajectory import Usage


class AssertionVerdict(BaseModel):
    """One assertion's verdict, as the judge (or a deterministic check) gave it."""

    model_config = ConfigDict(extra="forbid")

    text: str
    """The assertion, as in the corpus."""
    passed: bool
    """True when the transcript proves the assertion."""
    evidence: str
    """A verbatim quote when passed; ``absent: <what is missing>`` when not."""
    evidence_verified: bool | None = None
    """For passes: whether the quoted evidence was found in the transcript (None: not checked)."""
    note: str = ""
    """Why the verdict was changed after the judge answered (e.g. strict evidence), if it was."""
    check: Literal["judge", "deterministic"] = "judge"
    """Who decided: the judge model(s), or a deterministic check (extension) without a model."""
    weight: float = 1.0
    """Relative weight in weighted scores (deterministic assertions may set it; judged ones are 1)."""


class JudgeAnswer(BaseModel):
    """One judge model's grading of one shard, with every raw answer kept."""

    model_config = ConfigDict(extra="forbid")

    judge: str
    """Judge model name."""
    state: ShardState
    """``graded``, ``grader-malformed`` or ``grader-dispatch-failed``."""
    verdicts: list[AssertionVerdict] = Field(default_factory=list)
    """Per assertion, in corpus order (empty unless graded)."""
    raw_answers: list[str] = Field(default_factory=list)
    """Every raw answer text received (the first try and the re-ask)."""
    error: str = ""
    """Why the judge failed, when it did."""
    nonce: str = ""
    """The fence nonce of the last call."""
    usage: Usage = Field(default_factory=Usage)
    """Judge model usage for this shard."""


class PairAgreement(BaseModel):
    """How often two judges agreed on one shard's judged assertions."""

    model_config = ConfigDict(extra="forbid")

    judges: tuple[str, str]
    """The two judge models (sorted)."""
    share: float
    """Share of assertions on which they gave the same verdict."""


class ShardGrade(BaseModel):
    """The grade of one shard: the combined verdicts and each judge's answer."""

    model_config = ConfigDict(extra="forbid")

    version: Literal[1] = 1
    """Format version of this record."""
    shard_id: str
    """Shard graded."""
    state: ShardState
    """Terminal state of the shard."""
    verdicts: list[AssertionVerdict] = Field(default_factory=list)
    """Combined verdict per assertion (majority across judges; a tie is false)."""
    judges: list[JudgeAnswer] = Field(default_factory=list)
    """Each judge's answer."""
    template_hashes: dict[str, str] = Field(default_factory=dict)
    """SHA-256 of each prompt template used, by template name."""
    error: str = ""
    """Detail for non-graded states."""
    agreement: list[PairAgreement] = Field(default_factory=list)
    """Pairwise agreement between the judges that graded (empty with fewer than two)."""
    unanimous_share: float | None = None
    """Share of judged assertions all grading judges agreed on; None with fewer than two."""
    evidence_verified_share: float | None = None
    """Share of judged passes whose quoted evidence was found in the transcript; None: no pass checked."""
