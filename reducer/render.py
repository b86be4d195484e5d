"""Render a RunResult as markdown, JSON, JUnit XML, the SKILL-EVAL COMPLETE block and the run-log line. Pure."""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from reducer.agreement import agreement_lines
from reducer.file_names import file_slug
from reducer.markdown_text import MD_BREAKS, MD_CONTROL, md
from reducer.plugin_score import plugin_score_lines
from reducer.render_adaptive import markdown_section
from reducer.render_compare import comparison_section, quality_section
from reducer.render_sweep import is_sweep, row_label, sweep_section
from reducer.render_triggers import gates_text, routing_section, trigger_section
from reducer.rows import ROWS_NOT_KEPT
from reducer.scoring import counts, interval_method
from reducer.threshold import (
    gate_rule,
    gated_kinds,
    is_plugin,
    threshold_applies_to,
    threshold_text,
    verdict_basis,
)
from schemas.report import UNFINISHED, CaseRun, ClusteredRate, RunResult, SkillResult
from schemas.shard import CURRENT
from schemas.status import ShardState
from schemas.trajectory import Usage
from schemas.words import plural


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _field(text: str) -> str:
    """One run-log field: tabs and line breaks would shift or split the 13 fields."""
    return re.sub(r"[\t\r\n]+", " ", text).strip() or "-"


_cell = md

_BACKTICKS = re.compile("`+")


def code(text: object) -> str:
    """``text`` (untrusted) as one inline code span: shown verbatim, ``&&`` and ``<`` as typed.

    Code span content is literal in CommonMark (no tag, entity, link or emphasis inside), so
    only its end must be safe: the fence is one backtick longer than any run in the text, and
    the text is padded with a space each side when it starts or ends with a backtick or space
    (a parser strips exactly one each side). Line breaks become spaces, as a code span shows them.
    """
    flat = MD_CONTROL.sub("\ufffd", MD_BREAKS.sub(" ", str(text)))
    if not flat.strip():
        return "(none)"
    fence = "`" * (max((len(run) for run in _BACKTICKS.findall(flat)), default=0) + 1)
    pad = " " if flat[0] in "` " or flat[-1] in "` " else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def report_stem(skill: str, run_id: str) -> str:
    return f"skill-eval-{skill}-{run_id}"


def transcript_name(skill: str, run_id: str, run: CaseRun, unique_case: bool, model_slug: str | None = None) -> str:
    """``skill-eval-<skill>-<RUN_ID>-case<id>-transcript.txt``; model and epoch added when a case ran
    more than once (``model_slug``: the model's slug among the run's others, :func:`distinct_slugs`)."""
    suffix = "" if unique_case else f"-{model_slug or file_slug(run.model)}-e{run.epoch}"
    return f"{report_stem(skill, run_id)}-case{run.case_id}{suffix}-transcript.txt"


def needs_transcript(run: CaseRun) -> bool:
    """Failing or not-graded shards keep their rendered transcript."""
    return run.state is not ShardState.GRADED or not all(v.passed for v in run.verdicts)


def render_markdown(result: RunResult, skill: str, meta: dict[str, str]) -> str:
    """The human report for one skill: headline, per case and assertion verdicts, not-graded list."""
    parts = [s for s in result.skills if s.skill == skill]
    lines = [f"# skill-eval: {md(skill)}", ""]
    lines += [f"- run: `{result.run_id}`", f"- verdict: **{result.verdict.value}**"]
    if result.triggers is not None:
        lines.append(f"- trigger gates: {md(gates_text(result.triggers))}")
    else:
        rule = gate_rule(result) or "a corpus passes when its behavioural pass rate reaches it"
        lines.append(f"- {threshold_text(result)}: {rule}")
    lines += [f"- {md(k)}: {md(v)}" for k, v in meta.items()]
    for reason in result.reasons:
        lines.append(f"- reason: {md(reason)}")
    for judge, status in result.calibration.items():
        lines.append(f"- judge {md(judge)} calibration: {md(status)}")
    current = next((p for p in parts if p.variant == CURRENT), None)
    # A trigger run's arms hold no assertions: its paired changes are in its trigger section.
    if current is not None and result.triggers is None:
        for base in (p for p in parts if p.variant != CURRENT):
            lines += ["", *comparison_section(result, current, base)]
        section = sweep_section(result, current)
        lines += ["", *section] if section else []
    if result.triggers is not None:  # a trigger run: its shards hold no assertions, only what fired
        lines += ["", *trigger_section(result.triggers, skill), "", *routing_section(result.triggers)]
        return "\n".join(lines) + "\n"
    if result.adaptive is not None:
        lines += ["", *markdown_section(result.adaptive, skill)]
    lines += ["", *quality_section([q for q in result.assertion_quality if q.skill == skill])]
    if result.human_agreement:
        lines += ["", "## Judge vs people", ""]
        lines += [f"- {md(line)}" for line in agreement_lines(result.human_agreement)]
    for part in parts:
        lines += ["", *_variant_section(part, result)]
    return "\n".join(lines) + "\n"


