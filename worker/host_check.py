"""Checking an execute worker's host before a run's shards are sent: the sandbox and the canary.

The contract's canary proves transcript capture once before a batch of an external agent CLI
(``cmd:``) or a harness (Claude Code, Codex, OpenCode): it runs that executor in the sandbox,
so it runs where the cases will, on an execute worker, as a task on the execute queue like the
model preflight (worker/preflight.py). The same task probes the bubblewrap sandbox the run asks
for, with the very command line the sandbox builds: on an embedded cluster that is this host's
check before anything is sent. A failing check comes back as its named error
(:class:`schemas.preflight.HostCheckReport`), which the producer raises.

The canary goes first and nothing else of the run calls a model before it has passed (the
producer sends the model preflight only after this report when there is a canary).
"""

from __future__ import annotations

import os
import socket

import structlog

from harnesses.registry import harness_for
from schemas.errors import BlockedError
from schemas.manifest import RunManifest
from schemas.preflight import HostCheckReport, needs_canary
from worker.context import Context

log = structlog.get_logger("skill_eval.host_check")


def run_host_check(ctx: Context, run_id: str) -> HostCheckReport:
    """The sandbox probe, then the executor's canary; the report names the first that fails."""
    worker = f"{socket.gethostname()}:{os.getpid()}"
    try:
        manifest = ctx.manifest(run_id)
        check_host(manifest, ctx)
    except BlockedError as exc:
        return HostCheckReport(worker=worker, status=exc.status, detail=exc.detail)
    except Exception as exc:  # a report must come back whatever failed, or the producer waits for nothing
        log.warning("host check failed", error=str(exc))
        return HostCheckReport(worker=worker, detail=f"{type(exc).__name__}: {exc}")
    return HostCheckReport(worker=worker)


def check_host(manifest: RunManifest, ctx: Context) -> None:
    """Raise the named error (``NoSandbox``, ``NoHarness``, ``NoTranscriptCapture``) this host's first
    failing check gives for the run."""
    from worker.sandbox import require_sandbox

    require_sandbox(manifest.plan.sandbox)
    if not needs_canary(manifest):
        return
    executors = manifest.executors()
    for option in executors:  # every binary first: a missing one is said before any canary runs
        harness = harness_for(option)
        if harness is not None:
            from worker.executor.harness_binary import find_binary

            find_binary(harness)  # BLOCKED_NO_HARNESS
    for option, models in executors.items():
        _canary(option, models, manifest, ctx)


def _canary(option: str, models: tuple[str, ...], manifest: RunManifest, ctx: Context) -> None:
    """One executor's canary: an external CLI's once, a harness's once per model it runs."""
    mode, parent = manifest.plan.sandbox, ctx.settings.workspaces_dir
    if option.startswith("cmd:"):
        from worker.executor.canary import probe_transcript_capture
        from worker.executor.external import ExternalExecutor

        probe_transcript_capture(ExternalExecutor.from_option(option), mode=mode, parent=parent)
        return
    harness = harness_for(option)
    if harness is None:
        return
    from worker.executor.canary import probe_harness_capture

    config = manifest.settings.models
    for model in models:
        probe_harness_capture(harness, model, config.for_model(model), mode=mode, parent=parent)
