"""Model settings: the per-model limits of ``skill-eval.toml``, merged with defaults.

The file holds one table per litellm model name, plus optional ``[defaults]`` (for models
not listed), ``[retry]`` (the per-call retry budget) and ``[limiter]`` (lease and adaptation
knobs)::

    [models."openai/gpt-4.1"]
    api_base = "https://..."      # optional
    api_key_env = "OPENAI_API_KEY"
    rpm = 500                      # requests per minute, fleet-wide
    tpm = 200000                   # tokens per minute, fleet-wide
    max_concurrency = 32           # calls in flight, fleet-wide
    timeout_s = 120
    transport = "auto"             # or "direct" / "litellm"
    max_output_tokens = 32000      # what one harness request may ask for (the proxy clamps)

    [retry]
    max_attempts = 6

Every table forbids unknown keys, so a typo is a :class:`ConfigError` naming the file and the
field instead of a limit silently not applied. Pure: pydantic and tomllib only.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator

from schemas.base import FrozenModel
from schemas.constants import CONFIG_FILE
from schemas.errors import ConfigError

Transport = Literal["auto", "direct", "litellm"]
"""How a model's calls are sent. ``direct``: straight over HTTP to an OpenAI-compatible
``api_base`` (``POST {api_base}/chat/completions``, a bearer key), without litellm;
``litellm``: through litellm, which knows every provider's API and its model quirks;
``auto`` (the default): ``direct`` for a model routed as ``openai/...`` to an explicit
``api_base`` (a self-hosted or gateway endpoint), ``litellm`` for everything else."""


class ModelSettings(FrozenModel):
    """Limits and endpoint of one model; fields left unset fall back to ``[defaults]``."""

    api_base: str | None = None
    """Endpoint URL (litellm ``api_base``); None: the provider's default."""
    api_key_env: str | None = None
    """Name of the environment variable holding the API key; None: litellm's own lookup."""
    rpm: int | None = Field(default=None, gt=0)
    """Requests per minute, fleet-wide; None: not limited."""
    tpm: int | None = Field(default=None, gt=0)
    """Tokens per minute (prompt + completion), fleet-wide; None: not limited."""
    max_concurrency: int | None = Field(default=None, gt=0)
    """Calls in flight, fleet-wide; None: the default's value."""
    timeout_s: float | None = Field(default=None, gt=0)
    """Timeout of one HTTP call, seconds."""
    transport: Transport | None = None
    """How calls reach the model; None: the default's value (see :data:`Transport`)."""
    max_output_tokens: int | None = Field(default=None, gt=0)
    """Output tokens one harness request may ask for (the proxy clamps ``max_tokens`` to it)."""


DEFAULT_MAX_OUTPUT_TOKENS = 32_000
"""Output tokens one harness request may ask for where no table says (what Claude Code asks)."""
DEFAULT_MAX_CONCURRENCY = 16
"""Calls in flight per model, fleet-wide, where no table sets ``max_concurrency``."""


class ModelLimits(FrozenModel):
    """The resolved settings of one model, every limit decided (what the limiter and client use)."""

    name: str
    """The litellm model name."""
    api_base: str | None = None
    """Endpoint URL; the ``--api-base`` flag overrides every model's."""
    api_key_env: str | None = None
    """Environment variable holding the key."""
    rpm: int | None = None
    """Requests per minute, fleet-wide; None: not limited."""
    tpm: int | None = None
    """Tokens per minute, fleet-wide; None: not limited."""
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY
    """Calls in flight, fleet-wide."""
    timeout_s: float = 120.0
    """Timeout of one HTTP call, seconds."""
    transport: Transport = "auto"
    """How calls reach the model (see :data:`Transport`)."""
    max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS
    """Output tokens one harness request may ask for (the proxy clamps ``max_tokens`` to it)."""


class RetrySettings(FrozenModel):
    """The retry budget of one model call (429, 5xx, connection errors, timeouts)."""

    max_attempts: int = Field(default=6, ge=1)
    """HTTP attempts per call, the first included; past them: ModelCallFailed."""
    base_delay_s: float = Field(default=1.0, ge=0)
    """First backoff ceiling; doubles per attempt (full jitter: a uniform draw below it)."""
    max_delay_s: float = Field(default=30.0, ge=0)
    """Ceiling of one backoff sleep (a longer Retry-After still wins)."""


class LimiterSettings(FrozenModel):
    """How the fleet-wide limiter holds leases and adapts its pace."""

    lease_ttl_s: float = Field(default=30.0, gt=0)
    """A concurrency lease expires this long after its last refresh (a dead worker's slot returns)."""
    headroom: float = Field(default=0.98, gt=0, le=1)
    """Share of the configured rpm/tpm actually used, so arrival jitter never crosses the ceiling."""
    shrink: float = Field(default=0.8, gt=0, lt=1)
    """Factor applied to the pace and concurrency once per rate-limit episode."""
    min_factor: float = Field(default=0.1, gt=0, le=1)
    """The pace never shrinks below this share of the configured limits."""
    growth_per_success: float = Field(default=0.002, ge=0)
    """Added back to the pace factor per successful call, up to 1."""
    redis_retry_s: float = Field(default=60.0, ge=0)
    """How long a limiter operation retries an unreachable Redis before the call fails."""


