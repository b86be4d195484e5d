"""Loading recorded trajectories for grade-only runs (``skill-eval grade --trajectories``).

Expected layout, under a local directory or an ``s3://bucket/prefix``::

    <root>/<skill>/case-<id>.json              the product's own Trajectory JSON
    <root>/<skill>/case-<id>.epoch-<n>.json    the same, one file per epoch (0-based)
    <root>/<skill>/case-<id>[.epoch-<n>].jsonl a Claude Code stream-json log
                                               (``claude -p --output-format stream-json --verbose``)

The path decides the skill, case and epoch (epoch 0 when absent); a Trajectory JSON whose
own ``skill`` or ``case_id`` disagrees with its path is refused rather than guessed at.
The epoch number is the file's own label, 0- or 1-based as the user wrote it (gaps allowed):
only the recordings that exist are graded, each under its own number.

Files with other extensions (notes, READMEs) are ignored and named in ``notes`` (a warning);
a ``.json``/``.jsonl`` file (in any letter case) that does not follow the layout, a skill
folder that is not kebab-case, or two files for the same (skill, case, epoch) is a
:class:`ConfigError` naming the file, so a misnamed recording never silently drops out of
the grade. A stream-json line that is not JSON is skipped (a log cut short still holds its
evidence) and named, with its file and line, in ``notes``.
"""

from __future__ import annotations

import io
import os
import re
import stat
from pathlib import Path

from pydantic import ValidationError

from engine.store import ArtifactStore, LocalStore, S3Store, open_store
from harnesses.stream_json import read_stream_json
from schemas.constants import SKILL_NAME_RE
from schemas.errors import ConfigError
from schemas.event_bounds import capped_text
from schemas.trajectory import Event, ToolResultEvent, Trajectory

CASE_FILE_RE = re.compile(r"case-(?P<case>[0-9]+)(?:\.epoch-(?P<epoch>[0-9]+))?\.(?P<ext>jsonl|json)")
MAX_EPOCH = 10**6
"""An epoch label past this is refused: a run has at most a few hundred epochs."""
MAX_CASE_DIGITS = 18
"""A case id is a corpus's integer id; a longer run of digits is no case (and past 4,300 no int)."""
MAX_RECORDING_BYTES = 256 * 1024 * 1024
"""A recorded trajectory larger than this is refused (the executor's own transcripts stay far below)."""
IMPORTED_MODEL = "imported"
"""Model label of a stream-json trajectory (the log does not always name one the same way)."""

Imported = tuple[str, int, int, Trajectory]
"""(skill, case id, epoch, trajectory)."""


def parse_key(key: str) -> tuple[str, int, int, str] | None:
    """``<skill>/case-<id>[.epoch-<n>].json|jsonl`` -> (skill, case, epoch, ext); None for files
    the layout ignores (other extensions). Raises ConfigError for a misnamed recording."""
    if not key.lower().endswith((".json", ".jsonl")):
        return None
    parts = key.split("/")
    match = CASE_FILE_RE.fullmatch(parts[-1])
    if len(parts) != 2 or match is None:
        lower = " (file names are lower-case)" if CASE_FILE_RE.fullmatch(parts[-1].lower()) else ""
        raise ConfigError(f"{key}: a recorded trajectory must be <skill>/case-<id>[.epoch-<n>].json or .jsonl{lower}")
    skill = parts[0]
    if not SKILL_NAME_RE.fullmatch(skill):
        raise ConfigError(f"{key}: {skill!r} is not a kebab-case skill name")
    if len(match["case"]) > MAX_CASE_DIGITS:
        raise ConfigError(f"{key}: a case id of {len(match['case'])} digits; at most {MAX_CASE_DIGITS}")
    epoch = match["epoch"] or "0"
    if len(epoch) > len(str(MAX_EPOCH)) or int(epoch) > MAX_EPOCH:
        raise ConfigError(f"{key}: epoch {epoch[:20]} is past {MAX_EPOCH}")
    return skill, int(match["case"]), int(epoch), match["ext"]


def junk_note(key: str, lines: list[int]) -> str:
    """The warning for a stream-json file's lines that were not JSON (the first ten numbered)."""
    shown = ", ".join(str(n) for n in lines[:10]) + (f" and {len(lines) - 10} more" if len(lines) > 10 else "")
    return f"{key}: line {shown} not JSON, skipped (the rest of the recording is graded)"


def parse_stream_file(data: bytes, key: str, skill: str, case_id: int, notes: list[str]) -> Trajectory:
    """Decode a stream-json recording; its non-JSON lines are named in ``notes``."""
    try:
        # Line by line: a huge line is parsed, its result capped and let go before the next.
        parsed = read_stream_json(line.decode("utf-8", errors="replace") for line in io.BytesIO(data))
    except (RecursionError, ValueError) as exc:  # the JSON parser's own limits: named, never a crash
        raise ConfigError(f"{key}: cannot be read: {type(exc).__name__} (nested too deep or a huge integer)") from None
    if not parsed.events:  # a log with no readable event is a broken recording, not a lazy agent
        raise ConfigError(f"{key}: no stream-json event could be read")
    if parsed.junk_lines:
        notes.append(junk_note(key, parsed.junk_lines))
    return parsed.trajectory(skill, case_id, IMPORTED_MODEL)


