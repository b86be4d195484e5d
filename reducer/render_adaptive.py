"""Adaptive epochs in the reports: each case's epochs and why it stopped, and each gate's last look. Pure."""

from __future__ import annotations

from html import escape

from reducer.html_parts import table
from schemas.adaptive import AdaptivePlan, CaseEpochs, GateLook

REASONS = {
    "decided": "the gate was decided",
    "stable": "its verdicts never varied",
    "max-epochs": "it reached --max-epochs",
    "max-cost": "the cost or token cap ended the run",
    "not-graded": "none of its shards was graded",
    "": "still running",
}


LOOK_INTERVAL = "stratified by case over these cases' epochs"
"""What a look's interval is over: each case's own epochs, so it speaks of these cases and is
narrower than the 95% interval over cases the reports show beside the verdict."""


def look_decision(g: GateLook) -> str:
    """What the look decided. An undecided look stopped no case; it says so rather than "not
    decided against" the threshold, which would read as contradicting a definite verdict: the
    verdict is the rate (or the paired test) against the threshold, not this interval."""
    if g.decided:
        return f"decided: {g.decided} {g.target:g}"
    return f"undecided ({g.target:g} inside its interval), so the look stopped no case; the verdict does not read it"


def _look(g: GateLook) -> str:
    """The look's figure and interval, led by its harness × model pair in a sweep."""
    estimate = "-" if g.estimate is None else f"{g.estimate:.3f}"
    row = f"{g.row}: " if g.row is not None else ""
    return (
        f"{row}{g.figure} {estimate}, {100 * g.level:.2f}% interval {LOOK_INTERVAL} "
        f"[{g.low:.3f}, {g.high:.3f}]: {look_decision(g)}"
    )


def _cases(plan: AdaptivePlan, skill: str | None) -> list[CaseEpochs]:
    return [c for c in plan.cases if skill is None or c.skill == skill]


def stop_counts(plan: AdaptivePlan, skill: str) -> dict[str, int]:
    """A corpus's cases per stop reason (``running`` for those that may get more), in first-seen order."""
    counts: dict[str, int] = {}
    for c in _cases(plan, skill):
        counts[c.stopped or "running"] = counts.get(c.stopped or "running", 0) + 1
    return counts


def summary_lines(plan: AdaptivePlan, skill: str | None = None) -> list[str]:
    """One line per corpus for the terminal: epochs spent, cases per stop reason, and the gate's last look."""
    skills = sorted({c.skill for c in _cases(plan, skill)})
    out = []
    for name in skills:
        cases = _cases(plan, name)
        stops = ", ".join(f"{n} {reason}" for reason, n in stop_counts(plan, name).items())
        epochs = sum(c.epochs for c in cases)
        tail = "".join(f"; {_look(g)}" for g in plan.gates if g.skill == name)
        out.append(
            f"adaptive epochs {name}: {epochs} case epochs over {len(cases)} cases "
            f"(first round {plan.first_round}, max {plan.max_epochs}, {plan.looks_done}/{plan.looks} looks); "
            f"stopped: {stops}{tail}"
        )
    return out


def markdown_section(plan: AdaptivePlan, skill: str) -> list[str]:
    """The markdown section: the rule, the gate's last look, and a row per case."""
    out = [
        "## Adaptive epochs",
        "",
        f"- rule: a first round of {plan.first_round} epochs per case, then {plan.step} more per round to cases "
        f"whose verdicts vary, up to {plan.max_epochs}; each look's interval at {100 * plan.level:.2f}% "
        f"(alpha {plan.alpha:g} spread over {plan.looks} looks, Bonferroni)",
        f"- looks taken: {plan.looks_done}",
    ]
    out += [f"- gate: {_look(g)}" for g in plan.gates if g.skill == skill]
    out += ["", "| case | epochs | stopped | why |", "|---|---|---|---|"]
    out += [
        f"| {c.case_id} | {c.epochs} | {c.stopped or 'running'} | {REASONS[c.stopped]} |" for c in _cases(plan, skill)
    ]
    return out


def html_section(plan: AdaptivePlan | None) -> str:
    """The ``adaptive`` section of the page (empty for fixed epochs)."""
    if plan is None:
        return ""
    looks = "".join(f"<li>{escape(g.skill)}: {escape(_look(g))}</li>" for g in plan.gates)
    rows = [[c.skill, str(c.case_id), str(c.epochs), c.stopped or "running", REASONS[c.stopped]] for c in plan.cases]
    return (
        '<section id="adaptive"><h2>Adaptive epochs</h2>'
        f"<p>{escape(summary_rule(plan))}</p><ul>{looks}</ul>"
        + table(["corpus", "case", "epochs", "stopped", "why"], rows, text=("why",))
        + "</section>"
    )


def summary_rule(plan: AdaptivePlan) -> str:
    return (
        f"First round {plan.first_round} epochs per case, then {plan.step} more per round to cases whose "
        f"verdicts vary, up to {plan.max_epochs}; {plan.looks_done} of at most {plan.looks} looks, each at "
        f"{100 * plan.level:.2f}% (Bonferroni over looks)."
    )