class ModelConfig(FrozenModel):
    """The whole model configuration of a run."""

    models: dict[str, ModelSettings] = Field(default_factory=dict)
    """Per-model tables, keyed by litellm model name."""
    defaults: ModelSettings = Field(default_factory=ModelSettings)
    """Settings for fields a model's table leaves unset, and for models not listed."""
    retry: RetrySettings = Field(default_factory=RetrySettings)
    """Retry budget per call."""
    limiter: LimiterSettings = Field(default_factory=LimiterSettings)
    """Lease and adaptation knobs."""
    api_base_override: str | None = None
    """``--api-base``: the API base of every model of the run."""
    calls_in_flight: int | None = Field(default=None, gt=0)
    """The shards an embedded run keeps in flight (``--workers``). A model whose
    ``max_concurrency`` no table sets allows at least this many calls at once, so that the flag
    means what it says: with the built-in 16, ``--workers 64`` kept 16 executor calls in flight
    and the other shards queued in the limiter. A fleet's runs leave it unset: there the
    workers' concurrency is the operator's, and so are the models' limits."""
    source: str | None = None
    """The file this came from, for messages."""

    @model_validator(mode="after")
    def _direct_needs_an_endpoint(self) -> ModelConfig:
        tables = {"defaults": self.defaults, **{f'models."{n}"': t for n, t in self.models.items()}}
        for where, table in tables.items():
            transport = table.transport or self.defaults.transport
            if transport == "direct" and not (table.api_base or self.defaults.api_base or self.api_base_override):
                why = '"direct" needs an api_base (in the table, [defaults] or --api-base)'
                raise ValueError(f"{where}.transport: {why}")
        return self

    def for_model(self, name: str) -> ModelLimits:
        """The resolved limits of ``name`` (its table over ``[defaults]`` over built-in defaults)."""
        merged: dict[str, Any] = self.defaults.model_dump(exclude_none=True)
        merged.update(self.models.get(name, ModelSettings()).model_dump(exclude_none=True))
        if self.api_base_override:
            merged["api_base"] = self.api_base_override
        if "max_concurrency" not in merged and self.calls_in_flight:
            merged["max_concurrency"] = max(DEFAULT_MAX_CONCURRENCY, self.calls_in_flight)
        return ModelLimits(name=name, **merged)

    def narrower_than_run(self, models: list[str]) -> list[str]:
        """A note for each of ``models`` whose configured ``max_concurrency`` is below the run's
        shards in flight: those shards will queue for it."""
        if not self.calls_in_flight:
            return []
        notes: list[str] = []
        for name in dict.fromkeys(models):
            allowed = self.for_model(name).max_concurrency
            if allowed < self.calls_in_flight:
                where = self.source or "the model config"
                notes.append(
                    f"note: {name} allows {allowed} calls in flight (max_concurrency in {where}); "
                    f"{self.calls_in_flight} shards in flight will queue for it"
                )
        return notes


def _field_path(loc: tuple[int | str, ...]) -> str:
    parts: list[str] = []
    for i, part in enumerate(loc):
        text = str(part)
        if i == 1 and loc[0] == "models":  # a model name: quote it as TOML does
            parts.append(f'"{text}"')
        else:
            parts.append(text)
    return ".".join(parts)


def parse_model_config(
    data: dict[str, Any], source: str = "<config>", api_base_override: str | None = None
) -> ModelConfig:
    """Validate a parsed TOML document; raise ConfigError naming ``source`` and the field."""
    try:
        return ModelConfig.model_validate({**data, "api_base_override": api_base_override, "source": source})
    except ValidationError as err:
        first = err.errors()[0]
        where, message = _field_path(first["loc"]), first["msg"].removeprefix("Value error, ")
        raise ConfigError(f"{source}: {where}: {message}" if where else f"{source}: {message}") from err


def load_model_config(
    path: Path | None = None, api_base_override: str | None = None, *, untrusted: Path | None = None
) -> ModelConfig:
    """Load the model settings of a run.

    ``path`` None means ``./skill-eval.toml`` when it exists, else built-in defaults. A path
    that does not exist, bad TOML or a bad field raises :class:`ConfigError` naming the file
    (and the field).

    ``untrusted``: the repo under evaluation. The config names endpoints and the environment
    variables whose values are sent to them as keys, so a ``./skill-eval.toml`` found inside
    that repo (the command is usually started there) could send the operator's keys to any
    host: it is refused unless named with ``--config``, which is the operator vouching for it.
    """
    if path is None:
        default = Path.cwd() / CONFIG_FILE
        if not default.exists():
            return ModelConfig(api_base_override=api_base_override)
        repo = untrusted.resolve() if untrusted is not None else None
        # Where it sits and where it leads: a link in the repo may point out of it, and a link
        # outside may point in.
        if repo is not None and (default.absolute().is_relative_to(repo) or default.resolve().is_relative_to(repo)):
            raise ConfigError(
                f"{default}: a model config inside the repo under evaluation is not read unless named "
                "(it sets endpoints and which environment variables are sent to them as keys); "
                "pass --config to use it"
            )
        path = default
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as err:
        raise ConfigError(f"{path}: config file not found") from err
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"{path}: cannot read: {err}") from err
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: not valid TOML: {err}") from err
    return parse_model_config(data, str(path), api_base_override)
