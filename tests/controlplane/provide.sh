#!/usr/bin/env bash
# Provides the test control plane: etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kwok (the nodes and their kubelets, simulated) and kubectl; helm, which
# gitopsd runs to render charts, as it runs kubectl to render kustomizations; and an OCI
# registry (distribution) with a token service, which serve the tests' pushed charts; sops,
# which gitopsd runs to decrypt SOPS-encrypted files, and age-keygen, which makes the tests'
# keys; flux-push (Flux's client library pushing as `flux push artifact` does) and oras,
# which store the tests' OCI artifacts.
#
# Prints one NAME=path line per binary, in envtest's naming (TEST_ASSET_ETCD,
# TEST_ASSET_KUBE_APISERVER, TEST_ASSET_KUBE_CONTROLLER_MANAGER, TEST_ASSET_KUBE_SCHEDULER,
# TEST_ASSET_KWOK, TEST_ASSET_KUBECTL, TEST_ASSET_HELM, TEST_ASSET_REGISTRY,
# TEST_ASSET_REGISTRY_TOKENS, TEST_ASSET_SOPS, TEST_ASSET_AGE_KEYGEN, TEST_ASSET_FLUX_PUSH
# and TEST_ASSET_ORAS), each the absolute path of a binary that exists, and
# TEST_ASSET_KWOK_STAGES, the pod and node lifecycle kwok plays (its own published stages).
#
# Where the binaries come from, first match wins:
#   1. TEST_ASSET_<NAME>, one binary each;
#   2. $KUBEBUILDER_ASSETS, a directory holding envtest's binaries (envtest ships etcd,
#      kube-apiserver and kubectl; whatever it lacks is built);
#   3. a build from the Go modules pinned beside this script, cached in
#      ${GITOPSD_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/gitopsd}/control-plane/<version>/.
# A cached build is reused: a second call builds nothing.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache_root=${GITOPSD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gitopsd}/control-plane

provider=control-plane
build_note="all of them take about 12 min on 2 cores"
# shellcheck source=tests/controlplane/go-build.sh
. "$here/go-build.sh"

kube_version=$(module_version "$here/kube" k8s.io/kubernetes)
etcd_version=$(module_version "$here/etcd" go.etcd.io/etcd/server/v3)
kwok_version=$(module_version "$here/kwok" sigs.k8s.io/kwok)
helm_version=$(module_version "$here/helm" helm.sh/helm/v4)
registry_version=$(module_version "$here/registry" github.com/distribution/distribution/v3)
flux_version=$(module_version "$here/flux" github.com/fluxcd/pkg/oci)
oras_version=$(module_version "$here/oras" oras.land/oras)
sops_version=$(module_version "$here/sops" github.com/getsops/sops/v3)-age-$(module_version "$here/sops" filippo.io/age)

kube_dir=$cache_root/kube-$kube_version
etcd_dir=$cache_root/etcd-$etcd_version
kwok_dir=$cache_root/kwok-$kwok_version
helm_dir=$cache_root/helm-$helm_version
registry_dir=$cache_root/registry-$registry_version
sops_dir=$cache_root/sops-$sops_version
flux_dir=$cache_root/flux-$flux_version
oras_dir=$cache_root/oras-$oras_version

# Stages kwok plays, from its module: nodes become Ready; a scheduled pod runs and is
# Ready; a Job's pod succeeds, or fails when labelled
# pod-container-running-failed.stage.kwok.x-k8s.io=true; a deleted pod goes away; a claim
# of StorageClass kwok-volume gets a volume, released and deleted with it.
KWOK_STAGES="node/fast/node-initialize pod/fast/pod-ready pod/fast/pod-complete
  pod/fast/pod-delete pod/chaos/pod-container-running-failed volume/fast/pvc-provision
  volume/fast/pv-bind volume/fast/pvc-delete volume/fast/pv-delete"

write_kwok_stages() { # write_kwok_stages OUT
  local module stage
  module=$(module_dir "$here/kwok" sigs.k8s.io/kwok)
  for stage in $KWOK_STAGES; do
    printf -- '---\n'
    cat "$module/kustomize/stage/$stage.yaml"
  done >"$1.partial"
  mv -f "$1.partial" "$1"
}

