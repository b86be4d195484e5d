"""``skill-eval run --dry-run``: the plan of cases x assertions, and what the run would block, by name.

Nothing is enqueued and no model is called; the models may be missing (the plan counts shards
for one). Bad corpora and the case guards of :mod:`producer.plan.prechecks` are listed, and the exit
code is the one the real run would reach on them: BLOCKED when a base fixture needs git the
repo lacks (that case blocks the run, as ``validate`` says too) or nothing is left, WARN when
``--all-evals`` skips a bad corpus, PASS otherwise (a ``--compare`` guard does not change it).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from rich.console import Console
from rich.table import Table
from rich.text import Text

from engine.records import latest_noise
from engine.store import open_store
from producer.corpus.repo import Repo
from producer.plan.case_terms import check_case_terms, check_sandbox_terms
from producer.plan.compare import guard_compare
from producer.plan.epochs import adaptive_plan_line
from producer.plan.harnesses import UNSPECIFIED
from producer.plan.planning import new_run_id, plan_run, plan_summary
from producer.plan.prechecks import check_plugin_threshold, fixture_guards
from producer.plan.repo_terms import check_repo_terms
from schemas.adaptive import AdaptivePlan
from schemas.status import ExitCode, SandboxMode
from schemas.summary import PlanSummary, SkippedCorpus
from schemas.visible import inert_json, visible


@dataclass(frozen=True)
class PlanInput:
    """What a dry run plans with: the models (possibly none yet), epochs, arms and compare ref."""

    models: list[str]
    judges: list[str]
    epochs: int
    variants: list[str]
    compare: str | None
    store: str | None = None
    """The artifact store, where an earlier noise floor of the same corpus may be recorded."""
    executor: str = "agent"
    """The executor the run would use: a case term it cannot apply is refused here too."""
    adaptive: AdaptivePlan | None = None
    """``--epochs auto``: the first round is planned, the rest shown as a maximum."""
    harnesses: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """A sweep over several executors: each -> the models it runs (``executor`` is then the first)."""
    plugin_threshold: float | None = None
    """``--threshold``: refused, as the run refuses it, when no corpus is a plugin eval suite."""
    sandbox: SandboxMode = SandboxMode.BWRAP
    """``--sandbox``: a case that runs only inside the sandbox is refused without it, as the run refuses it."""
    fail_under: float | None = None
    """``--fail-under``: refused beside ``--threshold``, as the run refuses it, when every corpus is
    a plugin eval suite."""
    regression_alpha: float | None = None
    """``--regression-alpha``: the power printout is for the regression gate's own test."""
    require_uplift: float | None = None
    """``--require-uplift``: the power printout is for the uplift gate's test (without it, no gate's)."""

    def gated_by(self, flags: Mapping[str, object]) -> PlanInput:
        """This input with the gates among the run's behavioural flags (by name) that its power printout reads."""
        alpha, uplift = (flags.get(flag) for flag in ("--regression-alpha", "--require-uplift"))
        return dataclasses.replace(
            self, regression_alpha=cast(float | None, alpha), require_uplift=cast(float | None, uplift)
        )


