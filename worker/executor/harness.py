"""Run one shard with a real agent harness (Claude Code, Codex) inside the sandbox, its model behind the proxy.

The shard's life, in order:

1. find the binary (``BLOCKED_NO_HARNESS`` when missing) and let the adapter plan the run:
   files to stage in a fresh private HOME, command line, environment, prompt;
2. serve the shard's :class:`~worker.proxy.ModelProxy` on a unix socket in a private folder;
3. run, inside bubblewrap as the sandbox's throwaway uid: the forwarder (loopback port ->
   the proxy's socket, bound read-only), then the harness, with the binary bound read-only,
   the private HOME bound over the sandbox's, a seccomp program denying ptrace and
   process_vm_writev, the output on a socket (no ``/proc/<pid>/fd/1`` to write into), and
   the binary execute-only (so the harness process is non-dumpable: no ``/proc/<pid>/mem``);
4. build the trajectory from the proxy's record, cross-checked against the harness's stream
   (:func:`harnesses.crosscheck.cross_check`), and record whether the skill was activated.

Failure rules: a harness that fails before its first model call, or whose upstream kept
failing until it gave up, is ``executor-failed`` (infra). Anything after the first proxied
call is behaviour unless the proxy's record shows an infra cause; the harness's own words
are never what decides. Running out of wall clock, tokens or turns is behaviour.
"""

from __future__ import annotations

import json
import os
import re
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

import structlog

from engine.budget import RunBudget
from harnesses.activations import skills_fired, turn_activates
from harnesses.base import FORWARDER_PORT, Harness, HarnessRequest, Invoke, skill_body_marker
from harnesses.crosscheck import cross_check, cross_check_by_order
from harnesses.endpoints import normalise_upstream
from harnesses.model_record import ProxyRecord
from schemas.corpus import EvalCase
from schemas.errors import BudgetExhausted, ExecutorFailed, NoSandbox
from schemas.manifest import AgentBudget
from schemas.model_config import ModelLimits
from schemas.status import SandboxMode
from schemas.trajectory import EndReason, ToolCallEvent, Trajectory, Usage
from worker.executor.external import EXTERNAL_OUTPUT_CHARS
from worker.executor.final_files import collect_final_files
from worker.executor.harness_binary import find_binary, sealed_copy
from worker.executor.mock_calls import mock_servers, settle_mock_calls, stage_mocks
from worker.http_mock import HttpMockProxy
from worker.models.limiter import Limiter
from worker.proxy import ModelProxy, ProxyConfig, forwarder_command
from worker.sandbox import INNER_HOME, INNER_ROOT, BwrapSandbox, CommandResult, Sandbox, SandboxLimits
from worker.seccomp_filter import seccomp_program

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no cost-map fetch from the internet

INNER_PROXY_DIR = "/run/skill-eval-proxy"
INNER_BIN = "/run/skill-eval-bin/harness"
# JIT runtimes (Bun, V8) reserve tens of GB of address space up front: an RLIMIT_AS sized for
# one shell command would kill them at start. The tmpfs sizes and the process cap still hold.
HARNESS_ADDRESS_SPACE_MB = 256 * 1024
_MAX_SKILL_FILES, _MAX_SKILL_FILE_BYTES = 200, 1_000_000
MAX_DISTRACTOR_BYTES = 64 * 1024 * 1024
"""What a trigger shard stages of the other skills at most (their SKILL.md files are a few KB each)."""
_SKILL_DIR = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_PLUGIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_DEFAULT_KEY_ENV = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY", "gemini": "GEMINI_API_KEY"}
OFFLINE_KEY = "offline-no-key"
log = structlog.get_logger("skill_eval.harness")

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
    env = limits.api_key_env or _DEFAULT_KEY_ENV[harness.protocol]
    key = os.environ.get(env)
    if key:
        return key
    if urlparse(upstream).hostname in ("127.0.0.1", "localhost", "::1"):
        return OFFLINE_KEY
    raise ExecutorFailed(f"{harness.name} {limits.name}: environment variable {env} (the model's key) is not set")


def skill_files(skill_dir: Path, workspace: Path) -> dict[str, bytes]:
    """The skill folder's regular files (symlinks skipped: repo content is never followed), capped.

    A skill folder that is itself a link, or resolves outside ``workspace``, stages nothing.
    """
    files: dict[str, bytes] = {}
    real = Path(os.path.realpath(skill_dir))
    if skill_dir.is_symlink() or not real.is_relative_to(os.path.realpath(workspace)) or not real.is_dir():
        return files
    for dirpath, dirnames, filenames in os.walk(skill_dir, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not os.path.islink(os.path.join(dirpath, d)))
        for name in sorted(filenames):
            path = Path(dirpath, name)
            if path.is_symlink() or not path.is_file() or path.stat().st_size > _MAX_SKILL_FILE_BYTES:
                continue
            files[path.relative_to(skill_dir).as_posix()] = path.read_bytes()
            if len(files) >= _MAX_SKILL_FILES:
                return files
    return files


