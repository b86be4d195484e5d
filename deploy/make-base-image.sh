#!/usr/bin/env bash
# Build the Debian base image locally (no image registry needed): debootstrap a minimal
# bookworm into a folder from Debian's package mirror, then `docker import` it.
# Usage: deploy/make-base-image.sh [TAG]   (default skill-eval-base:bookworm; no-op when present)
set -euo pipefail
tag="${1:-skill-eval-base:bookworm}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
if docker image inspect "$tag" >/dev/null 2>&1; then
  echo "base image $tag present"
  exit 0
fi
command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap; }
root="$(mktemp -d /var/tmp/skill-eval-rootfs.XXXXXX)"
trap 'rm -rf "$root"' EXIT
debootstrap --variant=minbase bookworm "$root" "$mirror"
# Leave nothing host-specific or cached in the layer.
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
tar -C "$root" -c . | docker import --change 'CMD ["/bin/bash"]' - "$tag"
echo "base image $tag built"
