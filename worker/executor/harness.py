"""Run one shard with a real agent harness inside the sandbox, its model behind the proxy.

The shard's life, in order:

1. find the binary (``BLOCKED_NO_HARNESS`` when missing) and let the adapter plan the run:
   files to stage in a fresh private HOME, command line, environment, prompt (everything
   particular to one harness is its adapter's, ``harnesses/<harness>.py``: this module names none);
2. serve the shard's :class:`~worker.proxy.ModelProxy` on a unix socket in a private folder,
   and the case's HTTP mocks (:class:`~worker.http_mock.HttpMockProxy`, inert without any);
3. run, inside bubblewrap as the sandbox's throwaway uid: the forwarder (loopback port ->
   the proxy's socket, bound read-only), then the harness, with the binary (or the runtime
   and binds the adapter's ``prepare`` names, for a harness that is a script) bound read-only,
   the private HOME bound over the sandbox's, a seccomp program denying ptrace and
   process_vm_writev, the output on a socket (no ``/proc/<pid>/fd/1`` to write into), and
   the binary execute-only (so the harness process is non-dumpable: no ``/proc/<pid>/mem``);
4. build the trajectory from the proxy's record, cross-checked against the harness's stream
   (the adapter's ``cross_check``: by call id, by order, or its own), and record whether the
   skill was activated, the HTTP calls the mocks answered and their findings.

Failure rules (:mod:`worker.executor.harness_end`): a harness whose own conversation asked
the upstream and got no answer, or whose upstream kept failing its own requests until it gave
up, is ``executor-failed`` (infra); one that never asked its model anything, or whose stream
the agent's output cut at the sandbox's cap, is behaviour. The proxy's record decides, never
the harness's own words. Running out of wall clock, tokens or turns is behaviour, and so is
filling the workspace past its quota, whatever the record shows (:mod:`worker.workspace_quota`).
"""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from urllib.parse import urlparse

from engine.budget import RunBudget
from harnesses.activations import skills_fired, turn_activates
from harnesses.base import FORWARDER_PORT, Harness, HarnessPlan, HarnessRequest, Invoke, skill_body_marker
from harnesses.crosscheck import CheckedEvents, forged_output_line
from harnesses.endpoints import DEFAULT_KEY_ENV, normalise_upstream
from harnesses.model_record import ProxyRecord
from schemas.corpus import EvalCase
from schemas.errors import ExecutorFailed, NoSandbox
from schemas.http_mocks import HttpCall
from schemas.manifest import AgentBudget
from schemas.model_config import ModelLimits
from schemas.status import SandboxMode
from schemas.trajectory import EndReason, Trajectory, TrajectoryName, Usage
from worker.executor.allowed import not_offered
from worker.executor.external import EXTERNAL_OUTPUT_CHARS
from worker.executor.final_files import collect_final_files
from worker.executor.harness_binary import find_binary, sealed_copy
from worker.executor.harness_end import UpstreamCheck, end_notes, settle_end
from worker.executor.harness_stage import installed, other_skills, plugin_name, skill_files, stage_home
from worker.executor.mock_calls import mock_servers, settle_mock_calls, stage_mocks
from worker.http_mock import HttpMockProxy
from worker.models.limiter import Limiter
from worker.proxy import ModelProxy, ProxyConfig, forwarder_command
from worker.sandbox import INNER_HOME, INNER_ROOT, BwrapSandbox, CommandResult, Sandbox, SandboxLimits
from worker.seccomp_filter import seccomp_program
from worker.workspace_quota import WORKSPACE_LIMIT, quota_breach

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no cost-map fetch from the internet

INNER_PROXY_DIR = "/run/skill-eval-proxy"
INNER_BIN = "/run/skill-eval-bin/harness"
# JIT runtimes (Bun, V8) reserve tens of GB of address space up front: an RLIMIT_AS sized for
# one shell command would kill them at start. The tmpfs sizes and the process cap still hold.
HARNESS_ADDRESS_SPACE_MB = 256 * 1024
OFFLINE_KEY = "offline-no-key"

Usage_ = Callable[[int, int, bool, bool], None]