def clustered_sentence(c: ClusteredRate) -> str:
    """The case-clustered interval, its method and why it is there, in one sentence."""
    return (
        f"With the case as the unit (epochs and assertions of one case are not independent): "
        f"95% CI {_pct(c.low)}–{_pct(c.high)} over {c.clusters} cases, design effect {c.design_effect:.2f} "
        f"({c.method}: Wilson on the effective sample size, t on cases - 1 degrees of freedom)."
    )


def evidence_sentence(s: SkillResult) -> str:
    """What the evidence check counted: only a judge's passes carry a quote to look up (in a tool
    call or result); a deterministic check's evidence is read from the run itself, so it is not
    among them. Results stored before the count was kept give the share alone."""
    if s.evidence_verified_share is None:
        return ""
    share = _pct(s.evidence_verified_share)
    if s.evidence_checked is None:
        return f"Evidence a judge quoted was found in a tool call or result for {share} of the judged passes checked."
    found = round(s.evidence_verified_share * s.evidence_checked)
    others = s.behavioural.passed - s.evidence_checked
    rest = f"; the other {others} passes were not looked up (a deterministic check reads the run itself)"
    return (
        f"Evidence a judge quoted was found in a tool call or result for {found}/{s.evidence_checked} judged passes "
        f"({share}){rest if others > 0 else ''}."
    )


def corpus_status(s: SkillResult, result: RunResult) -> str:
    """The current arm's verdict beside its headline (``FAIL (below threshold 1.0)``); empty for a
    baseline arm or an INCONCLUSIVE corpus, whose headline already says so."""
    if s.verdict in ("PASS", "FAIL") and is_plugin(s):  # its case scores decided, never its pass rate
        return f"{s.verdict} ({verdict_basis(s, result)})"
    if s.verdict == "FAIL":
        return f"FAIL (below threshold {result.threshold})"
    if s.verdict == "WARN":
        return f"WARN ({plural(s.unplanned, 'case')} of {s.cases} not graded: no recording)"
    return s.verdict if s.verdict in ("PASS", "NOT GRADED") else ""


