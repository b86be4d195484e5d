"""Reading a corpus file of any format from the repo: the one way the producer opens one.

Our ``evals/<skill>.evals.json``, skill-creator's ``skills/<skill>/evals/evals.json`` and
every file of a plugin suite (``prompt.md``, ``case.yaml``, ``graders/*.md``) are read here.
Every component of the path is resolved first (:func:`engine.repo_files.resolve_inside`): a
link anywhere on the way out of the repo is ``BLOCKED_BAD_REPO`` before anything is opened,
so no byte of a host file is parsed or quoted in an error. The file is then opened without
following a link, must be a regular file, and is read up to the one size cap of every format
(``BLOCKED_BAD_CORPUS`` past it).
"""

from __future__ import annotations

from pathlib import Path

from engine.repo_files import UnreadableFile, bytes_inside
from producer.corpus.rules import MAX_CORPUS_BYTES
from schemas.errors import BadCorpus


def read_corpus_text(root: Path, rel: str, *, file: str | None = None) -> str | None:
    """The UTF-8 text of the corpus file ``root/rel``, or None when it does not exist.

    ``root`` must be resolved; ``file`` names the file in errors (``rel`` by default).
    Raise ``BadRepo`` for a link out of the repo and ``BadCorpus`` for anything but a
    regular UTF-8 file of at most :data:`MAX_CORPUS_BYTES` bytes.
    """
    name = file or rel
    try:
        data = bytes_inside(root, rel, MAX_CORPUS_BYTES)
    except UnreadableFile as exc:
        raise BadCorpus(name, "$", str(exc)) from None
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadCorpus(name, "$", f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
