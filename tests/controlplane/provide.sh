#!/usr/bin/env bash
# Provides the test control plane: kube-apiserver, etcd and kubectl.
#
# Prints three lines, TEST_ASSET_KUBE_APISERVER=…, TEST_ASSET_ETCD=…, TEST_ASSET_KUBECTL=…
# (the envtest names), each the absolute path of a binary that exists.
#
# Where they come from, first match wins:
#   1. TEST_ASSET_KUBE_APISERVER / TEST_ASSET_ETCD / TEST_ASSET_KUBECTL, one binary each;
#   2. $KUBEBUILDER_ASSETS, a directory holding envtest's binaries;
#   3. a build from the Go modules pinned beside this script, cached in
#      ${GITOPSD_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/gitopsd}/control-plane/<version>/.
# A cached build is reused: a second call builds nothing.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache_root=${GITOPSD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gitopsd}/control-plane

log() { printf 'control-plane: %s\n' "$*" >&2; }

module_version() { # module_version GO_MOD_DIR MODULE
  awk -v m="$2" '$1 == m && $2 ~ /^v/ {print $2; exit} $1 == "require" && $2 == m {print $3; exit}' "$1/go.mod"
}

kube_version=$(module_version "$here/kube" k8s.io/kubernetes)
etcd_version=$(module_version "$here/etcd" go.etcd.io/etcd/server/v3)

# build DIR OUT PACKAGE [LDFLAGS]: go build PACKAGE from the wrapper module in DIR into OUT.
build() {
  local dir=$1 out=$2 package=$3 ldflags=${4:-}
  log "building $(basename "$out") from $package (first run only; kube-apiserver takes ~5 min)"
  local started=$SECONDS
  (cd "$dir" && CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local \
    go build -trimpath -ldflags "-s -w $ldflags" -o "$out.partial" "$package")
  mv -f "$out.partial" "$out"
  log "built $(basename "$out") in $((SECONDS - started)) s"
}

kube_dir=$cache_root/kube-$kube_version
etcd_dir=$cache_root/etcd-$etcd_version

# ensure NAME: prints the path of the cached binary NAME, building it first when missing.
ensure() {
  mkdir -p "$kube_dir" "$etcd_dir"
  exec 9>"$cache_root/.lock"
  flock 9 # two test runs at once build only once
  local minor=${kube_version#v1.}
  local ldflags="-X k8s.io/component-base/version.gitVersion=$kube_version"
  ldflags+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${minor%%.*}"
  ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=$kube_version"
  case $1 in
  kube-apiserver | kubectl)
    [ -x "$kube_dir/$1" ] || build "$here/kube" "$kube_dir/$1" "k8s.io/kubernetes/cmd/$1" "$ldflags" >&2
    echo "$kube_dir/$1" ;;
  etcd)
    [ -x "$etcd_dir/etcd" ] || build "$here/etcd" "$etcd_dir/etcd" go.etcd.io/etcd/server/v3 >&2
    echo "$etcd_dir/etcd" ;;
  esac
  exec 9>&-
}

# from_environment NAME VARIABLE: the binary the environment names (envtest convention), if any.
from_environment() {
  local path=${!2:-}
  [ -n "$path" ] || path=${KUBEBUILDER_ASSETS:+$KUBEBUILDER_ASSETS/$1}
  [ -n "$path" ] || return 0
  if [ -x "$path" ]; then echo "$path"; return 0; fi
  # envtest asset sets may lack kubectl; only that one is built instead.
  [ "$1" = kubectl ] || { log "$2/KUBEBUILDER_ASSETS names $path, which is not an executable"; exit 1; }
}

provide() { # provide NAME VARIABLE
  local path
  path=$(from_environment "$1" "$2")
  [ -n "$path" ] || path=$(ensure "$1")
  printf '%s=%s\n' "$2" "$path"
}

provide etcd TEST_ASSET_ETCD
provide kube-apiserver TEST_ASSET_KUBE_APISERVER
provide kubectl TEST_ASSET_KUBECTL
