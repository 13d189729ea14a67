#!/usr/bin/env bash
# Provides a browser for the status page's tests; prints CHROMIUM=… and CHROMEDRIVER=….
#
# First match wins: $CHROMIUM and $CHROMEDRIVER; Debian's paths, /usr/bin/chromium and
# /usr/bin/chromedriver; otherwise, as root, Debian's packages `chromium chromium-driver`
# are installed (once per machine). Selenium is given these paths: it downloads nothing.
set -euo pipefail
. "$(dirname "$0")/../debian_packages.sh"

log() { printf 'browser: %s\n' "$*" >&2; }

found() { [ -x "${1:-}" ] && printf '%s' "$1"; }

chromium=${CHROMIUM:-$(found /usr/bin/chromium || true)}
chromedriver=${CHROMEDRIVER:-$(found /usr/bin/chromedriver || true)}
if [ -z "$chromium" ] || [ -z "$chromedriver" ]; then
  debian_packages "CHROMIUM and CHROMEDRIVER" chromium chromium-driver
  chromium=/usr/bin/chromium
  chromedriver=/usr/bin/chromedriver
fi
printf 'CHROMIUM=%s\nCHROMEDRIVER=%s\n' "$chromium" "$chromedriver"
