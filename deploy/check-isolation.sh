#!/bin/sh
# Refuse to start an executor whose root is the host's root (docs/design/deployment.md).
#
# The execute worker runs as root in its container so each sandbox can drop to a throwaway uid,
# with SYS_ADMIN and relaxed seccomp/AppArmor for bubblewrap. That is acceptable only where the
# container's root is not the host's: a user namespace (the Docker daemon's userns-remap, rootless
# Docker, Kubernetes hostUsers: false) or a runtime with its own kernel (gVisor's runsc).
#
# SKILL_EVAL_EXECUTOR_ISOLATION: unset (no check: a plain `docker run`), "required" (compose and
# the Kubernetes manifests set it) or "unchecked" (an explicit opt-out, for a test host only).
# Arguments (for tests): the uid_map and kernel version files to read, and the uid to check as.
uid_map="${1:-/proc/self/uid_map}"
version="${2:-/proc/version}"
uid="${3:-$(id -u)}"

case "${SKILL_EVAL_EXECUTOR_ISOLATION:-}" in
  "") exit 0 ;;
  unchecked)
    echo "skill-eval: SKILL_EVAL_EXECUTOR_ISOLATION=unchecked: the executor's isolation is not checked (a test host only)" >&2
    exit 0 ;;
  required) ;;
  *)
    echo "CONFIG_ERROR: SKILL_EVAL_EXECUTOR_ISOLATION=${SKILL_EVAL_EXECUTOR_ISOLATION}: expected required or unchecked" >&2
    exit 2 ;;
esac

[ "$uid" = 0 ] || exit 0                                    # not root: nothing of the host's to lose
if grep -qi gvisor "$version" 2>/dev/null; then exit 0; fi # gVisor: the sandbox has its own kernel
if [ ! -r "$uid_map" ]; then
  echo "BLOCKED_NO_SANDBOX: $uid_map cannot be read: the executor's isolation cannot be checked" >&2
  exit 2
fi
# A line "0 0 <n>": uid 0 here is uid 0 on the host.
if awk '$1 == 0 && $2 == 0 { host_root = 1 } END { exit !host_root }' "$uid_map"; then
  echo "BLOCKED_NO_SANDBOX: the executor runs as the host's root (no user namespace: $uid_map maps 0 to 0)" \
    "and not under gVisor; enable the Docker daemon's userns-remap, run Docker rootless or with runtime: runsc," \
    "or on a test host only set SKILL_EVAL_EXECUTOR_ISOLATION=unchecked (docs/design/deployment.md)" >&2
  exit 2
fi
exit 0
