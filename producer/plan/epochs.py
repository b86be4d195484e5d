"""``--epochs N`` or ``--epochs auto --max-epochs N``: what a run repeats, checked before anything starts."""

from __future__ import annotations

from schemas.adaptive import AdaptivePlan, adaptive_plan
from schemas.errors import ConfigError
from schemas.shard import SAME

AUTO = "auto"


def parse_epochs(
    value: str, max_epochs: int | None, *, detach: bool, triggers: bool, baseline: str | None = None
) -> tuple[int, AdaptivePlan | None]:
    """The fixed epochs, or (``auto``) the first round's and the adaptive rule; ConfigError naming
    what is wrong (a detached run has nobody to send its later rounds; a trigger run has no gate;
    the noise floor counts flips per pair, and epochs sent to the cases that flip would inflate it)."""
    if value.strip().lower() == AUTO:
        if max_epochs is None:
            raise ConfigError("--epochs auto needs --max-epochs N (the most epochs any case may get)")
        if detach:
            raise ConfigError("--epochs auto cannot --detach: the submitter sends each later round")
        if baseline == SAME:
            raise ConfigError(
                "--epochs auto with --baseline same: more epochs go to the cases that flip, which would "
                "inflate the noise floor it measures; give fixed --epochs"
            )
        if triggers:
            raise ConfigError("--epochs auto is for graded runs: a trigger run has no pass rate to decide")
        rule = adaptive_plan(max_epochs)
        return rule.first_round, rule
    if max_epochs is not None:
        raise ConfigError("--max-epochs goes with --epochs auto")
    try:
        epochs = int(value)
    except ValueError:
        raise ConfigError(f"--epochs: {value!r} is neither a whole number nor auto") from None
    if epochs < 1:
        raise ConfigError("--epochs must be at least 1")
    return epochs, None


def adaptive_plan_line(rule: AdaptivePlan, max_shards: int | None) -> str:
    """What a dry run says of ``--epochs auto``: the first round, the maximum, and the stopping rule."""
    most = f" (at most {max_shards} shards)" if max_shards is not None else ""
    return (
        f"epochs auto: a first round of {rule.first_round} per case (the shards above), then {rule.step} more per "
        f"round to cases whose verdicts vary, up to {rule.max_epochs}{most}; stops when the gate's interval at "
        f"{100 * rule.level:.2f}% (alpha {rule.alpha:g} over {rule.looks} looks, Bonferroni) decides it"
    )