def parse_trajectory(data: bytes, key: str, skill: str, case_id: int, notes: list[str] | None = None) -> Trajectory:
    """Decode one recorded file (``.json`` product format, ``.jsonl`` stream-json); warnings go to ``notes``."""
    if len(data) > MAX_RECORDING_BYTES:
        raise ConfigError(f"{key}: larger than {MAX_RECORDING_BYTES} bytes")
    if key.endswith(".jsonl"):
        return parse_stream_file(data, key, skill, case_id, [] if notes is None else notes)
    text = data.decode("utf-8", errors="replace")
    try:
        trajectory = Trajectory.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "$"
        raise ConfigError(f"{key}: not a trajectory: {where}: {first['msg']}") from None
    if trajectory.skill != skill or trajectory.case_id != case_id:
        raise ConfigError(
            f"{key}: records skill {trajectory.skill!r} case {trajectory.case_id}, but its path says "
            f"skill {skill!r} case {case_id}"
        )
    return trajectory.model_copy(update={"events": [_capped(e) for e in trajectory.events]})


def _capped(event: Event) -> Event:
    """A recorded tool result cut as every executor cuts one (head and tail, the cut counted)."""
    if not isinstance(event, ToolResultEvent):
        return event
    output, cut = capped_text(event.output)
    return event.model_copy(update={"output": output, "truncated": True}) if cut else event


def _refuse_links(root: Path, key: str) -> None:
    """A recording in a local folder is read only where it is: no component of its path a link."""
    path = root.joinpath(*key.split("/"))
    if os.path.realpath(path) != str(path):
        raise ConfigError(f"{key}: is read through a link; recorded trajectories are read only as regular files")


def read_local(path: Path, name: str) -> bytes:
    """A local recording's bytes: a regular file only (a FIFO would hang, a device never end),
    its size checked before reading and at most one byte past the limit read."""
    try:
        info = os.lstat(path)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"{name}: is {_kind(info.st_mode)}; recorded trajectories are read only as regular files")
        if info.st_size > MAX_RECORDING_BYTES:
            raise ConfigError(f"{name}: larger than {MAX_RECORDING_BYTES} bytes")
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)  # swapped for a FIFO: no hang
        with os.fdopen(fd, "rb") as file:
            if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
                raise ConfigError(f"{name}: changed while read; recorded trajectories are read only as regular files")
            data = file.read(MAX_RECORDING_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{name}: cannot be read: {exc.strerror or type(exc).__name__}") from None
    if len(data) > MAX_RECORDING_BYTES:
        raise ConfigError(f"{name}: larger than {MAX_RECORDING_BYTES} bytes")
    return data


def _kind(mode: int) -> str:
    kinds = (
        (stat.S_ISLNK, "a link"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((what for test, what in kinds if test(mode)), "a device")


def _read(store: ArtifactStore, key: str) -> bytes:
    """One recording of ``store``, never more than one byte past the limit read."""
    if isinstance(store, LocalStore):
        _refuse_links(store.root, key)
        return read_local(store.root.joinpath(*key.split("/")), key)
    if isinstance(store, S3Store):
        with store.open(key) as body:
            return body.read(MAX_RECORDING_BYTES + 1)
    return store.get(key)


def _linked_folders(root: Path) -> None:
    """A linked folder under a local root is named, not silently passed over by the walk."""
    for dirpath, dirs, _files in os.walk(root):
        for name in dirs:
            if os.path.islink(os.path.join(dirpath, name)):
                key = Path(dirpath, name).relative_to(root).as_posix()
                raise ConfigError(f"{key}: is a link; recorded trajectories are read only in real folders")


def load_trajectories(path_or_uri: str | Path, notes: list[str] | None = None) -> list[Imported]:
    """Every recorded trajectory under ``path_or_uri`` (a local directory, a single local file
    laid out as ``.../<skill>/case-<id>...``, ``file://`` or ``s3://``), sorted by (skill, case,
    epoch). Raises ConfigError for a missing root, a bad file or a duplicate; StoreError when
    the store cannot be read. ``notes`` receives the warnings: files ignored, lines skipped."""
    notes = [] if notes is None else notes
    target = str(path_or_uri)
    if "://" not in target:
        local = Path(target).resolve()
        if local.exists() and not local.is_dir():
            key = f"{local.parent.name}/{local.name}"
            parsed = parse_key(key)
            if parsed is None:
                raise ConfigError(f"{local}: not a .json or .jsonl trajectory")
            skill, case_id, epoch, _ext = parsed
            return [
                (skill, case_id, epoch, parse_trajectory(read_local(local, str(local)), key, skill, case_id, notes))
            ]
        if not local.is_dir():
            raise ConfigError(f"{local}: no such trajectory directory")
        _linked_folders(local)
        target = str(local)
    store = open_store(target)
    found: dict[tuple[str, int, int], str] = {}
    loaded: list[Imported] = []
    for key in store.list(""):
        parsed = parse_key(key)
        if parsed is None:
            notes.append(f"{key}: ignored, not a recording (<skill>/case-<id>[.epoch-<n>].json|.jsonl)")
            continue
        skill, case_id, epoch, _ext = parsed
        if (skill, case_id, epoch) in found:
            raise ConfigError(
                f"{key}: a second recording of {skill} case {case_id} epoch {epoch} "
                f"(first: {found[(skill, case_id, epoch)]})"
            )
        found[(skill, case_id, epoch)] = key
        loaded.append((skill, case_id, epoch, parse_trajectory(_read(store, key), key, skill, case_id, notes)))
    if not loaded:
        raise ConfigError(f"{path_or_uri}: no recorded trajectories (<skill>/case-<id>[.epoch-<n>].json|.jsonl)")
    return sorted(loaded, key=lambda item: item[:3])