def dry_run_plan(
    skills: list[str], all_evals: bool, repo: Path, plan_in: PlanInput, as_json: bool, out: Console
) -> ExitCode:
    """Print the plan (a table, or one JSON object) and return the exit code; a named error of a
    single target corpus is raised as the run would raise it."""
    r = Repo(repo)
    outcomes = r.load_many(r.targets(skills, all_evals))
    errors = [o.error for o in outcomes if o.error]
    if errors and not all_evals:
        raise errors[0]
    check_plugin_threshold(plan_in.plugin_threshold, [o.corpus_file for o in outcomes], plan_in.fail_under)
    bundles = [o.bundle for o in outcomes if o.bundle]
    for line in r.lookalike_warnings(outcomes):  # on stderr: a --json plan keeps stdout to itself
        sys.stderr.write(visible(line) + "\n")
    plan = plan_run(
        new_run_id(),
        bundles,
        plan_in.models or [UNSPECIFIED],
        judges=plan_in.judges,
        epochs=plan_in.epochs,
        variants=plan_in.variants,
        adaptive=plan_in.adaptive,
        harnesses=plan_in.harnesses,
        sandbox=plan_in.sandbox,
    )
    check_sandbox_terms(plan)  # as the run refuses it, before anything starts
    # The baseline arm of a skill whose --compare guard fires is dropped, as the run drops it.
    plan, compare_lines = guard_compare(plan, r.root, plan_in.compare) if plan_in.compare else (plan, [])
    # A compared plan's power uses the discordance its corpus's last noise floor observed, if any.
    compared = len(plan.variants) > 1
    observed = latest_noise(open_store(plan_in.store), bundles) if compared and plan_in.store else {}
    skipped = [SkippedCorpus(corpus=o.corpus_file, error=str(o.error)) for o in outcomes if o.error]
    executors = list(plan_in.harnesses or [plan_in.executor])
    for executor in executors:
        check_case_terms(plan, executor)
    check_repo_terms(r.root, executors)
    summary = plan_summary(plan, skipped, observed, plan_in.regression_alpha, plan_in.require_uplift)
    blocking = fixture_guards(r.root, bundles)
    summary = summary.model_copy(update={"guards": blocking + compare_lines})
    if as_json:
        sys.stdout.write(inert_json(summary.model_dump_json(indent=2)) + "\n")
    else:
        print_plan(summary, out)
    # A base fixture without git blocks its case and so the run (FixtureNeedsGit.stops_run); the
    # real run goes on past a bad corpus with --all-evals and WARNs. The dry run says the same.
    if blocking or (errors and not bundles):
        return ExitCode.BLOCKED
    return ExitCode.WARN if errors else ExitCode.PASS


def print_plan(summary: PlanSummary, out: Console) -> None:
    table = Table(title=f"Plan {summary.run_id} (dry run: nothing enqueued)")
    for col in ("skill", "corpus", "cases", "assertions", "shards"):
        table.add_column(col, justify="right" if col in {"cases", "assertions", "shards"} else "left")
    for c in summary.corpora:
        # Repo names are text, never console markup (a ``[/]`` in a corpus path would crash the table).
        table.add_row(Text(visible(c.skill)), Text(visible(c.corpus)), str(c.cases), str(c.assertions), str(c.shards))
    totals = summary.totals
    table.add_row("total", "", str(totals.cases), str(totals.assertions), str(totals.shards))
    out.print(table)
    for line in plan_lines(summary):  # each one line, whatever a corpus file is named
        out.print(visible(line), markup=False, highlight=False)


def plan_lines(summary: PlanSummary) -> list[str]:
    """The lines under the table: models and shards, what a run still needs, skipped corpora,
    guards, and what this many cases can detect."""
    totals = summary.totals
    unspecified = summary.models == [UNSPECIFIED]
    models = "none given (shards counted for one model)" if unspecified else ", ".join(summary.models)
    judges = ", ".join(summary.judges) or "none given"
    rows = "harness x model pairs" if summary.pairs else "models"
    formula = (
        f"arms: {', '.join(summary.variants)}  shards = cases x {rows} x epochs x arms = {totals.shards}"
        if len(summary.variants) > 1
        else f"shards = cases x {rows} x epochs = {totals.shards}"
    )
    lines = [f"models: {models}  judges: {judges}  epochs: {summary.epochs}  {formula}"]
    lines += [f"harness x model: {p.harness} x {p.model}: {p.shards} shards" for p in summary.pairs]
    if summary.adaptive is not None:
        lines.append(adaptive_plan_line(summary.adaptive, summary.max_shards))
    if unspecified or not summary.judges:
        lines.append("note: a run needs --model and --judge (litellm model names); the plan above needs neither")
    lines += [f"skipped {s.corpus}: {s.error}" for s in summary.skipped]
    lines += summary.guards
    return lines + summary.power
