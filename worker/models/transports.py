"""Which transport a model's calls take: given to the model client, not held by the module.

A request reaches its model straight over HTTP for an OpenAI-compatible endpoint
(:class:`worker.models.direct.OpenAICompatible`) or through litellm
(``worker/models/via_litellm.py``, imported on the first model that needs it). A worker
process builds one :class:`Transports` (its Context does) and hands it to every client it
makes, so the HTTP connection pools are shared by every run's client; a test hands a client
:meth:`Transports.only` one transport of its own, the way httpx takes a ``MockTransport``.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable

from schemas.model_config import ModelLimits
from worker.models.base import Transport
from worker.models.direct import OpenAICompatible


def goes_direct(limits: ModelLimits) -> bool:
    """Whether calls of this model go straight over HTTP rather than through litellm.

    ``transport = "direct"`` always (an ``api_base`` is then required by the config);
    ``"litellm"`` never; ``"auto"`` when the model is routed as ``openai/...`` to an explicit
    ``api_base``: an OpenAI-compatible server, not OpenAI's own API, whose per-model request
    rules (``max_completion_tokens`` and the like) litellm knows and this transport does not.
    """
    if limits.transport == "direct":
        return True
    return limits.transport == "auto" and limits.name.startswith("openai/") and bool(limits.api_base)


def _load_litellm() -> Transport:
    transport: Transport = importlib.import_module("worker.models.via_litellm").LiteLLM()
    return transport


class Transports:
    """The transports of one process, chosen per model by :func:`goes_direct`."""

    def __init__(self, direct: Transport | None = None, litellm: Callable[[], Transport] = _load_litellm) -> None:
        self.direct = direct if direct is not None else OpenAICompatible()
        self._make_litellm = litellm
        self._litellm: Transport | None = None
        self._lock = threading.Lock()

    @classmethod
    def only(cls, transport: Transport) -> Transports:
        """Every model's calls through ``transport`` (a test's or a benchmark's own)."""
        return cls(direct=transport, litellm=lambda: transport)

    def for_model(self, limits: ModelLimits) -> Transport:
        """The transport this model's calls take (litellm made on the first that needs it)."""
        if goes_direct(limits):
            return self.direct
        with self._lock:
            if self._litellm is None:
                self._litellm = self._make_litellm()
            return self._litellm
