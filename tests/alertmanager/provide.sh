#!/usr/bin/env bash
# Provides Alertmanager for the notification tests; prints ALERTMANAGER=….
#
# First match wins: $ALERTMANAGER; prometheus-alertmanager on PATH; otherwise, as root,
# Debian's package `prometheus-alertmanager` is installed (a few seconds, once per machine).
# Its service is never started by us: each test starts its own server on a free loopback port.
set -euo pipefail

log() { printf 'alertmanager: %s\n' "$*" >&2; }

alertmanager=${ALERTMANAGER:-$(command -v prometheus-alertmanager || true)}
if [ -z "$alertmanager" ]; then
  if [ "$(id -u)" -ne 0 ]; then
    log "not found; install Debian's package prometheus-alertmanager, or set ALERTMANAGER"
    exit 1
  fi
  log "installing Debian's package prometheus-alertmanager (first run only)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends prometheus-alertmanager >&2
  alertmanager=$(command -v prometheus-alertmanager)
fi
printf 'ALERTMANAGER=%s\n' "$alertmanager"
