"""A trigger shard with the built-in agent: the bare query, every installed skill in a catalogue, and a
``load_skill`` tool. Decisions: docs/design/triggers.md.

The agent sees what a harness shows it: each installed skill's name and description, in a system
message, and one tool to load a skill's body by name. A ``load_skill`` call naming an installed skill
is an activation, read from the record (the tool call), never from the agent's words. The shard ends
after the turn of its first activation, or after ``--trigger-turns`` turns without one.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engine.repo_files import gutted_skill, read_inside
from harnesses.activations import load_skill_calls, skills_fired
from harnesses.model_record import ModelToolCall
from schemas.constants import SKILL_FILE, SKILL_NAME_RE, SKILLS_DIR
from schemas.errors import BadRepo
from schemas.manifest import AgentBudget
from schemas.trajectory import EndReason, ToolCallEvent, ToolResultEvent, Trajectory
from worker.executor.agent import _Loop
from worker.executor.prompt import ExecutorInputs
from worker.executor.tools import ToolOutcome
from worker.models.base import ModelClient
from worker.sandbox import Sandbox

LOAD_SKILL = "load_skill"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")
MAX_CATALOGUE_SKILLS = 500
"""Installed skills listed at most (a repo of more is cut, the cut said in the catalogue)."""
MAX_DESCRIPTION_CHARS = 1024
"""A description's share of the catalogue, as harnesses cap it."""
MAX_BODY_CHARS = 32_000
"""What ``load_skill`` returns of a SKILL.md at most."""
CATALOGUE_TEMPLATE = (
    "You are a coding agent working in the repository at {workspace}.\n"
    "These skills are installed. When one fits the user's request, load it with the "
    "{tool} tool before you act; otherwise work without one.\n\n{catalogue}"
)
TEMPLATE_SHA256 = hashlib.sha256(CATALOGUE_TEMPLATE.encode()).hexdigest()

LOAD_SKILL_SPEC: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": LOAD_SKILL,
        "description": "Load an installed skill's instructions (its SKILL.md) by name, when the skill fits the task.",
        "parameters": {
            "type": "object",
            "properties": {"name": {"type": "string", "description": "The skill's name, as the catalogue lists it."}},
            "required": ["name"],
        },
    },
}


@dataclass(frozen=True)
class CatalogueEntry:
    name: str
    """The skill's folder name (a front matter cannot claim another skill's name)."""
    description: str


def front_matter_description(text: str) -> str:
    """The ``description`` of a SKILL.md front matter, folded to one line ('' when it has none)."""
    kept = gutted_skill(text).splitlines()[1:-1]
    value: list[str] = []
    taking = False
    for line in kept:
        if line[:1] not in (" ", "\t") and line.strip():
            key, _, rest = line.partition(":")
            value = [rest.strip()] if key.strip() == "description" else value
            taking = key.strip() == "description"
        elif taking:
            value.append(line.strip())
    folded = " ".join(v for v in value if v and v not in (">", "|", ">-", "|-"))
    if len(folded) >= 2 and folded[0] == folded[-1] and folded[0] in "'\"":
        folded = folded[1:-1]
    return folded


def skill_catalogue(root: Path) -> list[CatalogueEntry]:
    """Every ``skills/<name>/SKILL.md`` of the workspace, by name; links out of it are not followed."""
    folder = Path(os.path.realpath(root)) / SKILLS_DIR
    names = sorted(p.name for p in folder.iterdir() if SKILL_NAME_RE.match(p.name)) if folder.is_dir() else []
    out = []
    for name in names[:MAX_CATALOGUE_SKILLS]:
        try:
            text = read_inside(Path(os.path.realpath(root)), f"{SKILLS_DIR}/{name}/{SKILL_FILE}")
        except BadRepo:  # a SKILL.md linking out of the workspace is not an installed skill: never read
            continue
        if text is not None:
            out.append(CatalogueEntry(name, front_matter_description(text)[:MAX_DESCRIPTION_CHARS]))
    return out


