"""Judge-versus-people agreement: raw agreement and Cohen's kappa, per judge and per assertion. Pure.

The people's truth for an assertion of a shard comes from their labels: a reviewer who agrees
with an answer holds it true, one who disagrees holds its opposite. When several reviewers
labelled the same verdict, the newest label wins (people disagreeing with each other is not
what these figures measure). Each judge's own answer on that assertion is then compared with it,
whichever answer the label was given on.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

from schemas.label import Agreement, HumanLabel

Item = tuple[str, int]
"""(shard id, assertion index)."""


def human_truth(labels: Iterable[HumanLabel]) -> dict[Item, bool]:
    """(shard, assertion) -> what the newest label holds true."""
    newest: dict[Item, HumanLabel] = {}
    for label in sorted(labels, key=lambda x: x.at):
        newest[(label.shard_id, label.assertion)] = label
    return {item: label.human_passed for item, label in newest.items()}


def cohen_kappa(pairs: list[tuple[bool, bool]]) -> tuple[float | None, str]:
    """Kappa of two raters' binary verdicts, or None with the reason it is undefined.

    kappa = (po - pe) / (1 - pe), po the observed agreement, pe the agreement expected by chance
    from each rater's own pass share. It is undefined with no pair, and when pe is 1: both raters
    gave one and the same verdict to everything, so chance alone explains their agreement.
    """
    n = len(pairs)
    if n == 0:
        return None, "no labelled verdict yet"
    po = sum(a == b for a, b in pairs) / n
    pa = sum(a for a, _ in pairs) / n
    pb = sum(b for _, b in pairs) / n
    pe = pa * pb + (1 - pa) * (1 - pb)
    if pe >= 1.0:
        return None, "judge and people gave one same verdict to every labelled assertion"
    return (po - pe) / (1 - pe), ""


def _figure(judge: str, scope: str, pairs: list[tuple[bool, bool]]) -> Agreement:
    kappa, note = cohen_kappa(pairs)
    agreed = sum(a == b for a, b in pairs)
    return Agreement(
        judge=judge,
        scope=scope,
        n=len(pairs),
        agreed=agreed,
        raw=agreed / len(pairs) if pairs else None,
        kappa=kappa,
        kappa_note=note,
        judge_passes=sum(a for a, _ in pairs),
        human_passes=sum(b for _, b in pairs),
    )


def agreement(
    labels: Iterable[HumanLabel],
    answers: Mapping[Item, Mapping[str, bool]],
    scopes: Mapping[Item, str],
) -> list[Agreement]:
    """Per judge over all labelled assertions (scope ``all``), then per judge and assertion.

    ``answers`` maps (shard, assertion) to each judge's verdict there; ``scopes`` names the
    assertion an item belongs to (the same assertion across models and epochs shares a scope).
    A labelled item a judge did not answer is left out of that judge's figures.
    """
    truth = human_truth(labels)
    overall: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    per_scope: dict[tuple[str, str], list[tuple[bool, bool]]] = defaultdict(list)
    for item, human in sorted(truth.items()):
        for judge, passed in sorted(answers.get(item, {}).items()):
            overall[judge].append((passed, human))
            per_scope[(judge, scopes.get(item, f"{item[0]} #{item[1] + 1}"))].append((passed, human))
    out = [_figure(judge, "all", pairs) for judge, pairs in sorted(overall.items())]
    out += [_figure(judge, scope, pairs) for (judge, scope), pairs in sorted(per_scope.items())]
    return out


def format_kappa(a: Agreement) -> str:
    """``kappa 0.62`` or ``kappa undefined (<why>)``, for any report."""
    return f"kappa {a.kappa:.2f}" if a.kappa is not None else f"kappa undefined ({a.kappa_note})"


def agreed_text(a: Agreement) -> str:
    """``2 of 3 labelled verdicts agree``: how many of the labelled verdicts the judge agreed on."""
    verdicts = "verdict" if a.n == 1 else "verdicts"
    return f"{a.agreed} of {a.n} labelled {verdicts} {'agrees' if a.agreed == 1 else 'agree'}"


def agreement_lines(figures: Iterable[Agreement]) -> list[str]:
    """One line per figure: judge, scope, raw agreement with counts, kappa."""
    lines = []
    for a in figures:
        raw = f"{a.raw * 100:.1f}%" if a.raw is not None else "-"
        lines.append(f"{a.judge} [{a.scope}]: agreement {raw} ({agreed_text(a)}), {format_kappa(a)}")
    return lines
