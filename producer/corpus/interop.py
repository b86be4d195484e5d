"""Finding and reading a skill's corpus in any of the formats skill-eval understands. The I/O edge.

For skill ``S`` the first that exists wins:

1. ``evals/S.evals.json`` (skill-eval's own schema v1);
2. ``skills/S/evals/evals.json`` (Anthropic skill-creator, :mod:`producer.corpus.interop_skill_creator`);
3. the Claude Code plugin suite ``evals/<case>/`` of a repo that is a plugin
   (``.claude-plugin/plugin.json`` or ``plugin.json``), its cases for ``S``
   (:mod:`producer.corpus.interop_plugin`).

Every format ends in the same validator and the same named errors, and every file of the
graded corpus is listed in the bundle's ``graded_paths`` so workspaces never hold it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.repo_files import resolve_inside
from producer.corpus.files import read_corpus_text
from producer.corpus.interop_add_dirs import add_dir_fixtures
from producer.corpus.interop_mocks import MOCKS_DIR, read_mocks
from producer.corpus.interop_plugin import ADD_DIRS, PLUGIN_MANIFESTS, PluginCase, suite_corpus, translate_plugin_suite
from producer.corpus.interop_skill_creator import SKILL_CREATOR_FILE, skill_creator_path, translate_skill_creator
from producer.corpus.parse import parse_json
from producer.corpus.rules import MAX_CORPUS_BYTES, all_of
from schemas.constants import CORPUS_SUFFIX, EVALS_DIR, SKILLS_DIR
from schemas.errors import BadCorpus, BlockedError

_PLUGIN_FILE = re.compile(r"^" + re.escape(EVALS_DIR) + r"/\*/ \[plugin suite: ([a-z0-9][a-z0-9-]*)\]$")


def plugin_suite_name(skill: str) -> str:
    """The corpus name reports show for a plugin suite's cases of ``skill``."""
    return f"{EVALS_DIR}/*/ [plugin suite: {skill}]"


