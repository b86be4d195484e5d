"""The executor's six tools, every one executed as a command inside the sandbox.

``shell``, ``read_file``, ``write_file``, ``edit_file``, ``glob`` and ``grep`` never touch
the host filesystem from Python: reading is ``cat`` in the sandbox, writing streams the
content through stdin to ``cat >``, editing and globbing are tiny ``python3`` steps run in
the sandbox. So a path that points outside the workspace is contained by the sandbox
itself (read-only or absent there), not by a path check that could be got wrong.

A call with an unknown name or bad arguments returns an error result to the model (the
loop goes on); it is the model's mistake, not an infrastructure failure.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Any

from worker.sandbox import CommandResult, Sandbox

GLOB_MAX_HITS = 500

# Run by python3 inside the sandbox; the request comes as JSON on stdin so any text is safe.
_EDIT_SCRIPT = """
import json, sys
path = sys.argv[1]
req = json.load(sys.stdin)
try:
    with open(path, encoding="utf-8", newline="") as f:
        text = f.read()
except (OSError, UnicodeDecodeError) as exc:
    print(f"cannot read {path}: {exc}")
    sys.exit(1)
count = text.count(req["old"]) if req["old"] else 0
if count != 1:
    where = "not found" if count == 0 else f"found {count} times; it must be unique"
    print(f"edit_file: the old text was {where} in {path}")
    sys.exit(1)
with open(path, "w", encoding="utf-8", newline="") as f:
    f.write(text.replace(req["old"], req["new"], 1))
print(f"edited {path}")
"""

_GLOB_SCRIPT = f"""
import glob, sys
hits = sorted(glob.glob(sys.argv[1], recursive=True))
for hit in hits[:{GLOB_MAX_HITS}]:
    print(hit)
if len(hits) > {GLOB_MAX_HITS}:
    print(f"... and {{len(hits) - {GLOB_MAX_HITS}}} more")
if not hits:
    print("(no matches)")
"""


@dataclass(frozen=True)
class ToolOutcome:
    """What one tool call returned, as recorded in the trajectory and shown to the model."""

    output: str
    exit_code: int | None
    """The command's exit code; None when a limit killed it or the call never ran (bad call)."""
    truncated: bool = False
    limit: str | None = None
    wrote: str | None = None
    """The path a write_file or successful edit_file changed, as the agent named it."""

    @classmethod
    def error(cls, message: str) -> ToolOutcome:
        return cls(output=f"error: {message}", exit_code=None)


def _function(name: str, description: str, properties: dict[str, str], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {key: {"type": "string", "description": text} for key, text in properties.items()},
                "required": required,
            },
        },
    }


TOOL_SPECS: list[dict[str, Any]] = [
    _function(
        "shell",
        "Run a bash command in the repository root and return its combined output and exit code.",
        {"command": "The bash command line."},
        ["command"],
    ),
    _function(
        "read_file",
        "Return the text of a file.",
        {"path": "File path, relative to the repository root."},
        ["path"],
    ),
    _function(
        "write_file",
        "Create or overwrite a file with the given content (parent folders are created).",
        {"path": "File path, relative to the repository root.", "content": "The complete new content."},
        ["path", "content"],
    ),
    _function(
        "edit_file",
        "Replace one exact piece of text in a file. `old` must occur exactly once.",
        {"path": "File path.", "old": "The exact text to replace.", "new": "The replacement text."},
        ["path", "old", "new"],
    ),
    _function(
        "glob",
        "List paths matching a glob pattern (`**` matches any depth).",
        {"pattern": "Glob pattern, relative to the repository root."},
        ["pattern"],
    ),
    _function(
        "grep",
        "Search files for an extended regular expression; prints file:line:text.",
        {
            "pattern": "Extended regular expression.",
            "path": "File or folder to search (default: the repository).",
        },
        ["pattern"],
    ),
]
TOOL_NAMES = frozenset(spec["function"]["name"] for spec in TOOL_SPECS)
_REQUIRED = {spec["function"]["name"]: spec["function"]["parameters"]["required"] for spec in TOOL_SPECS}


def _outcome(result: CommandResult, *, empty: str = "", wrote: str | None = None) -> ToolOutcome:
    return ToolOutcome(
        output=result.output if result.output else empty,
        exit_code=result.exit_code,
        truncated=result.truncated,
        limit=result.limit,
        wrote=wrote if result.exit_code == 0 else None,
    )


def _check_arguments(name: str, arguments: dict[str, Any]) -> str | None:
    """Return what is wrong with the call, or None when it may run."""
    if name not in TOOL_NAMES:
        return f"unknown tool {name!r}; the tools are: {', '.join(sorted(TOOL_NAMES))}"
    if "_raw" in arguments and len(arguments) == 1:
        return f"the arguments of {name} were not valid JSON: {str(arguments['_raw'])[:200]!r}"
    for key in _REQUIRED[name]:
        if not isinstance(arguments.get(key), str):
            return f"{name} needs a string argument {key!r}"
    if name == "grep" and not isinstance(arguments.get("path", "."), str):
        return "grep's 'path' must be a string"
    return None


def execute_tool(
    sandbox: Sandbox, name: str, arguments: dict[str, Any], *, timeout_s: float | None = None
) -> ToolOutcome:
    """Run one tool call in ``sandbox``; never raises for the call's own failure."""
    problem = _check_arguments(name, arguments)
    if problem:
        return ToolOutcome.error(problem)
    run = sandbox.run
    if name == "shell":
        return _outcome(run(arguments["command"], timeout_s=timeout_s), empty="(no output)")
    if name == "read_file":
        return _outcome(run(f"cat -- {shlex.quote(arguments['path'])}", timeout_s=timeout_s))
    if name == "write_file":
        path = shlex.quote(arguments["path"])
        command = f'mkdir -p -- "$(dirname -- {path})" && cat > {path}'
        result = run(command, timeout_s=timeout_s, stdin=arguments["content"])
        done = f"wrote {len(arguments['content'])} characters to {arguments['path']}"
        return _outcome(result, empty=done if result.exit_code == 0 else "", wrote=arguments["path"])
    if name == "edit_file":
        request = json.dumps({"old": arguments["old"], "new": arguments["new"]})
        command = f"python3 -c {shlex.quote(_EDIT_SCRIPT)} {shlex.quote(arguments['path'])}"
        return _outcome(run(command, timeout_s=timeout_s, stdin=request), wrote=arguments["path"])
    if name == "glob":
        command = f"python3 -c {shlex.quote(_GLOB_SCRIPT)} {shlex.quote(arguments['pattern'])}"
        return _outcome(run(command, timeout_s=timeout_s))
    # grep: exit 1 means "no match", which the model should see as such, not as a failure.
    target = shlex.quote(arguments.get("path", "."))
    command = f"grep -rnEI --exclude-dir=.git -e {shlex.quote(arguments['pattern'])} -- {target}"
    return _outcome(run(command, timeout_s=timeout_s), empty="(no matches)")
