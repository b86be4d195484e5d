"""Refuse a run whose executor cannot honour a case's own terms (mocked MCP tools, allowed tools,
a turn limit) rather than run it as if they had been applied. Pure."""

from __future__ import annotations

from harnesses.registry import honoured_terms
from schemas.errors import BadCorpus, SandboxOnly
from schemas.shard import RunPlan
from schemas.status import SandboxMode

HONOURS = honoured_terms()
"""Executor -> the case terms it applies (a ``cmd:`` executor applies none): each harness's are its
adapter's (``honours``)."""


def check_case_terms(plan: RunPlan, executor: str) -> None:
    """Raise BadCorpus naming the first case whose terms ``executor`` would not apply."""
    honours = HONOURS.get(executor, frozenset())
    for bundle in plan.bundles:
        for i, case in enumerate(bundle.corpus.evals):
            used = {
                "mocks": bool(case.mocks),
                "http_mocks": bool(case.http_mocks),
                "history": bool(case.history),
                "agent_mocks": any(t.instructions is not None for s in case.mocks for t in s.tools),
                "allowed_tools": case.allowed_tools is not None,
                "max_turns": case.max_turns is not None,
                "timeout_s": case.timeout_s is not None,
                "scaffold_script": case.scaffold_script is not None,
            }
            for term in sorted(t for t, on in used.items() if on and t not in honours):
                able = " or ".join(sorted(e for e, terms in HONOURS.items() if term in terms))
                raise BadCorpus(
                    bundle.corpus_file,
                    f"$.evals[{i}].{term}",
                    f"the {executor} executor does not apply a case's {term}; run it with --executor {able}",
                )


def check_sandbox_terms(plan: RunPlan) -> None:
    """Raise :class:`SandboxOnly` naming every case that runs only inside the bwrap sandbox
    (``http_mocks``, ``scaffold_script``) when the plan runs without it (``--sandbox none``): each
    would be blocked, so the run is refused before it starts, and its dry run says so."""
    if plan.sandbox is SandboxMode.BWRAP:
        return
    cases = [
        f"{bundle.corpus_file}: case {case.id} ({', '.join(terms)})"
        for bundle in plan.bundles
        for case in bundle.corpus.evals
        if (
            terms := [t for t, on in (("http_mocks", case.http_mocks), ("scaffold_script", case.scaffold_script)) if on]
        )
    ]
    if cases:
        raise SandboxOnly(
            f"{'; '.join(cases)}: run only inside the bwrap sandbox, and --sandbox none would block "
            "each; run with the sandbox (drop --sandbox none), or without these cases"
        )
