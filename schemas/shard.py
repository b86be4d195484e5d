"""Shards and run manifests: what the producer plans and every worker reads.

A shard is one unit of work: (run, variant, skill, case, executor model, epoch), and in a sweep
over several executors (``--executor`` given more than once) the harness it runs under too.
Its id is a hash of exactly those fields, so a resubmission or a redelivery of the
same work always lands on the same id; a run of one executor leaves the harness out of the
hash, so its ids are what they were before the harness became a dimension.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

from pydantic import Field, model_validator

from schemas.adaptive import AdaptivePlan
from schemas.base import FrozenModel
from schemas.corpus import Corpus
from schemas.status import SandboxMode
from schemas.triggers import TriggerSet

CURRENT = "current"
BASELINE_PREFIX = "baseline@"
NO_SKILL = "no-skill"
"""The arm run with the skill absent: from the workspace (history included) and from the prompt."""
SAME = "same"
"""The current skill run again as a second arm: what two identical arms disagree on is the noise floor."""
GUTTED = "gutted"
"""The skill with its instructions removed (the name and description of its front matter kept, so
it still triggers): what the suite loses against it is the suite's sensitivity."""


def baseline_variant(ref: str) -> str:
    """The variant name of an old skill version materialized from git ``ref``."""
    return BASELINE_PREFIX + ref


ROW_SEPARATOR = " × "
"""Between the harness and the model in a sweep's row name (``claude-code × anthropic/claude-sonnet-4-5``):
no executor name holds it, so a row name splits back into its two parts."""


def row_name(model: str, harness: str | None) -> str:
    """The name a shard's figures are kept under: the model, or ``<harness> × <model>`` in a sweep
    over several harnesses (the reducer, the reports and the viewer show one row per name)."""
    return model if harness is None else f"{harness}{ROW_SEPARATOR}{model}"


def shard_id_for(
    run_id: str, variant: str, skill: str, case_id: int, model: str, epoch: int, harness: str | None = None
) -> str:
    """Deterministic shard id: 16 hex characters of a SHA-256 over the identifying fields."""
    # The unit separator cannot occur in any field (skill names are kebab-case, refs and
    # model names are printable), so distinct tuples never collide by concatenation.
    fields = (run_id, variant, skill, str(case_id), model, str(epoch))
    raw = "\x1f".join(fields if harness is None else (*fields, harness))
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


class Shard(FrozenModel):
    """One (variant, skill, case, model, epoch) of a run."""

    shard_id: str = ""
    """Deterministic id, see :func:`shard_id_for`: derived from the fields below when not given, and a
    given one that is not theirs is refused (a redelivery must land on the same id, whoever wrote it)."""
    run_id: str
    """The run this shard belongs to."""
    variant: str
    """``current``, ``baseline@<ref>``, ``no-skill``, ``same`` or ``gutted``."""
    skill: str
    """Skill under test."""
    case_id: int
    """Eval case id within the skill's corpus."""
    model: str
    """Executor model (a litellm model name, or ``cmd:`` for an external agent CLI)."""
    epoch: int
    """Repetition index, 0-based."""
    harness: str | None = None
    """The executor this shard runs under in a sweep over several (an ``--executor`` value); None:
    the run's one executor (``RunSettings.executor``)."""

    @model_validator(mode="after")
    def _id_of_fields(self) -> Shard:
        derived = shard_id_for(
            self.run_id, self.variant, self.skill, self.case_id, self.model, self.epoch, self.harness
        )
        if not self.shard_id:
            object.__setattr__(self, "shard_id", derived)  # the model is frozen; this is its construction
        elif self.shard_id != derived:
            raise ValueError(f"shard id {self.shard_id!r} is not the id of its fields ({derived!r})")
        return self

    @classmethod
    def planned(
        cls, run_id: str, variant: str, skill: str, case_id: int, model: str, epoch: int, harness: str | None = None
    ) -> Shard:
        """The shard of these fields, its id derived from them."""
        return cls(
            run_id=run_id, variant=variant, skill=skill, case_id=case_id, model=model, epoch=epoch, harness=harness
        )

    @property
    def row(self) -> str:
        """The row its figures count in (:func:`row_name`)."""
        return row_name(self.model, self.harness)


class SkillBundle(FrozenModel):
    """A skill as planned: its corpus and the key that identifies its graded inputs."""

    skill: str
    """Skill name (kebab-case, has a ``skills/<name>/`` folder)."""
    bundle_key: str
    """``<skill>-<12 hex>``: hash of SKILL.md + agents/*.md + corpus (the dedup key of --all-evals)."""
    corpus_file: str
    """Repo-relative path of the corpus file."""
    corpus: Corpus
    """The validated corpus; every variant is graded against this one (hold the stick constant)."""
    graded_paths: tuple[str, ...] = ()
    """Repo-relative files and folders of the graded corpus, removed from every workspace; empty
    means ``corpus_file`` alone (a skill-creator file or a plugin suite's case folders otherwise)."""
    triggers: TriggerSet | None = None
    """A trigger run's queries (``corpus`` then holds one bare case per query, same ids); None otherwise."""


class RunPlan(FrozenModel):
    """What a run will do, computed before anything is enqueued."""

    run_id: str
    """``YYYYMMDD-HHMMSS-<8 hex>``, made once per run."""
    bundles: tuple[SkillBundle, ...]
    """Skills in the run, in the order given."""
    models: tuple[str, ...]
    """Executor models."""
    judges: tuple[str, ...] = ()
    """Judge models (an ensemble when more than one)."""
    epochs: int = Field(default=1, ge=1)
    """Repetitions of every case per model."""
    variants: tuple[str, ...] = (CURRENT,)
    """``current`` and optionally one ``baseline@<ref>`` and/or ``no-skill``."""
    shards: tuple[Shard, ...]
    """Every shard of the run, deterministic order."""
    sandbox: SandboxMode = SandboxMode.BWRAP
    """Sandbox mode every executor tool call runs under."""
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    """When the plan was made (UTC)."""
    adaptive: AdaptivePlan | None = None
    """``--epochs auto``: ``epochs`` is then the first round's, and this says what each case got."""
    harnesses: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    """A sweep over several executors: each executor (in the order given) -> the models it runs
    (those of ``models`` it can speak). Empty: one executor runs every model."""

    @property
    def rows(self) -> tuple[str, ...]:
        """The rows of the run's figures in plan order: its models, or each harness × model pair."""
        if not self.harnesses:
            return self.models
        return tuple(row_name(m, h) for h, models in self.harnesses.items() for m in models)

    @property
    def case_count(self) -> int:
        return sum(len(b.corpus.evals) for b in self.bundles)

    @property
    def assertion_count(self) -> int:
        return sum(b.corpus.assertion_count for b in self.bundles)

    def epochs_of(self, skill: str, case_id: int) -> int:
        """The epochs planned for one case: ``epochs``, or its own count when epochs are adaptive."""
        return self.adaptive.epochs_of(skill, case_id) if self.adaptive is not None else self.epochs

    def bundle(self, skill: str) -> SkillBundle:
        for b in self.bundles:
            if b.skill == skill:
                return b
        raise KeyError(skill)
