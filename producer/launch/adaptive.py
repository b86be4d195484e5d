"""``--epochs auto``: the rounds of a run whose epochs go where its outcome is uncertain.

The first round (every case's first epochs) is submitted and reduced as any run. After each
round this module reads the graded verdicts back from the store, asks the pure rule
(:mod:`reducer.adaptive`) which cases get more epochs, and, when some do, stores the grown
plan as a new manifest revision (the workers read shards from it), registers the new shards
on the same run, reopens the run and sends them. When no case gets more, the final record of
each case's epochs and stop reason is stored with the manifest and the result, so a report
of the stored run says the same.
"""

from __future__ import annotations

from collections.abc import Callable

from rich.console import Console

from engine.broker import Broker
from engine.budget import RunBudget
from engine.collect import collect_outcomes
from engine.records import put_manifest, put_result
from engine.state import RunState
from engine.store import ArtifactStore
from reducer.adaptive import Gate, ShardKey, Verdicts, finished, next_round
from reducer.threshold import threshold_of
from schemas.adaptive import AdaptivePlan
from schemas.constants import QUEUE_EXECUTE
from schemas.manifest import RunManifest, result_key
from schemas.report import RunResult
from schemas.shard import BASELINE_PREFIX, NO_SKILL, RunPlan, Shard
from schemas.status import ShardState
from schemas.words import plural


def gates_of(manifest: RunManifest) -> dict[str, Gate]:
    """What decides each corpus: a regression against ``--compare`` (any drop), an uplift over no
    skill above ``--require-uplift``, else the pass rate against the threshold."""
    plan, settings = manifest.plan, manifest.settings
    compare = next((v for v in plan.variants if v.startswith(BASELINE_PREFIX)), None)
    if compare is not None:
        gate = Gate(0.0, compare)
    elif NO_SKILL in plan.variants and settings.require_uplift is not None:
        gate = Gate(settings.require_uplift, NO_SKILL)
    else:
        gate = Gate(threshold_of(settings.fail_under)[0])
    return {b.skill: gate for b in plan.bundles}


def observed_verdicts(store: ArtifactStore, manifest: RunManifest) -> dict[ShardKey, Verdicts]:
    """Every graded shard's verdicts so far, by (corpus, arm, case, row, epoch): a sweep's
    harness × model pairs apart, a run of one executor's models as they are."""
    out: dict[ShardKey, Verdicts] = {}
    for outcome in collect_outcomes(store, manifest).values():
        if outcome.state is ShardState.GRADED and outcome.grade is not None:
            s = outcome.shard
            out[(s.skill, s.variant, s.case_id, s.row, s.epoch)] = tuple(v.passed for v in outcome.grade.verdicts)
    return out


def grown(plan: RunPlan, adaptive: AdaptivePlan) -> RunPlan:
    """The plan with every epoch ``adaptive`` gives a case beyond what ``plan`` has, in every arm and
    model (in a sweep, every harness × model pair: the harnesses stay paired on the same epochs)."""
    assert plan.adaptive is not None
    pairs: list[tuple[str | None, str]] = [(h, m) for h, models in plan.harnesses.items() for m in models]
    pairs = pairs or [(None, m) for m in plan.models]
    shards = [
        Shard.planned(plan.run_id, variant, c.skill, c.case_id, model, epoch, harness)
        for c in adaptive.cases
        for variant in plan.variants
        for harness, model in pairs
        for epoch in range(plan.adaptive.epochs_of(c.skill, c.case_id), c.epochs)
    ]
    return plan.model_copy(update={"shards": plan.shards + tuple(shards), "adaptive": adaptive})


def store_revision(manifest: RunManifest, store: ArtifactStore, state: RunState) -> str:
    """Store the grown manifest: as the run's manifest (what reports read) and under a new revision
    key (a worker caches a manifest per key, so the new shards must come under a new one)."""
    put_manifest(store, manifest)
    run_id = manifest.plan.run_id
    key = f"runs/{run_id}/manifest.r{state.next_manifest_revision(run_id)}.json"
    store.put(key, manifest.model_dump_json().encode())
    return key


