"""Deployment without defaults that let people in, checked on the manifests themselves (no cluster).

* no Redis password anywhere: compose interpolates ``${REDIS_PASSWORD:?...}``, the Kubernetes
  Secret is the operator's to create, and Redis refuses a short one before it listens;
* every pod: no service-account token, all capabilities dropped, no privilege escalation; every
  pod but the executor's runs as non-root under the runtime's seccomp profile;
* the executor: root only inside a user namespace, and only the capabilities bubblewrap and the
  uid drop need (the same set in compose and Kubernetes), its isolation checked at start;
* the isolation check refuses an executor whose root is the host's, with its reason.
"""

from __future__ import annotations

import os
import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.image_support import EXECUTOR_CAPABILITIES, SANDBOX_PRIVILEGES
from tests.deploy.support import COMPOSE, ROOT, by_kind, k8s_documents

BWRAP_CAPS = {"SYS_ADMIN", "NET_ADMIN", "SETUID", "SETGID", "CHOWN", "FOWNER", "DAC_OVERRIDE", "KILL"}
"""What a root executor needs, each justified in docs/design/deployment.md."""
CHECK = ROOT / "deploy" / "check-isolation.sh"
EXECUTE = "skill-eval-execute"


def _pods() -> dict[str, dict[str, Any]]:
    return {
        name: doc["spec"]["template"]["spec"]
        for kind in ("Deployment", "StatefulSet")
        for name, doc in by_kind(kind).items()
    }


def _env(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container.get("env", [])}


def test_no_manifest_carries_a_redis_password_and_every_use_needs_the_secret() -> None:
    for file, doc in k8s_documents():
        if doc["kind"] == "Secret":
            assert doc["metadata"]["name"] != "skill-eval-redis", f"{file}: the Redis password is the operator's"
    users = 0
    for name, pod in _pods().items():
        for container in pod["containers"]:
            ref = _env(container).get("REDIS_PASSWORD")
            if ref is None:
                continue
            users += 1
            key_ref = ref["valueFrom"]["secretKeyRef"]
            assert key_ref["name"] == "skill-eval-redis" and not key_ref.get("optional", False), name
    assert users == 3  # Redis and both worker kinds


