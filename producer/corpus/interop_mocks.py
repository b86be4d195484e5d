"""Mocked MCP servers of a plugin eval suite, ``evals/mocks/<server>/``, read as the cases' ``mocks``.

``_tools.json`` lists the server's tools in the MCP ``tools/list`` shape
(``{"tools": [{"name", "description", "inputSchema"}]}``); ``<tool>.md`` scripts one tool: front
matter ``type: fixed`` (the body is the answer, ``{{field}}`` replaced by the input), ``expect:``
(input field -> regular expression its value must match) and ``error:`` (a scripted error);
``type: agent``: the body is instructions a model answers each call from (built-in agent only).
Files are read through the suite's reader (:mod:`producer.corpus.files`: no link out of the
repo, regular files only, the suite's one size cap) and parsed under the corpus limits
(:mod:`producer.corpus.parse`); they are never executed, and the repo's own server commands are
never looked at beyond their names (docs/design/mocks.md).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.repo_files import resolve_inside
from producer.corpus.parse import parse_json, parse_yaml
from schemas.constants import EVALS_DIR
from schemas.errors import BadCorpus

MOCKS_DIR = f"{EVALS_DIR}/mocks"
MAX_SERVERS = 20
MAX_TOOLS = 100
MAX_FILE_CHARS = 256_000
TOOL_KEYS = frozenset({"type", "expect", "error", "description"})

Reader = Callable[[str], str | None]
"""Repo-relative path -> the file's text, or None when absent (``producer.corpus.interop.SuiteReader``)."""


def _read(read: Reader, file: str) -> str | None:
    text = read(file)
    if text is not None and len(text) > MAX_FILE_CHARS:
        raise BadCorpus(file, "$", f"is {len(text)} characters; at most {MAX_FILE_CHARS} are read")
    return text


def _listed(text: str, file: str) -> dict[str, dict[str, Any]]:
    data = parse_json(text, file)
    tools = data.get("tools") if isinstance(data, dict) else None
    if not isinstance(tools, list) or len(tools) > MAX_TOOLS:
        raise BadCorpus(file, "$.tools", f"must be a list of at most {MAX_TOOLS} tools")
    out = {}
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str) or not tool["name"].strip():
            raise BadCorpus(file, f"$.tools[{i}]", "needs a name")
        schema = tool.get("inputSchema", {"type": "object", "properties": {}})
        if not isinstance(schema, dict):
            raise BadCorpus(file, f"$.tools[{i}].inputSchema", "must be a JSON Schema object")
        out[tool["name"]] = {
            "name": tool["name"],
            "description": str(tool.get("description", "")),
            "input_schema": schema,
        }
    return out


def _scripted(text: str, file: str) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    body = text
    if text.startswith("---"):
        end = text.find("\n---", 3)
        if end < 0:
            raise BadCorpus(file, "front matter", "opens with --- but never closes")
        meta = parse_yaml(text[3:end], file, "front matter") or {}
        body = text[end + 4 :]
    if not isinstance(meta, dict) or set(meta) - TOOL_KEYS:
        raise BadCorpus(file, "front matter", f"must be a mapping of: {', '.join(sorted(TOOL_KEYS))}")
    kind = meta.get("type", "fixed")
    if kind not in ("fixed", "agent"):
        raise BadCorpus(file, "front matter.type", f"{kind!r} is not a mock type (fixed or agent)")
    key = "answer" if kind == "fixed" else "instructions"  # agent: a model answers, following the body
    out: dict[str, Any] = {key: body.strip("\n")}
    if meta.get("expect") is not None:
        out["expect"] = meta["expect"]
    if meta.get("error") is not None:
        out["error"] = str(meta["error"])
    if meta.get("description") is not None:
        out["description"] = str(meta["description"])
    return out


def _folder(root: Path, rel: str) -> Path | None:
    """The real folder ``rel`` names, or None when absent; a link (out of the repo: ``BadRepo``)
    is refused, since the workspace hides the mocks by their path, not a link's target."""
    real = resolve_inside(root, rel)
    if (root / rel).is_symlink():
        raise BadCorpus(rel, "$", "is a symbolic link; mock files are read only from regular folders")
    return real if real is not None and real.is_dir() else None


def read_mocks(root: Path, read: Reader) -> list[dict[str, Any]]:
    """Every mocked server under ``evals/mocks/``, as ``EvalCase.mocks`` entries (validated later)."""
    folder = _folder(root, MOCKS_DIR)
    if folder is None:
        return []
    names = sorted(d.name for d in folder.iterdir() if d.is_dir() or d.is_symlink())
    if len(names) > MAX_SERVERS:
        raise BadCorpus(MOCKS_DIR, "$", f"{len(names)} servers; at most {MAX_SERVERS} are read")
    out = []
    for name in names:
        rel = f"{MOCKS_DIR}/{name}"
        server = _folder(root, rel)
        if server is None:
            continue
        listed = _read(read, f"{rel}/_tools.json")
        tools = _listed(listed, f"{rel}/_tools.json") if listed is not None else {}
        for md in sorted(p.name for p in server.glob("*.md")):
            tool = md[: -len(".md")]
            tools.setdefault(tool, {"name": tool})
            tools[tool].update(_scripted(_read(read, f"{rel}/{md}") or "", f"{rel}/{md}"))
        out.append({"name": name, "tools": list(tools.values())[:MAX_TOOLS]})
    return out