def _variant_section(s: SkillResult, result: RunResult) -> list[str]:
    status = corpus_status(s, result)
    out = [f"## {md(s.variant)}: {md(s.headline)}" + (f" — {status}" if status else ""), ""]
    b = s.behavioural
    out.append(
        f"Behavioural pass rate {counts(b)}, 95% CI {_pct(b.low)}–{_pct(b.high)} ({interval_method(b)}), "
        f"over graded shards only; {s.not_graded}/{s.shard_count} shards not graded."
    )
    if s.behavioural.clustered is not None:
        out.append(clustered_sentence(s.behavioural.clustered))
    out.append(f"Sandbox: {', '.join(s.sandbox_modes) or 'n/a'}. Bundle key: `{s.bundle_key}`.")
    evidence = evidence_sentence(s)
    if evidence:
        out.append(evidence)
    if s.judge_agreement is not None:
        out.append(
            f"Judges agreed pairwise on {_pct(s.judge_agreement)} of verdicts; "
            f"unanimous on {_pct(s.judge_unanimous)} of assertions."
        )
    out += ["", "### Not graded (infra)", ""]
    out += [f"- {md(kind)}: {n}" for kind, n in s.infra.items() if kind != UNFINISHED]
    if s.unfinished:  # no infra failure: the run may still be going
        out += [
            "",
            "### Not ended",
            "",
            f"- {plural(s.unfinished, 'shard')} with no terminal record yet: still running or lost",
        ]
    if s.blocked:
        out += ["", "### Blocked", ""]
        out += [f"- case {r.case_id} ({md(r.model)}, epoch {r.epoch}): {md(r.detail)}" for r in s.blocked]
    out += [
        "",
        "### Models",
        "",
        f"| {row_label(result)} | behavioural | 95% CI (Wilson) | 95% CI (by case) "
        "| composite (95% CI over cases) | graded/shards |",
        "|---|---|---|---|---|---|",
    ]
    for m in s.models:
        by_case = m.behavioural.clustered
        out.append(
            f"| {md(m.model)} | {counts(m.behavioural)} | "
            f"{_pct(m.behavioural.low)}–{_pct(m.behavioural.high)} | "
            f"{f'{_pct(by_case.low)}–{_pct(by_case.high)}' if by_case else '-'} | {_pct(m.composite_mean)}"
            f"{f' ({_pct(ci[0])}–{_pct(ci[1])})' if (ci := m.composite_interval) else ''} | {m.graded}/{m.shards} |"
        )
    out += _per_model_tables(s)
    out += plugin_score_lines(s)
    models = [m.model for m in s.models]
    out += ["", f"### Assertions by {row_label(result)}", ""]
    out.append("| case | assertion | " + " | ".join(md(m) for m in models) + " | pass@k | pass^k |")
    out.append("|---|---|" + "---|" * len(models) + "---|---|")
    for a in s.assertions:
        cells = [_pct(a.by_model[m].rate) if m in a.by_model else "-" for m in models]
        out.append(
            f"| {_cell(s.case_cell(a.case_id))} | {_cell(a.text)} | "
            + " | ".join(cells)
            + f" | {_pct(a.pass_at_k)} | {_pct(a.pass_hat_k)} |"
        )
    out += ["", "### Cases", ""]
    if not s.runs and s.shard_count:
        out += [ROWS_NOT_KEPT.format(shards=f"{s.shard_count:,}"), ""]
    for r in s.runs:
        out.append(f"#### {md(s.case_label(r.case_id))} · {md(r.model)} · epoch {r.epoch}: {r.state.value}")
        if r.state is not ShardState.GRADED:
            out.append(f"- not graded: {md(r.detail or r.state.value)}")
        if r.skill_activated is not None:
            out.append(f"- skill activated: {'yes' if r.skill_activated else 'no'}")
        out += [f"- **flagged**: {md(line)}" for line in r.rejected_calls]
        out += [f"- **mock finding**: {md(line)}" for line in r.mock_findings]
        out += [f"- **refused by the proxy**: {md(line)}" for line in r.refused_requests]
        out += [f"- model proposed, never run: {md(line)}" for line in r.proposed_calls]
        out += [f"- mock call: {code(line)}" for line in r.mock_calls]
        out += [f"- HTTP call: {code(line)}" for line in r.http_calls]
        for v in r.verdicts:
            mark = "PASS" if v.passed else "FAIL"
            checked = (
                ""
                if v.evidence_verified is None
                else (" (evidence found)" if v.evidence_verified else " (evidence NOT found)")
            )
            out.append(f"- **{mark}** {md(v.text)}{checked}")
            out.append(f"  - evidence: {code(v.evidence)}")
            if v.note:
                out.append(f"  - note: {_cell(v.note)}")
        out.append("")
    return out


def _per_model_tables(s: SkillResult) -> list[str]:
    """One table per executor model: every case and epoch it ran, with its state and scores."""
    out: list[str] = []
    if not s.runs:  # reduced from the outcome segments: the model table above is all there is
        return out
    for m in s.models:
        runs = [r for r in s.runs if r.model == m.model]
        activation = any(r.skill_activated is not None for r in runs)
        head = "| case | epoch | state | assertions passed | composite |" + (" skill activated |" if activation else "")
        out += ["", f"#### {md(m.model)}", "", head, "|---|---|---|---|---|" + ("---|" if activation else "")]
        for r in runs:
            passed = f"{sum(v.passed for v in r.verdicts)}/{len(r.verdicts)}" if r.state is ShardState.GRADED else "-"
            row = f"| {_cell(s.case_cell(r.case_id))} | {r.epoch} | {r.state.value} | {passed} | {_pct(r.composite)} |"
            if activation:
                row += " - |" if r.skill_activated is None else (" yes |" if r.skill_activated else " no |")
            out.append(row)
    return out


