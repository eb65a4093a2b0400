#!/usr/bin/env bash
# Builds the base image (Debian bookworm's Python 3.11, without pip: the build stage brings
# its own, pinned) from Debian's packages with mmdebstrap and imports it into podman, so the
# image needs no registry at all:
#   containers/base.sh [TAG]        (default episodic-base:bookworm)
# Docker users with a registry can skip this and build with
#   --build-arg PYTHON_IMAGE=python:3.11-slim-bookworm
set -euo pipefail
tag=${1:-episodic-base:bookworm}
if podman image exists "$tag"; then
  echo "base image $tag present"
  exit 0
fi
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
security=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
# Documentation, man pages and locales are never read in a container.
mmdebstrap --quiet --variant=minbase \
  --include=python3,python-is-python3,ca-certificates \
  --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/info/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-exclude=/usr/share/lintian/*' \
  --customize-hook='rm -rf "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/* "$1"/var/log/*' \
  bookworm - \
  "deb $mirror bookworm main" \
  "deb $mirror bookworm-updates main" \
  "deb $security bookworm-security main" |
  podman import \
    --change 'CMD ["python3"]' \
    --change 'ENV LANG=C.UTF-8' \
    --message "mmdebstrap bookworm minbase + python3" \
    - "$tag"
podman image inspect --format '{{.Id}} {{.Size}}' "$tag"
