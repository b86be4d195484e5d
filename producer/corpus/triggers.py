"""``run --triggers``, ``validate`` and ``--dry-run`` for trigger corpora: find and load them, make
their bundles, and the plan's cost estimate. Decisions: docs/design/triggers.md.

A trigger bundle carries its TriggerSet and, as its ``corpus``, one bare case per query (same ids,
the query as the prompt, no assertions), so planning, the workspace and the queues treat a trigger
query like any case. The whole ``evals/`` folder leaves every workspace: another skill's trigger
set would tell the agent which skill each query is meant for; so does the author's own agent setup
(``AUTHOR_SETUP``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from producer.corpus.parse import parse_json
from producer.corpus.repo import CorpusOutcome, Repo, bundle_key
from producer.corpus.rules import MAX_CORPUS_BYTES
from producer.corpus.trigger_validation import trigger_stem, validate_triggers
from schemas.constants import EVALS_DIR, SKILL_FILE, SKILLS_DIR
from schemas.corpus import Corpus, EvalCase
from schemas.errors import BadCorpus, BlockedError, NoCorpus
from schemas.shard import RunPlan, SkillBundle
from schemas.summary import HarnessPair
from schemas.triggers import TRIGGERS_SUFFIX, TriggerSet

AUTHOR_SETUP = (".claude", ".agents", ".codex", "CLAUDE.md", "AGENTS.md")
"""The author's own agent setup in a repo (project skills, settings, sub-agents, instructions): left
out of a trigger workspace, where it would intercept queries no user of the plugin would see it take."""
CATALOGUE_OVERHEAD_TOKENS = 400
"""The trigger system message and the tool specs, beside the descriptions (an estimate)."""


def trigger_file(skill: str) -> str:
    return f"{EVALS_DIR}/{skill}{TRIGGERS_SUFFIX}"


def trigger_targets(repo: Repo, skills: Sequence[str], all_evals: bool) -> list[str]:
    """The trigger corpora of the named skills (each must exist) or every one under ``evals/``."""
    repo.require_evals()
    if all_evals:
        folder = repo.inside(EVALS_DIR)
        files = (
            sorted(f"{EVALS_DIR}/{p.name}" for p in folder.glob("*" + TRIGGERS_SUFFIX) if p.is_file())
            if folder is not None
            else []
        )
        if not files:
            raise NoCorpus(f"{repo.root}/{EVALS_DIR}/*{TRIGGERS_SUFFIX}: no trigger corpus found")
        return files
    out = []
    for name in skills:
        repo.check_skill(name)
        real = repo.inside(trigger_file(name))  # a link out of the repo is BLOCKED_BAD_REPO
        if real is None or not real.is_file():
            raise NoCorpus(f"{trigger_file(name)} not found; author it first")
        out.append(trigger_file(name))
    return out


def read_triggers(repo: Repo, file: str) -> TriggerSet:
    """Read and validate one trigger corpus; the contract's named error on any problem."""
    path = repo.inside(file)
    if path is None or not path.is_file():
        raise NoCorpus(f"{file} not found; author it first")
    if path.stat().st_size > MAX_CORPUS_BYTES:
        raise BadCorpus(file, "$", f"larger than {MAX_CORPUS_BYTES} bytes")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise BadCorpus(file, "$", f"not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    return validate_triggers(parse_json(text, file), file)


def installed_skills(repo: Repo) -> list[str]:
    """Every ``skills/<name>/SKILL.md`` of the repo: the skill under test and its distractors."""
    folder = repo.inside(SKILLS_DIR)
    if folder is None or not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if (p / SKILL_FILE).is_file())


def trigger_bundle(repo: Repo, file: str) -> SkillBundle:
    """The bundle of one trigger corpus. Its key covers every installed SKILL.md (the distractors'
    descriptions decide routing too) and the trigger file."""
    skill = repo.check_skill(trigger_stem(file), file)
    repo.require_skill_file(skill)  # without it the skill is not in the catalogue: nothing could route to it
    triggers = read_triggers(repo, file)
    files = [(file, repo.inside(file).read_bytes())]  # type: ignore[union-attr]  # read just above
    for name in installed_skills(repo):
        real = repo.inside(f"{SKILLS_DIR}/{name}/{SKILL_FILE}")
        if real is not None and real.is_file():
            files.append((f"{SKILLS_DIR}/{name}/{SKILL_FILE}", real.read_bytes()))
    cases = tuple(
        EvalCase(id=t.id, prompt=t.query, expected_output="", files=(), assertions=()) for t in triggers.triggers
    )
    return SkillBundle(
        skill=skill,
        bundle_key=bundle_key(skill, files),
        corpus_file=file,
        corpus=Corpus(skill_name=skill, evals=cases),
        graded_paths=(EVALS_DIR, *AUTHOR_SETUP),
        triggers=triggers,
    )