# ensure NAME: prints the path of the cached binary NAME, building it first when missing.
ensure() {
  mkdir -p "$kube_dir" "$etcd_dir" "$kwok_dir" "$helm_dir" "$registry_dir" "$sops_dir" "$flux_dir" "$oras_dir"
  lock_cache "$cache_root"
  local minor=${kube_version#v1.}
  local ldflags="-X k8s.io/component-base/version.gitVersion=$kube_version"
  ldflags+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${minor%%.*}"
  ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=$kube_version"
  case $1 in
  kube-apiserver | kube-controller-manager | kube-scheduler | kubectl)
    [ -x "$kube_dir/$1" ] || build "$here/kube" "$kube_dir/$1" "k8s.io/kubernetes/cmd/$1" "$ldflags" >&2
    echo "$kube_dir/$1" ;;
  etcd)
    [ -x "$etcd_dir/etcd" ] || build "$here/etcd" "$etcd_dir/etcd" go.etcd.io/etcd/server/v3 >&2
    echo "$etcd_dir/etcd" ;;
  kwok)
    [ -x "$kwok_dir/kwok" ] || build "$here/kwok" "$kwok_dir/kwok" sigs.k8s.io/kwok/cmd/kwok >&2
    echo "$kwok_dir/kwok" ;;
  helm)
    [ -x "$helm_dir/helm" ] || build "$here/helm" "$helm_dir/helm" helm.sh/helm/v4/cmd/helm \
      "-X helm.sh/helm/v4/internal/version.version=$helm_version" >&2
    echo "$helm_dir/helm" ;;
  registry)
    [ -x "$registry_dir/registry" ] ||
      build "$here/registry" "$registry_dir/registry" github.com/distribution/distribution/v3/cmd/registry >&2
    echo "$registry_dir/registry" ;;
  sops)
    [ -x "$sops_dir/sops" ] || build "$here/sops" "$sops_dir/sops" github.com/getsops/sops/v3/cmd/sops >&2
    echo "$sops_dir/sops" ;;
  age-keygen)
    [ -x "$sops_dir/age-keygen" ] || build "$here/sops" "$sops_dir/age-keygen" filippo.io/age/cmd/age-keygen >&2
    echo "$sops_dir/age-keygen" ;;
  flux-push) # our own source: named by its hash, so that changing it builds anew
    local pusher
    pusher=$flux_dir/flux-push-$(cat "$here/flux/push/main.go" | sha256sum | cut -c1-12)
    [ -x "$pusher" ] || build "$here/flux" "$pusher" gitopsd.test/controlplane/flux/push >&2
    echo "$pusher" ;;
  oras)
    [ -x "$oras_dir/oras" ] || build "$here/oras" "$oras_dir/oras" oras.land/oras/cmd/oras >&2
    echo "$oras_dir/oras" ;;
  registry-tokens) # our own source: named by its hash, so that changing it builds anew
    local tokens
    tokens=$registry_dir/tokens-$(cat "$here/registry/tokens/main.go" | sha256sum | cut -c1-12)
    [ -x "$tokens" ] || build "$here/registry" "$tokens" gitopsd.test/controlplane/registry/tokens >&2
    echo "$tokens" ;;
  kwok-stages.yaml) # named by the list, so that changing it writes a new file
    local stages
    stages=$kwok_dir/stages-$(echo $KWOK_STAGES | sha256sum | cut -c1-12).yaml
    [ -s "$stages" ] || write_kwok_stages "$stages"
    echo "$stages" ;;
  esac
  exec 9>&-
}

# from_environment NAME VARIABLE: the binary the environment names (envtest convention), if any.
from_environment() {
  local path=${!2:-}
  [ -n "$path" ] || path=${KUBEBUILDER_ASSETS:+$KUBEBUILDER_ASSETS/$1}
  [ -n "$path" ] || return 0
  if [ -x "$path" ]; then echo "$path"; return 0; fi
  # envtest asset sets hold etcd and kube-apiserver only for sure; the rest is built instead.
  case $1 in etcd | kube-apiserver) ;; *) [ -n "${!2:-}" ] || return 0 ;; esac
  log "$2/KUBEBUILDER_ASSETS names $path, which is not an executable"
  exit 1
}

provide() { # provide NAME VARIABLE
  local path
  path=$(from_environment "$1" "$2")
  [ -n "$path" ] || path=$(ensure "$1")
  printf '%s=%s\n' "$2" "$path"
}

provide etcd TEST_ASSET_ETCD
provide kube-apiserver TEST_ASSET_KUBE_APISERVER
provide kube-controller-manager TEST_ASSET_KUBE_CONTROLLER_MANAGER
provide kube-scheduler TEST_ASSET_KUBE_SCHEDULER
provide kwok TEST_ASSET_KWOK
provide kubectl TEST_ASSET_KUBECTL
provide helm TEST_ASSET_HELM
provide registry TEST_ASSET_REGISTRY
provide registry-tokens TEST_ASSET_REGISTRY_TOKENS
provide sops TEST_ASSET_SOPS
provide age-keygen TEST_ASSET_AGE_KEYGEN
provide flux-push TEST_ASSET_FLUX_PUSH
provide oras TEST_ASSET_ORAS
printf 'TEST_ASSET_KWOK_STAGES=%s\n' "$(ensure kwok-stages.yaml)"