def send_round(manifest: RunManifest, key: str, state: RunState, publisher: Broker) -> int:
    """Register the grown plan's shards, reopen the run for a new reduce, send the new ones."""
    plan = manifest.plan
    known = state.states(plan.run_id)
    # Registered before the run is reopened: with more shards than have ended, no reduce can
    # start between the two.
    state.register(plan.run_id, [s.shard_id for s in plan.shards], key, plan.created_at.isoformat())
    state.reopen(plan.run_id)
    new = [s.shard_id for s in plan.shards if s.shard_id not in known]
    with publisher.batch():
        for shard_id in new:
            publisher.send(QUEUE_EXECUTE, plan.run_id, shard_id)
    state.mark_sent(plan.run_id, new)
    return len(new)


def out_of_budget(state: RunState, run_id: str) -> bool:
    """Whether a cost or token cap refused a call of this run."""
    return RunBudget(state.r, run_id).spend().exhausted is not None


def run_rounds(
    manifest: RunManifest,
    store: ArtifactStore,
    state: RunState,
    publisher: Broker,
    wait: Callable[[], None],
    note: Callable[[str], None] = lambda _: None,
) -> RunManifest:
    """After the first round was reduced: look, send the next round, wait, until every case stopped.

    Returns the final manifest (its plan's record says each case's epochs and why it stopped).
    """
    plan = manifest.plan
    cases = [(b.skill, c.id) for b in plan.bundles for c in b.corpus.evals]
    gates = gates_of(manifest)
    while manifest.plan.adaptive is not None:
        adaptive = next_round(
            manifest.plan.adaptive,
            cases,
            gates,
            observed_verdicts(store, manifest),
            manifest.plan.variants,
            out_of_budget=out_of_budget(state, plan.run_id),
            rows=plan.rows if plan.harnesses else (),
        )
        manifest = manifest.model_copy(update={"plan": grown(manifest.plan, adaptive)})
        note(round_line(adaptive))
        if finished(adaptive):
            break
        sent = send_round(manifest, store_revision(manifest, store, state), state, publisher)
        if sent == 0:  # nothing new could be planned: stop rather than wait for nothing
            break
        wait()
    # The final record (every case's stop) goes where reports read and where a resubmit's
    # workers and reduce read: the run is pointed at it.
    state.set_manifest_key(plan.run_id, store_revision(manifest, store, state))
    _record_in_result(store, manifest)
    return manifest


def further_rounds(
    manifest: RunManifest,
    store: ArtifactStore,
    state: RunState,
    publisher: Broker,
    wait: Callable[[], None],
    err: Console,
) -> RunManifest:
    """The manifest as it ends: unchanged for fixed epochs, else after every round :func:`run_rounds` sends."""
    if manifest.plan.adaptive is None:
        return manifest
    return run_rounds(
        manifest, store, state, publisher, wait, note=lambda line: err.print(line, markup=False, highlight=False)
    )


def round_line(adaptive: AdaptivePlan) -> str:
    """One line per look for the terminal: the gated figures and how many cases go on."""
    going = sum(1 for c in adaptive.cases if not c.stopped)
    figures = "; ".join(
        f"{g.skill}{f' ({g.row})' if g.row else ''} {g.figure} {'-' if g.estimate is None else f'{g.estimate:.3f}'} "
        f"[{g.low:.3f}, {g.high:.3f}] at {100 * g.level:.2f}% vs {g.target:g}"
        f"{' decided ' + g.decided if g.decided else ''}"
        for g in adaptive.gates
    )
    more = f"{plural(going, 'case')} {'gets' if going == 1 else 'get'} more epochs"
    return f"adaptive epochs, look {adaptive.looks_done}/{adaptive.looks}: {figures}; {more}"


def _record_in_result(store: ArtifactStore, manifest: RunManifest) -> None:
    """Put the final record of epochs and stops into the stored result (reduced before it was final)."""
    key = result_key(manifest.plan.run_id)
    if store.exists(key):
        result = RunResult.model_validate_json(store.get(key))
        put_result(store, result.model_copy(update={"adaptive": manifest.plan.adaptive}))