def installed(workspace: Path) -> list[str]:
    """The workspace's skill folders a harness can load (kebab-case names, real folders, not links)."""
    folder = workspace / "skills"
    if folder.is_symlink() or not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if _SKILL_DIR.match(p.name) and not p.is_symlink() and p.is_dir())


def other_skills(workspace: Path, skill: str, max_bytes: int = MAX_DISTRACTOR_BYTES) -> dict[str, dict[str, bytes]]:
    """Every installed skill but ``skill``, name -> its files (a trigger run's distractors), in name
    order until ``max_bytes`` staged in all: a repo's skills cannot fill the host's disk."""
    out: dict[str, dict[str, bytes]] = {}
    total = 0
    for name in (n for n in installed(workspace) if n != skill):
        files = skill_files(workspace / "skills" / name, workspace)
        total += sum(len(c) for c in files.values())
        if total > max_bytes:
            log.warning("trigger distractors cut", staged=len(out), cap_bytes=max_bytes)
            break
        out[name] = files
    return out


def plugin_name(workspace: Path) -> str | None:
    """The repo's Claude Code plugin name (``.claude-plugin/plugin.json``), when it has a sane one."""
    manifest = workspace / ".claude-plugin" / "plugin.json"
    if manifest.is_symlink() or not manifest.is_file():
        return None
    try:
        name = json.loads(manifest.read_text(encoding="utf-8")).get("name")
    except (OSError, ValueError, AttributeError):
        return None
    return name if isinstance(name, str) and _PLUGIN_NAME.match(name) else None


def _stage_home(home: Path, files: dict[str, bytes], uid: int | None) -> None:
    home.mkdir(mode=0o700)
    for relative, content in files.items():
        target = home / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    if uid is not None:
        for dirpath, _dirnames, filenames in os.walk(home):
            os.lchown(dirpath, uid, uid)
            for name in filenames:
                os.lchown(os.path.join(dirpath, name), uid, uid)


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


def _runtime(harness: Harness, found: Path, workspace: Path, private: Path) -> tuple[Path, list[str]]:
    """The sealed executable to run and the extra binds it needs: the binary itself, or for a
    harness that is a script (Gemini CLI, on node) what its adapter's ``prepare`` names."""
    prepare = getattr(harness, "prepare", None)
    if prepare is None:
        return sealed_copy(found), []
    runtime, binds = prepare(found, workspace, INNER_ROOT, private)
    return sealed_copy(runtime), list(binds)


def _tail(text: str, chars: int = 600) -> str:
    return text[-chars:].strip() or "(no output)"


