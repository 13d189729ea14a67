#!/usr/bin/env bash
# Provides the Prometheus Operator's CRDs (ServiceMonitor, PrometheusRule) for the tests that
# apply config/prometheus; prints PROMETHEUS_OPERATOR_CRDS=<directory of their YAML>.
#
# They come from the operator's Go module at the version pinned here, through the Go module
# proxy (checksummed against sum.golang.org) into Go's module cache: nothing is committed,
# and a second call downloads nothing.
set -euo pipefail

module=github.com/prometheus-operator/prometheus-operator
version=v0.85.0

dir=$(GOFLAGS=-mod=mod GOTOOLCHAIN=local go mod download -json "$module@$version" |
  sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
crds=$dir/example/prometheus-operator-crd
[ -f "$crds/monitoring.coreos.com_servicemonitors.yaml" ] || {
  printf 'prometheus-operator CRDs: not found in %s\n' "$dir" >&2
  exit 1
}
printf 'PROMETHEUS_OPERATOR_CRDS=%s\n' "$crds"
