"""Reading a skill repo from disk: targets, corpora, bundle keys. The I/O edge of planning."""

from __future__ import annotations

import difflib
import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from engine.repo_files import read_inside, resolve_inside
from producer.corpus import interop
from producer.corpus.files import read_corpus_text
from producer.corpus.interop_mocks import MOCKS_DIR
from producer.corpus.parse import parse_json
from producer.corpus.rules import check_skill_name, corpus_stem
from producer.corpus.validation import validate_corpus
from schemas.constants import AGENTS_DIR, CORPUS_SUFFIX, EVALS_DIR, SKILL_FILE, SKILLS_DIR
from schemas.errors import BadCorpus, BadRepo, BadSkillName, BlockedError, DevOnly, NoCorpus
from schemas.shard import SkillBundle
from schemas.triggers import TRIGGERS_SUFFIX


def bundle_key(skill: str, files: Iterable[tuple[str, bytes]]) -> str:
    """``<skill>-<12 hex>`` over SKILL.md, agents/*.md and the corpus (names and contents).

    Scoped per skill: an unrelated commit does not change it, and editing the skill text
    alone does (a corpus-only key would skip exactly the re-run that detects a change).
    """
    digest = hashlib.sha256()
    for name, content in sorted(files):
        digest.update(name.encode() + b"\0" + hashlib.sha256(content).digest())
    return f"{skill}-{digest.hexdigest()[:12]}"


@dataclass(frozen=True)
class CorpusOutcome:
    """The result of loading one target corpus: a bundle, or the named error that stopped it."""

    corpus_file: str
    bundle: SkillBundle | None = None
    error: BlockedError | None = None


_LOOKALIKE = re.compile(r"\.(?:json|ya?ml)$", re.IGNORECASE)
"""A file under ``evals/`` that could be a corpus by its format."""
_MAX_LOOKALIKE_DEPTH = 8


def _files_below(folder: Path, top: Path, skipped: set[str], depth: int = 0) -> list[str]:
    """The regular files below ``folder``, relative to ``top`` (links are not followed), past the
    folders ``skipped`` names (``evals/<name>``) and a few levels deep."""
    found = []
    for p in folder.iterdir():
        rel = p.relative_to(top).as_posix()
        if p.is_file():
            found.append(rel)
        elif p.is_dir() and not p.is_symlink() and f"{EVALS_DIR}/{rel}" not in skipped and depth < _MAX_LOOKALIKE_DEPTH:
            found += _files_below(p, top, skipped, depth + 1)
    return found


_KEBAB = re.compile(r"^[a-z0-9][a-z0-9-]*$")
"""A name a plugin suite can be attributed to (others get their named error when asked for by name)."""


