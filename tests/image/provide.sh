#!/usr/bin/env bash
# Provides what the image tests build the Dockerfile with, where no Docker engine runs:
# buildah (its storage kept in the cache below, apart from any system-wide storage), a
# Debian base image whose Python is /usr/bin/python3, a kubectl image holding the control
# plane's kubectl at /bin/kubectl, a helm image holding its helm at /bin/helm, and a sops
# image holding its sops at /bin/sops. Prints KEY=value lines:
#   BUILDAH=…          the buildah binary
#   BUILDAH_ROOT=…     its storage: pass --root, --runroot and --storage-driver
#   BUILDAH_RUNROOT=…
#   BUILDAH_DRIVER=…   overlay where the kernel mounts it here (a cached build takes
#                      seconds), else vfs (a full copy per step: a cached build takes minutes);
#                      GITOPSD_BUILDAH_DRIVER chooses one
#   BASE_IMAGE=…       build argument BASE
#   KUBECTL_IMAGE=…    build argument KUBECTL_IMAGE
#   HELM_IMAGE=…       build argument HELM_IMAGE
#   SOPS_IMAGE=…       build argument SOPS_IMAGE
#
# As root, Debian's packages buildah and mmdebstrap are installed when missing (about 30 s,
# once per machine). The base is made by mmdebstrap from Debian's mirror (about 80 s) into
# ${GITOPSD_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/gitopsd}/image/ and imported once; a
# second call builds nothing.
set -euo pipefail
. "$(dirname "$0")/../debian_packages.sh"

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${GITOPSD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gitopsd}/image
suite=bookworm
# What the Dockerfile's final stage needs from its base: no mirror is reached at build time.
packages=python3,python3-venv,git,openssh-client,gpg,ca-certificates
base_image=localhost/gitopsd-test-base:$suite

log() { printf 'image: %s\n' "$*" >&2; }

# Whether an overlay mount works on the cache's file system (not, say, inside a container
# whose own root is an overlay).
overlay_works() {
  local probe
  probe=$(mktemp -d "$cache/overlay-probe.XXXXXX")
  mkdir "$probe/lower" "$probe/upper" "$probe/work" "$probe/merged"
  local options=lowerdir=$probe/lower,upperdir=$probe/upper,workdir=$probe/work
  if mount -t overlay overlay -o "$options" "$probe/merged" 2>/dev/null; then
    umount "$probe/merged"
    rm -rf "$probe"
    return 0
  fi
  rm -rf "$probe"
  return 1
}

install_tools() {
  command -v buildah >/dev/null && command -v mmdebstrap >/dev/null && return 0
  debian_packages "" buildah mmdebstrap
}

buildah_() { buildah "${storage[@]}" "$@"; }

has_image() { buildah_ images --quiet "$1" >/dev/null 2>&1; }

# from_rootfs IMAGE TARBALL [CONFIG…]: commits IMAGE holding the root filesystem TARBALL.
from_rootfs() {
  local image=$1 tarball=$2 container
  shift 2
  container=$(buildah_ from scratch)
  buildah_ add --quiet "$container" "$tarball" / >/dev/null
  [ $# -eq 0 ] || buildah_ config "$@" "$container"
  buildah_ commit --quiet --rm "$container" "$image" >/dev/null
}

provide_base() {
  local tarball
  tarball=$cache/base-$suite-$(printf '%s' "$packages" | sha256sum | cut -c1-12).tar
  if [ ! -s "$tarball" ]; then
    log "making the $suite base with mmdebstrap (first run only, about 80 s)"
    local started=$SECONDS
    mmdebstrap --quiet --variant=minbase --include="$packages" "$suite" "$tarball.partial" >&2
    mv -f "$tarball.partial" "$tarball"
    log "made the base in $((SECONDS - started)) s"
  fi
  has_image "$base_image" || from_rootfs "$base_image" "$tarball" \
    --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
}

# binary_image NAME BINARY VERSION: prints an image holding BINARY alone, at /bin/NAME.
binary_image() {
  local name=$1 binary=$2 version=$3 image layer
  image=localhost/gitopsd-test-$name:$version
  if ! has_image "$image"; then
    layer=$cache/$name-$version.tar
    tar --create --file "$layer.partial" --owner 0 --group 0 --mode 0755 \
      --transform "s|.*|bin/$name|" --absolute-names "$binary"
    mv -f "$layer.partial" "$layer"
    from_rootfs "$image" "$layer"
  fi
  echo "$image"
}

# The control plane's kubectl, helm and sops (static binaries), where the Dockerfile copies
# them from.
provide_renderers() {
  local binaries kubectl helm sops version
  binaries=$("$here/../controlplane/provide.sh")
  kubectl=$(sed -n 's/^TEST_ASSET_KUBECTL=//p' <<<"$binaries")
  helm=$(sed -n 's/^TEST_ASSET_HELM=//p' <<<"$binaries")
  sops=$(sed -n 's/^TEST_ASSET_SOPS=//p' <<<"$binaries")
  version=$("$kubectl" version --client -o json | python3 -c \
    'import json, sys; print(json.load(sys.stdin)["clientVersion"]["gitVersion"])')
  kubectl_image=$(binary_image kubectl "$kubectl" "$version")
  version=$("$helm" version --template '{{.Version}}')
  helm_image=$(binary_image helm "$helm" "$version")
  version=$("$sops" --version --disable-version-check | sed -n '1s/^sops //p')
  sops_image=$(binary_image sops "$sops" "$version")
}

install_tools
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9 # two test runs at once build only once
driver=${GITOPSD_BUILDAH_DRIVER:-}
if [ -z "$driver" ]; then
  driver=vfs
  [ "$(id -u)" -ne 0 ] || ! overlay_works || driver=overlay
fi
storage=(--root "$cache/storage-$driver" --runroot "$cache/run-$driver" --storage-driver "$driver")
provide_base
provide_renderers
printf 'BUILDAH=%s\nBUILDAH_ROOT=%s\nBUILDAH_RUNROOT=%s\nBUILDAH_DRIVER=%s\n' \
  "$(command -v buildah)" "$cache/storage-$driver" "$cache/run-$driver" "$driver"
printf 'BASE_IMAGE=%s\nKUBECTL_IMAGE=%s\nHELM_IMAGE=%s\nSOPS_IMAGE=%s\n' "$base_image" "$kubectl_image" \
  "$helm_image" "$sops_image"
