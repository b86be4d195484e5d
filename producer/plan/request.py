"""What ``skill-eval run`` (or ``grade``) was asked for, and which corpora it selects."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from producer.corpus.repo import Repo
from producer.plan.prechecks import check_plugin_threshold
from producer.results.reports import carried_report, earlier_reports
from schemas.adaptive import AdaptivePlan
from schemas.constants import DEFAULT_REPORT_DIR
from schemas.manifest import RunSettings
from schemas.report import CarriedReport
from schemas.shard import SkillBundle
from schemas.visible import visible


@dataclass
class RunRequest:
    """Everything ``skill-eval run`` (or ``grade``) was asked for."""

    skills: list[str]
    all_evals: bool
    repo: Path
    models: list[str]
    judges: list[str]
    epochs: int = 1
    adaptive: AdaptivePlan | None = None
    """``--epochs auto``: the rule (``epochs`` is then its first round's)."""
    out: Path = Path(DEFAULT_REPORT_DIR)
    workers: int = 2
    detach: bool = False
    force: bool = False
    show_progress: bool = True
    settings: RunSettings = field(default_factory=RunSettings)
    compare: str | None = None
    """``--compare <ref>``: also grade the skill as it was at this git ref."""
    baseline: str | None = None
    """``--baseline no-skill``: also run every case with the skill absent."""
    preflight: bool = True
    """Have a worker of each queue check the run's models (key, one minimal call) before dispatch."""
    preflight_timeout_s: float = 300.0
    """How long to wait for those workers."""
    reported: list[CarriedReport] = field(default_factory=list)
    """Filled by :func:`plan_request`: corpora left out because their bundle key already has a
    report, each with that report's verdict (it stands, and decides the run with the new ones)."""
    triggers: bool = False
    """``--triggers``: run the trigger corpora (``evals/<skill>.triggers.json``) instead of the behavioural ones."""
    harnesses: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """A sweep over several ``--executor`` s: each -> the models it runs (empty: one executor runs all)."""


def plan_request(req: RunRequest, out: Console) -> tuple[Repo, list[SkillBundle], list[str]]:
    """Validate targets; return the repo, the bundles to run and the named errors of skipped corpora.

    Without --all-evals the first bad corpus is raised; with it, bad corpora are skipped (and
    named) and, unless --force, so is a corpus whose bundle key already has a conclusive report
    for every requested model.
    """
    repo = Repo(req.repo)
    if req.triggers:
        from producer.corpus.triggers import load_trigger_bundles, trigger_targets

        outcomes = load_trigger_bundles(repo, trigger_targets(repo, req.skills, req.all_evals))
    else:
        outcomes = repo.load_many(repo.targets(req.skills, req.all_evals))
        for line in repo.lookalike_warnings(outcomes):  # a warning: the run goes on without them
            sys.stderr.write(visible(line) + "\n")
    errors = [o.error for o in outcomes if o.error]
    if errors and not req.all_evals:
        raise errors[0]
    check_plugin_threshold(req.settings.plugin_threshold, [o.corpus_file for o in outcomes], req.settings.fail_under)
    bundles = [o.bundle for o in outcomes if o.bundle]
    if req.all_evals and not req.force and not req.triggers:
        done = earlier_reports(req.out)
        for b in list(bundles):
            carried = carried_report(done.get(b.bundle_key, []), req.models, b)
            if carried is None:
                continue
            earlier = f"already reported {carried.verdict} in {carried.report} (--force re-runs it)"
            line = f"skipped {b.corpus_file}: bundle key {b.bundle_key} {earlier}"
            out.print(visible(line), markup=False)
            bundles.remove(b)
            req.reported.append(carried)
    return repo, bundles, [str(e) for e in errors]
