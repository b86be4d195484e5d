"""Mocked MCP servers of a plugin eval suite, ``evals/mocks/<server>/``, read as the cases' ``mocks``.

``_tools.json`` lists the server's tools in the MCP ``tools/list`` shape
(``{"tools": [{"name", "description", "inputSchema"}]}``); ``<tool>.md`` scripts one tool: front
matter ``type: fixed`` (the body is the answer, ``{{field}}`` replaced by the input), ``expect:``
(input field -> regular expression its value must match) and ``error:`` (a scripted error).
``type: agent`` (a model improvising the answer) is refused by name. Files are read as regular
files only, and never executed; the repo's own server commands are never looked at beyond their
names (docs/design/mocks.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from schemas.constants import EVALS_DIR
from schemas.errors import BadCorpus

MOCKS_DIR = f"{EVALS_DIR}/mocks"
MAX_SERVERS = 20
MAX_TOOLS = 100
MAX_FILE_CHARS = 256_000
TOOL_KEYS = frozenset({"type", "expect", "error", "description"})


def _read(path: Path, file: str) -> str:
    if path.is_symlink() or not path.is_file():
        raise BadCorpus(file, "$", "is not a regular file; mock files are read only as regular files")
    text = path.read_text(encoding="utf-8", errors="replace")
    if len(text) > MAX_FILE_CHARS:
        raise BadCorpus(file, "$", f"is {len(text)} characters; at most {MAX_FILE_CHARS} are read")
    return text


def _listed(text: str, file: str) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadCorpus(file, "$", f"not JSON: {exc.msg} at line {exc.lineno}") from exc
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
        try:
            meta = yaml.safe_load(text[3:end]) or {}
        except yaml.YAMLError as exc:
            raise BadCorpus(file, "front matter", f"not YAML: {str(exc).splitlines()[0]}") from exc
        body = text[end + 4 :]
    if not isinstance(meta, dict) or set(meta) - TOOL_KEYS:
        raise BadCorpus(file, "front matter", f"must be a mapping of: {', '.join(sorted(TOOL_KEYS))}")
    kind = meta.get("type", "fixed")
    if kind != "fixed":
        raise BadCorpus(file, "front matter.type", f"{kind!r}: only fixed mocks are supported (agent mocks are not)")
    out: dict[str, Any] = {"answer": body.strip("\n")}
    if meta.get("expect") is not None:
        out["expect"] = meta["expect"]
    if meta.get("error") is not None:
        out["error"] = str(meta["error"])
    if meta.get("description") is not None:
        out["description"] = str(meta["description"])
    return out


def read_mocks(root: Path) -> list[dict[str, Any]]:
    """Every mocked server under ``evals/mocks/``, as ``EvalCase.mocks`` entries (validated later)."""
    folder = root / MOCKS_DIR
    if folder.is_symlink() or not folder.is_dir():
        return []
    servers = sorted(d for d in folder.iterdir() if d.is_dir() and not d.is_symlink())
    if len(servers) > MAX_SERVERS:
        raise BadCorpus(MOCKS_DIR, "$", f"{len(servers)} servers; at most {MAX_SERVERS} are read")
    out = []
    for server in servers:
        rel = f"{MOCKS_DIR}/{server.name}"
        listing = server / "_tools.json"
        tools = _listed(_read(listing, f"{rel}/_tools.json"), f"{rel}/_tools.json") if listing.exists() else {}
        for md in sorted(server.glob("*.md")):
            name = md.stem
            tools.setdefault(name, {"name": name})
            tools[name].update(_scripted(_read(md, f"{rel}/{md.name}"), f"{rel}/{md.name}"))
        out.append({"name": server.name, "tools": list(tools.values())[:MAX_TOOLS]})
    return out
