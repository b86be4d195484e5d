"""Markdown for the paired comparisons and the assertion-quality section. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from reducer.html_parts import ci, interval, pct, pts, pval
from reducer.sensitivity import insensitive_assertions
from schemas.comparison import AssertionQuality, NoiseFloor, PairedComparison
from schemas.constants import WARN_INSENSITIVE_SUITE
from schemas.report import RunResult, SkillResult
from schemas.words import plural

TEST_LABELS = {
    "mcnemar-exact": "McNemar's exact test over cases",
    "sign-flip-exact": "exact sign-flip (paired permutation) test over per-case differences",
    "sign-flip-monte-carlo": "sign-flip test over per-case differences (seeded Monte Carlo, 100,000 draws)",
    "two-proportion-z": "unpaired two-proportion z-test (no pair was graded on both sides)",
    "none": "no test (nothing to compare)",
}
NO_SKILL_NOTE = (
    "The no-skill arm ran the same cases, models and epochs with the skill folder removed from the "
    "workspace (and rewritten out of every commit of its git history) and the bare case prompt: the "
    "executor saw no skill text. Graded by the same judge against the same corpus."
)


SAME_NOTE = (
    "Both arms ran the current skill on the same cases, models and epochs: every verdict that differs "
    "between them is noise (the executor's sampling, the judge's). Its share is the noise floor."
)
TITLES = {
    "no-skill": "With vs without the skill",
    "same": "Noise floor: the current skill against itself",
    "gutted": "Suite sensitivity: the skill against its gutted copy",
}
GUTTED_NOTE = (
    "The gutted arm ran the same cases, models and epochs with the skill's instructions removed: its "
    "SKILL.md keeps the name and description of its front matter (so it still triggers) and nothing else; "
    "its other files and its history are gone, as for the no-skill arm. The paired drop from current to "
    "gutted is what the suite can see of the instructions."
)


def noise_summary(noise: NoiseFloor) -> str:
    """One line: the observed discordance, its interval and what it lets a run of this size detect."""
    method = "clustered by case" if noise.method == "cluster-wilson" else "Wilson, one case"
    if noise.min_detectable is not None:
        mde = (
            f"smallest detectable difference {100 * noise.min_detectable:.1f} pts with {noise.cases} cases x "
            f"{plural(noise.epochs, 'epoch')} (one-sided alpha {noise.alpha:g}, power {noise.power:g})"
        )
    else:
        mde = (
            f"no difference is detectable with {noise.cases} cases "
            f"(one-sided alpha {noise.alpha:g}, power {noise.power:g})"
        )
    return (
        f"{noise.flips}/{noise.pairs} assertion pairs flipped: discordance {pct(noise.discordance)} "
        f"(95% CI {pct(noise.low)}–{pct(noise.high)}, {method}, {noise.method}); {mde}"
    )


def noise_lines(noise: NoiseFloor) -> list[str]:
    """The noise floor's summary, then the flip rate per case and per assertion."""
    out = ["", f"Noise floor: {noise_summary(noise)}.", "", "| case | flips/pairs | flip rate |", "|---|---|---|"]
    out += [f"| {f.case_id} | {f.flips}/{f.pairs} | {pct(f.flip_rate)} |" for f in noise.per_case]
    out += ["", "| case | assertion | flips/pairs | flip rate |", "|---|---|---|---|"]
    out += [
        f"| {f.case_id} | {(f.index or 0) + 1} | {f.flips}/{f.pairs} | {pct(f.flip_rate)} |"
        for f in noise.per_assertion
    ]
    return out


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def comparison_summary(c: PairedComparison) -> str:
    """One line: difference, interval, test and p-values (the report headline of a comparison)."""
    if c.test == "none":
        return f"{c.baseline}: nothing to compare ({c.note})"
    shown = "" if c.low is None else f", {ci(c.low, c.high, c.cases)}"
    return (
        f"current vs {c.baseline}: {pts(c.difference)}{shown}; {TEST_LABELS[c.test]}: "
        f"two-sided p = {pval(c.p_two_sided)}, one-sided p (drop) = {pval(c.p_drop)}, "
        f"one-sided p (uplift) = {pval(c.p_uplift)}"
    )


def _dropped(c: PairedComparison) -> str:
    if not c.dropped:
        return "no pair dropped"
    by = ", ".join(f"{k} {v}" for k, v in sorted(c.dropped_by.items()))
    return f"{plural(c.dropped, 'pair')} dropped because a side was not graded ({by})"