@dataclass(frozen=True)
class HarnessShard:
    """What one harness shard runs."""

    harness: Harness
    model: str
    skill: str
    case: EvalCase
    invoke: Invoke = Invoke.EXPLICIT
    budget: AgentBudget = field(default_factory=AgentBudget)
    shard_id: str = ""
    triggers: bool = False
    """A trigger shard: every skill of the repo staged, and which of them fired recorded."""
    probe: bool = False
    """The harness's canary: nothing of a repo runs in it, so a harness that never asks its model
    is broken itself (infra), not stopped by what a case added (:mod:`worker.executor.harness_end`)."""

    def named(self) -> TrajectoryName:
        """The name of this shard's trajectory, as the other executors' is :meth:`ExecutorInputs.named`."""
        return TrajectoryName(shard_id=self.shard_id, skill=self.skill, case_id=self.case.id, model=self.model)


def harness_limits(limits: SandboxLimits, *, wall_clock_s: float) -> SandboxLimits:
    """Sandbox limits for a harness: its whole stream kept, the shard's wall clock, room for a JIT runtime."""
    return replace(
        limits,
        output_chars=EXTERNAL_OUTPUT_CHARS,
        timeout_s=wall_clock_s,
        cpu_s=int(wall_clock_s),
        memory_mb=HARNESS_ADDRESS_SPACE_MB,
    )


def real_key(harness: Harness, limits: ModelLimits, upstream: str) -> str:
    """The key the proxy sends upstream (never given to the sandbox); ExecutorFailed when it is not set."""
    env = limits.api_key_env or DEFAULT_KEY_ENV[harness.protocol]
    key = os.environ.get(env)
    if key:
        return key
    if urlparse(upstream).hostname in ("127.0.0.1", "localhost", "::1"):
        return OFFLINE_KEY
    raise ExecutorFailed(f"{harness.name} {limits.name}: environment variable {env} (the model's key) is not set")


def _short_parent(parent: Path | None) -> Path | None:
    """``parent``, unless the proxy's socket path under it would pass the kernel's 108-byte limit."""
    for candidate in (parent, Path(tempfile.gettempdir()), Path("/tmp")):
        if candidate is None or len(str(candidate)) + 60 < 108:
            return candidate
    return Path("/tmp")


def _run_sandboxed(
    sandbox: BwrapSandbox,
    command: str,
    env: dict[str, str],
    binds: list[str],
    stdin: str,
    timeout_s: float,
    *,
    allowance: Callable[[], float] | None = None,
    home: Path,
) -> CommandResult:
    from worker.sandbox_exec import bwrap_argv, execute, inner_argv, reap_uid, sandbox_env

    full_env = {**sandbox_env(home=INNER_HOME, tmp="/tmp"), **env}
    inner = inner_argv(command, sandbox.limits, uid=sandbox.uid)
    argv = bwrap_argv(sandbox.workspace, sandbox.limits, uid=sandbox.uid, inner=inner, env=full_env)
    cut = len(argv) - len(inner) - 1  # the "--" before the inner command
    with open(seccomp_program(), "rb") as program:
        extra = [*binds, "--seccomp", str(program.fileno())]
        argv = argv[:cut] + extra + argv[cut:]
        try:
            return execute(
                argv,
                env=full_env,
                cwd=None,
                stdin=stdin,
                timeout_s=timeout_s,
                limits=sandbox.limits,
                pass_fds=(program.fileno(),),
                socket_output=True,
                allowance=allowance,
                watch=(sandbox.workspace, home),  # its HOME is a host folder: counted with the workspace
            )
        finally:
            if sandbox.uid is not None:
                reap_uid(sandbox.uid)


def priced(record: ProxyRecord, model: str, token_cost: Callable[[str, int, int], float | None]) -> float | None:
    """Dollars the record's turns cost, each priced at the model its reply names (the shard's
    when it names none); None when any turn cannot be priced."""
    total = 0.0
    for turn in record.turns:
        cost = token_cost(turn.model or model, turn.prompt_tokens, turn.completion_tokens)
        if cost is None:
            return None
        total += cost
    return total


def _request(shard: HarnessShard, workspace: Path) -> HarnessRequest:
    """What the adapter plans from: the shard, and what its workspace holds."""
    harness = shard.harness
    return HarnessRequest(
        binary=INNER_BIN,
        model=shard.model,
        skill=shard.skill,
        skill_files=skill_files(workspace / "skills" / shard.skill, workspace),
        prompt=shard.case.prompt,
        invoke=shard.invoke,
        workspace=INNER_ROOT,
        home=INNER_HOME,
        plugin_name=plugin_name(workspace) if harness.loads_plugins else None,
        case_files=tuple(shard.case.files),
        allowed_tools=shard.case.allowed_tools,
        mock_servers=mock_servers(shard.case),
        other_skills=other_skills(workspace, shard.skill) if shard.triggers else {},
    )