@dataclass(frozen=True)
class ForeignCorpus:
    """A corpus read from another format: the schema-v1 dict, its skill, and its files."""

    data: dict[str, Any]
    skill: str
    graded_paths: tuple[str, ...]
    origins: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Schema-v1 JSON path prefix -> (file, path) in the original format, for error messages."""
    problems: tuple[BadCorpus, ...] = ()
    """Violations found while reading the original format (the validator's are added to them)."""
    unreadable: frozenset[str] = frozenset()
    """Files that could not be parsed: the validator's word on their empty case is left out."""
    case_names: tuple[str, ...] = ()
    """A plugin suite's case folder names, in the order of ``data["evals"]`` (none otherwise)."""

    def locate_error(self, exc: BadCorpus | None) -> BadCorpus | None:
        """Every violation, the reading's then the validator's, each pointed at the original file and
        field; None when there is none. Capped like a native corpus's (:func:`all_of`)."""
        located = [self._locate_one(e) for e in ((exc, *exc.also) if exc is not None else ())]
        found = [*self.problems, *(e for e in located if e.file not in self.unreadable)]
        return all_of(found) if found else None

    def _locate_one(self, exc: BadCorpus) -> BadCorpus:
        for prefix in sorted(self.origins, key=len, reverse=True):
            if exc.path == prefix or exc.path.startswith(prefix + ".") or exc.path.startswith(prefix + "["):
                file, path = self.origins[prefix]
                return BadCorpus(file, path + exc.path[len(prefix) :], exc.problem)
        return exc


def locate(root: Path, skill: str) -> str:
    """The corpus file name for ``skill`` in the order above (our own name when none exists)."""
    ours = f"{EVALS_DIR}/{skill}{CORPUS_SUFFIX}"
    if (root / ours).is_file():
        return ours
    if (root / skill_creator_path(skill)).is_file():
        return skill_creator_path(skill)
    if is_plugin(root) and case_dirs(root):
        return plugin_suite_name(skill)
    return ours


def exists(root: Path, corpus_file: str) -> bool:
    if _PLUGIN_FILE.match(corpus_file):
        return is_plugin(root) and bool(case_dirs(root))
    return (root / corpus_file).is_file()


def is_foreign(corpus_file: str) -> bool:
    return not corpus_file.endswith(CORPUS_SUFFIX)


def skill_creator_files(root: Path) -> list[str]:
    """Every ``skills/*/evals/evals.json`` (for ``--all-evals``)."""
    return sorted(p.relative_to(root).as_posix() for p in (root / SKILLS_DIR).glob(f"*/{SKILL_CREATOR_FILE}"))


def plugin_suite_files(root: Path, skills: list[str]) -> list[str]:
    """For ``--all-evals`` in a plugin repo: the plugin suite of each of ``skills`` that has a case in it.

    A suite that cannot be read is still listed (its named error is reported like any other
    corpus's); a skill with no case in the suite has no corpus there, so it is left out.
    """
    if not is_plugin(root) or not case_dirs(root):
        return []
    names = []
    for skill in skills:
        name = plugin_suite_name(skill)
        try:
            foreign = read_foreign(root, name)
            has_cases = bool(foreign.data["evals"] or foreign.problems)
        except BlockedError:  # listed: its named error is reported with the other corpora
            has_cases = True
        if has_cases:
            names.append(name)
    return names


def is_plugin(root: Path) -> bool:
    return any((root / m).is_file() for m in PLUGIN_MANIFESTS)


def case_dirs(root: Path) -> list[Path]:
    """A plugin suite's case folders: ``evals/<case>/`` with a ``prompt.md`` or a ``case.yaml``."""
    folder = root / EVALS_DIR
    if not folder.is_dir():
        return []
    return sorted(
        d
        for d in folder.iterdir()
        if d.is_dir() and not d.is_symlink() and ((d / "prompt.md").is_file() or (d / "case.yaml").is_file())
    )


def _read(root: Path, rel: str) -> str | None:
    """A file of a foreign corpus, read the one safe way (:func:`producer.corpus.files.read_corpus_text`);
    the file itself must not be a link (the workspace drops the corpus by its path, not its target)."""
    if (root / rel).is_symlink():
        raise BadCorpus(rel, "$", "is a symbolic link; corpus files are read only as regular files")
    return read_corpus_text(root, rel)


def _text(root: Path, rel: str) -> str:
    text = _read(root, rel)
    if text is None:
        raise BadCorpus(rel, "$", "not found")
    return text


class SuiteReader:
    """Reads a plugin suite's files (cases, graders, scripts, mocks) the one safe way
    (:func:`_read`), holding the suite as a whole to the one size cap."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.total = 0

    def __call__(self, rel: str) -> str | None:
        text = _read(self.root, rel)
        self.total += len(text or "")
        if self.total > MAX_CORPUS_BYTES:
            raise BadCorpus(f"{EVALS_DIR}/", "$", f"the suite's files are larger than {MAX_CORPUS_BYTES} bytes in all")
        return text


def _plugin_cases(root: Path, read: SuiteReader) -> list[PluginCase]:
    """Every case folder's files. Scripts are the folder's regular ``*.sh`` files (a link is not one)."""
    cases = []
    for d in case_dirs(root):
        rel = f"{EVALS_DIR}/{d.name}"
        graders_dir = resolve_inside(root, f"{rel}/graders")  # a link out is refused before it is listed
        found = graders_dir.glob("*.md") if graders_dir is not None else ()
        names = sorted(g.name for g in found if g.is_file() or g.is_symlink())
        graders = {name: read(f"{rel}/graders/{name}") or "" for name in names}
        scripts = sorted(s.name for s in d.glob("*.sh") if s.is_file() and not s.is_symlink())
        sessions = sorted(s.name for s in d.glob("*.jsonl") if s.is_file() and not s.is_symlink())
        cases.append(
            PluginCase(
                name=d.name,
                prompt_md=read(f"{rel}/prompt.md"),
                case_yaml=read(f"{rel}/case.yaml"),
                graders=graders,
                scripts={name: read(f"{rel}/{name}") or "" for name in scripts},
                sessions={name: read(f"{rel}/{name}") or "" for name in sessions},
            )
        )
    return cases


def _add_dirs(root: Path, case: dict[str, Any], folder: str, read: SuiteReader, file: str) -> None:
    """A case's ``add_dirs`` become its fixtures, and its ``files`` name them (the agent is told)."""
    dirs = case.pop(ADD_DIRS, None)
    if dirs:
        fixtures = add_dir_fixtures(root, folder, dirs, read, file)
        case["fixtures"] = fixtures
        case["files"] = [f["path"] for f in fixtures]


def read_foreign(root: Path, corpus_file: str) -> ForeignCorpus:
    """Read a skill-creator file or a plugin suite as a schema-v1 dict (validate it next)."""
    match = _PLUGIN_FILE.match(corpus_file)
    if match:
        skill = match.group(1)
        read = SuiteReader(root)
        cases = _plugin_cases(root, read)
        skills = (
            sorted(p.name for p in (root / SKILLS_DIR).iterdir() if p.is_dir()) if (root / SKILLS_DIR).is_dir() else []
        )
        reading = translate_plugin_suite(cases, skill, skills)
        data, folders = suite_corpus(reading, skill), reading.folders
        mocks = read_mocks(root, read)
        if mocks:
            for case_data in data["evals"]:
                case_data["mocks"] = mocks
        origins: dict[str, tuple[str, str]] = {}
        for i, folder in enumerate(folders):
            case = next(c for c in cases if f"{EVALS_DIR}/{c.name}" == folder)
            main = f"{folder}/prompt.md" if case.prompt_md is not None else f"{folder}/case.yaml"
            origins[f"$.evals[{i}]"] = (main, "$")
            try:
                _add_dirs(root, data["evals"][i], folder, read, f"{folder}/case.yaml" if case.case_yaml else main)
            except BadCorpus as exc:
                reading.found.append(exc)
            for j, origin in enumerate(reading.origins[i]):
                origins[f"$.evals[{i}].assertions[{j}]"] = origin
        hidden = (MOCKS_DIR,) if mocks else ()  # the mocks' answers are graded inputs: never in a workspace
        names = tuple(folder.rpartition("/")[2] for folder in folders)
        return ForeignCorpus(
            data, skill, (*folders, *hidden), origins, tuple(reading.found), frozenset(reading.unreadable), names
        )
    parts = corpus_file.split("/")
    if len(parts) != 4 or parts[0] != SKILLS_DIR or "/".join(parts[2:]) != SKILL_CREATOR_FILE:
        raise BadCorpus(corpus_file, "$", "not a corpus skill-eval can read")
    skill = parts[1]
    data = parse_json(_text(root, corpus_file), corpus_file)
    translated = translate_skill_creator(data, corpus_file, skill)
    origins = {
        f"$.evals[{i}].assertions": (corpus_file, f"$.evals[{i}].expectations")
        for i, raw in enumerate(data["evals"])
        if isinstance(raw, dict) and "expectations" in raw
    }
    return ForeignCorpus(translated, skill, (corpus_file,), origins)
