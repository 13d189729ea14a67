#!/usr/bin/env bash
# Provides Prometheus and promtool for the metrics tests; prints PROMETHEUS=… and PROMTOOL=….
#
# First match wins: $PROMETHEUS and $PROMTOOL; both on PATH; otherwise, as root, Debian's
# package `prometheus` is installed (about 10 s, once per machine). Its service is never
# started by us: each test starts its own server on a free loopback port.
set -euo pipefail
. "$(dirname "$0")/../debian_packages.sh"

log() { printf 'prometheus: %s\n' "$*" >&2; }

prometheus=${PROMETHEUS:-$(command -v prometheus || true)}
promtool=${PROMTOOL:-$(command -v promtool || true)}
if [ -z "$prometheus" ] || [ -z "$promtool" ]; then
  debian_packages "PROMETHEUS and PROMTOOL" prometheus
  prometheus=$(command -v prometheus)
  promtool=$(command -v promtool)
fi
printf 'PROMETHEUS=%s\nPROMTOOL=%s\n' "$prometheus" "$promtool"
