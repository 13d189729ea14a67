#!/usr/bin/env bash
# Provides Flux's source-controller and kustomize-controller, the peers `make bench
# PEERS=flux` measures gitopsd beside (the benchmark only: never the tests or the image),
# built from the wrapper module beside this script, with their CRDs from the same modules.
#
# Prints FLUX_SOURCE_CONTROLLER and FLUX_KUSTOMIZE_CONTROLLER, each the absolute path of a
# binary, and FLUX_SOURCE_CONTROLLER_CRDS and FLUX_KUSTOMIZE_CONTROLLER_CRDS, each a folder
# of the module's config/crd/bases, all cached in
# ${GITOPSD_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/gitopsd}/flux/<name>-<version>/.
# A second call builds nothing. With --cached it builds nothing either: it prints the lines
# when both are cached, and nothing otherwise (plain `make bench` measures Flux only then).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache_root=${GITOPSD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gitopsd}/flux
provider=flux
build_note="a few minutes each on 2 cores, more while the module cache fills"
# shellcheck source=tests/controlplane/go-build.sh
. "$here/../../controlplane/go-build.sh"

CONTROLLERS="source-controller kustomize-controller"

cached_dir() { # cached_dir NAME: the cache folder of controller NAME at its pinned version
  echo "$cache_root/$1-$(module_version "$here" "github.com/fluxcd/$1")"
}

cached() { # cached NAME: whether controller NAME and its CRDs are in the cache
  local dir
  dir=$(cached_dir "$1")
  [ -x "$dir/$1" ] && [ -d "$dir/crd" ]
}

ensure() { # ensure NAME: builds controller NAME and copies its CRDs, unless cached
  local dir module
  dir=$(cached_dir "$1")
  cached "$1" && return 0
  mkdir -p "$dir"
  [ -x "$dir/$1" ] || build "$here" "$dir/$1" "github.com/fluxcd/$1" >&2
  module=$(module_dir "$here" "github.com/fluxcd/$1")
  rm -rf "$dir/crd.partial"
  cp -r "$module/config/crd/bases" "$dir/crd.partial"
  chmod -R u+w "$dir/crd.partial" # the module cache's files are read-only
  mv "$dir/crd.partial" "$dir/crd"
}

print() { # print NAME: its two lines, FLUX_<NAME>=binary and FLUX_<NAME>_CRDS=folder
  local dir variable
  dir=$(cached_dir "$1")
  variable=FLUX_$(echo "$1" | tr 'a-z-' 'A-Z_')
  printf '%s=%s\n%s_CRDS=%s\n' "$variable" "$dir/$1" "$variable" "$dir/crd"
}

if [ "${1:-}" = --cached ]; then
  for name in $CONTROLLERS; do cached "$name" || exit 0; done
else
  lock_cache "$cache_root"
  for name in $CONTROLLERS; do ensure "$name"; done
  exec 9>&-
fi
for name in $CONTROLLERS; do print "$name"; done