def load_trigger_bundles(repo: Repo, files: Sequence[str]) -> list[CorpusOutcome]:
    """Every trigger corpus loaded, named errors collected instead of stopping at the first."""
    outcomes = []
    for file in files:
        try:
            outcomes.append(CorpusOutcome(file, bundle=trigger_bundle(repo, file)))
        except BlockedError as exc:
            outcomes.append(CorpusOutcome(file, error=exc))
    return outcomes


@dataclass(frozen=True)
class TriggerEstimate:
    """What a trigger plan costs at most: model calls and prompt tokens."""

    shards: int
    max_calls: int
    tokens_per_call: int
    max_prompt_tokens: int


def estimate(plan: RunPlan, turns: int, catalogue_chars: int) -> TriggerEstimate:
    """Every shard stops at ``turns`` model calls at most; each call carries the catalogue (its
    characters / 4 tokens, a common estimate) and the query, growing with the turns' tool results,
    which this lower estimate leaves out."""
    queries = [len(c.prompt) for b in plan.bundles for c in b.corpus.evals]
    mean_query = sum(queries) / len(queries) if queries else 0
    per_call = CATALOGUE_OVERHEAD_TOKENS + round((catalogue_chars + mean_query) / 4)
    calls = len(plan.shards) * turns
    return TriggerEstimate(len(plan.shards), calls, per_call, calls * per_call)


def catalogue_chars(repo: Repo) -> int:
    """Characters of every installed SKILL.md's front matter (an upper bound of what the catalogue lists)."""
    from engine.repo_files import gutted_skill

    total = 0
    for name in installed_skills(repo):
        real = repo.inside(f"{SKILLS_DIR}/{name}/{SKILL_FILE}")
        if real is not None:
            total += len(gutted_skill(real.read_text(encoding="utf-8", errors="replace")))
    return total


def plan_lines(
    plan: RunPlan, turns: int, estimate_: TriggerEstimate, installed: int, pairs: Sequence[HarnessPair] = ()
) -> list[str]:
    """The dry run's trigger plan: per skill its positives and negatives, then the totals, a sweep's
    harness × model ``pairs`` and the estimate."""
    lines = [f"Trigger plan {plan.run_id} (dry run: nothing enqueued)"]
    per = len(plan.rows) * plan.epochs
    for b in plan.bundles:
        t = b.triggers
        if t is None:
            continue
        pos = sum(c.should_trigger for c in t.triggers)
        lines.append(
            f"  {b.skill}: {b.corpus_file}: {pos} positive, {len(t.triggers) - pos} negative; "
            f"{len(t.triggers) * per} shards"
        )
    rows = "harness x model pairs" if plan.harnesses else "models"
    lines.append(
        f"models: {', '.join(plan.models)}  epochs: {plan.epochs}  installed skills (distractors included): "
        f"{installed}  shards = queries x {rows} x epochs = {estimate_.shards}"
    )
    lines += [f"harness x model: {p.harness} x {p.model}: {p.shards} shards" for p in pairs]
    lines.append(
        f"estimate: at most {estimate_.max_calls} model calls ({turns} turns per shard, fewer when a skill fires), "
        f"about {estimate_.tokens_per_call} prompt tokens per call, at most about "
        f"{estimate_.max_prompt_tokens} prompt tokens before tool results; no judge calls"
    )
    return lines


def plan_json(
    plan: RunPlan, turns: int, estimate_: TriggerEstimate, installed: int, pairs: Sequence[HarnessPair] = ()
) -> dict[str, object]:
    """The dry run's trigger plan as one JSON object (``--json``), with a sweep's ``pairs``."""
    corpora = [
        {
            "skill": b.skill,
            "corpus": b.corpus_file,
            "positives": sum(c.should_trigger for c in b.triggers.triggers),
            "negatives": sum(not c.should_trigger for c in b.triggers.triggers),
            "shards": len(b.triggers.triggers) * len(plan.rows) * plan.epochs,
        }
        for b in plan.bundles
        if b.triggers is not None
    ]
    doc: dict[str, object] = {
        "run_id": plan.run_id,
        "triggers": corpora,
        "models": list(plan.models),
        "epochs": plan.epochs,
        "installed_skills": installed,
        "trigger_turns": turns,
        "shards": estimate_.shards,
        "estimate": {
            "max_model_calls": estimate_.max_calls,
            "prompt_tokens_per_call": estimate_.tokens_per_call,
            "max_prompt_tokens": estimate_.max_prompt_tokens,
            "judge_calls": 0,
        },
    }
    if pairs:  # a sweep's, as the behavioural dry run lists them
        doc["pairs"] = [p.model_dump(mode="json") for p in pairs]
    return doc