def test_redis_refuses_a_short_password_before_it_listens() -> None:
    redis = _pods()["redis"]["containers"][0]
    assert redis["command"] == ["sh", "-c"]
    for password in ("", "REPLACE_ME"):
        done = subprocess.run(
            ["sh", "-c", redis["args"][0]],
            env={"PATH": os.environ["PATH"], "REDIS_PASSWORD": password},
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert done.returncode == 1 and "at least 16 characters" in done.stderr, done.stderr


def test_every_pod_drops_all_capabilities_and_only_the_executor_adds_what_bubblewrap_needs() -> None:
    for name, pod in _pods().items():
        assert pod["automountServiceAccountToken"] is False, name
        for container in pod["containers"]:
            ctx = container["securityContext"]
            assert ctx["capabilities"]["drop"] == ["ALL"], name
            assert ctx["allowPrivilegeEscalation"] is False, name
            added = set(ctx["capabilities"].get("add", []))
            assert added == (BWRAP_CAPS if name == EXECUTE else set()), name
        if name != EXECUTE:
            assert pod["securityContext"]["runAsNonRoot"] is True, name
            assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault", name
            assert "procMount" not in str(pod), name


def test_the_executor_is_root_only_inside_a_user_namespace_and_checks_it() -> None:
    pod = _pods()[EXECUTE]
    assert pod["hostUsers"] is False
    worker = pod["containers"][0]
    assert worker["securityContext"]["runAsUser"] == 0
    assert _env(worker)["SKILL_EVAL_EXECUTOR_ISOLATION"]["value"] == "required"


def test_compose_has_no_default_password_and_the_executor_the_same_capabilities() -> None:
    text = COMPOSE.read_text()
    assert not re.search(r"REDIS_PASSWORD:-", text), "a default Redis password"
    uses = re.findall(r"\$\{REDIS_PASSWORD(:\?[^}]*)?\}", text)
    assert uses and all(u.startswith(":?") for u in uses), uses
    services = yaml.safe_load(text)["services"]
    execute = services["worker-execute"]
    assert execute["cap_drop"] == ["ALL"] and set(execute["cap_add"]) == BWRAP_CAPS
    assert "no-new-privileges" in execute["security_opt"]
    assert execute["environment"]["SKILL_EVAL_EXECUTOR_ISOLATION"] == "${SKILL_EVAL_EXECUTOR_ISOLATION:-required}"
    for name, service in services.items():
        assert not service.get("privileged"), name
        if name != "worker-execute":
            assert "cap_add" not in service and "security_opt" not in service, name


def _check(
    tmp_path: Path, uid_map: str, version: str, isolation: str | None, uid: str = "0"
) -> subprocess.CompletedProcess[str]:
    (tmp_path / "uid_map").write_text(uid_map)
    (tmp_path / "version").write_text(version)
    env = {"PATH": os.environ["PATH"]}
    if isolation is not None:
        env["SKILL_EVAL_EXECUTOR_ISOLATION"] = isolation
    return subprocess.run(
        ["sh", str(CHECK), str(tmp_path / "uid_map"), str(tmp_path / "version"), uid],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )


HOST_ROOT = "         0          0 4294967295\n"
REMAPPED = "         0     100000      65536\n"
LINUX = "Linux version 6.1.0-13-amd64 (debian-kernel@lists.debian.org)\n"
GVISOR = "Linux version 4.19.0-gvisor #1 SMP Sun Jan 10 15:06:54 PST 2016\n"


@pytest.mark.parametrize(
    ("uid_map", "version", "isolation", "code", "says"),
    [
        (HOST_ROOT, LINUX, "required", 2, "BLOCKED_NO_SANDBOX: the executor runs as the host's root"),
        (REMAPPED, LINUX, "required", 0, ""),
        (HOST_ROOT, GVISOR, "required", 0, ""),
        (HOST_ROOT, LINUX, "unchecked", 0, "isolation is not checked (a test host only)"),
        (HOST_ROOT, LINUX, "yes", 2, "CONFIG_ERROR: SKILL_EVAL_EXECUTOR_ISOLATION=yes"),
        (HOST_ROOT, LINUX, None, 0, ""),
    ],
    ids=["host-root", "userns-remap", "gvisor", "opt-out", "typo", "plain-docker-run"],
)
def test_the_isolation_check_refuses_the_hosts_root_with_its_reason(
    tmp_path: Path, uid_map: str, version: str, isolation: str | None, code: int, says: str
) -> None:
    done = _check(tmp_path, uid_map, version, isolation)
    assert done.returncode == code, done.stderr
    assert says in done.stderr
    if code == 2:
        assert "userns-remap" in done.stderr or "expected required or unchecked" in done.stderr
    not_root = _check(tmp_path, uid_map, version, isolation, uid="10001")  # the image user holds nothing
    assert not_root.returncode == (2 if isolation == "yes" else 0), not_root.stderr


def test_the_entrypoint_runs_the_check_before_the_worker(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "skill-eval-check-isolation").symlink_to(CHECK)
    (bin_dir / "skill-eval").write_text('#!/bin/sh\necho "worker started: $*"\n')
    (bin_dir / "skill-eval").chmod(0o755)
    path = f"{bin_dir}:{os.environ['PATH']}"
    entry = ROOT / "deploy" / "entrypoint.sh"
    refused = subprocess.run(
        ["sh", str(entry), "worker"],
        env={"PATH": path, "SKILL_EVAL_EXECUTOR_ISOLATION": "maybe"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert refused.returncode == 2 and "worker started" not in refused.stdout, refused.stderr
    started = subprocess.run(["sh", str(entry), "worker"], env={"PATH": path}, capture_output=True, text=True)
    assert started.returncode == 0 and started.stdout == "worker started: worker\n"


def test_the_image_build_context_holds_every_deploy_script_the_dockerfile_copies() -> None:
    copied = re.findall(r"^COPY (deploy/\S+) ", (ROOT / "Dockerfile").read_text(), re.MULTILINE)
    allowed = (ROOT / ".dockerignore").read_text().splitlines()
    assert "deploy/check-isolation.sh" in copied
    for path in copied:
        assert f"!{path}" in allowed, f"{path} is copied but left out of the build context"


def test_the_image_build_context_holds_every_package_the_dockerfile_copies_and_the_project_ships() -> None:
    """A package the command imports but the context leaves out fails only at ``docker build``."""
    copied = re.findall(r"^COPY (\S+) /src/\S*$", (ROOT / "Dockerfile").read_text(), re.MULTILINE)
    allowed = (ROOT / ".dockerignore").read_text().splitlines()
    for path in copied:
        assert f"!{path}" in allowed or f"!{path}/" in allowed, f"{path} is copied but left out of the build context"
    shipped = re.search(r"include = \[([^\]]*)\]", (ROOT / "pyproject.toml").read_text())
    assert shipped is not None
    for package in re.findall(r'"(\w+)\*"', shipped.group(1)):
        assert package in copied, f"{package} ships in the distribution but the Dockerfile does not copy it"


def test_every_file_beside_the_code_of_a_shipped_package_is_package_data() -> None:
    """A data file (a Redis script, a template) left out of package-data is missing from an installed
    wheel and the image alike: the code that reads it fails only there, never in a source checkout."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    globs = setuptools["package-data"]
    packages = [p.rstrip("*") for p in setuptools["packages"]["find"]["include"]]
    left_out = [
        str(path.relative_to(ROOT))
        for package in packages
        for path in sorted((ROOT / package).rglob("*"))
        if path.is_file()
        and path.suffix not in (".py", ".pyc")
        and not any(path.relative_to(ROOT / package).match(g) for g in globs.get(package, []))
    ]
    assert left_out == []


def test_the_image_test_runs_the_executor_with_the_same_capabilities() -> None:
    assert set(EXECUTOR_CAPABILITIES) == BWRAP_CAPS
    assert SANDBOX_PRIVILEGES[SANDBOX_PRIVILEGES.index("--cap-drop") + 1] == "ALL"
    assert "no-new-privileges" in SANDBOX_PRIVILEGES


def test_the_image_pins_every_harness_the_makefile_pins_at_the_same_version() -> None:
    """The image's optional harnesses are the ones `make setup` installs, at the same versions."""
    makefile = (ROOT / "Makefile").read_text()
    pinned = dict(re.findall(r"^[A-Z_]+\s*:=\s*(@?[a-z0-9./-]+)@(\d[\w.-]*)\s*$", makefile, re.M))
    dockerfile = (ROOT / "Dockerfile").read_text()
    in_image = dict(re.findall(r"(@?[a-z0-9-]+(?:/[a-z0-9-]+)?)@(\d[\w.-]*)", dockerfile))
    assert {
        "@anthropic-ai/claude-code",
        "@openai/codex",
        "opencode-ai",
        "@google/gemini-cli",
        "@github/copilot",
    } <= set(pinned)
    assert {name: in_image.get(name) for name in pinned} == pinned
