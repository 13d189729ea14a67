#!/usr/bin/env bash
# Provides zsh and fish for the tests of `gitopsd completion` (bash is there already);
# prints BASH=…, ZSH=… and FISH=….
#
# First match wins: $GITOPSD_TEST_ZSH and $GITOPSD_TEST_FISH (not $ZSH, which oh-my-zsh
# takes for its own directory); zsh and fish on PATH; otherwise, as root, Debian's packages
# zsh and fish are installed (a few seconds, once per machine). Neither becomes anyone's
# login shell: the tests run each with no startup files of the machine's.
set -euo pipefail

log() { printf 'shells: %s\n' "$*" >&2; }

bash=$(command -v bash)
zsh=${GITOPSD_TEST_ZSH:-$(command -v zsh || true)}
fish=${GITOPSD_TEST_FISH:-$(command -v fish || true)}
if [ -z "$zsh" ] || [ -z "$fish" ]; then
  if [ "$(id -u)" -ne 0 ]; then
    log "zsh or fish not found; install Debian's packages zsh and fish, or set GITOPSD_TEST_ZSH and GITOPSD_TEST_FISH"
    exit 1
  fi
  log "installing Debian's packages zsh and fish (first run only)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends zsh fish >&2
  zsh=$(command -v zsh)
  fish=$(command -v fish)
fi
printf 'BASH=%s\nZSH=%s\nFISH=%s\n' "$bash" "$zsh" "$fish"
