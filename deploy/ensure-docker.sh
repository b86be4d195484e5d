#!/usr/bin/env bash
# Make sure a Docker daemon answers here: install Debian's docker.io and debootstrap when missing,
# start dockerd when none runs (it is left running for later builds), wait for its socket.
set -euo pipefail
SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
missing=""
command -v dockerd >/dev/null || missing="$missing docker.io"
command -v debootstrap >/dev/null || missing="$missing debootstrap"
if [ -n "$missing" ]; then
  $SUDO apt-get update -qq && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing
fi
if ! docker info >/dev/null 2>&1; then
  if ! pgrep -x dockerd >/dev/null; then
    $SUDO sh -c 'nohup dockerd >/var/log/skill-eval-dockerd.log 2>&1 &'
  fi
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
fi
docker info --format 'docker {{.ServerVersion}} ready' 
