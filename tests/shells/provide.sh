#!/usr/bin/env bash
# Provides zsh and fish for the tests of `gitopsd completion` (bash is there already);
# prints BASH=…, ZSH=… and FISH=….
#
# First match wins: $GITOPSD_TEST_ZSH and $GITOPSD_TEST_FISH (not $ZSH, which oh-my-zsh
# takes for its own directory); zsh and fish on PATH; otherwise, as root, Debian's packages
# zsh and fish are installed (a few seconds, once per machine). Neither becomes anyone's
# login shell: the tests run each with no startup files of the machine's.
set -euo pipefail
. "$(dirname "$0")/../debian_packages.sh"

log() { printf 'shells: %s\n' "$*" >&2; }

bash=$(command -v bash)
zsh=${GITOPSD_TEST_ZSH:-$(command -v zsh || true)}
fish=${GITOPSD_TEST_FISH:-$(command -v fish || true)}
if [ -z "$zsh" ] || [ -z "$fish" ]; then
  debian_packages "GITOPSD_TEST_ZSH and GITOPSD_TEST_FISH" zsh fish
  zsh=$(command -v zsh)
  fish=$(command -v fish)
fi
printf 'BASH=%s\nZSH=%s\nFISH=%s\n' "$bash" "$zsh" "$fish"
