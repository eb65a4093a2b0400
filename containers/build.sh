#!/usr/bin/env bash
# `make image`: builds the images with podman on a Debian machine from a fresh clone,
# installing what it needs from Debian's packages (podman, runc, mmdebstrap, dnsname):
#   $IMAGE:$TAG            the services (`server` extra): what k8s/ runs
#   $IMAGE:$TAG-embedded   plus the embedded PostgreSQL: `docker run` alone serves
# The base comes from containers/base.sh (no registry). Environment: IMAGE (episodic),
# TAG (dev, what k8s/overlays/dev runs), VARIANTS ("server embedded"), PYTHON_IMAGE (a base
# to use instead), CA_BUNDLE (mounted into the build so pip trusts the same CAs as the host).
set -euo pipefail
cd "$(dirname "$0")/.."
IMAGE=${IMAGE:-episodic}
TAG=${TAG:-dev}
VARIANTS=${VARIANTS:-server embedded}
BASE=${PYTHON_IMAGE:-localhost/episodic-base:bookworm}
CA_BUNDLE=${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}

sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
need=()
command -v podman >/dev/null || need+=(podman)
command -v runc >/dev/null || need+=(runc)
command -v mmdebstrap >/dev/null || [ -n "${PYTHON_IMAGE:-}" ] || need+=(mmdebstrap)
# CNI networks (what this machine's podman uses; netavark would be picked otherwise), on
# which containers find each other by name (the smoke test's Services).
[ -e /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
[ -e /usr/lib/cni/dnsname ] || need+=(golang-github-containernetworking-plugin-dnsname)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing ${need[*]} from Debian's packages"
  $sudo apt-get -o DPkg::Lock::Timeout=600 update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
    --no-install-recommends "${need[@]}" >/dev/null
fi
# Machines like CI's: runc (crun fails on hybrid cgroups), cgroupfs (no systemd), and no
# CAP_SYS_RESOURCE, so containers may not ask for more open files than the host's hard limit.
conf=/etc/containers/containers.conf
if [ ! -e "$conf" ] && [ -z "${CONTAINERS_CONF:-}" ]; then
  nofile=$(ulimit -Hn)
  $sudo mkdir -p /etc/containers
  printf '[containers]\ndefault_ulimits = ["nofile=%s:%s", "nproc=32768:32768"]\n[engine]\nruntime = "runc"\ncgroup_manager = "cgroupfs"\n' \
    "$nofile" "$nofile" | $sudo tee "$conf" >/dev/null
fi
if [ -z "${PYTHON_IMAGE:-}" ]; then
  start=$(date +%s)
  containers/base.sh "$BASE"
  echo "base $BASE ready in $(($(date +%s) - start)) s"
fi

version=$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || revision="$revision-dirty"
source_url=$(git remote get-url origin 2>/dev/null || true)
mounts=()
[ -f "$CA_BUNDLE" ] && mounts=(-v "$CA_BUNDLE:/etc/ssl/certs/ca-certificates.crt:ro")
for variant in $VARIANTS; do
  case $variant in
    server) extras="" tag="$TAG" ;;
    *) extras="$variant" tag="$TAG-$variant" ;;
  esac
  echo "building $IMAGE:$tag (extras: server $extras)"
  start=$(date +%s)
  podman build --network=host --format docker --layers "${mounts[@]}" \
    --build-arg PYTHON_IMAGE="$BASE" --build-arg EXTRAS="$extras" \
    --build-arg VERSION="$version" --build-arg REVISION="$revision" \
    --build-arg SOURCE="$source_url" \
    --build-arg CREATED="$(git log -1 --format=%cI 2>/dev/null || date -u +%FT%TZ)" \
    -t "$IMAGE:$tag" .
  echo "$IMAGE:$tag built in $(($(date +%s) - start)) s, $(podman image inspect --format '{{.Size}}' "$IMAGE:$tag" | awk '{printf "%.0f MB", $1/1e6}')"
done