def catalogue_message(entries: list[CatalogueEntry], workspace: str) -> str:
    """The system message: the repository, the skills, how to load one."""
    # Control characters and line breaks of a description cannot forge another catalogue line.
    lines = [f"- {e.name}: {_CONTROL.sub(' ', e.description)}" for e in entries]
    return CATALOGUE_TEMPLATE.format(workspace=workspace, tool=LOAD_SKILL, catalogue="\n".join(lines or ["(none)"]))


@dataclass(eq=False, kw_only=True)
class _TriggerLoop(_Loop):
    """The agent loop with the catalogue, ``load_skill``, and the stop at the first activation."""

    root: Path
    """The workspace, whose installed skills ``load_skill`` reads."""
    installed: frozenset[str]
    """The catalogue's skill names: the only ones ``load_skill`` loads."""
    fired: list[str] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        """Offer ``load_skill`` beside the tools the loop was given."""
        self.tools = replace(self.tools, specs=[*self.tools.specs, LOAD_SKILL_SPEC])

    def resolve(self, raw: object) -> str | None:
        """The installed skill a ``load_skill`` argument names, plain or plugin-qualified (``plugin:skill``)."""
        if not isinstance(raw, str):
            return None
        name = raw.strip().rsplit(":", 1)[-1]
        return name if name in self.installed else None

    def run_tool(self, call: ModelToolCall) -> ToolOutcome:
        if call.name != LOAD_SKILL:
            return super().run_tool(call)
        self.events.append(ToolCallEvent(call_id=call.call_id, name=LOAD_SKILL, arguments=call.arguments))
        skill = self.resolve(call.arguments.get("name"))
        if skill is None:
            outcome = ToolOutcome.error(f"no installed skill is named {json.dumps(call.arguments.get('name'))}")
        else:
            if skill not in self.fired:
                self.fired.append(skill)
            body = read_inside(Path(os.path.realpath(self.root)), f"{SKILLS_DIR}/{skill}/{SKILL_FILE}") or ""
            outcome = ToolOutcome(output=body[:MAX_BODY_CHARS], exit_code=0, truncated=len(body) > MAX_BODY_CHARS)
        self.events.append(
            ToolResultEvent(call_id=call.call_id, output=outcome.output, exit_code=outcome.exit_code, truncated=False)
        )
        return outcome

    def after_turn(self) -> EndReason | None:
        return EndReason.SKILL_ACTIVATED if self.fired else None


def run_trigger_agent(
    client: ModelClient,
    model: str,
    inputs: ExecutorInputs,
    *,
    sandbox: Sandbox,
    root: Path,
    budget: AgentBudget,
) -> Trajectory:
    """Ask the case prompt bare with the workspace's skills in the catalogue; record which skills fired.

    The skill's own text is not shown: the agent finds it only by loading it from the catalogue.
    """
    started_at = datetime.now(UTC)
    catalogue = skill_catalogue(root)
    loop = _TriggerLoop(
        client,
        model,
        sandbox,
        budget,
        system=catalogue_message(catalogue, sandbox.inner_root),
        root=root,
        installed=frozenset(e.name for e in catalogue),
    )
    begun = time.monotonic()
    end_reason = loop.run(inputs.case.prompt)
    return Trajectory(
        **inputs.named(model),
        events=loop.events,
        end_reason=end_reason,
        sandbox=sandbox.mode,
        usage=loop.usage,
        waited_s=round(min(loop.waited_s, time.monotonic() - begun), 3),
        template_hashes={"trigger-catalogue": TEMPLATE_SHA256},
        # Read back from the record, as for every executor (the loop's own list only decides the stop).
        skills_fired=skills_fired(load_skill_calls, loop.events, loop.installed),
        started_at=started_at,
        finished_at=datetime.now(UTC),
    )
