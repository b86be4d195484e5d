"""Building and running the skill-eval image for the image test (`make test-image`).

The base image is made locally when missing (deploy/make-base-image.sh: debootstrap + docker
import), since no image registry is reachable here; builds use the host network (PyPI, Debian).
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from tests.deploy.support import ROOT

BASE_IMAGE = "skill-eval-base:bookworm"
IMAGE = "skill-eval-worker:test"
# What bubblewrap needs in a container, and root so each sandbox drops to a throwaway uid: the
# same least-privilege set as deploy/compose.yaml (docs/design/deployment.md justifies each).
# Without these the execute worker refuses to start.
EXECUTOR_CAPABILITIES = ("SYS_ADMIN", "NET_ADMIN", "SETUID", "SETGID", "CHOWN", "FOWNER", "DAC_OVERRIDE", "KILL")
SANDBOX_PRIVILEGES = [
    "--user",
    "0",
    "--cap-drop",
    "ALL",
    *(arg for cap in EXECUTOR_CAPABILITIES for arg in ("--cap-add", cap)),
    "--security-opt",
    "no-new-privileges",
    "--security-opt",
    "systempaths=unconfined",
    "--security-opt",
    "seccomp=unconfined",
    "--security-opt",
    "apparmor=unconfined",
]


def docker(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise RuntimeError(f"docker {' '.join(args[:3])}... failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return done


def extra_ca_certs() -> str:
    """The site's extra CA certificates (a TLS-inspecting egress proxy), passed to the build."""
    return "\n".join(p.read_text() for p in sorted(Path("/usr/local/share/ca-certificates").glob("*.crt")))


def build_image() -> float:
    """Make the base image when missing, build the product image; the seconds it took."""
    start = time.monotonic()
    subprocess.run(["bash", str(ROOT / "deploy" / "make-base-image.sh"), BASE_IMAGE], check=True, timeout=900)
    args = ["build", "--network", "host", "--build-arg", f"BASE_IMAGE={BASE_IMAGE}", "-t", IMAGE]
    certs = extra_ca_certs()
    if certs:
        args += ["--build-arg", f"EXTRA_CA_CERTS={certs}"]
    done = subprocess.run(
        ["docker", *args, str(ROOT)],
        capture_output=True,
        text=True,
        timeout=1500,
        env={"DOCKER_BUILDKIT": "0", "PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"},
    )
    if done.returncode != 0:
        raise RuntimeError(f"docker build failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return time.monotonic() - start
