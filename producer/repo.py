"""Reading a skill repo from disk: targets, corpora, bundle keys. The I/O edge of planning."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from producer import interop
from producer.planning import bundle_key
from producer.validation import check_skill_name, corpus_stem, validate_corpus
from schemas.constants import AGENTS_DIR, CORPUS_SUFFIX, EVALS_DIR, SKILL_FILE, SKILLS_DIR
from schemas.errors import BadCorpus, BlockedError, DevOnly, NoCorpus
from schemas.shard import SkillBundle


@dataclass(frozen=True)
class CorpusOutcome:
    """The result of loading one target corpus: a bundle, or the named error that stopped it."""

    corpus_file: str
    bundle: SkillBundle | None = None
    error: BlockedError | None = None


class Repo:
    """A skill repo on the local disk (the working tree, uncommitted edits included)."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    def require_evals(self) -> None:
        """Raise DevOnly when the repo has no ``evals/`` folder (contract Phase 0.2) nor a skill-creator file."""
        if not (self.root / EVALS_DIR).is_dir() and not interop.skill_creator_files(self.root):
            raise DevOnly(
                f"{self.root}: no {EVALS_DIR}/ folder; skill-eval needs an {EVALS_DIR}/ corpus "
                "in the working tree (it is not runnable from an installed plugin cache)"
            )

    def skill_dir_exists(self, name: str) -> bool:
        return (self.root / SKILLS_DIR / name).is_dir()

    def has_file(self, relpath: str) -> bool:
        return (self.root / relpath).exists()

    def corpus_path(self, skill: str) -> str:
        """Our ``evals/<skill>.evals.json``, else a skill-creator file or a plugin suite (:mod:`producer.interop`)."""
        return interop.locate(self.root, skill)

    def all_corpus_files(self) -> list[str]:
        ours = sorted(f"{EVALS_DIR}/{p.name}" for p in (self.root / EVALS_DIR).glob("*" + CORPUS_SUFFIX) if p.is_file())
        have = {corpus_stem(f) for f in ours}
        return ours + [f for f in interop.skill_creator_files(self.root) if f.split("/")[1] not in have]

    def bundle_files(self, skill: str, graded: tuple[str, ...] = ()) -> list[tuple[str, bytes]]:
        """SKILL.md, agents/*.md and the corpus files: the inputs that define what is graded."""
        skill_dir = self.root / SKILLS_DIR / skill
        paths = [skill_dir / SKILL_FILE, *sorted((skill_dir / AGENTS_DIR).glob("*.md"))]
        for rel in graded or (f"{EVALS_DIR}/{skill}{CORPUS_SUFFIX}",):
            target = self.root / rel
            paths += sorted(p for p in target.rglob("*") if p.is_file()) if target.is_dir() else [target]
        return [(p.relative_to(self.root).as_posix(), p.read_bytes()) for p in paths if p.is_file()]

    def load(self, corpus_file: str) -> SkillBundle:
        """Load and validate one corpus; raise the contract's named error on any problem."""
        if interop.is_foreign(corpus_file):
            return self._load_foreign(corpus_file)
        skill = check_skill_name(corpus_stem(corpus_file), self.skill_dir_exists)
        path = self.root / corpus_file
        if not path.is_file():
            raise NoCorpus(f"{corpus_file} not found; author it first")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except UnicodeDecodeError as exc:
            raise BadCorpus(corpus_file, "$", f"not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
        except json.JSONDecodeError as exc:
            raise BadCorpus(corpus_file, "$", f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc
        corpus = validate_corpus(data, corpus_file, self.has_file)
        return SkillBundle(
            skill=skill,
            bundle_key=bundle_key(skill, self.bundle_files(skill)),
            corpus_file=corpus_file,
            corpus=corpus,
        )

    def _load_foreign(self, corpus_file: str) -> SkillBundle:
        foreign = interop.read_foreign(self.root, corpus_file)
        skill = check_skill_name(foreign.skill, self.skill_dir_exists)
        try:
            corpus = validate_corpus(foreign.data, corpus_file, self.has_file, skill_name=skill)
        except BadCorpus as exc:
            raise foreign.locate_error(exc) from exc
        return SkillBundle(
            skill=skill,
            bundle_key=bundle_key(skill, self.bundle_files(skill, foreign.graded_paths)),
            corpus_file=corpus_file,
            corpus=corpus,
            graded_paths=foreign.graded_paths,
        )

    def targets(self, skills: list[str], all_evals: bool) -> list[str]:
        """Corpus files for the named skills (checked names first) or every corpus.

        Raises DevOnly, BadSkillName or NoCorpus for a named skill; ``--all-evals``
        defers per-corpus errors to :meth:`load_many` so one bad corpus stops no other.
        """
        self.require_evals()
        if all_evals:
            files = self.all_corpus_files()
            if not files:  # a misplaced --repo must not go green with zero cases
                raise NoCorpus(f"{self.root}/{EVALS_DIR}/*{CORPUS_SUFFIX}: no corpus found")
            return files
        files = []
        for name in skills:
            check_skill_name(name, self.skill_dir_exists)
            corpus_file = self.corpus_path(name)
            if not interop.exists(self.root, corpus_file):
                raise NoCorpus(f"{corpus_file} not found; author it first")
            files.append(corpus_file)
        return files

    def load_many(self, corpus_files: list[str]) -> list[CorpusOutcome]:
        """Load every corpus, collecting named errors instead of stopping at the first."""
        outcomes = []
        for corpus_file in corpus_files:
            try:
                outcomes.append(CorpusOutcome(corpus_file, bundle=self.load(corpus_file)))
            except BlockedError as exc:
                outcomes.append(CorpusOutcome(corpus_file, error=exc))
        return outcomes
