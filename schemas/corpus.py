"""The eval corpus (``evals/<skill>.evals.json``), schema v1 of the contract.

These models describe a corpus that has already passed :mod:`producer.validation`;
the validator owns the contract's rules and their error messages, the models own
the shape that crosses queues and lands in the store.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from schemas.status import FixtureStage


class Fixture(BaseModel):
    """A file written into the case's workspace before the executor starts."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str
    """Repo-relative literal path (no glob characters, no escape from the root)."""
    content: str
    """Exact file content, written verbatim."""
    stage: FixtureStage = FixtureStage.HEAD
    """``base`` is committed before the case starts; ``head`` is written last and left uncommitted."""


class EvalCase(BaseModel):
    """One eval case: a prompt for the executor and assertions for the judge."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: int
    """Case id, unique within its corpus."""
    prompt: str
    """What the user asks the agent; the only task text the executor sees."""
    expected_output: str
    """What a good run produces; never shown to the executor."""
    files: tuple[str, ...]
    """Repo-relative files the case is about (exist in the repo or are fixture paths)."""
    assertions: tuple[str, ...]
    """Observable facts about the agent's tool calls; graded one by one, never shown to the executor."""
    fixtures: tuple[Fixture, ...] = ()
    """Files to materialize in the workspace before the run."""

    @property
    def has_base_fixtures(self) -> bool:
        return any(f.stage is FixtureStage.BASE for f in self.fixtures)


class Corpus(BaseModel):
    """A skill's eval corpus."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    skill_name: str
    """Kebab-case skill name; equals the corpus file stem."""
    evals: tuple[EvalCase, ...] = Field(min_length=2)
    """The cases, at least two."""

    @property
    def assertion_count(self) -> int:
        return sum(len(case.assertions) for case in self.evals)

    def case(self, case_id: int) -> EvalCase:
        """Return the case with ``case_id``; raise ``KeyError`` when there is none."""
        for case in self.evals:
            if case.id == case_id:
                return case
        raise KeyError(case_id)
