#!/usr/bin/env bash
# Provides Alertmanager for the notification tests; prints ALERTMANAGER=….
#
# First match wins: $ALERTMANAGER; prometheus-alertmanager on PATH; otherwise, as root,
# Debian's package `prometheus-alertmanager` is installed (a few seconds, once per machine).
# Its service is never started by us: each test starts its own server on a free loopback port.
set -euo pipefail
. "$(dirname "$0")/../debian_packages.sh"

log() { printf 'alertmanager: %s\n' "$*" >&2; }

alertmanager=${ALERTMANAGER:-$(command -v prometheus-alertmanager || true)}
if [ -z "$alertmanager" ]; then
  debian_packages ALERTMANAGER prometheus-alertmanager
  alertmanager=$(command -v prometheus-alertmanager)
fi
printf 'ALERTMANAGER=%s\n' "$alertmanager"