def _proxy_config(
    shard: HarnessShard, plan: HarnessPlan, limits: ModelLimits, upstream: str, workspace: Path
) -> ProxyConfig:
    harness = shard.harness
    skill_md = next((c for rel, c in plan.home_files.items() if rel.endswith(f"{shard.skill}/SKILL.md")), b"")
    stop = partial(turn_activates, harness.skills_in, installed=installed(workspace)) if shard.triggers else None
    return ProxyConfig(
        protocol=harness.protocol,
        upstream=upstream,
        real_key=real_key(harness, limits, upstream),
        model=shard.model,
        wall_clock_s=shard.budget.wall_clock_s,
        max_tokens=shard.budget.max_tokens,
        max_turns=shard.budget.max_turns,
        timeout_s=limits.timeout_s,
        watch=skill_body_marker(skill_md),
        stop_when=stop,
        max_output=limits.max_output_tokens,
        headers=harness.forward_headers,
        betas=harness.betas,
        answered_empty=harness.answered_empty,
        opening=plan.stdin,
        harness=harness.name,
    )


def _binds(private: Path, binary: Path, case: EvalCase) -> list[str]:
    """The sandbox's extra mounts: the proxy's socket folder and the binary read-only, the private HOME,
    the case's mocked MCP servers."""
    return [
        # bwrap makes missing parents 0700: the throwaway uid could not pass them.
        *("--perms", "0755", "--dir", "/run"),
        *("--perms", "0755", "--dir", INNER_PROXY_DIR),
        *("--perms", "0755", "--dir", os.path.dirname(INNER_BIN)),
        *("--ro-bind", str(private / "proxy"), INNER_PROXY_DIR),
        *("--ro-bind", str(binary), INNER_BIN),
        *("--bind", str(private / "home"), INNER_HOME),
        *stage_mocks(case, private / "mocks"),
    ]


@dataclass(frozen=True)
class _Ran:
    result: CommandResult
    record: ProxyRecord
    waited_s: float
    http_calls: list[HttpCall]
    http_findings: list[str]


@dataclass(frozen=True)
class _Host:
    """The worker's side of a shard: the fleet's limiter, the usage counters, the run's budget."""

    limiter: Limiter | None
    usage: Usage_ | None
    run_budget: RunBudget | None
    tmp_parent: Path | None


def _runtime(harness: Harness, found: Path, workspace: Path, private: Path) -> tuple[Path, list[str]]:
    """The sealed executable to run and the extra binds it needs: what the adapter's ``prepare``
    names for the binary found (the binary itself and none, unless the harness is a script)."""
    runtime, binds = harness.prepare(found, workspace, INNER_ROOT, private)
    return sealed_copy(runtime), list(binds)


def _run_behind_proxy(
    shard: HarnessShard, sandbox: BwrapSandbox, plan: HarnessPlan, config: ProxyConfig, found: Path, host: _Host
) -> _Ran:
    """Stage the private HOME, serve the proxy (and the case's HTTP mocks) on their sockets, run
    forwarder and harness in the sandbox."""
    private = Path(tempfile.mkdtemp(prefix="skill-eval-harness-", dir=_short_parent(host.tmp_parent)))
    try:
        os.chmod(private, 0o711)
        proxy_dir = private / "proxy"
        proxy_dir.mkdir(mode=0o755)
        binary, runtime_binds = _runtime(shard.harness, found, sandbox.workspace, private)
        stage_home(private / "home", dict(plan.home_files), sandbox.uid)
        ready = "/tmp/.skill-eval-forwarder-ready"
        http = HttpMockProxy(shard.case.http_mocks, private / "http")  # inert without http_mocks
        command = http.prelude() + forwarder_command(f"{INNER_PROXY_DIR}/model.sock", FORWARDER_PORT, ready)
        command += "exec " + shlex.join(plan.argv)
        proxy = ModelProxy(
            config, proxy_dir / "model.sock", limiter=host.limiter, usage=host.usage, run_budget=host.run_budget
        )
        with proxy, http:
            result = _run_sandboxed(
                sandbox,
                command,
                {**plan.env, **http.env()},
                [*_binds(private, binary, shard.case), *http.binds(), *runtime_binds],
                plan.stdin,
                shard.budget.wall_clock_s,
                allowance=proxy.allowance_s,  # the fleet's waits are not the agent's time
                home=private / "home",
            )
        return _Ran(result, proxy.record, proxy.waited_s, list(http.calls), http.findings())
    finally:
        shutil.rmtree(private, ignore_errors=True)