def render_json(result: RunResult, skill: str, meta: dict[str, object]) -> str:
    """The machine record for one skill: statuses, raw judge arrays, metadata, and the usage of this
    skill's shards alone (every arm of it; the run's total is in the HTML page and ``status``)."""
    usage: dict[str, Usage] = {}
    for part in (s for s in result.skills if s.skill == skill):
        for model, u in part.usage.items():
            usage[model] = usage[model].add(u) if model in usage else u
    # A run of one executor writes the record it wrote before the harness was a dimension.
    sweep = is_sweep(result)
    hidden: Any = None if sweep else {"assertions": {"__all__": {"by_harness"}}}
    doc = {
        "run_id": result.run_id,
        "skill": skill,
        "verdict": result.verdict.value,
        "reasons": result.reasons,
        "nonce_fenced": True,
        "meta": meta,
        "judges": result.judges,
        "calibration": result.calibration,
        "template_hashes": result.template_hashes,
        "threshold": _threshold_doc(result),
        "usage": {k: v.model_dump() for k, v in usage.items()},
        "variants": [
            {**s.model_dump(mode="json", exclude=hidden), "verdict_basis": verdict_basis(s, result)}
            for s in result.skills
            if s.skill == skill
        ],
        "comparisons": [
            c.model_dump(mode="json", exclude=None if sweep else {"harness"})
            for c in result.comparisons
            if c.skill == skill
        ],
        "assertion_quality": [q.model_dump(mode="json") for q in result.assertion_quality if q.skill == skill],
        "gates": {"regression_alpha": result.regression_alpha, "require_uplift": result.require_uplift},
        "human_agreement": [a.model_dump(mode="json") for a in result.human_agreement],
    }
    if sweep:
        doc["harness_comparisons"] = [c.model_dump(mode="json") for c in result.harness_comparisons if c.skill == skill]
    if result.triggers is not None:
        doc["triggers"] = result.triggers.model_dump(mode="json")
    if result.adaptive is not None:  # this skill's cases and gate only, as every other field
        plan = result.adaptive
        mine = {
            "cases": tuple(c for c in plan.cases if c.skill == skill),
            "gates": tuple(g for g in plan.gates if g.skill == skill),
        }
        doc["adaptive"] = plan.model_copy(update=mine).model_dump(mode="json")
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def _threshold_doc(result: RunResult) -> dict[str, object]:
    doc: dict[str, object] = {"value": result.threshold, "source": result.threshold_source}
    if result.plugin_threshold is not None:  # ``--threshold``: what every plugin eval case must score
        doc["plugin_eval_cases"] = result.plugin_threshold
    if gated_kinds(result.skills)[1]:  # a plugin eval suite's pass rate decides nothing: say what does
        doc["applies_to"] = threshold_applies_to(result)  # ``value``'s reach: [] when it gated nothing
        doc["text"] = threshold_text(result)
    return doc


def _log_status(s: SkillResult, result: RunResult) -> str:
    return corpus_status(s, result) if is_plugin(s) else s.verdict


def run_log_line(result: RunResult, when: datetime, project: str, branch: str, sha7: str, tier: str = "-") -> str:
    """The contract's 13-field tab-separated run-log line."""
    cases = sum(s.cases for s in result.skills if s.variant == CURRENT)
    # A corpus below its threshold says FAIL here too (the contract's VERDICT named only a regression);
    # a plugin eval suite's verdict, with what decided it.
    notes = (
        "; ".join(
            f"{s.skill}={s.headline}" + (f" {_log_status(s, result)}" if s.verdict in ("PASS", "FAIL") else "")
            for s in result.skills
            if s.variant == CURRENT
        )
        or "-"
    )
    if result.triggers is not None:  # no assertions: its pass rates would read 0/0
        notes = (
            "; ".join(
                f"{f.skill} ({f.model})=recall {f.recall.hits}/{f.recall.total}, "
                f"false triggers {f.false_trigger.hits}/{f.false_trigger.total}"
                for f in result.triggers.figures
            )
            or "-"
        )
    fields = [
        f"Run: {when.strftime('%Y-%m-%dT%H:%M:%SZ')}",
        "skill-eval",
        _field(project),
        "-",
        "-",
        result.verdict.value,
        "-",
        f"{cases}-cases",
        _field(notes),
        _field(branch),
        _field(sha7),
        "-",
        _field(tier),
    ]
    return "\t".join(fields) + "\n"