class Repo:
    """A skill repo on the local disk (the working tree, uncommitted edits included)."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    def require_evals(self) -> None:
        """Raise DevOnly when the repo has no ``evals/`` folder; BadRepo
        when ``evals/`` is a link out of the repo."""
        evals = self.inside(EVALS_DIR)
        if (evals is None or not evals.is_dir()) and not interop.skill_creator_files(self.root):
            raise DevOnly(
                f"{self.root}: no {EVALS_DIR}/ folder; skill-eval needs an {EVALS_DIR}/ corpus "
                "in the working tree (it is not runnable from an installed plugin cache)"
            )

    def skill_dir_exists(self, name: str) -> bool:
        return (self.root / SKILLS_DIR / name).is_dir()

    def check_skill(self, name: str, file: str | None = None) -> str:
        """``name`` when it is kebab-case and ``skills/<name>/`` exists, else ``BadSkillName`` naming
        ``file`` (the corpus whose name it was read from) and the nearest skill when one is close."""
        try:
            return check_skill_name(name, self.skill_dir_exists)
        except BadSkillName as exc:
            near = difflib.get_close_matches(name.lower().replace("_", "-"), self._skill_names(), n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise BadSkillName(f"{file + ': ' if file else ''}{exc.detail}{hint}") from None

    def _skill_names(self) -> list[str]:
        folder = self.inside(SKILLS_DIR)
        return sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder is not None and folder.is_dir() else []

    def require_skill_file(self, skill: str) -> None:
        """Raise ``BLOCKED_BAD_REPO`` naming ``skills/<skill>/SKILL.md`` when it is not a readable file.

        The skill under test is its SKILL.md: without one the agent would be given no skill and
        the run would grade the bare model as the skill.
        """
        rel = f"{SKILLS_DIR}/{skill}/{SKILL_FILE}"
        if read_inside(self.root, rel) is not None:  # a link out of the repo is BLOCKED_BAD_REPO here
            return
        folder = self.inside(f"{SKILLS_DIR}/{skill}")
        names = [p.name for p in folder.iterdir()] if folder is not None and folder.is_dir() else []
        near = sorted(n for n in names if n.lower() == SKILL_FILE.lower())
        hint = f" ({near[0]!r} is there: the name is {SKILL_FILE}, in capitals)" if near else ""
        raise BadRepo(rel, f"does not exist; the skill under test needs its {SKILL_FILE}{hint}")

    def has_file(self, relpath: str) -> bool:
        """Whether ``relpath`` names a file or folder of the repo (a link loop names nothing);
        ``BLOCKED_BAD_REPO`` when a link on the way leads out of the repo or into ``.git``."""
        real = self.inside(relpath)
        return real is not None and real.exists()

    def corpus_path(self, skill: str) -> str:
        """Our ``evals/<skill>.evals.json``, else a skill-creator file or a plugin suite (interop.py)."""
        return interop.locate(self.root, skill)

    def all_corpus_files(self) -> list[str]:
        """Every corpus, one per skill: ours, else skill-creator's, else the skill's cases of a plugin suite."""
        folder = self.inside(EVALS_DIR)
        ours = (
            sorted(f"{EVALS_DIR}/{p.name}" for p in folder.glob("*" + CORPUS_SUFFIX) if p.is_file() or p.is_symlink())
            if folder is not None
            else []
        )
        have = {corpus_stem(f) for f in ours}
        creator = [f for f in interop.skill_creator_files(self.root) if f.split("/")[1] not in have]
        have |= {f.split("/")[1] for f in creator}
        skills_dir = self.root / SKILLS_DIR
        rest = sorted(
            p.name
            for p in (skills_dir.iterdir() if skills_dir.is_dir() else ())
            if p.is_dir() and p.name not in have and _KEBAB.match(p.name)
        )
        return ours + creator + interop.plugin_suite_files(self.root, rest)

    def unread_lookalikes(self, inputs: Iterable[str] = ()) -> list[str]:
        """A line for each file under ``evals/`` (in subfolders too) that looks like a corpus (JSON or
        YAML) but has no name a corpus is read by, so no run would ever read it (``release-note.eval.json``).
        Left out: ``inputs`` (the files the loaded cases name: a case may keep its input there) and a
        plugin suite's own folders (its case folders and ``evals/mocks/``), which it reads itself."""
        folder = self.inside(EVALS_DIR)
        if folder is None or not folder.is_dir():
            return []
        suite = {f"{EVALS_DIR}/{d.name}" for d in interop.case_dirs(self.root)} | {MOCKS_DIR}
        lines, known, named = [], (CORPUS_SUFFIX, TRIGGERS_SUFFIX), set(inputs)
        for path in sorted(_files_below(folder, folder, suite)):
            rel = f"{EVALS_DIR}/{path}"
            name = path.rsplit("/", 1)[-1]
            if not _LOOKALIKE.search(name) or (name.endswith(known) and "/" not in path) or rel in named:
                continue
            stem = name.split(".", 1)[0]
            meant = f"{EVALS_DIR}/{stem}{TRIGGERS_SUFFIX if 'trigger' in name.lower() else CORPUS_SUFFIX}"
            lines.append(
                f"WARNING: {rel}: not read; a corpus is {EVALS_DIR}/<skill>{CORPUS_SUFFIX} and a trigger corpus "
                f"{EVALS_DIR}/<skill>{TRIGGERS_SUFFIX} (did you mean {meant}?)"
            )
        return lines

    def lookalike_warnings(self, outcomes: Iterable[CorpusOutcome]) -> list[str]:
        """:meth:`unread_lookalikes` but the files the loaded corpora's cases name."""
        return self.unread_lookalikes(f for o in outcomes if o.bundle for c in o.bundle.corpus.evals for f in c.files)

    def inside(self, relpath: str) -> Path | None:
        """The real path of ``relpath``, or None when absent; ``BLOCKED_BAD_REPO`` when a link leaves the repo."""
        return resolve_inside(self.root, relpath)

    def bundle_files(self, skill: str, graded: tuple[str, ...] = ()) -> list[tuple[str, bytes]]:
        """SKILL.md, agents/*.md and the corpus files: the inputs that define what is graded.

        Each is read where it really is inside the repo; a link out of the repo is ``BLOCKED_BAD_REPO``.
        """
        skill_rel = f"{SKILLS_DIR}/{skill}"
        rels = [f"{skill_rel}/{SKILL_FILE}"]
        agents = self.inside(f"{skill_rel}/{AGENTS_DIR}")
        if agents is not None and agents.is_dir():
            rels += [f"{skill_rel}/{AGENTS_DIR}/{p.name}" for p in sorted(agents.glob("*.md"))]
        for rel in graded or (self.corpus_path(skill),):
            real = self.inside(rel)
            if real is not None and real.is_dir():  # a plugin suite's case folder
                rels += sorted(p.relative_to(self.root).as_posix() for p in real.rglob("*") if p.is_file())
            else:
                rels.append(rel)
        files = []
        for rel in rels:
            real = self.inside(rel)
            if real is not None and real.is_file():
                files.append((rel, real.read_bytes()))
        return files

    def load(self, corpus_file: str) -> SkillBundle:
        """Load and validate one corpus; raise the contract's named error on any problem."""
        if interop.is_foreign(corpus_file):
            return self._load_foreign(corpus_file)
        skill = self.check_skill(corpus_stem(corpus_file), corpus_file)
        self.require_skill_file(skill)
        path = self.inside(corpus_file)
        text = read_corpus_text(self.root, corpus_file) if path is not None and path.is_file() else None
        if text is None:
            raise NoCorpus(f"{corpus_file} not found; author it first")
        data = parse_json(text, corpus_file)
        corpus = validate_corpus(data, corpus_file, self.has_file)
        return SkillBundle(
            skill=skill,
            bundle_key=bundle_key(skill, self.bundle_files(skill)),
            corpus_file=corpus_file,
            corpus=corpus,
        )

    def _load_foreign(self, corpus_file: str) -> SkillBundle:
        foreign = interop.read_foreign(self.root, corpus_file)
        skill = self.check_skill(foreign.skill)
        self.require_skill_file(skill)
        try:
            corpus = validate_corpus(foreign.data, corpus_file, self.has_file, skill_name=skill)
        except BadCorpus as exc:
            raise foreign.locate_error(exc) or exc from exc
        problems = foreign.locate_error(None)
        if problems is not None:
            raise problems
        if foreign.case_names:  # the validator reads schema v1, which has no case name: set after it
            named = (c.model_copy(update={"name": n}) for c, n in zip(corpus.evals, foreign.case_names, strict=True))
            corpus = corpus.model_copy(update={"evals": tuple(named)})
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
            self.check_skill(name)
            corpus_file = self.corpus_path(name)
            if interop.is_foreign(corpus_file):
                found = interop.exists(self.root, corpus_file)
            else:
                real = self.inside(corpus_file)  # a link out of the repo is BLOCKED_BAD_REPO
                found = real is not None and real.is_file()
            if not found:
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