def run_harness(
    shard: HarnessShard,
    *,
    sandbox: Sandbox,
    limits: ModelLimits,
    limiter: Limiter | None,
    usage: Usage_ | None = None,
    tmp_parent: Path | None = None,
    run_budget: RunBudget | None = None,
    upstream_check: UpstreamCheck | None = None,
) -> Trajectory:
    """Run ``shard`` in ``sandbox`` (bubblewrap, opened with :func:`harness_limits`); return its trajectory.

    Raises :class:`NoHarness` (binary missing), :class:`NoSandbox` (not bubblewrap) or
    :class:`ExecutorFailed` (see the module doc).
    """
    harness = shard.harness
    if sandbox.mode is not SandboxMode.BWRAP or not isinstance(sandbox, BwrapSandbox):
        raise NoSandbox(f"{harness.name} runs only in the bwrap sandbox (its model proxy needs it)")
    found = find_binary(harness)
    started_at, since_epoch = datetime.now(UTC), time.time()
    upstream = normalise_upstream(harness.protocol, limits.api_base)
    request = _request(shard, sandbox.workspace)
    plan = harness.plan(request)
    config = _proxy_config(shard, plan, limits, upstream, sandbox.workspace)
    config = replace(config, tools=harness.offered_tools(request))
    ran = _run_behind_proxy(shard, sandbox, plan, config, found, _Host(limiter, usage, run_budget, tmp_parent))
    parsed = harness.read_stream(ran.result.output.splitlines())
    where = f"{harness.name} ({shard.model})"
    # Measured before the final files are read; a breach is the agent's doing whatever else the record shows.
    over = quota_breach(sandbox.workspace, sandbox.limits, stopped=ran.result.limit == WORKSPACE_LIMIT)
    forced = None
    if over is None:
        forced = settle_end(
            where,
            ran.record,
            ran.result,
            saw_result=parsed.saw_result,
            probe=shard.probe,
            upstream_check=upstream_check,
        )
    end_reason = parsed.end_reason
    if over is not None:
        end_reason = EndReason.WORKSPACE_QUOTA
    elif ran.record.budget_end is not None:
        end_reason = EndReason(ran.record.budget_end)
    elif ran.result.limit == "timeout":
        end_reason = EndReason.WALL_CLOCK
    elif forced is not None:
        end_reason = forced
    checked = harness.cross_check(parsed.events, ran.record)
    trajectory = _trajectory(shard, sandbox, plan, ran, checked, end_reason, since_epoch)
    findings = [*trajectory.mock_findings, *not_offered(checked.events, config.tools)]
    events = [*trajectory.events, *end_notes(over, forced, ran.record)]
    trajectory = trajectory.model_copy(update={"started_at": started_at, "mock_findings": findings, "events": events})
    return settle_mock_calls(trajectory, shard.case)


def _trajectory(
    shard: HarnessShard,
    sandbox: BwrapSandbox,
    plan: HarnessPlan,
    ran: _Ran,
    checked: CheckedEvents,
    end_reason: EndReason,
    since_epoch: float,
) -> Trajectory:
    """The trajectory of a finished shard: the cross-checked events, the record's usage and cost."""
    from worker.models.via_litellm import token_cost  # litellm, imported only by a run that needs it

    harness, record = shard.harness, ran.record
    skills = installed(sandbox.workspace) if shard.triggers else None
    return Trajectory(
        **shard.named(),
        executor=harness.name,
        events=checked.events,
        end_reason=end_reason,
        sandbox=sandbox.mode,
        usage=Usage(
            prompt_tokens=record.prompt_tokens,
            completion_tokens=record.completion_tokens,
            calls=len(record.turns),
            cost_usd=priced(record, shard.model, token_cost),
        ),
        final_files=collect_final_files(sandbox, since_epoch=since_epoch, wrote=harness.written_paths(checked.events)),
        skill_activated=harness.activated(checked.events, shard.skill, plan.skill_ref, record.body_sent),
        rejected_calls=[*checked.rejected, *map(forged_output_line, record.forged_outputs)],
        forged_results=list(record.forged_outputs),
        skills_fired=skills_fired(harness.skills_in, checked.events, skills) if skills is not None else None,
        proposed_calls=checked.proposed,
        refused_requests=list(record.agent_refusals),
        http_calls=ran.http_calls,
        mock_findings=ran.http_findings,
        waited_s=round(ran.waited_s, 3),
        finished_at=datetime.now(UTC),
    )
