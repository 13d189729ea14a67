#!/usr/bin/env bash
# Provides OpenSSH's server for the tests of git over ssh; prints SSHD=….
#
# First match wins: $SSHD; /usr/sbin/sshd; otherwise, as root, Debian's package
# openssh-server is installed (a few seconds, once per machine), its service kept from
# starting (a policy-rc.d that says no, for the install only, where none is in place): an
# sshd on port 22 for every interface is no part of the suite. Each test session starts
# its own server on a free loopback port (tests/harness/sshd.py).
set -euo pipefail

log() { printf 'sshd: %s\n' "$*" >&2; }

policy=/usr/sbin/policy-rc.d
sshd=${SSHD:-}
if [ -z "$sshd" ] && [ -x /usr/sbin/sshd ]; then
  sshd=/usr/sbin/sshd
fi
if [ -z "$sshd" ]; then
  if [ "$(id -u)" -ne 0 ]; then
    log "not found; install Debian's package openssh-server, or set SSHD"
    exit 1
  fi
  log "installing Debian's package openssh-server (first run only)"
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' > "$policy"
    chmod 755 "$policy"
    trap 'rm -f "$policy"' EXIT
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends openssh-server >&2
  sshd=/usr/sbin/sshd
fi
# Run as root, sshd wants its privilege separation directory, which Debian's service makes
# at each start (it lives on /run, gone after a reboot).
if [ "$(id -u)" -eq 0 ] && [ ! -d /run/sshd ]; then
  install -d -m 0755 /run/sshd
fi
printf 'SSHD=%s\n' "$sshd"
