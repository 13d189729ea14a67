#!/usr/bin/env bash
# Provides Prometheus and promtool for the metrics tests; prints PROMETHEUS=… and PROMTOOL=….
#
# First match wins: $PROMETHEUS and $PROMTOOL; both on PATH; otherwise, as root, Debian's
# package `prometheus` is installed (about 10 s, once per machine). Its service is never
# started by us: each test starts its own server on a free loopback port.
set -euo pipefail

log() { printf 'prometheus: %s\n' "$*" >&2; }

prometheus=${PROMETHEUS:-$(command -v prometheus || true)}
promtool=${PROMTOOL:-$(command -v promtool || true)}
if [ -z "$prometheus" ] || [ -z "$promtool" ]; then
  if [ "$(id -u)" -ne 0 ]; then
    log "not found; install Debian's package prometheus, or set PROMETHEUS and PROMTOOL"
    exit 1
  fi
  log "installing Debian's package prometheus (first run only)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends prometheus >&2
  prometheus=$(command -v prometheus)
  promtool=$(command -v promtool)
fi
printf 'PROMETHEUS=%s\nPROMTOOL=%s\n' "$prometheus" "$promtool"
