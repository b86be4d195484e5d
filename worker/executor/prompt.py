"""Render the executor prompt from ``prompts/executor.md``.

The prompt carries the skill name, its SKILL.md, its agents/*.md, the case prompt and the
case's file list. It never carries ``expected_output`` or the assertions: the executor
must not know what it is graded on, so this module only ever reads
``case.prompt`` and ``case.files``.

The no-skill arm (``skill_text`` None) gets ``prompts/executor-no-skill.md``: the bare case
prompt with the same working rules and boundaries, and no word of the skill.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from prompts import load_template
from schemas.corpus import EvalCase
from schemas.trajectory import TrajectoryName

_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")


@dataclass(frozen=True)
class ExecutorInputs:
    """What every executor is told of one shard: the skill, as its arm shows it, and the case.

    The built-in agent and an external CLI both render their prompt from it and name their
    trajectory by it; the trigger loop asks the case prompt bare and names its trajectory by it.
    """

    skill: str
    """The skill's name (the trajectory's ``skill``)."""
    skill_text: str | None
    """The skill as the workspace holds it; None for the no-skill arm (the bare case prompt)."""
    agent_texts: Mapping[str, str]
    """The skill's ``agents/*.md``, file name -> text."""
    case: EvalCase
    shard_id: str = ""
    """The shard the trajectory is recorded for ("" outside a run: a canary, a test)."""

    def named(self, model: str) -> TrajectoryName:
        """The name of this shard's trajectory; ``model`` is what ran it (a model, a command's label)."""
        return TrajectoryName(shard_id=self.shard_id, skill=self.skill, case_id=self.case.id, model=model)


@dataclass(frozen=True)
class RenderedPrompt:
    """The executor prompt for one case, and the hash of the template it came from."""

    text: str
    template_sha256: str


def fill(template: str, values: Mapping[str, str]) -> str:
    """Replace every ``{{name}}`` token in one pass; raise KeyError for an unknown name.

    One pass means text inserted for one placeholder (a SKILL.md full of braces, say) is
    never itself scanned for placeholders.
    """
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


def render_executor_prompt(inputs: ExecutorInputs, *, workspace: str) -> RenderedPrompt:
    """Render the executor prompt for ``inputs`` with the sandbox's view of the workspace.

    ``skill_text`` None renders the no-skill arm's prompt (skill name and agents unused).
    """
    case, skill_text = inputs.case, inputs.skill_text
    files = "\n".join(f"- `{path}`" for path in case.files) or "(none named)"
    if skill_text is None:
        bare = load_template("executor-no-skill")
        values = {"case_files": files, "case_prompt": case.prompt.strip(), "workspace": workspace}
        return RenderedPrompt(text=fill(bare.text, values), template_sha256=bare.sha256)
    template = load_template("executor")
    if inputs.agent_texts:
        agents = "\n\n".join(
            f"### agents/{name}\n\n<agent>\n{text.strip()}\n</agent>"
            for name, text in sorted(inputs.agent_texts.items())
        )
    else:
        agents = "(this skill has no agents)"
    text = fill(
        template.text,
        {
            "skill_name": inputs.skill,
            "skill_text": skill_text.strip(),
            "agent_texts": agents,
            "case_files": files,
            "case_prompt": case.prompt.strip(),
            "workspace": workspace,
        },
    )
    return RenderedPrompt(text=text, template_sha256=template.sha256)