def comparison_section(result: RunResult, current: SkillResult, base: SkillResult) -> list[str]:
    """Old vs new, or with vs without, for one skill: overall, per model, per assertion."""
    rows = [c for c in result.comparisons if c.skill == current.skill and c.baseline == base.variant]
    overall = next((c for c in rows if c.model is None), None)
    title = TITLES.get(base.variant, "Old vs new (same corpus, same grader)")
    out = [f"## {title}: {base.variant}", ""]
    out.append(f"Overall: {base.variant} {base.headline} -> current {current.headline}")
    if base.variant == "no-skill":
        out += ["", NO_SKILL_NOTE]
    if base.variant == "same":
        out += ["", SAME_NOTE]
    if base.variant == "gutted":
        out += ["", GUTTED_NOTE]
    if overall is None:
        return [*out, ""]
    out += ["", f"Paired: {comparison_summary(overall)}."]
    if overall.pairs:
        out.append(
            f"Over {overall.cases} cases ({overall.pairs} (case, model, epoch) pairs; {_dropped(overall)}); "
            f"{overall.better} cases better, {overall.worse} worse; case rates {pct(overall.baseline_rate)} -> "
            f"{pct(overall.current_rate)}; score interval over cases, consistent with the exact test "
            f"(seed {overall.seed}, from the run id, for any Monte Carlo p)."
        )
    else:
        out.append(f"{_dropped(overall)}. {overall.note}.")
    out += _gate_lines(result, base)
    if overall.noise is not None:
        out += noise_lines(overall.noise)
    if overall.kind == "gutted":
        out += _sensitivity_lines(overall)
    per_model = [c for c in rows if c.model is not None]
    if per_model:
        out += ["", "| model | baseline | current | difference | 95% CI | test | p (two-sided) | pairs | dropped |"]
        out.append("|---|---|---|---|---|---|---|---|---|")
        for c in per_model:
            out.append(
                f"| {_cell(c.model or '')} | {pct(c.baseline_rate)} | {pct(c.current_rate)} | {pts(c.difference)} | "
                f"{interval(c.low, c.high, c.cases)} | {c.test} | {pval(c.p_two_sided)} | {c.pairs} | {c.dropped} |"
            )
    if overall.assertions:
        out += ["", "| case | assertion | baseline | current | pairs | better/worse | p (two-sided) | p drop (Holm) |"]
        out.append("|---|---|---|---|---|---|---|---|")
        for a in overall.assertions:
            out.append(
                f"| {a.case_id} | {_cell(a.text)} | {pct(a.baseline_rate)} | {pct(a.current_rate)} | {a.pairs} | "
                f"{a.better}/{a.worse} | {pval(a.p_two_sided)} | {pval(a.p_drop_holm)} |"
            )
    return [*out, ""]


def _sensitivity_lines(c: PairedComparison) -> list[str]:
    """Per assertion, the drop without the instructions; those with none measure the model, not the skill."""
    blind = insensitive_assertions(c)
    sensitive = len(c.assertions) - len(blind)
    out = ["", f"Sensitivity per assertion: {sensitive} of {len(c.assertions)} drop without the instructions."]
    if blind:
        out.append("Passing as often without the instructions (they measure the model, not the skill):")
    for a in blind:
        drop = (a.current_rate or 0.0) - (a.baseline_rate or 0.0)
        out.append(f"- case {a.case_id} assertion {a.index + 1}: {_cell(a.text)} (drop {pts(drop)})")
    return out


def _gate_lines(result: RunResult, base: SkillResult) -> list[str]:
    if base.variant == "same":
        return ["Gate: none (the noise floor is measured, never gated)."]
    if base.variant == "gutted":
        return [
            f"Gate: {WARN_INSENSITIVE_SUITE} unless the drop to the gutted skill is significant "
            "(exact one-sided p < 0.025 over cases); never a FAIL."
        ]
    if base.variant == "no-skill":
        if result.require_uplift is None:
            return ["Gate: none (--require-uplift not given; the figures decide nothing)."]
        return [
            f"Gate: --require-uplift {result.require_uplift:g} (95% lower bound above it, exact one-sided p < 0.025)."
        ]
    if result.regression_alpha is None:
        return ["Gate: any drop of the paired pass rate is a regression (no --regression-alpha)."]
    return [
        f"Gate: --regression-alpha {result.regression_alpha:g}: only a significant one-sided drop counts "
        "(overall, or an assertion after Holm's adjustment)."
    ]


def quality_section(rows: Sequence[AssertionQuality]) -> list[str]:
    """Assertions that cannot tell arms apart, that flip across epochs, or that split the judges."""
    out = ["## Assertion quality", ""]
    flagged = [q for q in rows if q.non_discriminating or q.flaky or (q.judge_disagreement or 0) > 0]
    out.append(
        f"{len(rows)} assertions with graded verdicts; {sum(q.non_discriminating for q in rows)} non-discriminating, "
        f"{sum(q.flaky for q in rows)} flaky, {sum((q.judge_disagreement or 0) > 0 for q in rows)} with judge "
        "disagreement."
    )
    if not flagged:
        return [*out, "", "None flagged.", ""]
    out += ["", "| case | assertion | verdicts | pass rate | non-discriminating | flaky in | judges disagree |"]
    out.append("|---|---|---|---|---|---|---|")
    for q in flagged:
        constant = f"always {q.constant}" if q.non_discriminating else "-"
        out.append(
            f"| {q.case_id} | {_cell(q.text)} | {q.observations} | {pct(q.pass_rate)} | {constant} | "
            f"{_cell(', '.join(q.flaky_in)) or '-'} | {pct(q.judge_disagreement)} |"
        )
    return [*out, ""]