def run_harness(
    shard: HarnessShard,
    *,
    sandbox: Sandbox,
    limits: ModelLimits,
    limiter: Limiter | None,
    usage: Usage_ | None = None,
    tmp_parent: Path | None = None,
    run_budget: RunBudget | None = None,
) -> Trajectory:
    """Run ``shard`` in ``sandbox`` (bubblewrap, opened with :func:`harness_limits`); return its trajectory.

    Raises :class:`NoHarness` (binary missing), :class:`NoSandbox` (not bubblewrap) or
    :class:`ExecutorFailed` (see the module doc).
    """
    from worker.models.via_litellm import token_cost  # litellm, imported only by a run that needs it

    if sandbox.mode is not SandboxMode.BWRAP or not isinstance(sandbox, BwrapSandbox):
        raise NoSandbox(f"{shard.harness.name} runs only in the bwrap sandbox (its model proxy needs it)")
    harness = shard.harness
    found = find_binary(harness)
    started_at, since_epoch = datetime.now(UTC), time.time()
    upstream = normalise_upstream(harness.protocol, limits.api_base)
    key = real_key(harness, limits, upstream)
    workspace = sandbox.workspace
    plan = harness.plan(
        HarnessRequest(
            binary=INNER_BIN,
            model=shard.model,
            skill=shard.skill,
            skill_files=skill_files(workspace / "skills" / shard.skill, workspace),
            prompt=shard.case.prompt,
            invoke=shard.invoke,
            workspace=INNER_ROOT,
            home=INNER_HOME,
            plugin_name=plugin_name(workspace) if harness.name == "claude-code" else None,
            case_files=tuple(shard.case.files),
            allowed_tools=shard.case.allowed_tools,
            mock_servers=mock_servers(shard.case),
            other_skills=other_skills(workspace, shard.skill) if shard.triggers else {},
        )
    )
    skill_md = next((c for rel, c in plan.home_files.items() if rel.endswith(f"{shard.skill}/SKILL.md")), b"")
    private = Path(tempfile.mkdtemp(prefix="skill-eval-harness-", dir=_short_parent(tmp_parent)))
    try:
        os.chmod(private, 0o711)
        proxy_dir = private / "proxy"
        proxy_dir.mkdir(mode=0o755)
        binary, runtime_binds = _runtime(harness, found, workspace, private)
        _stage_home(private / "home", dict(plan.home_files), sandbox.uid)
        config = ProxyConfig(
            protocol=harness.protocol,
            upstream=upstream,
            real_key=key,
            model=shard.model,
            wall_clock_s=shard.budget.wall_clock_s,
            max_tokens=shard.budget.max_tokens,
            max_turns=shard.budget.max_turns,
            timeout_s=limits.timeout_s,
            watch=skill_body_marker(skill_md),
            stop_when=partial(turn_activates, harness.name, installed=installed(workspace)) if shard.triggers else None,
            max_output=limits.max_output_tokens,
            headers=harness.forward_headers,
            betas=harness.betas,
            opening=plan.stdin,
        )
        ready = "/tmp/.skill-eval-forwarder-ready"
        http = HttpMockProxy(shard.case.http_mocks, private / "http")  # inert without http_mocks
        command = http.prelude() + forwarder_command(f"{INNER_PROXY_DIR}/model.sock", FORWARDER_PORT, ready)
        command += "exec " + shlex.join(plan.argv)
        binds = [
            # bwrap makes missing parents 0700: the throwaway uid could not pass them.
            "--perms",
            "0755",
            "--dir",
            "/run",
            "--perms",
            "0755",
            "--dir",
            INNER_PROXY_DIR,
            "--perms",
            "0755",
            "--dir",
            os.path.dirname(INNER_BIN),
            "--ro-bind",
            str(proxy_dir),
            INNER_PROXY_DIR,
            "--ro-bind",
            str(binary),
            INNER_BIN,
            "--bind",
            str(private / "home"),
            INNER_HOME,
            *stage_mocks(shard.case, private / "mocks"),
            *http.binds(),
            *runtime_binds,
        ]
        with (
            ModelProxy(config, proxy_dir / "model.sock", limiter=limiter, usage=usage, run_budget=run_budget) as proxy,
            http,
        ):
            result = _run_sandboxed(
                sandbox,
                command,
                {**plan.env, **http.env()},
                binds,
                plan.stdin,
                shard.budget.wall_clock_s,
                allowance=proxy.allowance_s,  # the fleet's waits are not the agent's time
            )
        record = proxy.record
    finally:
        shutil.rmtree(private, ignore_errors=True)
    where = f"{harness.name} ({shard.model})"
    if record.run_budget_end is not None:  # the run's cap, not the agent: never judged as behaviour
        raise BudgetExhausted(f"{where}: {record.run_budget_end}")
    if result.truncated:
        raise ExecutorFailed(f"{where}: its event stream was cut by the sandbox's output cap")
    parsed = harness.read_stream(result.output.splitlines())
    if not record.turns:
        if result.limit == "timeout":
            raise ExecutorFailed(f"{where}: no model call within the wall clock: {_tail(result.output)}")
        why = f"upstream kept failing ({record.last_error})" if record.upstream_failures else "no model call"
        if record.refused:  # its own requests broke a rule: the adapter's settings, not the agent
            why += f"; the proxy refused: {record.refused[-1]}"
        raise ExecutorFailed(f"{where}: failed before its first model response, {why}: {_tail(result.output)}")
    if not record.last_upstream_ok and not parsed.saw_result:
        raise ExecutorFailed(f"{where}: the upstream kept failing until the harness gave up: {record.last_error}")
    end_reason = parsed.end_reason
    if record.budget_end is not None:
        end_reason = EndReason(record.budget_end)
    elif result.limit == "timeout":
        end_reason = EndReason.WALL_CLOCK
    check = getattr(harness, "cross_check", None) or (cross_check if harness.stream_call_ids else cross_check_by_order)
    checked = check(parsed.events, record)
    wrote = [
        str(e.arguments[k])
        for e in checked.events
        if isinstance(e, ToolCallEvent) and e.name in ("Write", "Edit", "MultiEdit", "NotebookEdit")
        for k in ("file_path", "notebook_path")
        if isinstance(e.arguments.get(k), str)
    ]
    trajectory = Trajectory(
        shard_id=shard.shard_id,
        skill=shard.skill,
        case_id=shard.case.id,
        model=shard.model,
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
        final_files=collect_final_files(sandbox, since_epoch=since_epoch, wrote=wrote),
        skill_activated=harness.activated(checked.events, shard.skill, plan.skill_ref, record.body_sent),
        rejected_calls=checked.rejected,
        skills_fired=skills_fired(harness.name, checked.events, installed(workspace)) if shard.triggers else None,
        proposed_calls=checked.proposed,
        refused_requests=list(record.agent_refusals),
        http_calls=list(http.calls),
        mock_findings=http.findings(),
        waited_s=round(proxy.waited_s, 3),
        started_at=started_at,
        finished_at=datetime.now(UTC),
    )
    return settle_mock_calls(trajectory, shard.case)
